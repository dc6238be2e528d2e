#include "schema/field_set.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::schema {
namespace {

namespace json = boost::json;

FieldSet parse(std::string_view text) {
  std::string error;
  auto s = FieldSet::from_fields_v1(json::parse(text), &error);
  EXPECT_TRUE(s.has_value()) << error;
  return s ? *s : FieldSet();
}

std::vector<std::string> paths(const FieldSet& s) {
  std::vector<std::string> out;
  s.for_each([&](const FieldPath& p) { out.push_back(path_string(p)); });
  return out;
}

TEST(FieldSet, ReadsAndWritesFieldsV1WithMembershipOfInnerNodes) {
  const char* text =
      R"({"f:metadata":{"f:labels":{".":{},"f:app":{}}},)"
      R"("f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{}}}}})";
  FieldSet s = parse(text);
  EXPECT_EQ(paths(s), (std::vector<std::string>{".metadata.labels", ".metadata.labels.app",
                                                 ".spec.containers[name=\"nginx\"]",
                                                 ".spec.containers[name=\"nginx\"].image"}));
  EXPECT_EQ(json::value(s.to_fields_v1()), json::parse(text));
}

TEST(FieldSet, KeysAreCanonicalWhateverOrderTheyCameIn) {
  FieldSet a = parse(R"({"f:ports":{"k:{\"protocol\":\"TCP\",\"port\":80}":{}}})");
  FieldSet b;
  b.insert({field_step("ports"), key_step(json::parse(R"({"port":80,"protocol":"TCP"})").get_object())});
  EXPECT_EQ(a, b);
  EXPECT_EQ(paths(a), std::vector<std::string>{".ports[port=80,protocol=\"TCP\"]"});
}

TEST(FieldSet, PrintsValuesAndIndexes) {
  FieldSet s;
  s.insert({field_step("metadata"), field_step("finalizers"), value_step(json::string("a/b"))});
  s.insert({field_step("x"), index_step(3)});
  EXPECT_EQ(paths(s), (std::vector<std::string>{".metadata.finalizers[=\"a/b\"]", ".x[3]"}));
}

TEST(FieldSet, RefusesMalformedFieldsV1) {
  std::string error;
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse(R"({"x:a":{}})"), &error));
  EXPECT_NE(error.find("invalid path element"), std::string::npos);
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse(R"({"k:[1]":{}})"), &error));
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse(R"({"i:x":{}})"), &error));
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse(R"({"f:a":[]})"), &error));
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse(R"({"f:a":{".":1}})"), &error));
  EXPECT_FALSE(FieldSet::from_fields_v1(json::parse("[]"), &error));
}

TEST(FieldSet, DifferenceKeepsWhatIsBelowRemovedMembers) {
  FieldSet s = parse(R"({"f:a":{".":{},"f:b":{}},"f:c":{}})");
  FieldSet a = parse(R"({"f:a":{}})");
  EXPECT_EQ(paths(s.difference(a)), (std::vector<std::string>{".a.b", ".c"}));
  EXPECT_EQ(paths(s.recursive_difference(a)), std::vector<std::string>{".c"});
}

TEST(FieldSet, UnionAndIntersection) {
  FieldSet x = parse(R"({"f:a":{"f:b":{}},"f:c":{}})");
  FieldSet y = parse(R"({"f:a":{"f:b":{},"f:d":{}}})");
  EXPECT_EQ(paths(x.union_with(y)), (std::vector<std::string>{".a.b", ".a.d", ".c"}));
  EXPECT_EQ(paths(x.intersection(y)), std::vector<std::string>{".a.b"});
  EXPECT_TRUE(x.intersection(parse(R"({"f:z":{}})")).empty());
  EXPECT_TRUE(x.has({field_step("a"), field_step("b")}));
  EXPECT_FALSE(x.has({field_step("a")}));
}

}  // namespace
}  // namespace kwatch::schema
