// Authentication and authorization another API server decides, as kube's extension API servers
// delegate them (--authentication-kubeconfig, --authorization-kubeconfig): a bearer token no
// local authenticator knows is judged by a TokenReview there, and a request local RBAC does not
// allow is judged by a SubjectAccessReview there. access.cpp asks these interfaces;
// delegation/ implements them over the client library.
#pragma once

#include "auth/rbac_authorizer.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <vector>

namespace kwatch::auth {

// What the other server said of a token: `error` when it could not be asked (or answered
// nonsense); otherwise authenticated, and whose, or not.
struct DelegatedIdentity {
  bool authenticated = false;
  UserInfo user = {};
  std::string error = {};
  bool busy = false;  // too many reviews in flight: refused without asking (429)
};

class DelegatedAuthenticator {
 public:
  virtual ~DelegatedAuthenticator() = default;
  virtual boost::asio::awaitable<DelegatedIdentity> authenticate(std::string token) = 0;
};

// kube's authorizer decisions as a SubjectAccessReview reports them: allowed, denied, or
// neither (no opinion); `error` when the review could not be made.
struct DelegatedDecision {
  bool allowed = false;
  bool denied = false;
  std::string reason = {};
  std::string error = {};
  bool busy = false;  // too many reviews in flight: refused without asking (429)
};

class DelegatedAuthorizer {
 public:
  virtual ~DelegatedAuthorizer() = default;
  virtual boost::asio::awaitable<DelegatedDecision> authorize(const RequestAttributes& a) = 0;
};

}  // namespace kwatch::auth
