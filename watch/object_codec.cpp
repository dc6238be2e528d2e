#include "watch/object_codec.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>

namespace kwatch::watch {

namespace json = boost::json;

base::Result<ObjectPtr> decode_object(std::string key, std::string_view bytes,
                                         std::int64_t resource_version, const FieldsFn& fields) {
  // The parsed object lives only in this call: an arena on the stack, then the heap's blocks.
  unsigned char buffer[8192];
  json::monotonic_resource arena(buffer, sizeof buffer);
  auto parsed = apimachinery::parse_json(bytes, nullptr, &arena);
  if (!parsed || !parsed->is_object()) return base::Errc::corrupt;
  json::object& obj = parsed->get_object();
  json::value& meta_v = obj["metadata"];
  if (!meta_v.is_object()) meta_v = json::object();
  json::object& meta = meta_v.get_object();
  meta["resourceVersion"] = std::to_string(resource_version);

  CachedObject::Parts parts;
  parts.key = key;
  parts.resource_version = resource_version;
  if (auto* n = meta.if_contains("name"); n && n->is_string()) parts.name = n->get_string();
  if (auto* ns = meta.if_contains("namespace"); ns && ns->is_string()) parts.ns = ns->get_string();
  // Views into the parsed object (or `extracted`), copied by make().
  std::vector<Attribute> labels;
  if (auto* l = meta.if_contains("labels"); l && l->is_object()) {
    for (const auto& [k, val] : l->get_object()) {
      if (val.is_string()) labels.emplace_back(k, val.get_string());
    }
    std::sort(labels.begin(), labels.end());
  }
  Attributes extracted;
  std::vector<Attribute> fields_of;
  if (fields) {
    extracted = fields(obj);
    fields_of.reserve(extracted.size());
    for (const auto& [k, v] : extracted) fields_of.emplace_back(k, v);
    std::sort(fields_of.begin(), fields_of.end());
  }
  parts.labels = labels;
  parts.fields = fields_of;
  const std::string text = json::serialize(obj);
  parts.json = text;
  return CachedObject::make(parts);
}

ObjectPtr raw_object(std::string_view json_text, std::int64_t resource_version) {
  CachedObject::Parts parts;
  parts.json = json_text;
  parts.resource_version = resource_version;
  return CachedObject::make(parts);
}

ObjectPtr bookmark_object(std::string_view kind, std::string_view api_version, std::int64_t rv,
                          bool initial_events_end) {
  json::object meta{{"resourceVersion", std::to_string(rv)}};
  if (initial_events_end) {
    meta["annotations"] = json::object{{"k8s.io/initial-events-end", "true"}};
  }
  json::object obj{{"kind", kind}, {"apiVersion", api_version}, {"metadata", std::move(meta)}};
  return raw_object(json::serialize(obj), rv);
}

}  // namespace kwatch::watch
