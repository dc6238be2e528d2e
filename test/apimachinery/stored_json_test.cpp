#include "apimachinery/stored_json.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace kwatch::apimachinery {


namespace {

namespace json = boost::json;

std::string nested(std::size_t levels) {
  std::string s;
  for (std::size_t i = 0; i < levels; ++i) s += "{\"a\":";
  s += "1";
  for (std::size_t i = 0; i < levels; ++i) s += "}";
  return s;
}

std::string problem_of(std::string_view text) {
  std::string problem;
  EXPECT_FALSE(parse_json(text, &problem)) << text;
  return problem;
}

TEST(StoredJson, ParsesOrdinaryObjects) {
  auto v = parse_json(R"({"a":[1,2.5,"x",null,true],"b":{"c":-3}})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->at("b").at("c").as_int64(), -3);
}

TEST(StoredJson, NumbersThatOverflowADoubleAreRefusedWithTheirPath) {
  EXPECT_EQ(problem_of(R"({"data":{"x":1e999}})"), "data.x: number out of range");
  EXPECT_EQ(problem_of(R"({"a":[0,-1e400]})"), "a[1]: number out of range");
  // Underflow is harmless: it reads back as zero.
  EXPECT_TRUE(parse_json(R"({"x":1e-999})"));
  EXPECT_TRUE(parse_json(R"({"x":123456789012345678901234567890})"));
}

// Found by the JSON body fuzzer: Boost 1.81 converts long mantissas up to an ulp off, so a
// value read and written back drifted each time.
TEST(StoredJson, DoublesSurviveAnyNumberOfRoundTrips) {
  for (const char* text : {"118446744073709551615", R"({"":{"":99111122222000000055}})",
                           "0.30000000000000004", "1.7976931348623157e308", "5e-324",
                           "2.2250738585072011e-308", "123456789012345678901234567890.5"}) {
    auto first = parse_json(text);
    ASSERT_TRUE(first) << text;
    auto again = parse_json(json::serialize(*first));
    ASSERT_TRUE(again) << text;
    EXPECT_EQ(*first, *again) << text << " -> " << json::serialize(*first);
  }
  EXPECT_EQ(parse_json("0.1")->as_double(), 0.1);
  EXPECT_EQ(parse_json("1e-999")->as_double(), 0.0);
}

TEST(StoredJson, ParserAndCheckerAgreeOnTheDepthLimit) {
  auto ok = parse_json(nested(kMaxJsonDepth));
  ASSERT_TRUE(ok);
  EXPECT_FALSE(json_problem(*ok));
  EXPECT_EQ(json_depth(*ok), kMaxJsonDepth);
  EXPECT_EQ(problem_of(nested(kMaxJsonDepth + 1)), "nested deeper than 100 levels");

  // A value built in memory one level deeper than the parser accepts.
  json::value deep = *ok;
  deep = json::object{{"top", std::move(deep)}};
  EXPECT_EQ(json_depth(deep), kMaxJsonDepth + 1);
  auto problem = json_problem(deep);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->what, "nested deeper than 100 levels");
  EXPECT_TRUE(problem->path.starts_with("top.a.a."));
}

TEST(StoredJson, DepthStopsCountingPastTheLimit) {
  json::value v = 1;
  for (int i = 0; i < 5000; ++i) v = json::array{std::move(v)};
  EXPECT_EQ(json_depth(v, 10), 11u);
  EXPECT_EQ(json_depth(json::value(3)), 0u);
  EXPECT_EQ(json_depth(json::object()), 1u);
}

TEST(StoredJson, InvalidUtf8IsRefusedByParserAndChecker) {
  EXPECT_EQ(problem_of("{\"a\":\"\xff\"}"), "invalid UTF-8 at byte 6");
  json::value v = json::object{{"data", json::object{{"k", json::string("ok\xC3\x28")}}}};
  ASSERT_TRUE(json_problem(v));
  EXPECT_EQ(json_problem(v)->message(), "data.k: invalid UTF-8 in a string");
  json::value key = json::object{{"bad\xE0\x80\x80", 1}};
  auto problem = json_problem(key);
  ASSERT_TRUE(problem);
  // The path is shown, but never with the raw invalid bytes.
  EXPECT_TRUE(is_valid_utf8(problem->path));
  EXPECT_EQ(problem->what, "invalid UTF-8 in a member name");
}

TEST(StoredJson, Utf8ValidationFollowsRfc3629) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
  EXPECT_EQ(to_valid_utf8("a\xFF" "b\xE2\x82"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(StoredJson, SyntaxErrorsSayWhere) {
  EXPECT_EQ(problem_of(R"({"a":1)"), "unexpected end of JSON input");
  EXPECT_NE(problem_of(R"({"a":1} x)").find("at byte"), std::string::npos);
  EXPECT_NE(problem_of(R"({"a":tru})").find("at byte"), std::string::npos);
}

TEST(StoredJson, MemberTextFindsOneMemberWithoutParsing) {
  const std::string text =
      R"({"kind":"Pod","spec":{"a":"}{\"","b":[1,{"c":"]"}]},"n":-1.5e3,"t":true,)"
      R"("metadata":{"name":"x","labels":{"k":"v"}},"after":null})";
  EXPECT_EQ(member_text(text, "metadata"), R"({"name":"x","labels":{"k":"v"}})");
  EXPECT_EQ(member_text(text, "kind"), R"("Pod")");
  EXPECT_EQ(member_text(text, "n"), "-1.5e3");
  EXPECT_EQ(member_text(text, "t"), "true");
  EXPECT_EQ(member_text(text, "after"), "null");
  EXPECT_EQ(member_text(text, "spec"), R"({"a":"}{\"","b":[1,{"c":"]"}]})");
  // Only top-level members count.
  EXPECT_EQ(member_text(text, "name"), std::nullopt);
  EXPECT_EQ(member_text(text, "missing"), std::nullopt);
  // Whitespace as any JSON writer may put it.
  EXPECT_EQ(member_text(" {\n \"a\" : { } ,\t\"b\":[ ]\n}", "b"), "[ ]");
  EXPECT_EQ(member_text(" {\n \"a\" : { } ,\t\"b\":[ ]\n}", "a"), "{ }");
  // What is not such an object answers nothing, and nothing is read past the end.
  for (const char* bad : {"", "[]", "{", "{}", R"({"a")", R"({"a":)", R"({"a":{)", R"({"a":"x)",
                          R"({"a\u0062":1})", "null"}) {
    EXPECT_EQ(member_text(bad, "a"), std::nullopt) << bad;
    EXPECT_EQ(member_text(bad, "ab"), std::nullopt) << bad;
  }
  EXPECT_EQ(member_text(R"({"a":1,"b":{"c":)", "b"), std::nullopt);
  EXPECT_EQ(member_text(R"({"a":1 "b":2})", "b"), std::nullopt);
  EXPECT_EQ(member_text(R"({"a":1,)", "b"), std::nullopt);
}

}  // namespace
}  // namespace kwatch::apimachinery
