#include "server/openapi_v2.hpp"

#include "apimachinery/json_path.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kwatch::server {

namespace json = boost::json;

namespace {

constexpr std::string_view kV3Prefix = "#/components/schemas/";
constexpr std::string_view kV2Prefix = "#/definitions/";

std::string v2_reference(std::string_view ref) {
  if (ref.starts_with(kV3Prefix)) ref.remove_prefix(kV3Prefix.size());
  return std::string(kV2Prefix) + std::string(ref);
}

using apimachinery::object_member;

using apimachinery::string_member;
// A reference, alone or as the single member of allOf (how v3 documents attach a description
// or default to one): the v2 reference, or "" when `s` is none.
std::string reference_of(const json::object& s) {
  if (auto ref = string_member(s, "$ref"); !ref.empty()) return v2_reference(ref);
  const json::value* all = s.if_contains("allOf");
  if (all == nullptr || !all->is_array() || all->get_array().size() != 1 ||
      s.contains("properties") || s.contains("type")) {
    return "";
  }
  const json::value& only = all->get_array().front();
  if (!only.is_object()) return "";
  auto ref = string_member(only.get_object(), "$ref");
  return ref.empty() ? "" : v2_reference(ref);
}

json::object v2_schema(const json::object& s) {
  json::object out;
  if (auto description = string_member(s, "description"); !description.empty()) {
    out["description"] = description;
  }
  if (std::string ref = reference_of(s); !ref.empty()) {
    out["$ref"] = std::move(ref);
    return out;
  }
  for (const auto& [key, value] : s) {
    if (key.starts_with("x-kubernetes-")) out[key] = value;
  }
  const std::string_view type = string_member(s, "type");
  const json::object* properties = object_member(s, "properties");
  if (properties != nullptr) {
    // A kind: no `type`, which kube's v2 models read either way.
    json::object fields;
    for (const auto& [name, field] : *properties) {
      fields[name] = field.is_object() ? v2_schema(field.get_object()) : json::object();
    }
    out["properties"] = std::move(fields);
    if (const json::value* required = s.if_contains("required"); required && required->is_array()) {
      out["required"] = *required;
    }
  } else if (type == "object") {
    // A map with its value schema; without one (additionalProperties: true, or preserved
    // unknown fields) anything goes.
    if (const json::object* values = object_member(s, "additionalProperties")) {
      out["type"] = "object";
      out["additionalProperties"] = v2_schema(*values);
    }
  } else if (type == "array") {
    out["type"] = "array";
    const json::object* items = object_member(s, "items");
    out["items"] = items != nullptr ? v2_schema(*items) : json::object();
  } else if (type == "string" || type == "integer" || type == "number" || type == "boolean") {
    out["type"] = type;
    if (auto format = string_member(s, "format"); !format.empty()) out["format"] = format;
  }
  return out;
}

// ---- custom resources ----

constexpr std::string_view kObjectMetaRef =
    "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

bool true_member(const json::object& s, std::string_view key) {
  const json::value* v = s.if_contains(key);
  return v != nullptr && v->is_bool() && v->get_bool();
}

// One node of a structural schema in v2's terms (the root's additions come after).
json::object structural_v2(const json::object& s) {
  const bool nullable = true_member(s, "nullable");
  const bool keeps_unknown = true_member(s, "x-kubernetes-preserve-unknown-fields");
  // What a structural schema keeps of a node (kube's Structural), less what v2 cannot say.
  static constexpr std::string_view kKept[] = {
      "type", "format", "title", "description", "enum", "maximum", "exclusiveMaximum",
      "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
      "minItems", "uniqueItems", "multipleOf", "maxProperties", "minProperties"};
  json::object out;
  for (const auto& [key, value] : s) {
    const bool kept = key.starts_with("x-kubernetes-") ||
                      std::find(std::begin(kKept), std::end(kKept), key) != std::end(kKept);
    if (!kept || (key == "type" && nullable)) continue;
    out[key] = value;
  }
  const json::object* properties = object_member(s, "properties");
  if (properties != nullptr && !nullable && !keeps_unknown) {
    json::object fields;
    for (const auto& [name, field] : *properties) {
      fields[name] = field.is_object() ? structural_v2(field.get_object()) : json::object();
    }
    out["properties"] = std::move(fields);
  }
  if (const json::value* required = s.if_contains("required"); required && required->is_array()) {
    // A nullable field may be null, which v2 would read as missing.
    json::array kept;
    for (const auto& name : required->get_array()) {
      const json::object* field =
          properties != nullptr && name.is_string() ? object_member(*properties, name.get_string())
                                                    : nullptr;
      if (field == nullptr || !true_member(*field, "nullable")) kept.push_back(name);
    }
    if (!kept.empty()) out["required"] = std::move(kept);
  }
  if (const json::object* items = object_member(s, "items"); items && !nullable && !keeps_unknown) {
    out["items"] = structural_v2(*items);
  }
  if (const json::value* values = s.if_contains("additionalProperties")) {
    out["additionalProperties"] =
        values->is_object() ? json::value(structural_v2(values->get_object())) : *values;
  }
  // kubectl cannot read an array without an item schema.
  if (string_member(out, "type") == "array" && !out.contains("items")) out.erase("type");
  return out;
}

json::object type_meta_property(std::string_view description) {
  return json::object{{"description", description}, {"type", "string"}};
}

// kube's texts for the properties it adds (TypeMeta's and ObjectMeta's documentation).
constexpr std::string_view kApiVersionText =
    "APIVersion defines the versioned schema of this representation of an object. Servers "
    "should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
constexpr std::string_view kKindText =
    "Kind is a string value representing the REST resource this object represents. Servers may "
    "infer this from the endpoint the client submits requests to. Cannot be updated. In "
    "CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
constexpr std::string_view kEmbeddedApiVersionText =
    "apiVersion defines the versioned schema of this representation of an object. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
constexpr std::string_view kEmbeddedKindText =
    "kind is a string value representing the type of this object. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
constexpr std::string_view kMetadataText =
    "Standard object's metadata. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

json::object metadata_property() {
  return json::object{{"$ref", kObjectMetaRef}, {"description", kMetadataText}};
}

// Embedded resources (x-kubernetes-embedded-resource) are objects of their own: their type and
// object metadata, unless they keep unknown fields (kubectl would then refuse those).
void add_embedded_properties(json::object& s) {
  if (json::object* properties = object_member(s, "properties")) {
    for (auto& [name, field] : *properties) {
      if (field.is_object()) add_embedded_properties(field.get_object());
    }
  }
  if (json::object* items = object_member(s, "items")) add_embedded_properties(*items);
  if (json::object* values = object_member(s, "additionalProperties")) {
    add_embedded_properties(*values);
  }
  if (true_member(s, "x-kubernetes-preserve-unknown-fields")) return;
  if (!true_member(s, "x-kubernetes-embedded-resource")) return;
  json::value& props = s["properties"];
  if (!props.is_object()) props = json::object();
  props.get_object()["apiVersion"] = type_meta_property(kEmbeddedApiVersionText);
  props.get_object()["kind"] = type_meta_property(kEmbeddedKindText);
  props.get_object()["metadata"] = metadata_property();
  json::value& required = s["required"];
  if (!required.is_array()) required = json::array();
  for (std::string_view name : {"kind", "apiVersion"}) {
    bool listed = false;
    for (const auto& r : required.get_array()) listed = listed || (r.is_string() && r.get_string() == name);
    if (!listed) required.get_array().push_back(json::string(name));
  }
}

// ---- protobuf: the gnostic openapi_v2 messages, field numbers from OpenAPIv2.proto ----

void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void bytes_field(std::string& out, int number, std::string_view bytes) {
  varint(out, static_cast<std::uint64_t>(number) << 3 | 2);
  varint(out, bytes.size());
  out.append(bytes);
}

void string_field(std::string& out, int number, std::string_view text) {
  if (!text.empty()) bytes_field(out, number, text);
}

std::string schema_message(const json::object& s);

// NamedSchema {name = 1; value = 2}
std::string named_schema(std::string_view name, const json::object& s) {
  std::string out;
  string_field(out, 1, name);
  bytes_field(out, 2, schema_message(s));
  return out;
}

// Schema: _ref 1, format 2, description 4, required 19, additional_properties 21
// (AdditionalPropertiesItem.schema 1), type 22 (TypeItem.value 1), items 23 (ItemsItem.schema 1),
// properties 25 (Properties.additional_properties 1), vendor_extension 31 (NamedAny {name 1,
// value 2: Any {yaml 2}}).
void double_field(std::string& out, int number, double v) {
  varint(out, static_cast<std::uint64_t>(number) << 3 | 1);
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(bits >> (8 * i) & 0xff));
}

void varint_field(std::string& out, int number, std::uint64_t v) {
  varint(out, static_cast<std::uint64_t>(number) << 3);
  varint(out, v);
}

// Any {yaml = 2}: JSON is YAML.
std::string any_message(const json::value& v) {
  std::string any;
  bytes_field(any, 2, json::serialize(v));
  return any;
}

// The value validations a custom resource's schema keeps: multipleOf 6, maximum 7,
// exclusiveMaximum 8, minimum 9, exclusiveMinimum 10, maxLength 11, minLength 12, pattern 13,
// maxItems 14, minItems 15, uniqueItems 16, maxProperties 17, minProperties 18, enum 20; title 3.
void validation_fields(std::string& out, const json::object& s) {
  string_field(out, 3, string_member(s, "title"));
  const auto number = [&](std::string_view key, int field) {
    const json::value* v = s.if_contains(key);
    if (v != nullptr && v->is_number()) double_field(out, field, v->to_number<double>());
  };
  const auto flag = [&](std::string_view key, int field) {
    if (true_member(s, key)) varint_field(out, field, 1);
  };
  const auto count = [&](std::string_view key, int field) {
    const json::value* v = s.if_contains(key);
    if (v == nullptr) return;
    if (v->is_int64() && v->get_int64() >= 0) varint_field(out, field, static_cast<std::uint64_t>(v->get_int64()));
    if (v->is_uint64()) varint_field(out, field, v->get_uint64());
  };
  number("multipleOf", 6);
  number("maximum", 7);
  flag("exclusiveMaximum", 8);
  number("minimum", 9);
  flag("exclusiveMinimum", 10);
  count("maxLength", 11);
  count("minLength", 12);
  string_field(out, 13, string_member(s, "pattern"));
  count("maxItems", 14);
  count("minItems", 15);
  flag("uniqueItems", 16);
  count("maxProperties", 17);
  count("minProperties", 18);
  if (const json::value* e = s.if_contains("enum"); e && e->is_array()) {
    for (const auto& v : e->get_array()) bytes_field(out, 20, any_message(v));
  }
}

std::string schema_message(const json::object& s) {
  std::string out;
  string_field(out, 1, string_member(s, "$ref"));
  string_field(out, 2, string_member(s, "format"));
  string_field(out, 4, string_member(s, "description"));
  validation_fields(out, s);
  if (const json::value* required = s.if_contains("required"); required && required->is_array()) {
    for (const auto& r : required->get_array()) {
      if (r.is_string()) bytes_field(out, 19, r.get_string());
    }
  }
  if (const json::object* values = object_member(s, "additionalProperties")) {
    std::string item;
    bytes_field(item, 1, schema_message(*values));
    bytes_field(out, 21, item);
  } else if (const json::value* flag = s.if_contains("additionalProperties"); flag && flag->is_bool()) {
    std::string item;  // AdditionalPropertiesItem {boolean = 2}
    varint_field(item, 2, flag->get_bool() ? 1 : 0);
    bytes_field(out, 21, item);
  }
  if (auto type = string_member(s, "type"); !type.empty()) {
    std::string item;
    bytes_field(item, 1, type);
    bytes_field(out, 22, item);
  }
  if (const json::object* items = object_member(s, "items")) {
    std::string item;
    bytes_field(item, 1, schema_message(*items));
    bytes_field(out, 23, item);
  }
  if (const json::object* properties = object_member(s, "properties")) {
    std::string fields;  // present even when empty: a kind with no fields is still a kind
    for (const auto& [name, field] : *properties) {
      bytes_field(fields, 1, named_schema(name, field.is_object() ? field.get_object() : json::object()));
    }
    bytes_field(out, 25, fields);
  }
  for (const auto& [key, value] : s) {
    if (!key.starts_with("x-")) continue;
    std::string named;
    string_field(named, 1, key);
    bytes_field(named, 2, any_message(value));
    bytes_field(out, 31, named);
  }
  return out;
}

}  // namespace

json::object custom_resource_v2_schema(const json::object& openapi_v3_schema,
                                       std::string_view group, std::string_view version,
                                       std::string_view kind) {
  json::object out;
  if (true_member(openapi_v3_schema, "x-kubernetes-preserve-unknown-fields")) {
    out["type"] = "object";
  } else {
    out = structural_v2(openapi_v3_schema);
    json::value& props = out["properties"];
    if (!props.is_object()) props = json::object();
    props.get_object()["metadata"] = metadata_property();
    props.get_object()["apiVersion"] = type_meta_property(kApiVersionText);
    props.get_object()["kind"] = type_meta_property(kKindText);
    add_embedded_properties(out);
  }
  out["x-kubernetes-group-version-kind"] =
      json::array{json::object{{"group", group}, {"kind", kind}, {"version", version}}};
  return out;
}

json::object openapi_v2_document(const json::object& v3_components, std::string_view version) {
  json::object definitions;
  for (const auto& [name, schema] : v3_components) {
    definitions[name] = schema.is_object() ? v2_schema(schema.get_object()) : json::object();
  }
  return json::object{{"swagger", "2.0"},
                      {"info", json::object{{"title", "Kubernetes"}, {"version", version}}},
                      {"paths", json::object()},
                      {"definitions", std::move(definitions)}};
}

std::string openapi_v2_protobuf(const json::object& doc) {
  std::string out;
  string_field(out, 1, string_member(doc, "swagger"));
  if (const json::object* info = object_member(doc, "info")) {
    std::string message;
    string_field(message, 1, string_member(*info, "title"));
    string_field(message, 2, string_member(*info, "version"));
    bytes_field(out, 2, message);
  }
  bytes_field(out, 8, "");  // paths: published in v3
  std::string definitions;
  if (const json::object* defs = object_member(doc, "definitions")) {
    for (const auto& [name, schema] : *defs) {
      bytes_field(definitions, 1,
                  named_schema(name, schema.is_object() ? schema.get_object() : json::object()));
    }
  }
  bytes_field(out, 9, definitions);
  return out;
}

}  // namespace kwatch::server
