// kube's delegating token authenticator (an extension API server's --authentication-kubeconfig):
// a bearer token this server does not know is sent in a TokenReview
// (authentication.k8s.io/v1) to the server it delegates to, and whose the answer says it is
// becomes the request's user. Answers are remembered for --authentication-token-webhook-cache-ttl
// (10 s), keyed by the token's SHA-256 (the token itself is not kept); a review that could not be
// made is not remembered. At most `max_in_flight` reviews wait at once: a flood of made-up tokens
// costs the other server that many requests, and the rest are told to retry (429).
//
// Thread-safety: authenticate() may be called from any thread; the client's executor runs the
// calls.
#pragma once

#include "auth/delegated.hpp"
#include "base/expiring_cache.hpp"
#include "delegation/review_call.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::delegation {

struct TokenReviewOptions {
  std::chrono::milliseconds cache_ttl{10'000};
  std::size_t cache_entries = 8192;
  std::size_t max_in_flight = 100;
  std::vector<std::string> audiences;  // spec.audiences (empty: the other server's own)
  RetryBackoff backoff;
};

class TokenReviewAuthenticator final : public auth::DelegatedAuthenticator {
 public:
  TokenReviewAuthenticator(std::shared_ptr<client::HttpClient> client, TokenReviewOptions options);

  boost::asio::awaitable<auth::DelegatedIdentity> authenticate(std::string token) override;

  // Reviews sent so far (for tests of the cache).
  std::size_t reviews_sent() const { return sent_.load(); }

 private:
  std::shared_ptr<client::HttpClient> client_;
  TokenReviewOptions options_;
  base::ExpiringCache<auth::DelegatedIdentity> cache_;
  InFlightLimit in_flight_;
  std::atomic<std::size_t> sent_{0};
};

// The user a TokenReview's status names (status.user: username, uid, groups, extra); for tests.
// With `audiences` asked for, the status must name at least one of them (kube's webhook
// authenticator's check), else the token does not authenticate.
auth::DelegatedIdentity identity_from_token_review(const boost::json::object& review,
                                                   const std::vector<std::string>& audiences = {});

}  // namespace kwatch::delegation
