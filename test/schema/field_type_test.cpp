#include "schema/field_type.hpp"

#include "schema/builtin_schemas.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::schema {
namespace {

namespace json = boost::json;

const FieldType& deployment() {
  static const auto types = FieldTypes::of_resource(
      *KindSchemas::builtin().structural_schema("apps", "v1", "Deployment"));
  return types->root();
}

std::vector<std::string> paths(const FieldSet& s) {
  std::vector<std::string> out;
  s.for_each([&](const FieldPath& p) { out.push_back(path_string(p)); });
  return out;
}

std::vector<std::string> fields_of(std::string_view value, const FieldType& t = deployment()) {
  auto s = field_set_of(json::parse(value), t);
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? paths(*s) : std::vector<std::string>();
}

TEST(FieldType, BuiltinKindsKnowTheirListsAndMaps) {
  const FieldType& d = deployment();
  const FieldType* containers =
      d.field("spec")->field("template")->field("spec")->field("containers");
  ASSERT_NE(containers, nullptr);
  EXPECT_EQ(containers->form, FieldType::Form::list);
  EXPECT_EQ(containers->keys, std::vector<std::string>{"name"});
  const FieldType* args = containers->element->field("args");
  EXPECT_TRUE(args->atomic);
  const FieldType* meta = d.field("metadata");
  EXPECT_EQ(meta->field("labels")->form, FieldType::Form::map);
  EXPECT_EQ(meta->field("finalizers")->form, FieldType::Form::list);
  EXPECT_FALSE(meta->field("finalizers")->atomic);
  EXPECT_TRUE(meta->field("finalizers")->keys.empty());
}

TEST(FieldType, FieldSetsOwnLeavesItemsAndMapEntries) {
  EXPECT_EQ(fields_of(R"({"metadata":{"labels":{"app":"x"},"finalizers":["a"]},
                          "spec":{"replicas":2,"template":{"spec":{"containers":[
                            {"name":"c","image":"i","args":["1","2"],
                             "ports":[{"containerPort":80}]}]}}}})"),
            (std::vector<std::string>{
                ".metadata.finalizers[=\"a\"]", ".metadata.labels.app", ".spec.replicas",
                ".spec.template.spec.containers[name=\"c\"]",
                ".spec.template.spec.containers[name=\"c\"].args",
                ".spec.template.spec.containers[name=\"c\"].image",
                ".spec.template.spec.containers[name=\"c\"].name",
                // protocol defaults to TCP in the key
                ".spec.template.spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"]",
                ".spec.template.spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"].containerPort"}));
  // Empty structures are owned themselves.
  EXPECT_EQ(fields_of(R"({"spec":{"strategy":{}}})"), std::vector<std::string>{".spec.strategy"});
}

TEST(FieldType, ApplyConfigurationsMayNotRepeatOrOmitKeys) {
  auto dup = field_set_of(json::parse(R"({"spec":{"template":{"spec":{"containers":[
                                           {"name":"a"},{"name":"a"}]}}}})"),
                          deployment());
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message,
            ".spec.template.spec.containers: duplicate entries for key [name=\"a\"]");
  auto keyless = field_set_of(
      json::parse(R"({"spec":{"template":{"spec":{"containers":[{"image":"a"}]}}}})"), deployment());
  ASSERT_FALSE(keyless);
  EXPECT_NE(keyless.error().message.find("omits key field \"name\""), std::string::npos);
  // Live objects may hold duplicates: the first counts.
  EXPECT_TRUE(field_set_of(json::parse(R"({"metadata":{"finalizers":["a","a"]}})"), deployment(),
                           /*allow_duplicates=*/true));
}

TEST(FieldType, ComparisonNamesAddedStructuresAndRemovedItems) {
  json::value a = json::parse(R"({"spec":{"replicas":1,"template":{"spec":{"containers":[
                                  {"name":"a","image":"1"},{"name":"b","image":"1"}]}}}})");
  json::value b = json::parse(R"({"spec":{"replicas":2,"selector":{"matchLabels":{"x":"y"}},
                                  "template":{"spec":{"containers":[{"name":"a","image":"1"}]}}}})");
  Comparison c = compare(&a, &b, deployment());
  EXPECT_EQ(paths(c.modified), std::vector<std::string>{".spec.replicas"});
  EXPECT_EQ(paths(c.added), (std::vector<std::string>{".spec.selector", ".spec.selector.matchLabels",
                                                      ".spec.selector.matchLabels.x"}));
  EXPECT_EQ(paths(c.removed),
            (std::vector<std::string>{".spec.template.spec.containers[name=\"b\"]",
                                      ".spec.template.spec.containers[name=\"b\"].image",
                                      ".spec.template.spec.containers[name=\"b\"].name"}));
  EXPECT_TRUE(compare(&a, &a, deployment()).same());
}

TEST(FieldType, AtomicListsCompareAsOneField) {
  json::value a = json::parse(R"({"spec":{"template":{"spec":{"containers":[{"name":"a","args":["1"]}]}}}})");
  json::value b = json::parse(R"({"spec":{"template":{"spec":{"containers":[{"name":"a","args":["1","2"]}]}}}})");
  EXPECT_EQ(paths(compare(&a, &b, deployment()).modified),
            std::vector<std::string>{".spec.template.spec.containers[name=\"a\"].args"});
}

TEST(FieldType, MergeKeepsLiveItemsInPlaceAndTakesConfigOrderForSharedOnes) {
  const FieldType& set = *deployment().field("metadata")->field("finalizers");
  auto m = [&](std::string_view live, std::string_view config) {
    return json::serialize(merge(json::parse(live), json::parse(config), set));
  };
  // Live's own items keep their place; shared ones follow config's order (c before a).
  EXPECT_EQ(m(R"(["a","b","c"])", R"(["c","a"])"), R"(["b","c","a"])");
  EXPECT_EQ(m(R"(["a","x"])", R"(["b"])"), R"(["a","x","b"])");
  EXPECT_EQ(m(R"([])", R"(["b","a"])"), R"(["b","a"])");
  EXPECT_EQ(m(R"(["x","a","y","b"])", R"(["b","n","a"])"), R"(["x","y","b","n","a"])");
}

TEST(FieldType, MergeIsFieldByFieldAndAtomicPartsAreReplaced) {
  json::value live = json::parse(R"({"metadata":{"labels":{"a":"1","b":"2"}},
      "spec":{"replicas":1,"template":{"spec":{"containers":[
        {"name":"a","image":"1","args":["x","y"]},{"name":"b","image":"1"}]}}}})");
  json::value config = json::parse(R"({"metadata":{"labels":{"b":"3","a":null}},
      "spec":{"template":{"spec":{"containers":[{"name":"b","image":"2"},
        {"name":"a","args":["z"]}]}}}})");
  EXPECT_EQ(merge(live, config, deployment()),
            json::parse(R"({"metadata":{"labels":{"b":"3"}},
      "spec":{"replicas":1,"template":{"spec":{"containers":[
        {"name":"b","image":"2"},{"name":"a","image":"1","args":["z"]}]}}}})"));
}

TEST(FieldType, RemovesMembersWithEverythingBelow) {
  json::value v = json::parse(R"({"metadata":{"labels":{"a":"1","b":"2"}},
      "spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"a","image":"1"},{"name":"b"}]}}}})");
  FieldSet s;
  s.insert({field_step("metadata"), field_step("labels"), field_step("a")});
  s.insert({field_step("spec"), field_step("replicas")});
  s.insert({field_step("spec"), field_step("template"), field_step("spec"), field_step("containers"),
            key_step(json::parse(R"({"name":"a"})").get_object())});
  remove_fields(v, s, deployment());
  EXPECT_EQ(v, json::parse(R"({"metadata":{"labels":{"b":"2"}},
      "spec":{"template":{"spec":{"containers":[{"name":"b"}]}}}})"));
}

TEST(FieldType, NamedFieldsBecomeMembersButMapEntriesAndItemsDoNot) {
  FieldSet s;
  s.insert({field_step("metadata"), field_step("labels"), field_step("a")});
  s.insert({field_step("spec"), field_step("template"), field_step("spec"), field_step("containers"),
            key_step(json::parse(R"({"name":"a"})").get_object()), field_step("image")});
  EXPECT_EQ(paths(with_named_fields(s, deployment())),
            (std::vector<std::string>{".metadata", ".metadata.labels", ".metadata.labels.a", ".spec",
                                      ".spec.template", ".spec.template.spec",
                                      ".spec.template.spec.containers",
                                      ".spec.template.spec.containers[name=\"a\"].image"}));
}

TEST(FieldType, CustomResourceSchemasAndDeducedShapes) {
  auto types = FieldTypes::of_resource(json::parse(R"({"type":"object","properties":{
      "spec":{"type":"object","properties":{
        "items":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["id"],
                 "items":{"type":"object","properties":{"id":{"type":"integer"},"v":{"type":"string"}}}},
        "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
        "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
        "sel":{"type":"object","x-kubernetes-map-type":"atomic","properties":{"a":{"type":"string"}}}}}}})"));
  EXPECT_EQ(fields_of(R"({"spec":{"items":[{"id":1,"v":"x"}],"tags":["t"],
                                  "free":{"a":{"b":[1]}},"sel":{"a":"1"}}})",
                      types->root()),
            (std::vector<std::string>{".spec.free.a", ".spec.free.a.b", ".spec.items[id=1]",
                                      ".spec.items[id=1].id", ".spec.items[id=1].v", ".spec.sel",
                                      ".spec.tags[=\"t\"]"}));
  // Without a schema everything is deduced: objects granular, lists atomic.
  auto none = FieldTypes::of_resource(json::object());
  EXPECT_EQ(fields_of(R"({"spec":{"a":[1,2],"b":{"c":1}}})", none->root()),
            (std::vector<std::string>{".spec", ".spec.a", ".spec.b", ".spec.b.c"}));
}

}  // namespace
}  // namespace kwatch::schema
