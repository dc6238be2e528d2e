#include "server/openapi_v2.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <map>
#include <string>
#include <vector>

namespace kwatch::server {
namespace {

namespace json = boost::json;

const json::object kComponents = json::parse(R"({
  "io.k8s.api.core.v1.ConfigMap": {"type": "object",
    "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}},
                   "metadata": {"allOf": [{"$ref": "#/components/schemas/meta.ObjectMeta"}],
                                "description": "standard metadata"},
                   "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                   "ports": {"type": "array", "items": {"$ref": "#/components/schemas/Port"},
                             "x-kubernetes-patch-merge-key": "name",
                             "x-kubernetes-patch-strategy": "merge"},
                   "port": {"type": "string", "format": "int-or-string", "minLength": 1},
                   "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
    "required": ["data"],
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}]},
  "meta.ObjectMeta": {"type": "object", "properties": {}}
})").as_object();

TEST(OpenApiV2, DefinitionsAreWhatKubesV2ModelsParse) {
  auto doc = openapi_v2_document(kComponents, "v1.32.0");
  EXPECT_EQ(doc.at("swagger"), "2.0");
  EXPECT_EQ(doc.at("info").at("version"), "v1.32.0");
  EXPECT_EQ(doc.at("definitions").at("io.k8s.api.core.v1.ConfigMap"), json::parse(R"({
    "properties": {
      "data": {"type": "object", "additionalProperties": {"type": "string"}},
      "metadata": {"description": "standard metadata", "$ref": "#/definitions/meta.ObjectMeta"},
      "free": {"x-kubernetes-preserve-unknown-fields": true},
      "ports": {"x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge",
                "type": "array", "items": {"$ref": "#/definitions/Port"}},
      "port": {"type": "string", "format": "int-or-string"},
      "either": {}},
    "required": ["data"],
    "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}]})"));
  // A kind without fields stays a kind.
  EXPECT_EQ(doc.at("definitions").at("meta.ObjectMeta"), json::parse(R"({"properties": {}})"));
}

// A minimal protobuf reader: the fields of one message as (number, bytes) pairs, varints and
// doubles as their decimal text.
std::multimap<int, std::string> fields_of(std::string_view bytes) {
  std::multimap<int, std::string> out;
  std::size_t i = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0; i < bytes.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(bytes[i++]);
      v |= std::uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) break;
    }
    return v;
  };
  while (i < bytes.size()) {
    const std::uint64_t tag = varint();
    const int number = static_cast<int>(tag >> 3);
    if ((tag & 7) == 0) {
      out.emplace(number, std::to_string(varint()));
    } else if ((tag & 7) == 1 && i + 8 <= bytes.size()) {
      double d;
      std::memcpy(&d, bytes.data() + i, sizeof d);
      i += 8;
      std::ostringstream text;
      text << d;
      out.emplace(number, text.str());
    } else {
      EXPECT_EQ(tag & 7, 2u) << "a wire type kwatch does not write";
      const std::uint64_t length = varint();
      out.emplace(number, std::string(bytes.substr(i, length)));
      i += length;
    }
  }
  return out;
}

std::string only(const std::multimap<int, std::string>& fields, int number) {
  EXPECT_EQ(fields.count(number), 1u) << "field " << number;
  auto it = fields.find(number);
  return it == fields.end() ? "" : it->second;
}

TEST(OpenApiV2, ProtobufIsGnosticsDocumentWithItsFieldNumbers) {
  auto pb = openapi_v2_protobuf(openapi_v2_document(kComponents, "v1.32.0"));
  auto document = fields_of(pb);
  EXPECT_EQ(only(document, 1), "2.0");                      // swagger
  EXPECT_EQ(only(fields_of(only(document, 2)), 2), "v1.32.0");  // info.version
  EXPECT_EQ(only(document, 8), "");                         // paths, present and empty
  std::map<std::string, std::string> definitions;           // name -> Schema bytes
  for (const auto& [number, named] : fields_of(only(document, 9))) {
    EXPECT_EQ(number, 1);
    auto f = fields_of(named);
    definitions[only(f, 1)] = only(f, 2);
  }
  ASSERT_EQ(definitions.size(), 2u);
  auto config_map = fields_of(definitions.at("io.k8s.api.core.v1.ConfigMap"));
  EXPECT_EQ(only(config_map, 19), "data");  // required
  auto extension = fields_of(only(config_map, 31));  // vendor_extension: NamedAny
  EXPECT_EQ(only(extension, 1), "x-kubernetes-group-version-kind");
  EXPECT_EQ(only(fields_of(only(extension, 2)), 2),  // Any.yaml
            R"([{"group":"","kind":"ConfigMap","version":"v1"}])");
  std::map<std::string, std::multimap<int, std::string>> properties;
  for (const auto& [number, named] : fields_of(only(config_map, 25))) {
    auto f = fields_of(named);
    properties[only(f, 1)] = fields_of(only(f, 2));
  }
  ASSERT_EQ(properties.size(), 6u);
  EXPECT_EQ(only(properties["metadata"], 1), "#/definitions/meta.ObjectMeta");  // _ref
  EXPECT_EQ(only(fields_of(only(properties["data"], 22)), 1), "object");          // type
  auto values = fields_of(only(fields_of(only(properties["data"], 21)), 1));     // additionalProperties
  EXPECT_EQ(only(fields_of(only(values, 22)), 1), "string");
  auto item = fields_of(only(fields_of(only(properties["ports"], 23)), 1));      // items
  EXPECT_EQ(only(item, 1), "#/definitions/Port");
  EXPECT_EQ(only(properties["port"], 2), "int-or-string");                      // format
  EXPECT_TRUE(properties["either"].empty());
  // The field-less kind keeps an empty properties message.
  EXPECT_EQ(only(fields_of(definitions.at("meta.ObjectMeta")), 25), "");
}

// kube's CRD builder, v2: what kubectl validates a custom resource against.
TEST(OpenApiV2, CustomResourcesAreWhatKubesCrdBuilderPublishes) {
  // A root that keeps unknown fields: no properties at all, or kubectl refuses the unknown ones.
  auto open = custom_resource_v2_schema(json::parse(R"({"type": "object",
      "x-kubernetes-preserve-unknown-fields": true,
      "properties": {"spec": {"type": "object"}}})").as_object(), "company.com", "v1", "Foo");
  EXPECT_EQ(open, json::parse(R"({"type": "object", "x-kubernetes-group-version-kind":
      [{"group": "company.com", "kind": "Foo", "version": "v1"}]})"));

  auto s = custom_resource_v2_schema(json::parse(R"({"type": "object", "description": "a widget",
    "properties": {
      "spec": {"type": "object", "required": ["size", "note"], "properties": {
        "size": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3},
        "note": {"type": "string", "nullable": true, "maxLength": 10},
        "mode": {"type": "string", "enum": ["a", "b"], "pattern": "^[ab]$", "example": "a"},
        "port": {"x-kubernetes-int-or-string": true,
                 "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                 "properties": {"x": {"type": "string"}}},
        "anything": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                     "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "nullable": true}},
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"spec": {"type": "object"}}},
        "raw": {"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true}}}}})").as_object(),
                                         "company.com", "v1", "Widget");
  const auto& spec = s.at("properties").at("spec");
  EXPECT_EQ(spec.at("required"), json::parse(R"(["size"])"));  // note is nullable
  const auto& p = spec.at("properties");
  EXPECT_EQ(p.at("size"), json::parse(R"({"type": "integer", "minimum": 1, "maximum": 5})"));
  EXPECT_EQ(p.at("note"), json::parse(R"({"maxLength": 10})"));
  EXPECT_EQ(p.at("mode"), json::parse(R"({"type": "string", "enum": ["a", "b"],
                                          "pattern": "^[ab]$"})"));
  EXPECT_EQ(p.at("port"), json::parse(R"({"x-kubernetes-int-or-string": true})"));
  EXPECT_EQ(p.at("free"), json::parse(R"({"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": true})"));
  EXPECT_EQ(p.at("anything"), json::parse(R"({"x-kubernetes-preserve-unknown-fields": true})"));
  EXPECT_EQ(p.at("labels"), json::parse(R"({"type": "object", "additionalProperties": {}})"));
  EXPECT_EQ(p.at("tags"), json::parse(R"({"type": "array", "items": {"type": "string"},
                                          "x-kubernetes-list-type": "set"})"));
  const auto& template_ = p.at("template");
  EXPECT_EQ(template_.at("required"), json::parse(R"(["kind", "apiVersion"])"));
  EXPECT_EQ(template_.at("properties").at("metadata").at("$ref"),
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_TRUE(template_.at("properties").as_object().contains("apiVersion"));
  EXPECT_TRUE(template_.at("properties").as_object().contains("spec"));
  EXPECT_FALSE(p.at("raw").as_object().contains("properties"));
  // The kind's own type and object metadata.
  EXPECT_EQ(s.at("description"), "a widget");
  EXPECT_EQ(s.at("properties").at("metadata").at("$ref"),
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_EQ(s.at("properties").at("kind").at("type"), "string");
  EXPECT_EQ(s.at("properties").at("apiVersion").at("type"), "string");
  EXPECT_EQ(s.at("x-kubernetes-group-version-kind").at(0).at("kind"), "Widget");

  // The value validations reach the protobuf form with gnostic's field numbers.
  json::object doc = openapi_v2_document(json::object(), "v1");
  doc["definitions"].as_object()["com.company.v1.Widget"] = s;
  auto document = fields_of(openapi_v2_protobuf(doc));
  auto named = fields_of(only(fields_of(only(document, 9)), 1));
  auto widget = fields_of(only(named, 2));
  std::map<std::string, std::multimap<int, std::string>> props;
  for (const auto& [number, entry] : fields_of(only(widget, 25))) {
    auto f = fields_of(entry);
    props[only(f, 1)] = fields_of(only(f, 2));
  }
  std::map<std::string, std::multimap<int, std::string>> spec_props;
  for (const auto& [number, entry] : fields_of(only(props["spec"], 25))) {
    auto f = fields_of(entry);
    spec_props[only(f, 1)] = fields_of(only(f, 2));
  }
  EXPECT_EQ(only(spec_props["size"], 9), "1");   // minimum
  EXPECT_EQ(only(spec_props["size"], 7), "5");   // maximum
  EXPECT_EQ(only(spec_props["note"], 11), "10");  // maxLength
  EXPECT_EQ(only(spec_props["mode"], 13), "^[ab]$");  // pattern
  EXPECT_EQ(spec_props["mode"].count(20), 2u);        // enum
  EXPECT_EQ(only(fields_of(spec_props["mode"].find(20)->second), 2), R"("a")");
}

}  // namespace
}  // namespace kwatch::server
