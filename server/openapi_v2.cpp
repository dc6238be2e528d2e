#include "server/openapi_v2.hpp"

#include "apimachinery/json_path.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cstdint>

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
std::string schema_message(const json::object& s) {
  std::string out;
  string_field(out, 1, string_member(s, "$ref"));
  string_field(out, 2, string_member(s, "format"));
  string_field(out, 4, string_member(s, "description"));
  if (const json::value* required = s.if_contains("required"); required && required->is_array()) {
    for (const auto& r : required->get_array()) {
      if (r.is_string()) bytes_field(out, 19, r.get_string());
    }
  }
  if (const json::object* values = object_member(s, "additionalProperties")) {
    std::string item;
    bytes_field(item, 1, schema_message(*values));
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
    std::string any;  // YAML is read from the text: JSON is YAML
    bytes_field(any, 2, json::serialize(value));
    std::string named;
    string_field(named, 1, key);
    bytes_field(named, 2, any);
    bytes_field(out, 31, named);
  }
  return out;
}

}  // namespace

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
