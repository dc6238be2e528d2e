#include "watch/watch_cache.hpp"

#include "storage/storage.hpp"
#include "base/string_map.hpp"

#include <absl/container/btree_map.h>
#include <absl/container/btree_set.h>

#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace kwatch::watch {


// Keys are views of the mapped objects' own `key`: every entry (in the state and in the indexes)
// is replaced or removed before the object it views can go away. B-trees keep ~20 bytes per
// entry where node-based maps and sets keep 64-80.
struct WatchCache::State {
  using KeySet = absl::btree_set<std::string_view>;
  absl::btree_map<std::string_view, ObjectPtr> objects;
  base::StringMap<KeySet> trigger_index;  // value -> keys
  // "key=value" -> keys: a list with an equality label selector walks only its bucket.
  base::StringMap<KeySet> label_index;
};

WatchCache::WatchCache(std::size_t lower_capacity, std::size_t upper_capacity,
                       std::string trigger_field)
    : trigger_field_(std::move(trigger_field)),
      state_(std::make_unique<State>()),
      window_(lower_capacity, upper_capacity) {}

WatchCache::~WatchCache() = default;

namespace {

std::string label_entry(std::string_view key, std::string_view value) {
  std::string out;
  out.reserve(key.size() + 1 + value.size());
  out.append(key).append(1, '=').append(value);
  return out;
}

}  // namespace

void WatchCache::index_add(const ObjectPtr& object) {
  for (const auto& [k, v] : object->labels) state_->label_index[label_entry(k, v)].insert(object->key);
  if (trigger_field_.empty()) return;
  if (const std::string_view* v = object->field(trigger_field_)) {
    state_->trigger_index[std::string(*v)].insert(object->key);
  }
}

void WatchCache::index_remove(const ObjectPtr& object) {
  for (const auto& [k, v] : object->labels) {
    auto it = state_->label_index.find(label_entry(k, v));
    if (it == state_->label_index.end()) continue;
    it->second.erase(object->key);
    if (it->second.empty()) state_->label_index.erase(it);
  }
  if (trigger_field_.empty()) return;
  const std::string_view* v = object->field(trigger_field_);
  if (v == nullptr) return;
  auto it = state_->trigger_index.find(*v);
  if (it == state_->trigger_index.end()) return;
  it->second.erase(object->key);
  if (it->second.empty()) state_->trigger_index.erase(it);
}

void WatchCache::replace(std::vector<ObjectPtr> objects, std::int64_t rv) {
  std::unique_lock lock(mutex_);
  state_->objects.clear();
  state_->trigger_index.clear();
  state_->label_index.clear();
  std::int64_t bytes = 0;
  for (auto& o : objects) {
    index_add(o);
    bytes += static_cast<std::int64_t>(o->json.size());
    state_->objects.emplace(o->key, std::move(o));
  }
  bytes_.store(bytes, std::memory_order_relaxed);
  window_.reset(rv);
  rv_ = rv;
  applied_rv_ = rv;
  count_.store(static_cast<std::int64_t>(state_->objects.size()), std::memory_order_relaxed);
}

EventPtr WatchCache::apply_put(ObjectPtr object, ObjectPtr prev, Clock::time_point now) {
  auto event = std::make_shared<CachedEvent>();
  event->resource_version = object->resource_version;
  event->type = prev ? EventType::modified : EventType::added;
  event->object = object;
  event->prev = std::move(prev);
  event->recorded = now;
  std::unique_lock lock(mutex_);
  if (auto it = state_->objects.find(object->key); it != state_->objects.end()) {
    index_remove(it->second);
    bytes_.fetch_sub(static_cast<std::int64_t>(it->second->json.size()), std::memory_order_relaxed);
    // The entry's key views the old object's key: replace the entry, keyed by the new one's.
    state_->objects.erase(it);
    state_->objects.emplace(object->key, object);
  } else {
    state_->objects.emplace(object->key, object);
  }
  index_add(object);
  bytes_.fetch_add(static_cast<std::int64_t>(object->json.size()), std::memory_order_relaxed);
  count_.store(static_cast<std::int64_t>(state_->objects.size()), std::memory_order_relaxed);
  event->sequence = window_.next_sequence();
  window_.push(event, now);
  rv_ = std::max(rv_, event->resource_version);
  applied_rv_ = event->resource_version;
  return event;
}

EventPtr WatchCache::apply_delete(ObjectPtr last, Clock::time_point now) {
  auto event = std::make_shared<CachedEvent>();
  event->resource_version = last->resource_version;
  event->type = EventType::deleted;
  event->object = last;
  event->prev = last;
  event->recorded = now;
  std::unique_lock lock(mutex_);
  if (auto it = state_->objects.find(last->key); it != state_->objects.end()) {
    index_remove(it->second);
    bytes_.fetch_sub(static_cast<std::int64_t>(it->second->json.size()), std::memory_order_relaxed);
    state_->objects.erase(it);
  }
  count_.store(static_cast<std::int64_t>(state_->objects.size()), std::memory_order_relaxed);
  event->sequence = window_.next_sequence();
  window_.push(event, now);
  rv_ = std::max(rv_, event->resource_version);
  applied_rv_ = event->resource_version;
  return event;
}

void WatchCache::advance(std::int64_t rv) {
  std::unique_lock lock(mutex_);
  rv_ = std::max(rv_, rv);
}

std::int64_t WatchCache::resource_version() const {
  std::shared_lock lock(mutex_);
  return rv_;
}

std::int64_t WatchCache::applied_resource_version() const {
  std::shared_lock lock(mutex_);
  return applied_rv_;
}

ObjectPtr WatchCache::get(const std::string& key) const {
  std::shared_lock lock(mutex_);
  auto it = state_->objects.find(key);
  return it == state_->objects.end() ? nullptr : it->second;
}

CacheList WatchCache::list(const std::string& prefix, const std::string& start_key,
                           std::size_t limit, const Predicate* predicate) const {
  CacheList out;
  std::shared_lock lock(mutex_);
  out.resource_version = rv_;
  const std::string& from = start_key.empty() || start_key < prefix ? prefix : start_key;
  auto in_prefix = [&](std::string_view key) { return key.substr(0, prefix.size()) == prefix; };
  auto take = [&](const ObjectPtr& o) {
    if (predicate != nullptr && !predicate->matches(*o)) return true;
    if (limit > 0 && out.objects.size() >= limit) {
      out.more = true;
      return false;
    }
    out.objects.push_back(o);
    return true;
  };
  // A list that pins the trigger field or a label walks only the keys that have it.
  const State::KeySet* bucket = nullptr;
  bool pinned = false;
  if (predicate != nullptr && !trigger_field_.empty()) {
    if (auto value = predicate->exact_field(trigger_field_)) {
      pinned = true;
      auto it = state_->trigger_index.find(*value);
      if (it != state_->trigger_index.end()) bucket = &it->second;
    }
  }
  if (!pinned && predicate != nullptr) {
    if (auto label = predicate->exact_label()) {
      pinned = true;
      auto it = state_->label_index.find(label_entry(label->first, label->second));
      if (it != state_->label_index.end()) bucket = &it->second;
    }
  }
  if (pinned) {
    if (bucket == nullptr) return out;
    for (auto it = bucket->lower_bound(from); it != bucket->end(); ++it) {
      if (!in_prefix(*it)) {
        if (*it > prefix) break;
        continue;
      }
      if (!take(state_->objects.at(*it))) break;
    }
    return out;
  }
  // The range's end is found once, so the walk compares no keys.
  auto it = state_->objects.lower_bound(from);
  const std::string stop = kwatch::storage::prefix_end(prefix);
  const auto end = stop.empty() ? state_->objects.end() : state_->objects.lower_bound(stop);
  for (; it != end; ++it) {
    if (!take(it->second)) break;
  }
  if (out.more && predicate == nullptr) out.remaining = std::distance(it, end);
  return out;
}

std::optional<std::vector<ObjectPtr>> WatchCache::objects_at(const std::string& prefix,
                                                             std::int64_t rv) const {
  std::shared_lock lock(mutex_);
  if (rv_ != rv) return std::nullopt;
  std::vector<ObjectPtr> out;
  const std::string stop = kwatch::storage::prefix_end(prefix);
  auto it = state_->objects.lower_bound(prefix);
  const auto end = stop.empty() ? state_->objects.end() : state_->objects.lower_bound(stop);
  out.reserve(static_cast<std::size_t>(std::distance(it, end)));
  for (; it != end; ++it) out.push_back(it->second);
  return out;
}

CacheList list_sorted(const std::vector<ObjectPtr>& sorted, std::int64_t rv, const std::string& prefix,
                      const std::string& start_key, std::size_t limit, const Predicate* predicate) {
  CacheList out;
  out.resource_version = rv;
  const std::string& from = start_key.empty() || start_key < prefix ? prefix : start_key;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), from,
                             [](const ObjectPtr& o, const std::string& key) { return o->key < key; });
  for (; it != sorted.end(); ++it) {
    if ((*it)->key.substr(0, prefix.size()) != prefix) break;
    if (predicate != nullptr && !predicate->matches(**it)) continue;
    if (limit > 0 && out.objects.size() >= limit) {
      out.more = true;
      break;
    }
    out.objects.push_back(*it);
  }
  if (out.more && predicate == nullptr) out.remaining = std::distance(it, sorted.end());
  return out;
}

std::optional<std::vector<EventPtr>> WatchCache::events_since(std::int64_t rv) const {
  std::shared_lock lock(mutex_);
  return window_.since(rv);
}

std::uint64_t WatchCache::first_sequence() const {
  std::shared_lock lock(mutex_);
  return window_.first_sequence();
}

bool WatchCache::events_from(std::uint64_t from, std::size_t limit,
                             std::vector<EventPtr>& out) const {
  std::shared_lock lock(mutex_);
  return window_.read(from, limit, out);
}

std::int64_t WatchCache::window_start() const {
  std::shared_lock lock(mutex_);
  return window_.start_resource_version();
}

CacheStats WatchCache::stats() const {
  std::shared_lock lock(mutex_);
  return {state_->objects.size(), window_.size(), window_.capacity(), rv_};
}

}  // namespace kwatch::watch
