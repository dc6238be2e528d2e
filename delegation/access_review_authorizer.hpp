// kube's delegating authorizer (an extension API server's --authorization-kubeconfig): a request
// is described in a SubjectAccessReview (authorization.k8s.io/v1: the user, uid, groups and
// extra; the resource attributes with the version asked for, or the path and verb) and sent to
// the server it delegates to, whose answer decides: allowed, denied (with its reason) or no
// opinion. Decisions are remembered by the review's spec, allowed ones for
// --authorization-webhook-cache-authorized-ttl and the others for
// --authorization-webhook-cache-unauthorized-ttl (10 s each, as kube's delegating defaults), at
// most 8192 of them; a review that could not be made is an error, not remembered. At most
// `max_in_flight` reviews wait at once (authorization runs on a request's head, before the
// in-flight limits): beyond that a request is told to retry (429) without a review being sent.
//
// Thread-safety: authorize() may be called from any thread; the client's executor runs the
// calls.
#pragma once

#include "auth/delegated.hpp"
#include "base/expiring_cache.hpp"
#include "delegation/review_call.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace kwatch::delegation {

struct AccessReviewOptions {
  std::chrono::milliseconds allowed_ttl{10'000};
  std::chrono::milliseconds denied_ttl{10'000};
  std::size_t cache_entries = 8192;
  std::size_t max_in_flight = 400;
  RetryBackoff backoff;
};

class AccessReviewAuthorizer final : public auth::DelegatedAuthorizer {
 public:
  AccessReviewAuthorizer(std::shared_ptr<client::HttpClient> client, AccessReviewOptions options);

  boost::asio::awaitable<auth::DelegatedDecision> authorize(
      const auth::RequestAttributes& a) override;

  std::size_t reviews_sent() const { return sent_.load(); }

 private:
  std::shared_ptr<client::HttpClient> client_;
  AccessReviewOptions options_;
  base::ExpiringCache<auth::DelegatedDecision> cache_;
  InFlightLimit in_flight_;
  std::atomic<std::size_t> sent_{0};
};

// The SubjectAccessReview's spec for `a`, and the decision an answer's status holds (kube's
// webhook authorizer: allowed and denied both set is an error); for tests.
boost::json::object access_review_spec(const auth::RequestAttributes& a);
auth::DelegatedDecision decision_from_access_review(const boost::json::object& review);

}  // namespace kwatch::delegation
