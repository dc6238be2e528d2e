#include "apimachinery/merge_patch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::apimachinery {


namespace {

namespace json = boost::json;

std::string merged(std::string_view target, std::string_view patch) {
  return json::serialize(apply_merge_patch(json::parse(target), json::parse(patch)));
}

TEST(MergePatch, AppliesTheRfc7386Section1Example) {
  auto target = R"({"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},
                    "tags":["example","sample"],"content":"This will be unchanged"})";
  auto patch = R"({"title":"Hello!","phoneNumber":"+01-123-456-7890",
                   "author":{"familyName":null},"tags":["example"]})";
  EXPECT_EQ(json::parse(merged(target, patch)),
            json::parse(R"({"title":"Hello!","author":{"givenName":"John"},"tags":["example"],
                            "content":"This will be unchanged","phoneNumber":"+01-123-456-7890"})"));
}

struct Case {
  const char* target;
  const char* patch;
  const char* result;
};

TEST(MergePatch, PassesEveryRfc7386AppendixAExample) {
  const Case cases[] = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"a":"foo"})", "null", "null"},
      {R"({"a":"foo"})", R"("bar")", R"("bar")"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(json::parse(merged(c.target, c.patch)), json::parse(c.result))
        << c.target << " + " << c.patch;
  }
}

TEST(MergePatch, KeepsTheOrderOfUntouchedMembers) {
  EXPECT_EQ(merged(R"({"a":1,"b":2,"c":3})", R"({"b":null,"d":4,"a":5})"),
            R"({"a":5,"c":3,"d":4})");
}

TEST(MergePatch, DropsNullsFromObjectsInsideAnAddedArray) {
  EXPECT_EQ(merged(R"({})", R"({"a":[{"x":null,"y":1},null]})"), R"({"a":[{"y":1},null]})");
}

}  // namespace
}  // namespace kwatch::apimachinery
