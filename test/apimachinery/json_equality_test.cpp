#include "apimachinery/json_equality.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace kwatch::apimachinery {
namespace {

namespace json = boost::json;

// Two numbers are equal when their int64 forms are: a rule only a test would use, so that the
// structure's rules show apart from any real number rule.
bool as_int64_equal(const json::value& a, const json::value& b) {
  return a.to_number<std::int64_t>() == b.to_number<std::int64_t>();
}

bool equal(const char* a, const char* b, std::size_t max_depth = SIZE_MAX) {
  return json_equal_with(json::parse(a), json::parse(b), as_int64_equal, max_depth);
}

TEST(JsonEquality, ObjectsIgnoreMemberOrderArraysDoNot) {
  EXPECT_TRUE(equal(R"({"a":1,"b":[1,2]})", R"({"b":[1,2],"a":1})"));
  EXPECT_FALSE(equal(R"([1,2])", R"([2,1])"));
  EXPECT_FALSE(equal(R"({"a":1})", R"({"a":1,"b":2})"));
  EXPECT_FALSE(equal(R"({"a":1,"c":2})", R"({"a":1,"b":2})"));
  EXPECT_FALSE(equal(R"([1])", R"([1,1])"));
}

TEST(JsonEquality, NumbersFollowTheRuleGivenAndNothingElseDoes) {
  EXPECT_TRUE(equal("1", "1.0"));
  EXPECT_TRUE(equal(R"({"n":[7]})", R"({"n":[7.0]})")) << "the rule applies at every depth";
  EXPECT_FALSE(equal("1", R"("1")"));
  EXPECT_FALSE(equal("0", "false"));
  EXPECT_FALSE(equal("null", "0"));
  EXPECT_FALSE(json_equal_with(json::parse("1"), json::parse("1"),
                               [](const json::value&, const json::value&) { return false; }))
      << "numbers are compared by the rule only";
  EXPECT_TRUE(equal(R"("x")", R"("x")"));
  EXPECT_FALSE(equal(R"("x")", R"("y")"));
  EXPECT_TRUE(equal("null", "null"));
  EXPECT_FALSE(equal("true", "false"));
}

TEST(JsonEquality, ValuesDeeperThanTheBoundAreUnequal) {
  std::string deep = "1";
  for (int i = 0; i < 5; ++i) deep = "[" + deep + "]";  // 1 nested 5 levels down
  EXPECT_TRUE(equal(deep.c_str(), deep.c_str(), 5));
  EXPECT_FALSE(equal(deep.c_str(), deep.c_str(), 4));
  EXPECT_TRUE(equal(deep.c_str(), deep.c_str()));
}

TEST(JsonEquality, AsDecodedANullMemberIsOneLeftOut) {
  auto eq = [](std::string_view a, std::string_view b) {
    return json_equal_as_decoded(json::parse(a), json::parse(b));
  };
  EXPECT_TRUE(eq(R"({"a":1,"rules":null})", R"({"a":1})"));
  EXPECT_TRUE(eq(R"({"a":{"b":null,"c":[{"d":null}]}})", R"({"a":{"c":[{}]}})"));
  EXPECT_FALSE(eq(R"({"rules":[]})", R"({})")) << "an empty list is no nil";
  EXPECT_FALSE(eq(R"([null])", R"([])")) << "list elements are not members";
  EXPECT_FALSE(eq(R"({"a":1})", R"({"a":2})"));
}

}  // namespace
}  // namespace kwatch::apimachinery
