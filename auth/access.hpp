// Who is asking and whether they may, as kube-apiserver's authentication, impersonation and
// authorization filters decide: a client certificate or bearer token (--token-auth-file,
// ServiceAccount tokens, or a TokenReview another server makes: --authentication-kubeconfig)
// names the user, anonymous when allowed; Impersonate-* headers switch to another user the
// caller may impersonate; --authorization-mode AlwaysAllow or RBAC decides, from the policy the
// watch caches hold (auth/rbac_policy_source.hpp), never from storage, and what RBAC does not
// allow another server may (a SubjectAccessReview: --authorization-kubeconfig).
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/credentials.hpp"
#include "auth/delegated.hpp"
#include "auth/rbac_authorizer.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::auth {

class RbacPolicySource;
class ServiceAccountTokens;
class TokenFile;

struct AccessOptions {
  std::shared_ptr<const TokenFile> tokens;  // --token-auth-file; null: none
  // ServiceAccount tokens (--service-account-*); null: none.
  std::shared_ptr<const ServiceAccountTokens> service_accounts;
  // --service-account-max-token-expiration: TokenRequests asking for longer get this (0: none).
  std::int64_t max_token_seconds = 0;
  bool anonymous = true;                    // --anonymous-auth
  RequestHeaderOptions request_header;      // with --requestheader-client-ca-file
  std::shared_ptr<RbacPolicySource> rbac;   // --authorization-mode=RBAC; null: AlwaysAllow
  // --authentication-kubeconfig: tokens no local authenticator knows; null: none.
  std::shared_ptr<DelegatedAuthenticator> delegated_authentication;
  // --authorization-kubeconfig: what RBAC does not allow; null: none.
  std::shared_ptr<DelegatedAuthorizer> delegated_authorization;
  // Where the accounts (and objects) tokens name are looked up: the watch caches, then storage.
  std::shared_ptr<kinds::Scheme> scheme;
  std::shared_ptr<registry::CacherRegistry> cachers;
  std::shared_ptr<registry::ResourceStore> store;
};

// kube's request header authenticator: the user a front proxy's request names in its headers,
// when its certificate verified against the request header CA, its CN is allowed and a user
// header is set; nullopt otherwise (the other authenticators then decide).
std::optional<UserInfo> request_header_user(const RequestHeaderOptions& options,
                                            const ClientCertificate& cert,
                                            const Credentials& credentials);

// A bearer token judged as TokenReview reports it.
struct TokenReviewResult {
  bool authenticated = false;
  UserInfo user;
  std::vector<std::string> audiences;  // the token's audiences among those asked for
  std::string error;
};

// Judges `token` for `audiences` (empty: the API's own); nullopt when no authenticator checks
// tokens at all. A ServiceAccount token must name an account (and bound object) that exists
// with the uid it was issued for.
boost::asio::awaitable<std::optional<TokenReviewResult>> authenticate_token(
    const AccessOptions& options, std::string token, std::vector<std::string> audiences);

// The user `credentials` name, anonymous when they name none (or no token authenticator is
// configured) and that is allowed (--anonymous-auth, or `health_probe`: the probes stay
// anonymous with --anonymous-auth=false); 401 Unauthorized otherwise.
boost::asio::awaitable<apimachinery::ApiResult<UserInfo>> authenticate(
    const AccessOptions& options, const Credentials& credentials, bool health_probe);

// The user a request acts as: `user` itself, or the one `impersonation` names when `user` may
// impersonate every identity in it (403 otherwise), as kubectl --as asks.
boost::asio::awaitable<apimachinery::ApiResult<UserInfo>> impersonate(
    const AccessOptions& options, const UserInfo& user, const Impersonation& impersonation);

// Whether requests are authorized at all (false: AlwaysAllow, every request allowed): callers
// skip building attributes when not.
inline bool authorizes(const AccessOptions& options) {
  return options.rbac != nullptr || options.delegated_authorization != nullptr;
}

// 403 Forbidden as kube words it, or nothing when allowed: system:masters, then RBAC, then the
// delegated authorizer (whose reason the message ends with; a review that failed is a 500).
boost::asio::awaitable<std::optional<apimachinery::ApiError>> authorize(
    const AccessOptions& options, const RequestAttributes& attributes);

}  // namespace kwatch::auth
