// Privilege escalation through RBAC writes, prevented as kube-apiserver's RBAC storage does
// (pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased): an admission
// stage of the write of a Role, ClusterRole, RoleBinding or ClusterRoleBinding, judging the object
// about to be stored against one RbacPolicy, the same the authorizer answers from.
//
//  - Members of system:masters may write anything (kube's EscalationAllowed).
//  - An update that changes only ownerReferences and finalizers is let through (the garbage
//    collector's writes; kube's IsOnlyMutatingGCFields).
//  - A role's rules must all be held by the writer in the role's namespace (cluster-wide for a
//    ClusterRole), unless the writer holds `escalate` on it. A ClusterRole that has, or had, an
//    aggregationRule needs every permission (`*` on `*.*` and on every URL): a selector can gather
//    any role's rules, so only who holds all of them may set or change one.
//  - A binding's role must exist, and its rules (an aggregated ClusterRole's resolved rules) must
//    all be held by the writer in the binding's namespace, unless the writer holds `bind` on that
//    role there. A binding to a role that does not exist yet would grant whatever that role holds
//    once someone creates it, so it is refused (404 naming the role) as kube refuses it.
//
// Pure: no I/O, no executor. Thread-safety: a RbacAdmission is immutable; `admit` may be called
// from any thread, again for each retry of the write.
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/rbac_authorizer.hpp"

#include <boost/json/object.hpp>

#include <memory>
#include <optional>
#include <string>

namespace kwatch::auth {

class RbacAdmission {
 public:
  // `resource` is roles, clusterroles, rolebindings or clusterrolebindings; `ns` the request's
  // namespace ("" for cluster objects); `url_name` the name in the request's URL ("" on create),
  // which is what an `escalate` grant with resourceNames is matched against, as in kube.
  RbacAdmission(std::shared_ptr<const RbacPolicy> policy, UserInfo user, std::string resource,
                std::string ns, std::string url_name);

  // Nothing when `next` (replacing `old`, null on create) may be written; otherwise 403
  // Forbidden in kube's words, or 404 for a binding's missing role.
  std::optional<apimachinery::ApiError> admit(const boost::json::object* old,
                                const boost::json::object& next) const;

 private:
  std::optional<apimachinery::ApiError> admit_role(const boost::json::object* old,
                                     const boost::json::object& next) const;
  std::optional<apimachinery::ApiError> admit_binding(const boost::json::object& next) const;
  apimachinery::ApiError forbidden(std::string_view name, std::string reason) const;

  std::shared_ptr<const RbacPolicy> policy_;
  UserInfo user_;
  std::string resource_;
  std::string ns_;
  std::string url_name_;
};

// The roles (or bindings) of rbac.authorization.k8s.io whose writes RbacAdmission judges.
bool is_rbac_resource(std::string_view group, std::string_view resource);

}  // namespace kwatch::auth
