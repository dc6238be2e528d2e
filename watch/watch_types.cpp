#include "watch/watch_types.hpp"

#include <algorithm>

namespace kwatch::watch {

namespace {

const std::string* find_attribute(const Attributes& attrs, std::string_view key) {
  auto it = std::lower_bound(attrs.begin(), attrs.end(), key,
                             [](const auto& kv, std::string_view k) { return kv.first < k; });
  if (it == attrs.end() || it->first != key) return nullptr;
  return &it->second;
}

}  // namespace

const std::string* CachedObject::label(std::string_view k) const { return find_attribute(labels, k); }

const std::string* CachedObject::field(std::string_view k) const {
  if (k == "metadata.name") return &name;
  if (k == "metadata.namespace") return &ns;
  return find_attribute(fields, k);
}

std::string_view event_type_name(EventType t) {
  switch (t) {
    case EventType::added: return "ADDED";
    case EventType::modified: return "MODIFIED";
    case EventType::deleted: return "DELETED";
    case EventType::bookmark: return "BOOKMARK";
    case EventType::error: return "ERROR";
  }
  return "ERROR";
}

std::string_view frame_prefix(EventType t) {
  switch (t) {
    case EventType::added: return R"({"type":"ADDED","object":)";
    case EventType::modified: return R"({"type":"MODIFIED","object":)";
    case EventType::deleted: return R"({"type":"DELETED","object":)";
    case EventType::bookmark: return R"({"type":"BOOKMARK","object":)";
    case EventType::error: return R"({"type":"ERROR","object":)";
  }
  return R"({"type":"ERROR","object":)";
}

}  // namespace kwatch::watch
