// kube-apiserver's RBAC authorizer as a pure engine: rbac.authorization.k8s.io/v1 Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings (JSON as stored) compiled once into an
// immutable index, then queried for decisions, SelfSubjectRulesReview rules and the escalation
// check of role and binding writes.
//
// Semantics are kube's (plugin/pkg/auth/authorizer/rbac, pkg/apis/rbac/v1/evaluation_helpers.go,
// pkg/registry/rbac/validation/rule.go, the clusterrole aggregation controller):
//  - verbs and apiGroups match exactly or by `*`; resources by `*`, exactly (`pods`,
//    `pods/status`) or `*/<subresource>`. kube has no `pods/*` form: such a rule matches only a
//    request for the subresource literally named `*`.
//  - resourceNames: an empty list matches any name; otherwise the request's name must be listed,
//    so requests without a name (create, list, watch, deletecollection) never match it.
//  - nonResourceURLs: `*`, exact, or a trailing `*` as a prefix match (`/apis/*`).
//  - subjects: User by name, Group by membership, ServiceAccount as the user
//    `system:serviceaccount:<namespace>:<name>` (a RoleBinding's ServiceAccount subject without a
//    namespace means the binding's namespace; a ClusterRoleBinding's never matches).
//  - ClusterRoleBindings grant everywhere; RoleBindings (to a Role or a ClusterRole) only in their
//    own namespace. Users in group `system:masters` are always allowed, as kube's superuser group
//    authorizer (which runs before RBAC and gives no reason).
//  - an aggregated ClusterRole (aggregationRule.clusterRoleSelectors) has the rules of every other
//    ClusterRole one of its selectors matches, in name order without duplicates, at the fixpoint
//    the aggregation controller converges to (aggregated roles may aggregate aggregated roles).
//
// Thread-safety: an RbacPolicy is immutable after build(); any thread may query it concurrently
// without locks. The owner rebuilds a new policy when any RBAC object changes and swaps the
// shared_ptr. No I/O, no executor, nothing to cancel.
#pragma once

#include "apimachinery/user_info.hpp"

#include <boost/json/object.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::auth {

using apimachinery::UserInfo;

// Whether `user` is in system:masters, which kube lets do anything before RBAC is consulted (its
// superuser authorizer, escalation checks, priority and fairness exemptions).
bool is_superuser(const UserInfo& user);

// kube's authorizer.Attributes.
struct RequestAttributes {
  UserInfo user;
  bool resource_request = true;
  std::string verb;         // get list watch create update patch delete deletecollection; escalate
                            // bind impersonate ...; non-resource: get post put patch delete head
  std::string api_group;    // "" is the core group
  std::string api_version;  // the version asked for (RBAC ignores it; delegated reviews send it)
  std::string resource;     // "pods"
  std::string subresource;  // "" or "status", "log", "scale", "token", ...
  std::string namespace_;   // "" for cluster-scoped requests or all namespaces
  std::string name;         // "" for collections and create
  std::string path;         // non-resource requests: "/healthz", "/api", "/version", ...

  bool operator==(const RequestAttributes&) const = default;
};

struct Decision {
  bool allowed = false;
  // As kube words it: `RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "z"`,
  // `RBAC: allowed by RoleBinding "x/ns" of Role "y" to ServiceAccount "sa/ns"`. Empty on a denial
  // unless a binding that applies refers to a missing role (`RBAC: clusterrole.rbac.authorization
  // .k8s.io "y" not found`), and empty for system:masters.
  std::string reason;
};

// A SelfSubjectRulesReview's status: each rule with resources becomes a resourceRule
// ({verbs, apiGroups, resources, resourceNames}), each with nonResourceURLs a nonResourceRule
// ({verbs, nonResourceURLs}), in the order the bindings are visited. `evaluation_error` names the
// roles that bindings of the user refer to and that do not exist (kube's aggregated error text);
// kube's RBAC resolver never sets `incomplete` (other authorizers may).
struct SubjectRules {
  std::vector<boost::json::object> resource_rules;
  std::vector<boost::json::object> non_resource_rules;
  bool incomplete = false;
  std::string evaluation_error;
};

class RbacPolicy {
 public:
  // Objects as stored (JSON). Objects without a name (roles and role bindings: without a
  // namespace) are skipped; unreadable fields (a rule whose lists are not string arrays, a
  // subject without kind or name, an invalid aggregation selector) are ignored.
  static std::shared_ptr<const RbacPolicy> build(
      const std::vector<boost::json::object>& roles,
      const std::vector<boost::json::object>& cluster_roles,
      const std::vector<boost::json::object>& role_bindings,
      const std::vector<boost::json::object>& cluster_role_bindings);

  ~RbacPolicy();
  RbacPolicy(const RbacPolicy&) = delete;
  RbacPolicy& operator=(const RbacPolicy&) = delete;

  // Walks only the bindings that name the user, one of its groups or (for its service-account
  // user name) the service account: ClusterRoleBindings, then the RoleBindings of
  // `attributes.namespace_`.
  Decision authorize(const RequestAttributes& attributes) const;

  // The rules that apply to `user` in `ns` ("" : cluster-wide bindings only), each binding once:
  // ClusterRoleBindings first, then the namespace's RoleBindings, each in name order.
  SubjectRules rules_for(const UserInfo& user, std::string_view ns) const;

  // kube's ConfirmNoEscalation/Covers: `rules` (PolicyRule JSON) broken down into one verb, one
  // group, one resource, one resource name (or one verb and one URL) each, and those not covered
  // by a rule `user` holds in `ns` returned in that form. Empty: no escalation. Members of
  // system:masters hold everything. ns is the Role's or RoleBinding's namespace, "" for cluster
  // objects. The `escalate`/`bind` verb shortcuts are the caller's (authorize() them first).
  std::vector<boost::json::object> not_covered(const UserInfo& user, std::string_view ns,
                                               const std::vector<boost::json::object>& rules) const;

  // The rules a roleRef grants, as the authorizer sees them (an aggregated ClusterRole's resolved
  // rules, whatever is stored), as PolicyRule JSON; nullopt when no such role exists. `kind` is
  // "Role" (looked up in `ns`, the binding's namespace) or "ClusterRole".
  std::optional<std::vector<boost::json::object>> role_rules(std::string_view kind,
                                                             std::string_view ns,
                                                             std::string_view name) const;

 private:
  struct Index;  // the compiled form, defined in the .cpp
  explicit RbacPolicy(std::unique_ptr<Index> index);
  std::unique_ptr<Index> index_;
};

// The clusterrole-aggregation controller's work on `cluster_roles` (as stored): each ClusterRole
// with a valid aggregationRule whose stored rules are not the ones it aggregates (the rules of
// every other ClusterRole a selector matches, in name order, first occurrence kept, resolved as
// RbacPolicy resolves them), with the rules to write. Empty when all agree.
struct AggregatedClusterRole {
  std::string name;
  boost::json::array rules;
};
std::vector<AggregatedClusterRole> cluster_roles_to_aggregate(
    const std::vector<boost::json::object>& cluster_roles);

// kube's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), reduced to the
// resources kwatch serves and the everyday ones: ClusterRoles cluster-admin, admin, edit, view
// (aggregated, as kube ships them, from system:aggregate-to-admin/-edit/-view), system:discovery,
// system:basic-user, system:public-info-viewer, each labelled kubernetes.io/bootstrapping=
// rbac-defaults and annotated rbac.authorization.kubernetes.io/autoupdate=true.
std::vector<boost::json::object> bootstrap_cluster_roles();
// kube's bootstrap reconciliation of a stored bootstrap ClusterRole annotated
// rbac.authorization.kubernetes.io/autoupdate=true: its rules with those of `bootstrap` it lacks
// appended (a newer kwatch may grant more, e.g. selfsubjectreviews to system:basic-user);
// nullopt when nothing is missing or the role opted out of updates.
std::optional<boost::json::array> reconciled_bootstrap_rules(const boost::json::object& stored,
                                                              const boost::json::object& bootstrap);
// cluster-admin to group system:masters; system:discovery and system:basic-user to
// system:authenticated; system:public-info-viewer to system:authenticated and
// system:unauthenticated.
std::vector<boost::json::object> bootstrap_cluster_role_bindings();
// kube's bootstrap Roles and RoleBindings in kube-system that extension API servers rely on:
// Role extension-apiserver-authentication-reader (get, list, watch of the ConfigMap
// extension-apiserver-authentication, which kubectl create rolebinding grants to an extension
// server's account) and its binding system::extension-apiserver-authentication-reader to users
// system:kube-controller-manager and system:kube-scheduler.
std::vector<boost::json::object> bootstrap_kube_system_roles();
std::vector<boost::json::object> bootstrap_kube_system_role_bindings();

}  // namespace kwatch::auth
