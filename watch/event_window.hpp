// The window of recent events of one resource: a ring whose capacity follows the event rate.
//
// It doubles when full while its oldest event is younger than the freshness period (75 s), and
// halves when full while even the newest quarter is older than that, within [lower, upper].
// Every event with a resource version above `start_resource_version()` is in the window; a
// watcher asking for events since an older version must re-list (410 Gone).
//
// Events are also numbered in push order (across resets): a parked watcher remembers the number
// of the first event it has not received and reads on from there, which stays exact when several
// events share a revision (one etcd transaction).
//
// Thread-safety: none; the owner (WatchCache) serializes access.
#pragma once

#include "watch/watch_types.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace kwatch::watch {

class EventWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kFreshness{75};

  EventWindow(std::size_t lower_bound, std::size_t upper_bound);

  // Appends an event whose version is above every event already held.
  void push(EventPtr event, Clock::time_point now);
  // Events with resource version > `rv`, oldest first; nullopt if `rv` is older than the window.
  std::optional<std::vector<EventPtr>> since(std::int64_t rv) const;
  // Empties the window; every event after `rv` will be pushed (a re-list at `rv`).
  void reset(std::int64_t rv);
  // The number the next pushed event gets, and that of the oldest event held.
  std::uint64_t next_sequence() const { return pushed_; }
  std::uint64_t first_sequence() const { return pushed_ - size_; }
  // Appends the events numbered `from` and later to `out`, oldest first, at most `limit`.
  // False when event `from` has left the window.
  bool read(std::uint64_t from, std::size_t limit, std::vector<EventPtr>& out) const;

  std::int64_t start_resource_version() const { return start_rv_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return ring_.size(); }

 private:
  const EventPtr& at(std::size_t i) const { return ring_[(head_ + i) % ring_.size()]; }
  void resize(std::size_t capacity);

  std::size_t lower_;
  std::size_t upper_;
  std::vector<EventPtr> ring_;
  std::size_t head_ = 0;  // index of the oldest event
  std::size_t size_ = 0;
  std::int64_t start_rv_ = 0;
  std::uint64_t pushed_ = 0;  // events pushed since construction: the held ones are the last size_
};

}  // namespace kwatch::watch
