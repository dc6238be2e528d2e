#include "registry/json_patch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::registry {
namespace {

namespace json = boost::json;

json::value patched(std::string_view doc, std::string_view patch) {
  std::string detail;
  auto r = apply_json_patch(json::parse(doc), json::parse(patch), &detail);
  EXPECT_TRUE(r.has_value()) << patch << ": " << detail;
  return r ? *r : json::value{};
}

// Returns the library detail of a patch that cannot be applied (422).
std::string unapplicable(std::string_view doc, std::string_view patch) {
  std::string detail;
  auto r = apply_json_patch(json::parse(doc), json::parse(patch), &detail);
  EXPECT_FALSE(r.has_value()) << patch;
  if (r) return {};
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_EQ(r.error().message, "the server rejected our request due to an error in our request");
  EXPECT_TRUE(r.error().causes.empty());
  return detail;
}

TEST(JsonPatch, A1AddsAnObjectMember) {
  EXPECT_EQ(patched(R"({"foo":"bar"})", R"([{"op":"add","path":"/baz","value":"qux"}])"),
            json::parse(R"({"baz":"qux","foo":"bar"})"));
}

TEST(JsonPatch, A2AddsAnArrayElement) {
  EXPECT_EQ(patched(R"({"foo":["bar","baz"]})", R"([{"op":"add","path":"/foo/1","value":"qux"}])"),
            json::parse(R"({"foo":["bar","qux","baz"]})"));
}

TEST(JsonPatch, A3RemovesAnObjectMember) {
  EXPECT_EQ(patched(R"({"baz":"qux","foo":"bar"})", R"([{"op":"remove","path":"/baz"}])"),
            json::parse(R"({"foo":"bar"})"));
}

TEST(JsonPatch, A4RemovesAnArrayElement) {
  EXPECT_EQ(patched(R"({"foo":["bar","qux","baz"]})", R"([{"op":"remove","path":"/foo/1"}])"),
            json::parse(R"({"foo":["bar","baz"]})"));
}

TEST(JsonPatch, A5ReplacesAValue) {
  EXPECT_EQ(patched(R"({"baz":"qux","foo":"bar"})",
                    R"([{"op":"replace","path":"/baz","value":"boo"}])"),
            json::parse(R"({"baz":"boo","foo":"bar"})"));
}

TEST(JsonPatch, A6MovesAValue) {
  EXPECT_EQ(patched(R"({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}})",
                    R"([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}])"),
            json::parse(R"({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}})"));
}

TEST(JsonPatch, A7MovesAnArrayElement) {
  EXPECT_EQ(patched(R"({"foo":["all","grass","cows","eat"]})",
                    R"([{"op":"move","from":"/foo/1","path":"/foo/3"}])"),
            json::parse(R"({"foo":["all","cows","eat","grass"]})"));
}

TEST(JsonPatch, A8TestsValuesSuccessfully) {
  EXPECT_EQ(patched(R"({"baz":"qux","foo":["a",2,"c"]})",
                    R"([{"op":"test","path":"/baz","value":"qux"},
                        {"op":"test","path":"/foo/1","value":2}])"),
            json::parse(R"({"baz":"qux","foo":["a",2,"c"]})"));
}

TEST(JsonPatch, A9FailsATestWith422) {
  EXPECT_EQ(unapplicable(R"({"baz":"qux"})", R"([{"op":"test","path":"/baz","value":"bar"}])"),
            "testing value /baz failed: test failed");
}

TEST(JsonPatch, A10AddsANestedMember) {
  EXPECT_EQ(patched(R"({"foo":"bar"})",
                    R"([{"op":"add","path":"/child","value":{"grandchild":{}}}])"),
            json::parse(R"({"foo":"bar","child":{"grandchild":{}}})"));
}

TEST(JsonPatch, A11IgnoresUnrecognizedMembers) {
  EXPECT_EQ(patched(R"({"foo":"bar"})", R"([{"op":"add","path":"/baz","value":"qux","xyz":123}])"),
            json::parse(R"({"foo":"bar","baz":"qux"})"));
}

TEST(JsonPatch, A12FailsToAddToANonexistentTarget) {
  EXPECT_EQ(unapplicable(R"({"foo":"bar"})", R"([{"op":"add","path":"/baz/bat","value":"qux"}])"),
            "add operation does not apply: doc is missing path: \"/baz/bat\": missing value");
}

TEST(JsonPatch, A14UnescapesTildeSequences) {
  EXPECT_EQ(patched(R"({"/":9,"~1":10})", R"([{"op":"test","path":"/~01","value":10}])"),
            json::parse(R"({"/":9,"~1":10})"));
  EXPECT_EQ(patched(R"({"a/b":1})", R"([{"op":"replace","path":"/a~1b","value":2}])"),
            json::parse(R"({"a/b":2})"));
}

TEST(JsonPatch, A15ComparesStringsAndNumbersStrictly) {
  unapplicable(R"({"/":9,"~1":10})", R"([{"op":"test","path":"/~01","value":"10"}])");
}

TEST(JsonPatch, A16AddsAnArrayValue) {
  EXPECT_EQ(patched(R"({"foo":["bar"]})", R"([{"op":"add","path":"/foo/-","value":["abc","def"]}])"),
            json::parse(R"({"foo":["bar",["abc","def"]]})"));
}

TEST(JsonPatch, TestComparesNumbersByValueAndObjectsWithoutOrder) {
  patched(R"({"a":1,"o":{"x":1,"y":2}})", R"([{"op":"test","path":"/a","value":1.0},
                                              {"op":"test","path":"/o","value":{"y":2,"x":1}}])");
}

TEST(JsonPatch, CopiesValues) {
  EXPECT_EQ(patched(R"({"a":{"b":1}})", R"([{"op":"copy","from":"/a","path":"/c"}])"),
            json::parse(R"({"a":{"b":1},"c":{"b":1}})"));
}

TEST(JsonPatch, ReplacesTheWholeDocumentWithAnEmptyPath) {
  EXPECT_EQ(patched(R"({"a":1})", R"([{"op":"replace","path":"","value":{"b":2}}])"),
            json::parse(R"({"b":2})"));
}

TEST(JsonPatch, AppliesOperationsInOrderAndAtomically) {
  std::string detail;
  auto r = apply_json_patch(json::parse(R"({"a":1})"),
                            json::parse(R"([{"op":"add","path":"/b","value":2},
                                            {"op":"remove","path":"/zzz"}])"),
                            &detail);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(detail, "remove operation does not apply: doc is missing path: \"/zzz\": missing value");
}

TEST(JsonPatch, KeepsTheOrderOfRemainingMembersAfterRemove) {
  EXPECT_EQ(json::serialize(patched(R"({"a":1,"b":2,"c":3,"d":4})",
                                    R"([{"op":"remove","path":"/b"}])")),
            R"({"a":1,"c":3,"d":4})");
}

TEST(JsonPatch, RejectsBadIndicesAndOperations) {
  EXPECT_EQ(unapplicable(R"({"a":[1]})", R"([{"op":"add","path":"/a/5","value":0}])"),
            "Unable to access invalid index: 5: invalid index referenced");
  unapplicable(R"({"a":[1,2]})", R"([{"op":"remove","path":"/a/01"}])");
  unapplicable(R"({"a":[1,2]})", R"([{"op":"replace","path":"/a/-","value":0}])");
  EXPECT_EQ(unapplicable(R"({})", R"([{"op":"frobnicate","path":"/a"}])"), "Unexpected kind: frobnicate");
  EXPECT_EQ(unapplicable(R"({})", R"([{"path":"/a"}])"), "Unexpected kind: unknown");
  EXPECT_EQ(unapplicable(R"({})", R"([{"op":"remove"}])"), "operation missing path field");
  EXPECT_EQ(unapplicable(R"({"a":1})", R"([{"op":"replace","path":"/b","value":0}])"),
            "replace operation does not apply: doc is missing key: /b: missing value");
  unapplicable(R"({"a":{"b":1}})", R"([{"op":"move","from":"/a","path":"/a/b/c"}])");
  unapplicable(R"({"a":1})", R"([{"op":"add","path":"a","value":0}])");
  unapplicable(R"({"a":1})", R"([{"op":"add","path":"/~2","value":0}])");
}

TEST(JsonPatch, RejectsAPatchThatIsNotAnArrayOfObjectsWith400) {
  auto r = apply_json_patch(json::parse("{}"), json::parse(R"({"op":"add"})"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::bad_request);
  EXPECT_EQ(r.error().message, "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  r = apply_json_patch(json::parse("{}"), json::parse(R"(["x"])"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::bad_request);
}

TEST(JsonPatch, RejectsTooManyOperations) {
  json::array ops;
  for (std::size_t i = 0; i <= kMaxJsonPatchOperations; ++i) {
    ops.push_back(json::parse(R"({"op":"test","path":"","value":{}})"));
  }
  auto r = apply_json_patch(json::parse("{}"), ops);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::bad_request);
}

}  // namespace
}  // namespace kwatch::registry
