// The cached state of one resource: every object by key, indexes on the resource's trigger
// field (e.g. spec.nodeName for pods) and on label values, the window of recent events, and the resource version the
// cache has reached.
//
// Thread-safety: internally synchronized with a shared mutex. `replace`, `apply_*` and `advance`
// come from the reflector only; reads may come from any thread.
#pragma once

#include "watch/event_window.hpp"
#include "watch/watch_types.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::watch {

struct CacheList {
  std::vector<ObjectPtr> objects;
  std::int64_t resource_version = 0;
  bool more = false;              // matching or unexamined keys remain after the last object
  std::int64_t remaining = 0;     // keys after the last object (without a predicate)
};

// A page of `sorted` (objects in key order, all under `prefix`), as WatchCache::list pages.
CacheList list_sorted(const std::vector<ObjectPtr>& sorted, std::int64_t rv, const std::string& prefix,
                      const std::string& start_key, std::size_t limit, const Predicate* predicate);

struct CacheStats {
  std::size_t objects = 0;
  std::size_t events = 0;
  std::size_t capacity = 0;
  std::int64_t resource_version = 0;
};

class WatchCache {
 public:
  using Clock = std::chrono::steady_clock;

  WatchCache(std::size_t lower_capacity, std::size_t upper_capacity, std::string trigger_field);
  ~WatchCache();

  // Replaces the whole state (a re-list at `rv`); the event window starts over at `rv`.
  void replace(std::vector<ObjectPtr> objects, std::int64_t rv);
  // Records a create or update. `prev` is the previous state re-stamped with `object`'s version
  // (null when the key was absent).
  EventPtr apply_put(ObjectPtr object, ObjectPtr prev, Clock::time_point now);
  // Records a delete; `last` is the deleted state re-stamped with the delete's version.
  EventPtr apply_delete(ObjectPtr last, Clock::time_point now);
  // Nothing changed up to `rv` (a progress notification).
  void advance(std::int64_t rv);

  std::int64_t resource_version() const;
  // How many objects the cache holds (no lock: a moment's figure, for estimates).
  std::int64_t object_count() const { return count_.load(std::memory_order_relaxed); }
  // Their serialized size in all (the same kind of figure).
  std::int64_t object_bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // The version of the last event applied (or of the re-list): unlike resource_version(),
  // never moved by progress notifications.
  std::int64_t applied_resource_version() const;
  ObjectPtr get(const std::string& key) const;
  // Objects under `prefix` from `start_key` on (inclusive), in key order, that match `predicate`
  // (null: all), at most `limit` (0: all).
  CacheList list(const std::string& prefix, const std::string& start_key, std::size_t limit,
                 const Predicate* predicate) const;
  // The objects under `prefix` in key order, when the cache is at version `rv` (a paged list's
  // state at its first page, for the pages after it); nullopt when it has moved on.
  std::optional<std::vector<ObjectPtr>> objects_at(const std::string& prefix, std::int64_t rv) const;
  // Events above `rv`; nullopt when `rv` is older than the window (410).
  std::optional<std::vector<EventPtr>> events_since(std::int64_t rv) const;
  // The number of the oldest event in the window (events are numbered in the order applied).
  std::uint64_t first_sequence() const;
  // Appends recorded events numbered `from` and later to `out` (at most `limit`); false when
  // event `from` has left the window.
  bool events_from(std::uint64_t from, std::size_t limit, std::vector<EventPtr>& out) const;
  // The oldest version a watch may start from.
  std::int64_t window_start() const;
  CacheStats stats() const;

 private:
  void index_add(const ObjectPtr& object);
  void index_remove(const ObjectPtr& object);

  mutable std::shared_mutex mutex_;
  std::atomic<std::int64_t> count_{0};
  std::atomic<std::int64_t> bytes_{0};
  std::string trigger_field_;
  // The ordered state and its indexes (B-trees, defined in the .cpp so that no other translation
  // unit compiles them).
  struct State;
  std::unique_ptr<State> state_;
  EventWindow window_;
  std::int64_t rv_ = 0;
  std::int64_t applied_rv_ = 0;
};

}  // namespace kwatch::watch
