#include "watch/watch_types.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace kwatch::watch {

namespace {

const std::string_view* find_attribute(std::span<const Attribute> attrs, std::string_view key) {
  auto it = std::lower_bound(attrs.begin(), attrs.end(), key,
                             [](const Attribute& kv, std::string_view k) { return kv.first < k; });
  if (it == attrs.end() || it->first != key) return nullptr;
  return &it->second;
}

// What the next allocation of a TrailingAllocator adds, and where that started. Thread-local
// so that the allocator is empty (the control block then stores nothing for it).
struct Trailing {
  std::size_t extra = 0;
  char* at = nullptr;
};
thread_local Trailing trailing;

// Allocates what allocate_shared asks for (the control block with the record in it) plus
// `trailing.extra` bytes after it, and records where those start.
template <class T>
struct TrailingAllocator {
  using value_type = T;

  TrailingAllocator() = default;
  template <class U>
  TrailingAllocator(const TrailingAllocator<U>&) {}

  T* allocate(std::size_t n) {
    const std::size_t head = (n * sizeof(T) + alignof(Attribute) - 1) / alignof(Attribute) *
                             alignof(Attribute);
    char* p = static_cast<char*>(::operator new(head + trailing.extra));
    trailing.at = p + head;
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { ::operator delete(static_cast<void*>(p)); }

  template <class U>
  bool operator==(const TrailingAllocator<U>&) const {
    return true;
  }
};

std::size_t text_size(std::span<const Attribute> attrs) {
  std::size_t n = 0;
  for (const auto& [k, v] : attrs) n += k.size() + v.size();
  return n;
}

}  // namespace

// The key to the constructor: only `make` has one.
struct CachedObject::Made {};

namespace {

// Name and namespace are usually segments of the key: then they share its text.
bool in_key(std::string_view key, std::string_view text) {
  return !text.empty() && key.find(text) != std::string_view::npos;
}

}  // namespace

CachedObject::CachedObject(const Parts& parts, const Made&)
    : resource_version(parts.resource_version) {
  // The bytes after the control block, allocated for this record a moment ago on this thread.
  char* p = trailing.at;
  auto* attrs = reinterpret_cast<Attribute*>(p);
  p += (parts.labels.size() + parts.fields.size()) * sizeof(Attribute);
  auto copy = [&p](std::string_view text) {
    if (text.empty()) return std::string_view();
    std::memcpy(p, text.data(), text.size());
    std::string_view out(p, text.size());
    p += text.size();
    return out;
  };
  key = copy(parts.key);
  auto shared_or_copied = [this, &copy](std::string_view text) {
    return in_key(key, text) ? key.substr(key.find(text), text.size()) : copy(text);
  };
  name = shared_or_copied(parts.name);
  ns = shared_or_copied(parts.ns);
  json = copy(parts.json);
  Attribute* a = attrs;
  for (const auto& [k, v] : parts.labels) new (a++) Attribute(copy(k), copy(v));
  labels = std::span<const Attribute>(attrs, parts.labels.size());
  for (const auto& [k, v] : parts.fields) new (a++) Attribute(copy(k), copy(v));
  fields = std::span<const Attribute>(attrs + parts.labels.size(), parts.fields.size());
}

std::shared_ptr<const CachedObject> CachedObject::make(const Parts& parts) {
  trailing.extra = (parts.labels.size() + parts.fields.size()) * sizeof(Attribute) +
                   parts.key.size() + (in_key(parts.key, parts.name) ? 0 : parts.name.size()) +
                   (in_key(parts.key, parts.ns) ? 0 : parts.ns.size()) + parts.json.size() +
                   text_size(parts.labels) + text_size(parts.fields);
  trailing.at = nullptr;
  // allocate_shared allocates first (the allocator records where the extra bytes start), then
  // constructs the record, which fills them.
  return std::allocate_shared<CachedObject>(TrailingAllocator<CachedObject>(), parts, Made{});
}

std::shared_ptr<const CachedObject> CachedObject::with_json(std::string_view other_json) const {
  Parts parts{key, ns, name, other_json, resource_version, labels, fields};
  return make(parts);
}

const std::string_view* CachedObject::label(std::string_view k) const {
  return find_attribute(labels, k);
}

const std::string_view* CachedObject::field(std::string_view k) const {
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
