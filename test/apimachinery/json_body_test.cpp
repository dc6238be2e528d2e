#include "apimachinery/json_body.hpp"
#include "apimachinery/stored_json.hpp"

#include <gtest/gtest.h>

namespace kwatch::apimachinery {


namespace {

using Paths = std::vector<std::string>;

TEST(DuplicateFields, AreReportedWithTheirPathsInKubesNotation) {
  EXPECT_EQ(duplicate_fields(R"({"metadata":{"name":"a","name":"b"}})"), Paths{"metadata.name"});
  EXPECT_EQ(duplicate_fields(R"({"spec":{"containers":[{"name":"a"},{"image":"x","image":"y"}]}})"),
            Paths{"spec.containers[1].image"});
  EXPECT_EQ(duplicate_fields(R"({"kind":"Pod","kind":"Pod","a":[[{"b":1,"b":2}]]})"),
            (Paths{"kind", "a[0][0].b"}));
}

TEST(DuplicateFields, SameNamesInDifferentObjectsAreNotDuplicates) {
  EXPECT_TRUE(duplicate_fields(R"({"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]})").empty());
  EXPECT_TRUE(duplicate_fields(R"({"a":[1,"x",null,true,{}],"b":2})").empty());
}

TEST(DuplicateFields, EscapedNamesCompareByTheirValue) {
  EXPECT_EQ(duplicate_fields(R"({"a":1,"\u0061":2})"), Paths{"a"});
}

TEST(DuplicateFields, ABodyThatDoesNotParseHasNone) {
  EXPECT_TRUE(duplicate_fields(R"({"a":1,"a":)").empty());
  EXPECT_TRUE(duplicate_fields("").empty());
}

TEST(DuplicateFields, OfAParsedBodyAreTheSame) {
  for (const char* text :
       {R"({"metadata":{"name":"a","name":"b"}})", R"({"a":{},"a":{}})",
        R"({"a":{"x":1},"a":{"y":1,"y":2}})", R"({"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}]})",
        R"({"kind":"Pod","kind":"Pod","a":[[{"b":1,"b":2}]]})", R"({"a":1,"\u0061":2})",
        R"({"a":[1,"x",null,true,{}],"b":2})", R"({})"}) {
    auto parsed = parse_json_body(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(duplicate_fields(text, parsed->as_object()), duplicate_fields(text)) << text;
  }
}

TEST(ParseJsonBody, KeepsTheLastOfDuplicateMembers) {
  auto v = parse_json_body(R"({"a":1,"a":2})");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->as_object().at("a"), 2);
  EXPECT_EQ(v->as_object().size(), 1u);
}

// Go's encoding/json scanner's words, which kube-apiserver's decode errors carry.
TEST(GoJsonSyntaxError, NamesTheFirstErrorAsGoDoes) {
  const std::pair<std::string, std::string> cases[] = {
      {"{bad", "invalid character 'b' looking for beginning of object key string"},
      {"", "unexpected end of JSON input"},
      {"  ", "unexpected end of JSON input"},
      {R"({"a":1)", "unexpected end of JSON input"},
      {R"({"a":"x)", "unexpected end of JSON input"},
      {R"({"a" 1})", "invalid character '1' after object key"},
      {R"({"a":1 "b":2})", R"(invalid character '"' after object key:value pair)"},
      {"[1 2]", "invalid character '2' after array element"},
      {"[,]", "invalid character ',' looking for beginning of value"},
      {R"({"a":1,})", "invalid character '}' looking for beginning of object key string"},
      {R"({"a":tru})", "invalid character '}' in literal true (expecting 'e')"},
      {R"({"a":nul})", "invalid character '}' in literal null (expecting 'l')"},
      {R"({"a":fx})", "invalid character 'x' in literal false (expecting 'a')"},
      {R"({"a":-})", "invalid character '}' in numeric literal"},
      {R"({"a":1.})", "invalid character '}' after decimal point in numeric literal"},
      {R"({"a":1e})", "invalid character '}' in exponent of numeric literal"},
      {R"({"a":1e+})", "invalid character '}' in exponent of numeric literal"},
      {R"({"a":01})", "invalid character '1' after object key:value pair"},
      {R"({"a":"\x"})", "invalid character 'x' in string escape code"},
      {R"({"a":"\u12g4"})", R"(invalid character 'g' in \u hexadecimal character escape)"},
      {"{\"a\":\"\t\"}", R"(invalid character '\t' in string literal)"},
      {"{\"a\":\"\x01\"}", R"(invalid character '\x01' in string literal)"},
      {"{} x", "invalid character 'x' after top-level value"},
      {"{'a':1}", R"(invalid character '\'' looking for beginning of object key string)"},
      {"\\", R"(invalid character '\\' looking for beginning of value)"},
      {"\xe9", "invalid character '\xc3\xa9' looking for beginning of value"},
      {"\x85", R"(invalid character '\u0085' looking for beginning of value)"},
      {"\x7f", R"(invalid character '\x7f' looking for beginning of value)"},
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(go_json_syntax_error(text), want) << text;
  for (const char* valid : {"{}", " [1, 2.5e-3, \"x\\u00e9\", true, false, null] ", "\"s\"", "0",
                            "-0.5E+2", "{\"a\":{\"b\":[[],{}]}}\n"}) {
    EXPECT_EQ(go_json_syntax_error(valid), "") << valid;
  }
}

TEST(SummarizeBody, QuotesTheStartAsKubeDoes) {
  EXPECT_EQ(summarize_body(""), "<empty>");
  EXPECT_EQ(summarize_body("{bad"), "{bad");
  EXPECT_EQ(summarize_body("{\"metadata\":{\"name\":\"a-long-name\"}}"),
            "{\"metadata\":{\"name\":\"a-long-na ...");
  EXPECT_EQ(summarize_body("[1]"), "5b315d");
  std::string hex;
  for (int k = 0; k < 30; ++k) hex += "78";
  EXPECT_EQ(summarize_body(std::string(40, 'x')), hex + " ...");
  // Cut inside a character, the text stays valid UTF-8.
  EXPECT_TRUE(is_valid_utf8(summarize_body("{" + std::string(28, 'a') + "\xc3\xa9")));
}

TEST(ParseJsonBody, SyntaxErrorsInGosWords) {
  auto r = parse_json_body("{bad");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "couldn't get version/kind; json parse error: invalid character 'b' "
                               "looking for beginning of object key string");
  // What Go reads but kwatch refuses stays in kwatch's words.
  auto deep = parse_json_body(std::string(200, '[') + std::string(200, ']'));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().message.find("invalid character"), std::string::npos);
}

}  // namespace
}  // namespace kwatch::apimachinery
