#include "server/partial_metadata.hpp"

#include "apimachinery/stored_json.hpp"

#include <boost/json/serialize.hpp>

namespace kwatch::server {

namespace json = boost::json;
using apimachinery::ApiError;
using base::Errc;

namespace {

std::string api_version(std::string_view version) {
  return "meta.k8s.io/" + std::string(version);
}

json::value metadata_of(const json::object& object) {
  const json::value* m = object.if_contains("metadata");
  return m != nullptr && m->is_object() ? *m : json::value(json::object());
}

// The Go package kube-apiserver's object of `info` lives in, as its messages print types: the
// internal types of built-in kinds are in a package named after the group's first label (the
// core group's and events.k8s.io's in `core`); custom resources are unstructured.
std::string go_type(const kinds::ResourceInfo& info, bool is_list) {
  if (info.origin == kinds::KindOrigin::custom) {
    return is_list ? "*unstructured.UnstructuredList" : "*unstructured.Unstructured";
  }
  std::string package;
  if (info.group.empty() || info.group == "events.k8s.io") {
    package = "core";
  } else if (info.group == "internal.apiserver.k8s.io") {
    package = "apiserverinternal";
  } else {
    package = info.group.substr(0, info.group.find('.'));
  }
  return "*" + package + "." + (is_list ? info.list_kind() : info.kind);
}

}  // namespace

json::object partial_object_metadata(const json::object& object, std::string_view version) {
  return json::object{{"kind", "PartialObjectMetadata"},
                      {"apiVersion", api_version(version)},
                      {"metadata", metadata_of(object)}};
}

json::object partial_object_metadata_list(const json::object& list, std::string_view version) {
  json::array items;
  if (const json::value* in = list.if_contains("items"); in != nullptr && in->is_array()) {
    items.reserve(in->get_array().size());
    for (const json::value& item : in->get_array()) {
      items.push_back(item.is_object() ? partial_object_metadata(item.get_object(), version)
                                       : partial_object_metadata(json::object(), version));
    }
  }
  return json::object{{"kind", "PartialObjectMetadataList"},
                      {"apiVersion", api_version(version)},
                      {"metadata", metadata_of(list)},
                      {"items", std::move(items)}};
}

watch::ObjectPtr partial_object_metadata(const watch::ObjectPtr& object, std::string_view version) {
  const bool shared = version == "v1";
  if (shared) {
    if (auto done = object->metadata_only.load(std::memory_order_acquire)) return done;
  }
  std::string text = R"({"kind":"PartialObjectMetadata","apiVersion":)" +
                     json::serialize(json::string(api_version(version))) + R"(,"metadata":)";
  if (auto m = apimachinery::member_text(object->json, "metadata"); m && m->front() == '{') {
    text += *m;
  } else {
    // Not text kwatch wrote (or no metadata): read it the slow way.
    auto parsed = apimachinery::parse_json(object->json);
    text += parsed && parsed->is_object() ? json::serialize(metadata_of(parsed->get_object()))
                                          : std::string("{}");
  }
  text += '}';
  watch::ObjectPtr made = object->with_json(text);
  // Watchers on several threads may race to make it: each gets a correct one, one is kept.
  if (shared) object->metadata_only.store(made, std::memory_order_release);
  return made;
}

std::string partial_object_metadata_list_head(std::string_view version) {
  return R"({"kind":"PartialObjectMetadataList","apiVersion":)" +
         json::serialize(json::string(api_version(version))) + R"(,"metadata":)";
}

ApiError partial_metadata_mismatch(const kinds::ResourceInfo& info, bool is_list) {
  const std::string type = go_type(info, is_list);
  return ApiError(Errc::not_acceptable,
                  is_list ? "you requested PartialObjectMetadata, but the requested object is a "
                            "list (" + type + ")"
                          : "you requested PartialObjectMetadataList, but the requested object "
                            "is not a list (" + type + ")");
}

}  // namespace kwatch::server
