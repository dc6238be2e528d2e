// Overload protection as kube-apiserver's max-in-flight filter does it: at most
// --max-requests-inflight read-only and --max-mutating-requests-inflight mutating requests are
// served at once, from the request's arrival until its response is written (0: no limit); one
// more is refused at once with 429 TooManyRequests and
// Retry-After: 1, so that clients back off instead of queueing without bound. Long-running
// requests (watches) count only while they are being set up, and system:masters is exempt, as in
// kube. Besides, a user may hold at most --max-watches-per-user open watches (0: no limit), so
// that one client cannot take every connection's memory.
//
// Thread-safety: all methods from any thread. A lease gives its slot back when destroyed.
#pragma once

#include "registry/api_error.hpp"
#include "registry/rbac_authorizer.hpp"

#include <atomic>
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
};

class RequestLimits : public std::enable_shared_from_this<RequestLimits> {
 public:
  RequestLimits(RequestLimitOptions options, std::shared_ptr<Metrics> metrics);

  using Lease = std::shared_ptr<void>;
  // A slot for a request of `user`, or 429.
  registry::ApiResult<Lease> admit(const registry::UserInfo& user, bool mutating);
  // A slot for one more open watch of `user`, held for the watch's life, or 429.
  registry::ApiResult<Lease> admit_watch(const registry::UserInfo& user);

  unsigned inflight(bool mutating) const { return (mutating ? mutating_ : readonly_).load(); }

 private:
  RequestLimitOptions options_;
  std::shared_ptr<Metrics> metrics_;
  std::atomic<unsigned> readonly_{0};
  std::atomic<unsigned> mutating_{0};
  std::mutex mutex_;
  std::unordered_map<std::string, unsigned> watches_;  // by user name
};

}  // namespace kwatch::server
