// client-go's rate-limited work queue, for controllers: handlers add keys, workers take them.
// - A key is queued at most once: adding one already waiting does nothing.
// - A key is handed to one worker at a time: added again while a worker has it, it is queued
//   again when that worker calls done() (so a change during a reconcile is never lost).
// - add_rate_limited() re-queues after the key's own backoff (base x 2^failures, capped), and no
//   faster than an overall token bucket (qps, burst): a failing key cannot spin, and many failing
//   keys cannot flood the server. forget() clears a key's failures once it succeeded.
// - add_after() queues after a delay; shut_down() wakes every get() (which then returns nothing).
//
// Thread-safety: every member from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

namespace kwatch::client {

struct RateLimits {
  std::chrono::milliseconds base_delay{5};      // client-go's per-item defaults
  std::chrono::milliseconds max_delay{1'000'000};
  double qps = 10;                               // and its overall bucket
  int burst = 100;
};

class WorkQueue {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkQueue(RateLimits limits = {}) : limits_(limits) {}

  void add(const std::string& key);
  void add_after(const std::string& key, Clock::duration delay);
  // Re-queues after the key's backoff and the overall bucket; counts a failure of the key.
  void add_rate_limited(const std::string& key);
  // The key succeeded: its backoff starts again from base_delay.
  void forget(const std::string& key);
  int requeues(const std::string& key) const;
  // The key's own backoff for its next add_rate_limited (client-go's When), before the bucket.
  Clock::duration backoff(const std::string& key) const;

  // Blocks until a key is ready (nullopt once shut down); then done(key) when handled.
  std::optional<std::string> get();
  void done(const std::string& key);

  void shut_down();
  std::size_t length() const;  // queued now (not the delayed ones, not those being handled)

 private:
  void queue_locked(const std::string& key);
  Clock::duration backoff_locked(const std::string& key) const;
  Clock::duration bucket_delay_locked(Clock::time_point now);

  const RateLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;      // in queue_
  std::set<std::string> processing_;  // handed to a worker
  std::set<std::string> dirty_;       // added while processing
  std::multimap<Clock::time_point, std::string> delayed_;
  std::map<std::string, int> failures_;
  bool bucket_started_ = false;  // full at first use
  double tokens_ = 0;            // below zero: a debt, the wait of the last re-queue
  Clock::time_point refilled_{};
  bool shut_down_ = false;
};

}  // namespace kwatch::client
