// A bounded map whose entries expire: what a decision asked of another server (a token's
// review, an access review) is remembered for a while, as kube's webhook authenticator and
// authorizer cache theirs. At most `capacity` entries; when full, the least recently used goes.
//
// Thread-safety: every member may be called from any thread (one mutex; no call waits on I/O).
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace kwatch::base {

template <class Value>
class ExpiringCache {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ExpiringCache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The value kept under `key`, unless it has expired (then it is dropped).
  std::optional<Value> get(const std::string& key, Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    if (it->second.expires <= now) {
      order_.erase(it->second.position);
      entries_.erase(it);
      return std::nullopt;
    }
    order_.splice(order_.begin(), order_, it->second.position);
    return it->second.value;
  }

  // Keeps `value` for `ttl` (a ttl of zero or less keeps nothing).
  void put(const std::string& key, Value value, Clock::duration ttl,
           Clock::time_point now = Clock::now()) {
    if (ttl <= Clock::duration::zero()) return;
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      it->second.value = std::move(value);
      it->second.expires = now + ttl;
      order_.splice(order_.begin(), order_, it->second.position);
      return;
    }
    if (entries_.size() >= capacity_) {
      entries_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    entries_.emplace(key, Entry{std::move(value), now + ttl, order_.begin()});
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    Value value;
    Clock::time_point expires;
    std::list<std::string>::iterator position;
  };
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::string> order_;  // most recently used first
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace kwatch::base
