// The review and token endpoints of authentication.k8s.io and authorization.k8s.io, answered
// under the configured authentication and authorization (auth/access.hpp): what a user may do
// (SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview and its local form), who
// the caller is (SelfSubjectReview), whose a token is (TokenReview), and a new ServiceAccount
// token (TokenRequest).
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/access.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace kwatch::auth {

// The review objects clients ask about themselves with (kubectl auth can-i, can-i --list,
// whoami), answered for `user` under the configured authorization: `body` is the posted review
// (JSON, or decoded from protobuf), the result the review with its status filled.
boost::json::object self_subject_access_review(const AccessOptions& options,
                                               const UserInfo& user,
                                               boost::json::object body);
boost::json::object self_subject_rules_review(const AccessOptions& options,
                                              const UserInfo& user,
                                              boost::json::object body);
boost::json::object self_subject_review(const UserInfo& user);
// SubjectAccessReview (any user, from spec.user/groups/uid) and, with a namespace,
// LocalSubjectAccessReview (whose resourceAttributes.namespace must be that namespace).
apimachinery::ApiResult<boost::json::object> subject_access_review(const AccessOptions& options,
                                                               boost::json::object body,
                                                               std::string_view local_namespace);
// With a delegated authorizer (--authorization-kubeconfig), an answered access review that
// local RBAC did not allow is asked of it, as kube's union authorizer answers reviews: allowed,
// denied and its reason, or evaluationError when it could not be asked. `caller`: the user of a
// SelfSubjectAccessReview; null: the user the review's spec names.
boost::asio::awaitable<void> complete_access_review(const AccessOptions& options,
                                                    const UserInfo* caller,
                                                    boost::json::object& review);
// TokenReview: whether spec.token is good for spec.audiences, and whose it is.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> token_review(
    const AccessOptions& options, boost::json::object body);
// TokenRequest (POST serviceaccounts/<name>/token, `kubectl create token`): a token for the
// account in `ns`, for spec.audiences (default: the API's), spec.expirationSeconds (default an
// hour, at least ten minutes), optionally bound to a Pod, Secret or Node.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> token_request(
    const AccessOptions& options, std::string ns, std::string name, boost::json::object body);

}  // namespace kwatch::auth
