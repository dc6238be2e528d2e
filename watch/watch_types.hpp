// The immutable values the watch cache shares between its state, its event window and every
// watcher: cached objects (serialized once) and the frames that reference them.
//
// Thread-safety: everything here is immutable after construction and shared by shared_ptr; safe
// to read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::watch {

using Attributes = std::vector<std::pair<std::string, std::string>>;  // sorted by key
// A label or selectable field of a cached object: views into the object's own text.
using Attribute = std::pair<std::string_view, std::string_view>;

// One object as the cache holds it: its JSON with `metadata.resourceVersion` set, encoded once,
// plus the attributes selectors look at, extracted once. The record, its attributes and all of
// its text (key, JSON, names, labels, fields) are one allocation together with the shared_ptr's
// control block: the views below point into it and live exactly as long as the object.
// Immutable; made only by `make`.
struct CachedObject {
  std::string_view key;
  std::string_view ns;
  std::string_view name;
  std::string_view json;
  std::int64_t resource_version = 0;
  std::span<const Attribute> labels;  // sorted by key
  // Selectable field -> value, sorted. metadata.name and metadata.namespace are not repeated
  // here: `field` answers them from `name` and `ns`.
  std::span<const Attribute> fields;

  const std::string_view* label(std::string_view k) const;
  const std::string_view* field(std::string_view k) const;

  // What an object is made of; `labels` and `fields` sorted by key. Everything is copied.
  struct Parts {
    std::string_view key;
    std::string_view ns;
    std::string_view name;
    std::string_view json;
    std::int64_t resource_version = 0;
    std::span<const Attribute> labels;
    std::span<const Attribute> fields;
  };
  static std::shared_ptr<const CachedObject> make(const Parts& parts);
  // The same object with other JSON (a rendering of it for one watcher).
  std::shared_ptr<const CachedObject> with_json(std::string_view other_json) const;

  // Its metadata-only rendering (meta.k8s.io/v1 PartialObjectMetadata, for client-go's metadata
  // clients), made by the first reader or watcher that asks and then shared by all, so that
  // each event is rendered once whatever the number of watchers (server/partial_metadata.hpp).
  mutable std::atomic<std::shared_ptr<const CachedObject>> metadata_only;
  // Its protobuf message (kube's generated.proto, no envelope), made likewise by the first
  // reader that asks for protobuf (server/responses.hpp); empty when it has none.
  mutable std::atomic<std::shared_ptr<const std::string>> protobuf;
  // Its CBOR form (apimachinery/cbor.hpp, no self-described tag), made likewise by the first
  // reader that asks for CBOR.
  mutable std::atomic<std::shared_ptr<const std::string>> cbor;

  // Only `make` constructs one, in storage it sized for the text.
  struct Made;
  CachedObject(const Parts& parts, const Made&);
  CachedObject(const CachedObject&) = delete;
  CachedObject& operator=(const CachedObject&) = delete;
};
using ObjectPtr = std::shared_ptr<const CachedObject>;

enum class EventType : std::uint8_t { added, modified, deleted, bookmark, error };

std::string_view event_type_name(EventType t);

// A change in the cache. For `deleted`, `object` (and `prev`) is the last state re-stamped with
// the delete's revision. For `modified`, `prev` is the state before as the cache held it (its own
// resourceVersion, shared with the cache and the earlier event); null for `added`.
struct CachedEvent {
  EventType type = EventType::added;
  std::int64_t resource_version = 0;
  std::uint64_t sequence = 0;  // its number in the order the cache applied events
  ObjectPtr object;
  ObjectPtr prev;
  std::chrono::steady_clock::time_point recorded;
  // `prev` re-stamped with this event's revision: what a watcher that stops matching receives as
  // DELETED. Made by the first watcher that needs it (most events never do), then shared.
  mutable std::atomic<ObjectPtr> restamped_prev;
};
using EventPtr = std::shared_ptr<const CachedEvent>;

// What a watcher writes: `{"type":<type>,"object":<object->json>}`. Transports write the type
// prefix, the shared JSON and the suffix as separate buffers, so nothing is copied per watcher.
struct WatchFrame {
  EventType type = EventType::added;
  ObjectPtr object;
};

// "{\"type\":\"ADDED\",\"object\":" and friends.
std::string_view frame_prefix(EventType t);
inline constexpr std::string_view kFrameSuffix = "}\n";

// A watcher's filter. Implementations (label and field selectors) live above watch/.
// Thread-safety: `matches` is const and called from the dispatcher thread.
class Predicate {
 public:
  virtual ~Predicate() = default;
  virtual bool matches(const CachedObject& object) const = 0;
  virtual bool empty() const = 0;
  // An exact `field=value` the watcher requires, for the dispatcher's index (e.g. spec.nodeName).
  virtual std::optional<std::string> exact_field(std::string_view field) const = 0;
  // A `key=value` label every matching object has, for the cache's label index.
  virtual std::optional<std::pair<std::string, std::string>> exact_label() const {
    return std::nullopt;
  }
};

}  // namespace kwatch::watch
