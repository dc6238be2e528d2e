#include "apimachinery/json_patch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::apimachinery {

using base::Errc;

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
  EXPECT_EQ(r.error().message,
            "the server rejected our request due to an error in our request: " + detail);
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
  // 413, as kube-apiserver answers.
  EXPECT_EQ(r.error().code, Errc::too_large);
  EXPECT_NE(r.error().message.find("The allowed maximum operations in a JSON patch is 10000"),
            std::string::npos);
}

// 22 copies of the whole document into itself double it 22 times (a 782-byte request once
// stored 87 MB and took the server to 1.7 GB): kube's accumulated copy limit stops it, before
// the copy that would pass the limit is made.
TEST(JsonPatch, CopiesThatAmplifyTheDocumentStopAtTheCopyLimit) {
  json::array ops;
  for (int i = 0; i < 22; ++i) {
    ops.push_back(json::object{{"op", "copy"}, {"from", ""}, {"path", "/data/k" + std::to_string(i)}});
  }
  std::string detail;
  auto r = apply_json_patch(
      json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{}})"),
      ops, &detail);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_NE(detail.find("Unable to complete the copy, the accumulated size increase of copy is"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("exceeding the limit 3145728"), std::string::npos);
}

TEST(JsonPatch, ADocumentGrowingPastTheObjectLimitStopsAtTheOperationThatCrossesIt) {
  const std::string mib(1u << 20, 'x');
  json::array ops;
  for (int i = 0; i < 8; ++i) {
    ops.push_back(json::object{{"op", "add"}, {"path", "/k" + std::to_string(i)}, {"value", mib}});
  }
  ops.push_back(json::object{{"op", "frobnicate"}});  // never reached
  auto r = apply_json_patch(json::object(), ops);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::too_large);
  EXPECT_NE(r.error().message.find("3145728"), std::string::npos);
}

TEST(JsonPatch, TheSizeEstimateNeverRejectsAResultWithinTheLimit) {
  // A document a few bytes under the limit; operations that grow and shrink it there (the
  // limit holds after every operation, not only for the result).
  const std::string big(3145728 - 200, 'x');
  json::value doc = json::object{{"a", big}, {"arr", json::array{1, 2, 3}}};
  ASSERT_LE(json::serialize(doc).size(), 3145728u);
  auto r = apply_json_patch(doc, json::parse(R"([
      {"op":"add","path":"/b","value":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"},
      {"op":"remove","path":"/b"},
      {"op":"add","path":"/arr/0","value":"zz"},
      {"op":"move","from":"/arr/0","path":"/c"},
      {"op":"remove","path":"/arr/2"},
      {"op":"copy","from":"/arr","path":"/d"},
      {"op":"replace","path":"/c","value":7}])"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_LE(json::serialize(*r).size(), 3145728u);
}

TEST(JsonPatch, ValuesNestingPastTheDepthLimitAreRefused) {
  auto nested = [](int levels) {
    json::value v = 1;
    for (int i = 0; i < levels; ++i) v = json::object{{"a", std::move(v)}};
    return v;
  };
  // Two adds of 60 levels each, the second below the first: 120 levels once committed.
  json::array ops;
  ops.push_back(json::object{{"op", "add"}, {"path", "/x"}, {"value", nested(60)}});
  std::string below = "/x";
  for (int i = 0; i < 59; ++i) below += "/a";
  ops.push_back(json::object{{"op", "add"}, {"path", below}, {"value", nested(60)}});
  std::string detail;
  auto r = apply_json_patch(json::object(), ops, &detail);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_NE(detail.find("would nest deeper than 100 levels"), std::string::npos) << detail;
  // Moving a subtree deeper is checked the same way.
  std::string deep_path = "/y";
  for (int i = 0; i < 58; ++i) deep_path += "/a";
  json::array move;
  move.push_back(json::object{{"op", "move"}, {"from", "/x"}, {"path", deep_path}});
  json::value doc = json::object{{"x", nested(60)}, {"y", nested(59)}};
  r = apply_json_patch(doc, move, &detail);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(detail.find("would nest deeper"), std::string::npos) << detail;
}

TEST(JsonPatch, QuadraticWorkIsBounded) {
  // Ten thousand inserts at the front of a 100,000-element array: a billion element moves.
  json::array arr(100000, json::value(0));
  json::array ops;
  for (int i = 0; i < 10000; ++i) {
    ops.push_back(json::object{{"op", "add"}, {"path", "/a/0"}, {"value", 1}});
  }
  std::string detail;
  auto r = apply_json_patch(json::object{{"a", std::move(arr)}}, ops, &detail);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_NE(detail.find("steps to apply"), std::string::npos) << detail;
}

}  // namespace
}  // namespace kwatch::apimachinery
