#include "server/request_limits.hpp"

#include "server/metrics.hpp"

#include <algorithm>

namespace kwatch::server {

using registry::ApiError;
using registry::Errc;

namespace {

bool privileged(const registry::UserInfo& user) {
  return std::find(user.groups.begin(), user.groups.end(), "system:masters") != user.groups.end();
}

ApiError too_many(std::string message) {
  ApiError e(Errc::too_many_requests, std::move(message));
  e.retry_after_seconds = 1;
  return e;
}

}  // namespace

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
}

registry::ApiResult<RequestLimits::Lease> RequestLimits::admit(const registry::UserInfo& user,
                                                               bool mutating) {
  const unsigned limit = mutating ? options_.max_mutating : options_.max_readonly;
  if (limit == 0 || privileged(user)) return Lease();
  std::atomic<unsigned>& counter = mutating ? mutating_ : readonly_;
  if (counter.fetch_add(1) >= limit) {
    counter.fetch_sub(1);
    if (metrics_) {
      metrics_->inc("apiserver_dropped_requests_total",
                    {{"request_kind", mutating ? "mutating" : "readOnly"}});
    }
    return too_many("Too many requests, please try again later.");
  }
  // The lease keeps the limiter alive and gives the slot back when the request is done.
  return Lease(static_cast<void*>(&counter),
               [self = shared_from_this()](void* c) { static_cast<std::atomic<unsigned>*>(c)->fetch_sub(1); });
}

registry::ApiResult<RequestLimits::Lease> RequestLimits::admit_watch(const registry::UserInfo& user) {
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
