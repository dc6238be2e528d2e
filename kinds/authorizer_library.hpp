// Kube's authorizer CEL library for admission policies (k8s.io/apiserver pkg/cel/library/authz):
// `authorizer` asks whether the requesting user (or, through serviceAccount(), another) may do
// something, `authorizer.requestResource` is a check already aimed at the request's resource.
//
//   authorizer.group('apps').resource('deployments').namespace('ns').name('web').check('get')
//   authorizer.path('/healthz').check('get').allowed()
//   authorizer.serviceAccount('ns', 'builder').group('').resource('secrets').check('list')
//   authorizer.requestResource.subresource('scale').check('update').reason()
//
// Types: kubernetes.authorization.{Authorizer, PathCheck, GroupCheck, ResourceCheck, Decision}.
// A check costs 350,000 units, as kube charges it. The decision comes from a PolicyAuthorizer
// the admission plugin supplies per write (kinds cannot see the authorizer itself).
//
// Pure apart from that; thread-safe.
#pragma once

#include "cel/functions.hpp"
#include "cel/value.hpp"

#include <memory>
#include <string>

namespace kwatch::kinds {

// One question: a resource request (verb on group/resource/subresource in a namespace, by
// name) or a non-resource one (verb on a path), for the policy's user or a service account.
struct AuthorizationCheck {
  bool resource_request = true;
  std::string verb, group, resource, subresource, ns, name, path;
  // Set by serviceAccount(): ask for system:serviceaccount:<namespace>:<name> instead.
  bool service_account = false;
  std::string service_account_namespace, service_account_name;
};

struct AuthorizationDecision {
  bool allowed = false;
  std::string reason;
  std::string error;  // "" when the authorizer answered
};

// What answers a policy's checks during one write.
class PolicyAuthorizer {
 public:
  virtual ~PolicyAuthorizer() = default;
  virtual AuthorizationDecision check(const AuthorizationCheck& check) const = 0;
};

// `authorizer` for `impl`; `authorizer.requestResource` for the request's resource.
cel::Value authorizer_value(std::shared_ptr<const PolicyAuthorizer> impl);
cel::Value request_resource_value(std::shared_ptr<const PolicyAuthorizer> impl,
                                  std::string group, std::string resource,
                                  std::string subresource, std::string ns, std::string name);

// Adds the library's functions to `registry`.
void add_authorizer_library(cel::FunctionRegistry& registry);

}  // namespace kwatch::kinds
