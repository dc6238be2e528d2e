// Overload protection as kube-apiserver's max-in-flight filter does it: at most
// --max-requests-inflight read-only and --max-mutating-requests-inflight mutating requests are
// served at once, from the request's arrival until its response is written (0: no limit); one
// more is refused at once with 429 TooManyRequests and
// Retry-After: 1, so that clients back off instead of queueing without bound. Long-running
// requests (watches) count only while they are being set up, and system:masters is exempt, as in
// kube. Besides, a user may hold at most --max-watches-per-user open watches (0: no limit), so
// that one client cannot take every connection's memory.
//
// Writes are admitted by seats, as API Priority and Fairness admits them: a mutating request that
// finds every seat taken waits in one FIFO queue (at most `mutating_queue_length` requests, each at
// most `mutating_queue_wait`) and is refused with 429 and Retry-After only when the queue is full
// or its wait runs out. The cost of fanning a write's event out to watchers is charged to the
// write: after its response it keeps ceil(watchers / watches_per_seat) seats, at most
// `max_fanout_seats` (kube's mutating work estimator charges 10 watches per seat, at most 10
// seats, and so does kwatch by default; measured in bench/RESULTS.md), and holds them not for a
// fixed 5 ms as kube does but until the watch cache's delivery has done the work handed out up to
// its event. Writers are therefore slowed only while delivery is behind, and at most
// seats / max_fanout_seats writes' events are ever being delivered.
//
// Thread-safety: all methods from any thread. A lease gives its slot back when destroyed.
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/rbac_authorizer.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kwatch::server {

class Metrics;

struct RequestLimitOptions {
  unsigned max_readonly = 400;  // kube's defaults
  unsigned max_mutating = 200;
  unsigned max_watches_per_user = 10000;
  unsigned mutating_queue_length = 200;  // 0: refuse at once when every seat is taken
  std::chrono::milliseconds mutating_queue_wait{10'000};
  unsigned watches_per_seat = 10;
  unsigned max_fanout_seats = 2;  // 0: fan-out costs no seats
};

class RequestLimits : public std::enable_shared_from_this<RequestLimits> {
 public:
  RequestLimits(RequestLimitOptions options, std::shared_ptr<Metrics> metrics);

  using Lease = std::shared_ptr<void>;
  // A slot for a request of `user`, or 429.
  apimachinery::ApiResult<Lease> admit(const auth::UserInfo& user, bool mutating);
  // A seat for a mutating request of `user`: at once, after waiting in the queue, or 429.
  boost::asio::awaitable<apimachinery::ApiResult<Lease>> admit_mutating(auth::UserInfo user);
  // The seats a write of `user` keeps for the fan-out of its event to `watchers` watchers (taken
  // even when all are in use: the write is already done); null when that costs none.
  Lease charge_fanout(const auth::UserInfo& user, std::int64_t watchers);
  // A slot for one more open watch of `user`, held for the watch's life, or 429.
  apimachinery::ApiResult<Lease> admit_watch(const auth::UserInfo& user);

  unsigned inflight(bool mutating) const { return (mutating ? mutating_ : readonly_).load(); }
  unsigned queued() const { return queued_.load(); }

 private:
  struct Waiter;
  Lease seats(unsigned n);
  void release_seats(unsigned n);
  apimachinery::ApiError refuse(const char* reason);

  RequestLimitOptions options_;
  std::shared_ptr<Metrics> metrics_;
  std::atomic<unsigned> readonly_{0};
  std::atomic<unsigned> mutating_{0};  // seats in use; changed under seats_mutex_
  std::atomic<unsigned> queued_{0};
  std::mutex seats_mutex_;
  std::deque<std::shared_ptr<Waiter>> queue_;
  std::mutex mutex_;
  std::unordered_map<std::string, unsigned> watches_;  // by user name
};

}  // namespace kwatch::server
