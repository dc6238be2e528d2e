#include "watch/watch_cache.hpp"

#include "storage/storage.hpp"

#include <mutex>

namespace kwatch::watch {


WatchCache::WatchCache(std::size_t lower_capacity, std::size_t upper_capacity,
                       std::string trigger_field)
    : trigger_field_(std::move(trigger_field)), window_(lower_capacity, upper_capacity) {}

void WatchCache::index_add(const ObjectPtr& object) {
  for (const auto& [k, v] : object->labels) label_index_[k + '=' + v].insert(object->key);
  if (trigger_field_.empty()) return;
  if (const std::string* v = object->field(trigger_field_)) trigger_index_[*v].insert(object->key);
}

void WatchCache::index_remove(const ObjectPtr& object) {
  for (const auto& [k, v] : object->labels) {
    auto it = label_index_.find(k + '=' + v);
    if (it == label_index_.end()) continue;
    it->second.erase(object->key);
    if (it->second.empty()) label_index_.erase(it);
  }
  if (trigger_field_.empty()) return;
  const std::string* v = object->field(trigger_field_);
  if (v == nullptr) return;
  auto it = trigger_index_.find(*v);
  if (it == trigger_index_.end()) return;
  it->second.erase(object->key);
  if (it->second.empty()) trigger_index_.erase(it);
}

void WatchCache::replace(std::vector<ObjectPtr> objects, std::int64_t rv) {
  std::unique_lock lock(mutex_);
  objects_.clear();
  trigger_index_.clear();
  label_index_.clear();
  for (auto& o : objects) {
    index_add(o);
    objects_.emplace(o->key, std::move(o));
  }
  window_.reset(rv);
  rv_ = rv;
  applied_rv_ = rv;
}

EventPtr WatchCache::apply_put(ObjectPtr object, ObjectPtr prev, Clock::time_point now) {
  auto event = std::make_shared<CachedEvent>();
  event->resource_version = object->resource_version;
  event->type = prev ? EventType::modified : EventType::added;
  event->object = object;
  event->prev = std::move(prev);
  event->recorded = now;
  std::unique_lock lock(mutex_);
  if (auto it = objects_.find(object->key); it != objects_.end()) {
    index_remove(it->second);
    // The node's key views the old object's key: point it at the new one's.
    auto node = objects_.extract(it);
    node.key() = object->key;
    node.mapped() = object;
    objects_.insert(std::move(node));
  } else {
    objects_.emplace(object->key, object);
  }
  index_add(object);
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
  if (auto it = objects_.find(last->key); it != objects_.end()) {
    index_remove(it->second);
    objects_.erase(it);
  }
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
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
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
  const KeySet* bucket = nullptr;
  bool pinned = false;
  if (predicate != nullptr && !trigger_field_.empty()) {
    if (auto value = predicate->exact_field(trigger_field_)) {
      pinned = true;
      auto it = trigger_index_.find(*value);
      if (it != trigger_index_.end()) bucket = &it->second;
    }
  }
  if (!pinned && predicate != nullptr) {
    if (auto label = predicate->exact_label()) {
      pinned = true;
      auto it = label_index_.find(label->first + '=' + label->second);
      if (it != label_index_.end()) bucket = &it->second;
    }
  }
  if (pinned) {
    if (bucket == nullptr) return out;
    for (auto it = bucket->lower_bound(from); it != bucket->end(); ++it) {
      if (!in_prefix(*it)) {
        if (*it > prefix) break;
        continue;
      }
      if (!take(objects_.at(*it))) break;
    }
    return out;
  }
  // The range's end is found once, so the walk compares no keys.
  auto it = objects_.lower_bound(from);
  const std::string stop = kwatch::storage::prefix_end(prefix);
  const auto end = stop.empty() ? objects_.end() : objects_.lower_bound(stop);
  for (; it != end; ++it) {
    if (!take(it->second)) break;
  }
  if (out.more && predicate == nullptr) out.remaining = std::distance(it, end);
  return out;
}

std::optional<std::vector<EventPtr>> WatchCache::events_since(std::int64_t rv) const {
  std::shared_lock lock(mutex_);
  return window_.since(rv);
}

std::int64_t WatchCache::window_start() const {
  std::shared_lock lock(mutex_);
  return window_.start_resource_version();
}

CacheStats WatchCache::stats() const {
  std::shared_lock lock(mutex_);
  return {objects_.size(), window_.size(), window_.capacity(), rv_};
}

}  // namespace kwatch::watch
