#include "kinds/custom_resource_definition.hpp"

#include "schema/structural_schema.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <algorithm>

namespace kwatch::kinds {

using schema::PatternCache;
using apimachinery::Cause;
using base::Errc;

namespace {

namespace json = boost::json;

// A CRD as a user writes it: two versions (v1 stored), status and scale subresources, printer
// columns, an int-or-string field, a map list, a case-insensitive pattern, a selectable field.
constexpr const char* kWidgets = R"({
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.stable.example.com"},
  "spec": {
    "group": "stable.example.com",
    "scope": "Namespaced",
    "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
    "versions": [
      {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
       "deprecationWarning": "stable.example.com/v1beta1 Widget is deprecated; use v1",
       "schema": {"openAPIV3Schema": {"type": "object", "properties": {
         "spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}},
      {"name": "v1", "served": true, "storage": true,
       "schema": {"openAPIV3Schema": {
         "type": "object",
         "properties": {
           "spec": {"type": "object", "required": ["color"], "properties": {
             "replicas": {"type": "integer", "minimum": 0},
             "color": {"type": "string", "enum": ["red", "green", "blue"]},
             "size": {"x-kubernetes-int-or-string": true},
             "host": {"type": "string", "pattern": "(?i)^[a-z0-9.-]+$"},
             "ports": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "required": ["name"], "properties": {
                         "name": {"type": "string"}, "port": {"type": "integer"}}}}}},
           "status": {"type": "object", "properties": {
             "replicas": {"type": "integer"}, "selector": {"type": "string"}}}}}},
       "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                               "statusReplicasPath": ".status.replicas",
                                               "labelSelectorPath": ".status.selector"}},
       "additionalPrinterColumns": [
         {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
         {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1},
         {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}],
       "selectableFields": [{"jsonPath": ".spec.color"}]}
    ]
  }
})";

json::object widgets() {
  json::object crd = json::parse(kWidgets).as_object();
  default_custom_resource_definition(crd);
  return crd;
}

json::object& spec(json::object& crd) { return crd["spec"].as_object(); }
json::object& version(json::object& crd, std::size_t i) {
  return spec(crd)["versions"].as_array()[i].as_object();
}

std::string describe(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + ": " + c.message + " (" + c.type + ")\n";
  return out;
}

const Cause* find_field(const std::vector<Cause>& causes, std::string_view field) {
  for (const auto& c : causes) {
    if (c.field == field) return &c;
  }
  return nullptr;
}

TEST(CustomResourceDefinition, DefaultingFillsSingularListKindConversionAndStoredVersions) {
  json::object crd = widgets();
  const json::object& names = spec(crd)["names"].as_object();
  EXPECT_EQ(names.at("singular"), "widget");
  EXPECT_EQ(names.at("listKind"), "WidgetList");
  EXPECT_EQ(spec(crd)["conversion"], json::parse(R"({"strategy":"None"})"));
  EXPECT_EQ(crd["status"].at("storedVersions"), json::parse(R"(["v1"])"));
}

// PrepareForCreate: whatever status a create sends gives way to Go's zero status, as its JSON
// writes it, with the storage version stored.
TEST(CustomResourceDefinition, ACreateStartsFromKubesZeroStatus) {
  json::object crd = widgets();
  crd["status"] = json::parse(R"({"conditions":[{"type":"Established","status":"True"}],
      "acceptedNames":{"plural":"forged","kind":"Forged"},"storedVersions":["v0"]})");
  reset_custom_resource_definition_status(crd);
  EXPECT_EQ(crd["status"], json::parse(R"({
      "acceptedNames":{"plural":"","kind":""},"storedVersions":["v1"]})"));
}

TEST(CustomResourceDefinition, DefaultingKeepsWhatTheUserSet) {
  json::object crd = json::parse(kWidgets).as_object();
  spec(crd)["names"].as_object()["singular"] = "gadget";
  spec(crd)["names"].as_object()["listKind"] = "Widgets";
  default_custom_resource_definition(crd);
  EXPECT_EQ(spec(crd)["names"].at("singular"), "gadget");
  EXPECT_EQ(spec(crd)["names"].at("listKind"), "Widgets");
}

TEST(CustomResourceDefinition, DefaultingLeavesACrdWithoutSpecAlone) {
  json::object crd = json::parse(R"({"metadata":{"name":"x"}})").as_object();
  default_custom_resource_definition(crd);
  EXPECT_EQ(crd, json::parse(R"({"metadata":{"name":"x"}})").as_object());
  auto causes = validate_custom_resource_definition(crd, nullptr);
  EXPECT_NE(find_field(causes, "spec.group"), nullptr) << describe(causes);
  EXPECT_NE(find_field(causes, "spec.names.kind"), nullptr) << describe(causes);
}

TEST(CustomResourceDefinition, ARealisticCrdValidatesCleanAndServesTwoVersions) {
  json::object crd = widgets();
  auto causes = validate_custom_resource_definition(crd, nullptr);
  EXPECT_TRUE(causes.empty()) << describe(causes);

  auto infos = custom_resources(crd, "/registry");
  ASSERT_TRUE(infos.has_value()) << infos.error().message;
  ASSERT_EQ(infos->size(), 2u);
  const ResourceInfo& beta = (*infos)[0];
  const ResourceInfo& v1 = (*infos)[1];
  EXPECT_EQ(beta.version, "v1beta1");
  EXPECT_EQ(v1.version, "v1");
  for (const ResourceInfo* info : {&beta, &v1}) {
    EXPECT_EQ(info->group, "stable.example.com");
    EXPECT_EQ(info->kind, "Widget");
    EXPECT_EQ(info->resource, "widgets");
    EXPECT_EQ(info->singular, "widget");
    EXPECT_TRUE(info->namespaced);
    EXPECT_EQ(info->short_names, std::vector<std::string>{"wd"});
    EXPECT_EQ(info->categories, std::vector<std::string>{"all"});
    EXPECT_EQ(info->origin, KindOrigin::custom);
    EXPECT_EQ(info->storage_version, "v1");
    EXPECT_EQ(info->storage_prefix, "/registry");
    EXPECT_EQ(info->key_prefix(), "/registry/stable.example.com/widgets/");
    EXPECT_EQ(info->key("ns1", "w1"), "/registry/stable.example.com/widgets/ns1/w1");
    EXPECT_NE(info->schema, nullptr);
  }
  EXPECT_FALSE(beta.has_status);
  EXPECT_FALSE(beta.scale.has_value());
  EXPECT_TRUE(beta.printer_columns.empty());
  EXPECT_TRUE(beta.selectable_fields.empty());

  EXPECT_TRUE(v1.has_status);
  ASSERT_TRUE(v1.scale.has_value());
  EXPECT_EQ(v1.scale->spec_replicas_path, ".spec.replicas");
  EXPECT_EQ(v1.scale->status_replicas_path, ".status.replicas");
  EXPECT_EQ(v1.scale->label_selector_path, ".status.selector");
  ASSERT_EQ(v1.printer_columns.size(), 3u);
  EXPECT_EQ(v1.printer_columns[0].name, "Replicas");
  EXPECT_EQ(v1.printer_columns[0].type, "integer");
  EXPECT_EQ(v1.printer_columns[0].json_path, ".spec.replicas");
  EXPECT_EQ(v1.printer_columns[1].priority, 1);
  EXPECT_EQ(v1.printer_columns[2].type, "date");
  EXPECT_EQ(v1.selectable_fields, std::vector<std::string>{"spec.color"});
  EXPECT_TRUE(v1.is_selectable("spec.color"));

  // The compiled schema is the version's own: v1 knows int-or-string and the (?i) pattern.
  json::value ok = json::parse(
      R"({"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"a"},
          "spec":{"color":"red","size":"50%","host":"Example.COM",
                  "ports":[{"name":"http","port":80}]}})");
  EXPECT_TRUE(v1.schema->validate(ok).empty()) << describe(v1.schema->validate(ok));
  json::value bad = json::parse(
      R"({"spec":{"color":"pink","size":true,"host":"a b",
                  "ports":[{"name":"x"},{"name":"x"}]}})");
  auto bad_causes = v1.schema->validate(bad);
  EXPECT_NE(find_field(bad_causes, "spec.color"), nullptr) << describe(bad_causes);
  EXPECT_NE(find_field(bad_causes, "spec.size"), nullptr) << describe(bad_causes);
  EXPECT_NE(find_field(bad_causes, "spec.host"), nullptr) << describe(bad_causes);
  EXPECT_NE(find_field(bad_causes, "spec.ports[1]"), nullptr) << describe(bad_causes);
}

TEST(CustomResourceDefinition, OnlyServedVersionsBecomeResources) {
  json::object crd = widgets();
  version(crd, 0)["served"] = false;
  auto infos = custom_resources(crd, "/kw");
  ASSERT_TRUE(infos.has_value()) << infos.error().message;
  ASSERT_EQ(infos->size(), 1u);
  EXPECT_EQ((*infos)[0].version, "v1");
  EXPECT_EQ((*infos)[0].key_prefix(), "/kw/stable.example.com/widgets/");
}

TEST(CustomResourceDefinition, ClusterScopedCrdsAreNotNamespaced) {
  json::object crd = widgets();
  spec(crd)["scope"] = "Cluster";
  auto infos = custom_resources(crd, "/registry");
  ASSERT_TRUE(infos.has_value()) << infos.error().message;
  EXPECT_FALSE((*infos)[0].namespaced);
  EXPECT_EQ((*infos)[0].key("", "w1"), "/registry/stable.example.com/widgets/w1");
}

TEST(CustomResourceDefinition, ANonStructuralSchemaIsRefusedUnderTheVersionsPath) {
  json::object crd = widgets();
  version(crd, 1)["schema"].as_object()["openAPIV3Schema"].as_object()["properties"]
      .as_object()["spec"].as_object()["properties"].as_object()["extra"] = json::object{
      {"description", "no type"}};
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_FALSE(causes.empty());
  const Cause* c = find_field(
      causes, "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[extra].type");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_EQ(c->type, "FieldValueRequired");
  EXPECT_EQ(c->message, "Required value: must not be empty for specified object fields");

  auto infos = custom_resources(crd, "/registry");
  ASSERT_FALSE(infos.has_value());
  EXPECT_EQ(infos.error().code, Errc::invalid);
  EXPECT_EQ(infos.error().kind, "CustomResourceDefinition");
  EXPECT_EQ(infos.error().group, "apiextensions.k8s.io");
  EXPECT_EQ(infos.error().name, "widgets.stable.example.com");
  EXPECT_EQ(infos.error().message.rfind(
                "CustomResourceDefinition.apiextensions.k8s.io \"widgets.stable.example.com\" is "
                "invalid: spec.versions[1].schema.openAPIV3Schema",
                0),
            0u)
      << infos.error().message;
}

TEST(CustomResourceDefinition, ABadPatternIsRefusedWithGosRegexpError) {
  json::object crd = widgets();
  version(crd, 1)["schema"].as_object()["openAPIV3Schema"].as_object()["properties"]
      .as_object()["spec"].as_object()["properties"].as_object()["host"].as_object()["pattern"] =
      "([a-z";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  const Cause* c = find_field(
      causes, "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[host].pattern");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_EQ(c->type, "FieldValueInvalid");
  EXPECT_NE(c->message.find("\"([a-z\": must be a valid regular expression, but isn't: error "
                            "parsing regexp: missing closing ]"),
            std::string::npos)
      << c->message;
}

// The widgets CRD with `count` string properties under v1beta1's and v1's spec, the i-th of
// version v with pattern(v, i).
template <typename Pattern>
json::object widgets_with_patterns(std::size_t count, Pattern pattern) {
  json::object crd = widgets();
  for (std::size_t v = 0; v < 2; ++v) {
    json::object& props = version(crd, v)["schema"].as_object()["openAPIV3Schema"].as_object()
                              ["properties"].as_object()["spec"].as_object()["properties"]
                              .as_object();
    for (std::size_t i = 0; i < count; ++i) {
      props["p" + std::to_string(i)] = json::object{{"type", "string"}, {"pattern", pattern(v, i)}};
    }
  }
  return crd;
}

TEST(CustomResourceDefinition, EveryVersionSharesOneCompileOfAPatternAndOneBudget) {
  // 200 properties in each of two versions with ^\pL{100}$: compiled once, accepted.
  auto same = widgets_with_patterns(200, [](std::size_t, std::size_t) { return "^\\pL{100}$"; });
  EXPECT_EQ(describe(validate_custom_resource_definition(same, nullptr)), "");
  auto patterns = std::make_shared<PatternCache>();
  auto infos = custom_resources(same, "/registry", patterns);
  ASSERT_TRUE(infos.has_value());
  EXPECT_EQ(patterns->distinct(), 2u);  // ^\pL{100}$ and the host pattern of v1

  // Three distinct expensive patterns per version fit one version's compile, not both: the
  // budget is the definition's, and the 422 names the first pattern past it.
  auto distinct = widgets_with_patterns(3, [](std::size_t v, std::size_t i) {
    return "^\\pL{" + std::to_string(100 - 3 * v - i) + "}$";
  });
  auto causes = validate_custom_resource_definition(distinct, nullptr);
  const Cause* c = find_field(
      causes, "spec.versions[1].schema.openAPIV3Schema.properties[spec].properties[p1].pattern");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_EQ(c->type, "FieldValueForbidden");
  EXPECT_EQ(c->message.rfind("Forbidden: compiled patterns of this definition would need ", 0), 0u)
      << c->message;
  EXPECT_EQ(find_field(causes, "spec.versions[0].schema.openAPIV3Schema.properties[spec]"
                               ".properties[p2].pattern"),
            nullptr)
      << describe(causes);
  auto refused = custom_resources(distinct, "/registry");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, Errc::invalid);
}

TEST(CustomResourceDefinition, ItsStorageIsFoundFromTheSpecEvenWhenTheSpecNoLongerValidates) {
  json::object crd = widgets();
  version(crd, 1)["schema"].as_object()["openAPIV3Schema"].as_object()["properties"]
      .as_object()["spec"].as_object()["properties"].as_object()["host"].as_object()["pattern"] =
      "([a-z";
  ASSERT_FALSE(custom_resources(crd, "/registry").has_value());
  auto stored = custom_resource_storage(crd, "/registry");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->key_prefix(), "/registry/stable.example.com/widgets/");
  EXPECT_EQ(stored->key("default", "w1"), "/registry/stable.example.com/widgets/default/w1");
  EXPECT_EQ(stored->storage_version, "v1");
  EXPECT_EQ(stored->owner, "widgets.stable.example.com");
  EXPECT_EQ(stored->origin, KindOrigin::custom);
  // The served resources agree on the prefix.
  auto served = custom_resources(widgets(), "/registry");
  ASSERT_TRUE(served.has_value());
  EXPECT_EQ(served->front().key_prefix(), stored->key_prefix());

  spec(crd).erase("group");
  EXPECT_FALSE(custom_resource_storage(crd, "/registry").has_value());
}

TEST(CustomResourceDefinition, MetadataNameMustBePluralDotGroup) {
  json::object crd = widgets();
  crd["metadata"].as_object()["name"] = "widget.stable.example.com";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "metadata.name");
  EXPECT_EQ(causes[0].type, "FieldValueInvalid");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"widget.stable.example.com\": must be "
            "spec.names.plural+\".\"+spec.group");
}

TEST(CustomResourceDefinition, TwoStorageVersionsAreRefused) {
  json::object crd = widgets();
  version(crd, 0)["storage"] = true;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  const Cause* c = find_field(causes, "spec.versions");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_EQ(c->type, "FieldValueInvalid");
  EXPECT_TRUE(c->message.ends_with(": must have exactly one version marked as storage version"))
      << c->message;
}

TEST(CustomResourceDefinition, NoStorageVersionIsRefusedAndLeavesNoStoredVersion) {
  json::object crd = widgets();
  version(crd, 1)["storage"] = false;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  const Cause* c = find_field(causes, "spec.versions");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_TRUE(c->message.ends_with(": must have exactly one version marked as storage version"));
  const Cause* stored = find_field(causes, "status.storedVersions");
  ASSERT_NE(stored, nullptr) << describe(causes);
  EXPECT_EQ(stored->message, "Invalid value: null: must have at least one stored version");
}

TEST(CustomResourceDefinition, ASchemaEveryVersionSharesIsReportedOnceAtSpecValidation) {
  json::object crd = widgets();
  // A schema with a broken pattern, the same in every version: one cause, where kube's
  // internal form of the definition holds that schema.
  const json::value bad = json::parse(R"({"openAPIV3Schema": {"type": "object", "properties":
      {"spec": {"type": "object", "properties": {"a": {"type": "string", "pattern": "("},
       "color": {"type": "string"}}}}}})");
  json::array& versions = crd["spec"].as_object()["versions"].as_array();
  for (auto& v : versions) v.as_object()["schema"] = bad;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field,
            "spec.validation.openAPIV3Schema.properties[spec].properties[a].pattern");
  // Different schemas: each version's own, at its own path.
  if (versions.size() > 1) {
    versions[1].as_object()["schema"] = json::parse(R"({"openAPIV3Schema": {"type": "object",
        "properties": {"spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}})");
    causes = validate_custom_resource_definition(crd, nullptr);
    ASSERT_EQ(causes.size(), 1u) << describe(causes);
    EXPECT_EQ(causes[0].field,
              "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].pattern");
  }
}

TEST(CustomResourceDefinition, EveryVersionNeedsASchema) {
  json::object crd = widgets();
  version(crd, 0).erase("schema");
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.versions[0].schema.openAPIV3Schema");
  EXPECT_EQ(causes[0].type, "FieldValueRequired");
  EXPECT_EQ(causes[0].message, "Required value");
}

TEST(CustomResourceDefinition, ScopeMustBeNamespacedOrCluster) {
  json::object crd = widgets();
  spec(crd)["scope"] = "Global";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.scope");
  EXPECT_EQ(causes[0].type, "FieldValueNotSupported");
  EXPECT_EQ(causes[0].message,
            "Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"");

  spec(crd).erase("scope");
  causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.scope");
  EXPECT_EQ(causes[0].message, "Required value");
}

TEST(CustomResourceDefinition, PrinterColumnsNeedAKnownTypeAndAJsonPath) {
  json::object crd = widgets();
  auto& columns = version(crd, 1)["additionalPrinterColumns"].as_array();
  columns[0].as_object()["type"] = "float";
  columns[1].as_object().erase("jsonPath");
  columns[2].as_object()["format"] = "uuid";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 3u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.versions[1].additionalPrinterColumns[0].type");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"float\": must be one of boolean,date,integer,number,string");
  EXPECT_EQ(causes[1].field, "spec.versions[1].additionalPrinterColumns[1].JSONPath");
  EXPECT_EQ(causes[1].message, "Required value");
  EXPECT_EQ(causes[2].field, "spec.versions[1].additionalPrinterColumns[2].format");
}

TEST(CustomResourceDefinition, ScalePathsMustLieUnderSpecAndStatus) {
  json::object crd = widgets();
  auto& scale = version(crd, 1)["subresources"].as_object()["scale"].as_object();
  scale["specReplicasPath"] = ".status.replicas";
  scale["statusReplicasPath"] = "status.replicas";
  scale["labelSelectorPath"] = ".metadata.labels";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 3u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.versions[1].subresources.scale.specReplicasPath");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \".status.replicas\": should be a json path under .spec");
  EXPECT_EQ(causes[1].field, "spec.versions[1].subresources.scale.statusReplicasPath");
  EXPECT_EQ(causes[1].message,
            "Invalid value: \"status.replicas\": must be a simple json path starting with .");
  EXPECT_EQ(causes[2].field, "spec.versions[1].subresources.scale.labelSelectorPath");
  EXPECT_EQ(causes[2].message,
            "Invalid value: \".metadata.labels\": should be a json path under either .spec or "
            ".status");
}

TEST(CustomResourceDefinition, SelectableFieldsMustNameAScalarOfTheSchema) {
  json::object crd = widgets();
  json::array fields;
  for (const char* p : {".spec.color", ".spec.missing", ".spec.ports", ".spec.size", "spec.color",
                        ".spec.color", ".spec.ports[0]"}) {
    fields.push_back(json::object{{"jsonPath", p}});
  }
  fields.push_back(json::object{});
  version(crd, 1)["selectableFields"] = fields;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 7u) << describe(causes);
  const std::string p = "spec.versions[1].selectableFields";
  EXPECT_EQ(causes[0].field, p + "[1].jsonPath");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \".spec.missing\": is an invalid path: does not refer to a valid field");
  EXPECT_EQ(causes[1].field, p + "[2].jsonPath");
  EXPECT_EQ(causes[1].message,
            "Invalid value: \".spec.ports\": must point to a field of type string, boolean or "
            "integer. Enum string fields and strings with formats are allowed.");
  EXPECT_EQ(causes[2].field, p + "[3].jsonPath");  // int-or-string has no type
  EXPECT_EQ(causes[3].field, p + "[4].jsonPath");
  EXPECT_EQ(causes[3].message,
            "Invalid value: \"spec.color\": is an invalid path: expected [ or . but got: spec");
  EXPECT_EQ(causes[4].field, p + "[5].jsonPath");
  EXPECT_EQ(causes[4].type, "FieldValueDuplicate");
  EXPECT_EQ(causes[5].message,
            "Invalid value: \".spec.ports[0]\": is an invalid path: array notation is not allowed");
  EXPECT_EQ(causes[6].field, p + "[7].jsonPath");
  EXPECT_EQ(causes[6].type, "FieldValueRequired");
}

TEST(CustomResourceDefinition, AtMostEightSelectableFields) {
  json::object crd = widgets();
  auto& props = version(crd, 1)["schema"].as_object()["openAPIV3Schema"].as_object()["properties"]
                    .as_object()["spec"].as_object()["properties"].as_object();
  json::array fields;
  for (int i = 0; i < 9; ++i) {
    props["f" + std::to_string(i)] = json::object{{"type", "string"}};
    fields.push_back(json::object{{"jsonPath", ".spec.f" + std::to_string(i)}});
  }
  version(crd, 1)["selectableFields"] = fields;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.versions[1].selectableFields");
  EXPECT_EQ(causes[0].type, "FieldValueTooMany");
  EXPECT_EQ(causes[0].message, "Too many: 9: must have at most 8 items");
}

TEST(CustomResourceDefinition, NamesFollowKubesFormatRules) {
  json::object crd = widgets();
  auto& names = spec(crd)["names"].as_object();
  names["plural"] = "Widgets";
  names["kind"] = "9Widget";
  names["shortNames"] = json::array{"w_d"};
  names["listKind"] = "9Widget";
  crd["metadata"].as_object()["name"] = "Widgets.stable.example.com";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  EXPECT_NE(find_field(causes, "spec.names.plural"), nullptr) << describe(causes);
  const Cause* kind = find_field(causes, "spec.names.kind");
  ASSERT_NE(kind, nullptr) << describe(causes);
  EXPECT_EQ(kind->message,
            "Invalid value: \"9Widget\": may have mixed case, but should otherwise match: a "
            "DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
            "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
            "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  EXPECT_NE(find_field(causes, "spec.names.shortNames[0]"), nullptr) << describe(causes);
  bool same = std::any_of(causes.begin(), causes.end(), [](const Cause& c) {
    return c.field == "spec.names.listKind" &&
           c.message == "Invalid value: \"9Widget\": kind and listKind may not be the same";
  });
  EXPECT_TRUE(same) << describe(causes);
}

TEST(CustomResourceDefinition, GroupNeedsADot) {
  json::object crd = widgets();
  spec(crd)["group"] = "example";
  crd["metadata"].as_object()["name"] = "widgets.example";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.group");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"example\": should be a domain with at least one dot");
}

TEST(CustomResourceDefinition, PreserveUnknownFieldsIsRefused) {
  json::object crd = widgets();
  spec(crd)["preserveUnknownFields"] = true;
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.preserveUnknownFields");
  EXPECT_EQ(causes[0].message,
            "Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to "
            "true in spec.versions[*].schema instead");
}

TEST(CustomResourceDefinition, AConversionWebhookIsServedWithItsClient) {
  json::object crd = widgets();
  spec(crd)["conversion"] = json::parse(
      R"({"strategy":"Webhook","webhook":{"clientConfig":{"service":{"namespace":"ops",
          "name":"convert","path":"/convert"}},"conversionReviewVersions":["v2","v1beta1","v1"]}})");
  default_custom_resource_definition(crd);
  auto causes = validate_custom_resource_definition(crd, nullptr);
  EXPECT_TRUE(causes.empty()) << describe(causes);
  auto infos = custom_resources(crd, "/registry");
  ASSERT_TRUE(infos) << infos.error().message;
  ASSERT_EQ(infos->size(), 2u);
  for (const auto& info : *infos) {
    ASSERT_NE(info.conversion_webhook, nullptr);
    EXPECT_EQ(info.conversion_webhook.get(), infos->front().conversion_webhook.get());
    const auto& client = info.conversion_webhook->client;
    EXPECT_EQ(client.name, "conversion_webhook_for_widgets.stable.example.com");
    ASSERT_TRUE(client.service.has_value());
    EXPECT_EQ(client.service->ns, "ops");
    EXPECT_EQ(client.service->port, 443);  // kube's default
    EXPECT_EQ(client.review_version, "v1beta1");  // the first kwatch speaks
    EXPECT_EQ(client.timeout, std::chrono::seconds(30));
  }
  // Only the version that is not stored is converted by the webhook.
  EXPECT_EQ((*infos)[0].converted_by_webhook(), (*infos)[0].version != (*infos)[0].storage_version);
  EXPECT_NE((*infos)[0].converted_by_webhook(), (*infos)[1].converted_by_webhook());

  spec(crd)["conversion"] = json::parse(R"({"strategy":"None"})");
  infos = custom_resources(crd, "/registry");
  ASSERT_TRUE(infos);
  EXPECT_EQ(infos->front().conversion_webhook, nullptr);
}

TEST(CustomResourceDefinition, AConversionWebhookIsCheckedAsKubeChecksIt) {
  json::object crd = widgets();
  auto check = [&](const char* conversion) {
    spec(crd)["conversion"] = json::parse(conversion);
    return validate_custom_resource_definition(crd, nullptr);
  };
  auto causes = check(R"({"strategy":"Webhook"})");
  ASSERT_EQ(causes.size(), 2u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.conversion.webhookClientConfig");
  EXPECT_EQ(causes[0].message, "Required value: required when strategy is set to Webhook");
  EXPECT_EQ(causes[1].field, "spec.conversion.conversionReviewVersions");
  EXPECT_EQ(causes[1].message, "Required value");

  causes = check(R"({"strategy":"Webhook","webhook":{"clientConfig":{},
                     "conversionReviewVersions":["v1","v1","v9"]}})");
  ASSERT_EQ(causes.size(), 2u) << describe(causes);
  EXPECT_EQ(causes[0].message, "Required value: exactly one of url or service is required");
  EXPECT_EQ(causes[1].field, "spec.conversion.conversionReviewVersions[1]");
  EXPECT_EQ(causes[1].message, "Invalid value: \"v1\": duplicate version");

  causes = check(R"({"strategy":"Webhook","webhook":{"clientConfig":{"url":"http://x/c?a=b"},
                     "conversionReviewVersions":["v9"]}})");
  ASSERT_EQ(causes.size(), 3u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.conversion.webhookClientConfig.url");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: "
            "https://host[/path]");
  EXPECT_EQ(causes[1].message, "Invalid value: \"a=b\": query parameters are not permitted in the URL");
  EXPECT_EQ(causes[2].field, "spec.conversion.conversionReviewVersions");
  EXPECT_EQ(causes[2].message, "Invalid value: [\"v9\"]: must include at least one of v1, v1beta1");

  // A caBundle must hold certificates.
  causes = check(R"({"strategy":"Webhook","webhook":{"clientConfig":{"url":"https://x/c",
                     "caBundle":"bm90IGEgY2VydA=="},"conversionReviewVersions":["v1"]}})");
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.conversion.webhookClientConfig.caBundle");
  EXPECT_TRUE(causes[0].message.ends_with(
      ": data does not contain any valid RSA or ECDSA certificates")) << causes[0].message;

  // Strategy None takes neither a client nor review versions.
  causes = check(R"({"strategy":"None","webhook":{"clientConfig":{"url":"https://x"},
                     "conversionReviewVersions":["v1"]}})");
  ASSERT_EQ(causes.size(), 2u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.conversion.webhookClientConfig");
  EXPECT_EQ(causes[0].message, "Forbidden: should not be set when strategy is not set to Webhook");
  EXPECT_EQ(causes[1].field, "spec.conversion.conversionReviewVersions");
}

TEST(CustomResourceDefinition, AnUpdateKeepsWhatTheStoredConversionWebhookAlreadyHad) {
  // Stored, established, with review versions kwatch cannot speak and a caBundle that is no
  // certificate: an update that keeps them passes, as kube's options let it.
  json::object old = widgets();
  spec(old)["conversion"] = json::parse(
      R"({"strategy":"Webhook","webhook":{"clientConfig":{"url":"https://x/c",
          "caBundle":"bm90IGEgY2VydA=="},"conversionReviewVersions":["v9"]}})");
  old = accepted_status(old, "2026-01-01T00:00:00Z");
  json::object crd = old;
  auto causes = validate_custom_resource_definition(crd, &old);
  EXPECT_TRUE(causes.empty()) << describe(causes);
  // A definition whose stored caBundle was good may not be given a bad one once established.
  json::object good = old;
  spec(good)["conversion"].as_object()["webhook"].as_object()["clientConfig"].as_object().erase(
      "caBundle");
  spec(good)["conversion"].as_object()["webhook"].as_object()["conversionReviewVersions"] =
      json::array{"v1"};
  crd = good;
  spec(crd)["conversion"].as_object()["webhook"].as_object()["clientConfig"].as_object()["caBundle"] =
      "bm90IGEgY2VydA==";
  causes = validate_custom_resource_definition(crd, &good);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.conversion.webhookClientConfig.caBundle");
}

TEST(CustomResourceDefinition, TheStatusSubresourceRestrictsTheRootSchema) {
  json::object crd = widgets();
  version(crd, 1)["schema"].as_object()["openAPIV3Schema"].as_object()["anyOf"] =
      json::parse(R"([{"required":["spec"]}])");
  auto causes = validate_custom_resource_definition(crd, nullptr);
  const Cause* c = find_field(causes, "spec.versions[1].schema.openAPIV3Schema");
  ASSERT_NE(c, nullptr) << describe(causes);
  EXPECT_TRUE(c->message.ends_with(
      "fields are allowed at the root of the schema if the status subresource is enabled"))
      << c->message;
}

TEST(CustomResourceDefinition, ProtectedGroupsNeedTheApprovalAnnotation) {
  json::object crd = widgets();
  spec(crd)["group"] = "widgets.k8s.io";
  crd["metadata"].as_object()["name"] = "widgets.widgets.k8s.io";
  auto causes = validate_custom_resource_definition(crd, nullptr);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "metadata.annotations[api-approved.kubernetes.io]");
  EXPECT_EQ(causes[0].type, "FieldValueRequired");
  crd["metadata"].as_object()["annotations"] =
      json::object{{"api-approved.kubernetes.io", "https://github.com/kubernetes/kubernetes/pull/1"}};
  causes = validate_custom_resource_definition(crd, nullptr);
  EXPECT_TRUE(causes.empty()) << describe(causes);
}

TEST(CustomResourceDefinition, UpdatesKeepGroupPluralAndStoredVersions) {
  json::object old = accepted_status(widgets(), "2026-01-01T00:00:00Z");
  json::object crd = old;
  spec(crd)["group"] = "other.example.com";
  spec(crd)["scope"] = "Cluster";
  auto causes = validate_custom_resource_definition(crd, &old);
  ASSERT_EQ(causes.size(), 2u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.scope");  // immutable once Established
  EXPECT_EQ(causes[0].message, "Invalid value: \"Cluster\": field is immutable");
  EXPECT_EQ(causes[1].field, "spec.group");
  EXPECT_EQ(causes[1].message, "Invalid value: \"other.example.com\": field is immutable");

  // Moving storage to v1beta1 and dropping v1: v1 is still in status.storedVersions.
  crd = old;
  version(crd, 0)["storage"] = true;
  spec(crd)["versions"].as_array().erase(spec(crd)["versions"].as_array().begin() + 1);
  causes = validate_custom_resource_definition(crd, &old);
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "status.storedVersions[0]");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"v1\": missing from spec.versions; v1 was previously a storage "
            "version, and must remain in spec.versions until a storage migration ensures no data "
            "remains persisted in v1 and removes v1 from status.storedVersions");
}

TEST(CustomResourceDefinition, NamesConflictReportsAKindClashWithABuiltIn) {
  auto scheme = Scheme::builtin();
  json::object crd = json::parse(kWidgets).as_object();
  spec(crd)["group"] = "coordination.k8s.io";
  spec(crd)["names"] = json::parse(R"({"plural":"myleases","kind":"Lease"})");
  default_custom_resource_definition(crd);
  auto conflict = names_conflict(crd, *scheme);
  ASSERT_TRUE(conflict.has_value());
  // kube checks kind before listKind; both clash, the last one checked is reported.
  EXPECT_EQ(conflict->first, "ListKindConflict");
  EXPECT_EQ(conflict->second, "\"LeaseList\" is already in use");

  spec(crd)["names"].as_object()["listKind"] = "MyLeaseList";
  conflict = names_conflict(crd, *scheme);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->first, "KindConflict");
  EXPECT_EQ(conflict->second, "\"Lease\" is already in use");

  spec(crd)["names"] = json::parse(R"({"plural":"leases","singular":"mylease","kind":"MyLease"})");
  conflict = names_conflict(crd, *scheme);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->first, "PluralConflict");
}

TEST(CustomResourceDefinition, NamesConflictAcceptsAFreshGroupAndItsOwnResources) {
  auto scheme = Scheme::builtin();
  json::object crd = widgets();
  EXPECT_FALSE(names_conflict(crd, *scheme).has_value());
  // Once served, the CRD's own resources do not clash with it; another CRD's do.
  for (auto& info : custom_resources(crd, "/registry").value()) scheme->add(std::move(info));
  EXPECT_FALSE(names_conflict(crd, *scheme).has_value());
  json::object gadgets = widgets();
  spec(gadgets)["names"] = json::parse(R"({"plural":"gadgets","kind":"Gadget","shortNames":["wd"]})");
  gadgets["metadata"].as_object()["name"] = "gadgets.stable.example.com";
  default_custom_resource_definition(gadgets);
  auto conflict = names_conflict(gadgets, *scheme);
  ASSERT_TRUE(conflict.has_value());
  EXPECT_EQ(conflict->first, "ShortNamesConflict");
  EXPECT_EQ(conflict->second, "\"wd\" is already in use");
}

TEST(CustomResourceDefinition, AcceptedStatusSetsBothConditionsAndKeepsTransitionTimes) {
  json::object crd = accepted_status(widgets(), "2026-01-01T00:00:00Z");
  const json::object& status = crd["status"].as_object();
  EXPECT_EQ(status.at("acceptedNames"), spec(crd)["names"]);
  EXPECT_EQ(status.at("storedVersions"), json::parse(R"(["v1"])"));
  EXPECT_EQ(status.at("conditions"), json::parse(R"([
    {"type":"NamesAccepted","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z",
     "reason":"NoConflicts","message":"no conflicts found"},
    {"type":"Established","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z",
     "reason":"InitialNamesAccepted","message":"the initial names have been accepted"}])"));

  // A condition that stays True keeps its time; one that flips gets the new time.
  crd["status"].as_object()["conditions"].as_array()[1].as_object()["status"] = "False";
  crd = accepted_status(std::move(crd), "2026-02-02T00:00:00Z");
  const json::array& conditions = crd["status"].at("conditions").as_array();
  ASSERT_EQ(conditions.size(), 2u);
  EXPECT_EQ(conditions[0].at("lastTransitionTime"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(conditions[1].at("lastTransitionTime"), "2026-02-02T00:00:00Z");
  EXPECT_EQ(conditions[1].at("status"), "True");
}

TEST(CustomResourceDefinition, AcceptedStatusAddsANewStorageVersionToStoredVersions) {
  json::object crd = accepted_status(widgets(), "2026-01-01T00:00:00Z");
  version(crd, 1)["storage"] = false;
  version(crd, 0)["storage"] = true;
  crd = accepted_status(std::move(crd), "2026-01-02T00:00:00Z");
  EXPECT_EQ(crd["status"].at("storedVersions"), json::parse(R"(["v1","v1beta1"])"));
}

TEST(CustomResourceDefinition, RejectedNamesAndTerminatingConditions) {
  json::object crd = rejected_names_status(widgets(), "KindConflict", "\"Lease\" is already in use",
                                           "2026-01-01T00:00:00Z");
  const json::array& conditions = crd["status"].at("conditions").as_array();
  ASSERT_EQ(conditions.size(), 2u);
  EXPECT_EQ(conditions[0].at("type"), "NamesAccepted");
  EXPECT_EQ(conditions[0].at("status"), "False");
  EXPECT_EQ(conditions[0].at("reason"), "KindConflict");
  EXPECT_EQ(conditions[1].at("type"), "Established");
  EXPECT_EQ(conditions[1].at("reason"), "NotAccepted");

  crd = accepted_status(widgets(), "2026-01-01T00:00:00Z");
  set_terminating(crd, "2026-03-03T00:00:00Z");
  const json::object& last = crd["status"].at("conditions").as_array().back().as_object();
  EXPECT_EQ(last.at("type"), "Terminating");
  EXPECT_EQ(last.at("status"), "True");
  EXPECT_EQ(last.at("reason"), "InstanceDeletionInProgress");
  EXPECT_EQ(last.at("message"), "CustomResource deletion is in progress");
  EXPECT_EQ(last.at("lastTransitionTime"), "2026-03-03T00:00:00Z");
}

}  // namespace
}  // namespace kwatch::kinds
