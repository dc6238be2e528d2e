#include "server/openapi_v2.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <cstdint>
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

// A minimal protobuf reader: the fields of one message as (number, bytes) pairs, varints as
// their decimal text.
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
    const std::uint64_t length = varint();
    EXPECT_EQ(tag & 7, 2u) << "only length-delimited fields are written";
    out.emplace(static_cast<int>(tag >> 3), std::string(bytes.substr(i, length)));
    i += length;
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

}  // namespace
}  // namespace kwatch::server
