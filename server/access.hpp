// Who is asking and whether they may: authentication (bearer tokens from --token-auth-file,
// anonymous requests when allowed) and authorization (--authorization-mode AlwaysAllow or RBAC,
// decided from the RBAC objects in the watch caches, never from storage per request).
//
// `RbacPolicySource` keeps the current RbacPolicy: a task watches the four RBAC caches and
// rebuilds the policy after a change (within ~100 ms), swapping it atomically; requests read the
// current one without locks. Ownership: shared; the task holds it. Strand: its own.
#pragma once

#include "auth/rbac_authorizer.hpp"
#include "apimachinery/api_error.hpp"
#include "server/http_types.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <vector>

namespace kwatch::auth {
class ServiceAccountTokens;
class TokenFile;
}  // namespace kwatch::auth

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}

namespace kwatch::storage {
class Storage;
}

namespace kwatch::registry {
class CacherRegistry;
}  // namespace kwatch::registry

namespace kwatch::server {


class RbacPolicySource : public std::enable_shared_from_this<RbacPolicySource> {
 public:
  // `storage` answers what the caches cannot prove they have caught up with (consistent()).
  RbacPolicySource(std::shared_ptr<kinds::Scheme> scheme,
                   std::shared_ptr<registry::CacherRegistry> cachers,
                   std::shared_ptr<storage::Storage> storage);
  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }
  // The policy as of the last rebuild; null until the caches are ready.
  std::shared_ptr<const auth::RbacPolicy> current() const { return std::atomic_load(&policy_); }
  // The storage revision the current policy includes every RBAC object up to (0: none yet).
  std::int64_t covered_revision() const { return covered_.load(); }
  // Asks for a rebuild at the next tick (the caches may have moved on since the last one).
  void refresh() { dirty_ = true; }
  // A policy that holds every RBAC object written before the call (storage's current revision),
  // as kube reads roles and bindings from storage for a write's escalation check: the current
  // policy when it is new enough, else one rebuilt from the caches once they have caught up
  // (published for everyone), else one built from a storage list. `unavailable` (503, Retry-After)
  // while no policy is loaded or storage does not answer. Any executor.
  boost::asio::awaitable<apimachinery::ApiResult<std::shared_ptr<const auth::RbacPolicy>>>
  consistent();

 private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<void> watch_one(std::string resource);
  // Builds a policy from the caches and publishes it unless a newer one was published meanwhile;
  // null when a cache is not ready. Any thread.
  std::shared_ptr<const auth::RbacPolicy> rebuild();
  boost::asio::awaitable<apimachinery::ApiResult<std::shared_ptr<const auth::RbacPolicy>>>
  build_from_storage(std::int64_t revision);

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<storage::Storage> storage_;
  std::mutex publish_mutex_;  // policy_ and covered_ change together
  std::shared_ptr<const auth::RbacPolicy> policy_;
  std::atomic<bool> dirty_{true};
  std::atomic<bool> stopped_{false};
  std::atomic<std::int64_t> covered_{0};
};

struct AccessOptions {
  std::shared_ptr<const auth::TokenFile> tokens;  // --token-auth-file; null: none
  // ServiceAccount tokens (--service-account-*); null: none.
  std::shared_ptr<const auth::ServiceAccountTokens> service_accounts;
  // --service-account-max-token-expiration: TokenRequests asking for longer get this (0: none).
  std::int64_t max_token_seconds = 0;
  bool anonymous = true;                    // --anonymous-auth
  std::shared_ptr<RbacPolicySource> rbac;   // --authorization-mode=RBAC; null: AlwaysAllow
  // Where the accounts (and objects) tokens name are looked up: the watch caches, then storage.
  std::shared_ptr<kinds::Scheme> scheme;
  std::shared_ptr<registry::CacherRegistry> cachers;
  std::shared_ptr<registry::ResourceStore> store;
};

// A bearer token judged as TokenReview reports it.
struct TokenReviewResult {
  bool authenticated = false;
  auth::UserInfo user;
  std::vector<std::string> audiences;  // the token's audiences among those asked for
  std::string error;
};

// Judges `token` for `audiences` (empty: the API's own); nullopt when no authenticator checks
// tokens at all. A ServiceAccount token must name an account (and bound object) that exists
// with the uid it was issued for.
boost::asio::awaitable<std::optional<TokenReviewResult>> authenticate_token(
    const AccessOptions& options, std::string token, std::vector<std::string> audiences);

// Liveness and readiness probes (/healthz, /livez, /readyz): anonymous even with
// --anonymous-auth=false, and never refused by the in-flight limits.
bool is_health_probe(std::string_view target);

// The user a request's client certificate or Authorization header names, anonymous when it
// names none (or no token authenticator is configured) and that is allowed; 401 Unauthorized
// otherwise.
boost::asio::awaitable<apimachinery::ApiResult<auth::UserInfo>> authenticate(
    const AccessOptions& options, const ApiRequest& request);

// The review objects clients ask about themselves with (kubectl auth can-i, can-i --list,
// whoami), answered for `user` under the configured authorization: `body` is the posted review
// (JSON, or decoded from protobuf), the result the review with its status filled.
boost::json::object self_subject_access_review(const AccessOptions& options,
                                               const auth::UserInfo& user,
                                               boost::json::object body);
boost::json::object self_subject_rules_review(const AccessOptions& options,
                                              const auth::UserInfo& user,
                                              boost::json::object body);
boost::json::object self_subject_review(const auth::UserInfo& user);
// SubjectAccessReview (any user, from spec.user/groups/uid) and, with a namespace,
// LocalSubjectAccessReview (whose resourceAttributes.namespace must be that namespace).
apimachinery::ApiResult<boost::json::object> subject_access_review(const AccessOptions& options,
                                                               boost::json::object body,
                                                               std::string_view local_namespace);
// TokenReview: whether spec.token is good for spec.audiences, and whose it is.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> token_review(
    const AccessOptions& options, boost::json::object body);
// TokenRequest (POST serviceaccounts/<name>/token, `kubectl create token`): a token for the
// account in `ns`, for spec.audiences (default: the API's), spec.expirationSeconds (default an
// hour, at least ten minutes), optionally bound to a Pod, Secret or Node.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> token_request(
    const AccessOptions& options, std::string ns, std::string name, boost::json::object body);

// The user a request acts as: `user` itself, or the one its Impersonate-* headers name when
// `user` may impersonate every identity they name (403 otherwise), as kubectl --as asks.
apimachinery::ApiResult<auth::UserInfo> impersonate(const AccessOptions& options,
                                                    const auth::UserInfo& user,
                                                    const ApiRequest& request);

// 403 Forbidden as kube words it, or nothing when allowed.
std::optional<apimachinery::ApiError> authorize(const AccessOptions& options,
                                            const auth::RequestAttributes& attributes);

}  // namespace kwatch::server
