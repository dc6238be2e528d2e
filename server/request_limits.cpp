#include "server/request_limits.hpp"

#include "server/metrics.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace kwatch::server {

using apimachinery::ApiError;
using base::Errc;

namespace {

bool privileged(const auth::UserInfo& user) { return auth::is_superuser(user); }

ApiError too_many(std::string message) {
  ApiError e(Errc::too_many_requests, std::move(message));
  e.retry_after_seconds = 1;
  return e;
}

}  // namespace

namespace asio = boost::asio;

// A queued write: granted (a seat taken for it) under seats_mutex_, then woken by cancelling
// its timer on its own executor.
struct RequestLimits::Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(std::move(ex)) {}
  asio::steady_timer timer;
  bool granted = false;
};

RequestLimits::RequestLimits(RequestLimitOptions options, std::shared_ptr<Metrics> metrics)
    : options_(options), metrics_(std::move(metrics)) {
  if (!metrics_) return;
  metrics_->help("apiserver_current_inflight_requests", "gauge",
                 "Requests being served now, by kind (watches only while being set up).");
  metrics_->help("apiserver_dropped_requests_total", "counter",
                 "Requests refused with 429 because too many were in flight.");
  for (const bool mutating : {false, true}) {
    metrics_->gauge_fn("apiserver_current_inflight_requests",
                       {{"request_kind", mutating ? "mutating" : "readOnly"}},
                       [counter = mutating ? &mutating_ : &readonly_] {
                         return static_cast<double>(counter->load());
                       });
  }
  metrics_->help("apiserver_flowcontrol_current_inqueue_requests", "gauge",
                 "Mutating requests waiting for a seat.");
  metrics_->gauge_fn("apiserver_flowcontrol_current_inqueue_requests",
                     {{"priority_level", "mutating"}},
                     [q = &queued_] { return static_cast<double>(q->load()); });
  metrics_->help("apiserver_flowcontrol_rejected_requests_total", "counter",
                 "Mutating requests refused with 429: the queue was full or the wait ran out.");
}

RequestLimits::Lease RequestLimits::seats(unsigned n) {
  // The lease keeps the limiter alive and gives the seats back when the request (or its
  // fan-out) is done.
  return Lease(reinterpret_cast<void*>(static_cast<std::uintptr_t>(n)),
               [self = shared_from_this()](void* p) {
                 self->release_seats(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p)));
               });
}

void RequestLimits::release_seats(unsigned n) {
  std::vector<std::shared_ptr<Waiter>> granted;
  {
    std::lock_guard lock(seats_mutex_);
    mutating_ -= n;
    while (!queue_.empty() && mutating_ < options_.max_mutating) {
      granted.push_back(std::move(queue_.front()));
      queue_.pop_front();
      granted.back()->granted = true;
      ++mutating_;
    }
    queued_ = static_cast<unsigned>(queue_.size());
  }
  for (auto& w : granted) {
    asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
  }
}

ApiError RequestLimits::refuse(const char* reason) {
  if (metrics_) {
    metrics_->inc("apiserver_dropped_requests_total", {{"request_kind", "mutating"}});
    metrics_->inc("apiserver_flowcontrol_rejected_requests_total",
                  {{"priority_level", "mutating"}, {"reason", reason}});
  }
  return too_many("Too many requests, please try again later.");
}

asio::awaitable<apimachinery::ApiResult<RequestLimits::Lease>> RequestLimits::admit_mutating(
    auth::UserInfo user) {
  if (options_.max_mutating == 0 || privileged(user)) co_return Lease();
  auto executor = co_await asio::this_coro::executor;
  auto waiter = std::make_shared<Waiter>(executor);
  {
    std::unique_lock lock(seats_mutex_);
    if (queue_.empty() && mutating_ < options_.max_mutating) {
      ++mutating_;
      lock.unlock();
      co_return seats(1);
    }
    if (queue_.size() >= options_.mutating_queue_length) {
      lock.unlock();
      co_return refuse("queue-full");
    }
    waiter->timer.expires_after(options_.mutating_queue_wait);
    queue_.push_back(waiter);
    queued_ = static_cast<unsigned>(queue_.size());
  }
  co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  {
    std::lock_guard lock(seats_mutex_);
    if (!waiter->granted) {
      std::erase(queue_, waiter);
      queued_ = static_cast<unsigned>(queue_.size());
    }
  }
  if (waiter->granted) co_return seats(1);
  co_return refuse("time-out");
}

RequestLimits::Lease RequestLimits::charge_fanout(const auth::UserInfo& user,
                                                  std::int64_t watchers) {
  if (watchers <= 0 || options_.max_fanout_seats == 0 || options_.max_mutating == 0 ||
      privileged(user)) {
    return Lease();
  }
  const auto per_seat = static_cast<std::int64_t>(std::max(1u, options_.watches_per_seat));
  const auto n = static_cast<unsigned>(
      std::min<std::int64_t>((watchers + per_seat - 1) / per_seat, options_.max_fanout_seats));
  {
    std::lock_guard lock(seats_mutex_);
    mutating_ += n;
  }
  return seats(n);
}

apimachinery::ApiResult<RequestLimits::Lease> RequestLimits::admit(const auth::UserInfo& user,
                                                               bool mutating) {
  const unsigned limit = mutating ? options_.max_mutating : options_.max_readonly;
  if (limit == 0 || privileged(user)) return Lease();
  if (mutating) {
    std::unique_lock lock(seats_mutex_);
    if (mutating_ >= limit) {
      lock.unlock();
      return refuse("queue-full");
    }
    ++mutating_;
    lock.unlock();
    return seats(1);
  }
  if (readonly_.fetch_add(1) >= limit) {
    readonly_.fetch_sub(1);
    if (metrics_) metrics_->inc("apiserver_dropped_requests_total", {{"request_kind", "readOnly"}});
    return too_many("Too many requests, please try again later.");
  }
  // The lease keeps the limiter alive and gives the slot back when the request is done.
  return Lease(static_cast<void*>(&readonly_),
               [self = shared_from_this()](void* c) { static_cast<std::atomic<unsigned>*>(c)->fetch_sub(1); });
}

apimachinery::ApiResult<RequestLimits::Lease> RequestLimits::admit_watch(
    const auth::UserInfo& user) {
  if (options_.max_watches_per_user == 0) return Lease();
  {
    std::lock_guard lock(mutex_);
    unsigned& open = watches_[user.name];
    if (open >= options_.max_watches_per_user) {
      if (metrics_) metrics_->inc("apiserver_dropped_requests_total", {{"request_kind", "watch"}});
      return too_many("Too many watches for user \"" + user.name + "\": at most " +
                      std::to_string(options_.max_watches_per_user) +
                      " may be open at once (--max-watches-per-user).");
    }
    ++open;
  }
  auto* name = new std::string(user.name);
  return Lease(static_cast<void*>(name), [self = shared_from_this()](void* p) {
    std::unique_ptr<std::string> name(static_cast<std::string*>(p));
    std::lock_guard lock(self->mutex_);
    auto it = self->watches_.find(*name);
    if (it != self->watches_.end() && --it->second == 0) self->watches_.erase(it);
  });
}

}  // namespace kwatch::server
