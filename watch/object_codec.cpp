#include "watch/object_codec.hpp"

#include "storage/stored_json.hpp"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>

namespace kwatch::watch {

namespace json = boost::json;

storage::Result<ObjectPtr> decode_object(std::string key, std::string_view bytes,
                                         std::int64_t resource_version, const FieldsFn& fields) {
  // The parsed object lives only in this call: an arena on the stack, then the heap's blocks.
  unsigned char buffer[8192];
  json::monotonic_resource arena(buffer, sizeof buffer);
  auto parsed = storage::parse_json(bytes, nullptr, &arena);
  if (!parsed || !parsed->is_object()) return storage::Errc::corrupt;
  json::object& obj = parsed->get_object();
  json::value& meta_v = obj["metadata"];
  if (!meta_v.is_object()) meta_v = json::object();
  json::object& meta = meta_v.get_object();
  meta["resourceVersion"] = std::to_string(resource_version);

  auto out = std::make_shared<CachedObject>();
  out->key = std::move(key);
  out->resource_version = resource_version;
  if (auto* n = meta.if_contains("name"); n && n->is_string()) out->name = n->get_string();
  if (auto* ns = meta.if_contains("namespace"); ns && ns->is_string()) out->ns = ns->get_string();
  if (auto* labels = meta.if_contains("labels"); labels && labels->is_object()) {
    for (const auto& [k, val] : labels->get_object()) {
      if (val.is_string()) out->labels.emplace_back(k, val.get_string());
    }
    std::sort(out->labels.begin(), out->labels.end());
    out->labels.shrink_to_fit();  // held for as long as the object is cached
  }
  if (fields) {
    out->fields = fields(obj);
    std::sort(out->fields.begin(), out->fields.end());
    out->fields.shrink_to_fit();
  }
  out->json = json::serialize(obj);
  return ObjectPtr(std::move(out));
}

ObjectPtr raw_object(std::string json_text, std::int64_t resource_version) {
  auto out = std::make_shared<CachedObject>();
  out->json = std::move(json_text);
  out->resource_version = resource_version;
  return out;
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
