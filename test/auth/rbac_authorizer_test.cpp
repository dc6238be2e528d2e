#include "auth/rbac_authorizer.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>
#include <vector>

namespace kwatch::auth {
namespace {

namespace json = boost::json;
using Objects = std::vector<json::object>;

json::object obj(std::string_view text) { return json::parse(text).as_object(); }

json::object cluster_role(std::string_view name, std::string_view rules,
                          std::string_view labels = "{}") {
  return obj(R"({"kind":"ClusterRole","metadata":{"name":")" + std::string(name) +
             R"(","labels":)" + std::string(labels) + R"(},"rules":)" + std::string(rules) + "}");
}

json::object role(std::string_view ns, std::string_view name, std::string_view rules) {
  return obj(R"({"kind":"Role","metadata":{"name":")" + std::string(name) + R"(","namespace":")" +
             std::string(ns) + R"("},"rules":)" + std::string(rules) + "}");
}

json::object cluster_binding(std::string_view name, std::string_view role_name,
                             std::string_view subjects) {
  return obj(
      R"({"kind":"ClusterRoleBinding","metadata":{"name":")" + std::string(name) +
      R"("},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":")" +
      std::string(role_name) + R"("},"subjects":)" + std::string(subjects) + "}");
}

json::object binding(std::string_view ns, std::string_view name, std::string_view role_kind,
                     std::string_view role_name, std::string_view subjects) {
  return obj(R"({"kind":"RoleBinding","metadata":{"name":")" + std::string(name) +
             R"(","namespace":")" + std::string(ns) +
             R"("},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":")" +
             std::string(role_kind) + R"(","name":")" + std::string(role_name) +
             R"("},"subjects":)" + std::string(subjects) + "}");
}

std::string user_subject(std::string_view name) {
  return R"([{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":")" + std::string(name) +
         R"("}])";
}

UserInfo alice() { return UserInfo{"alice", "1", {"system:authenticated"}}; }

RequestAttributes resource(UserInfo user, std::string verb, std::string group, std::string res,
                           std::string ns = "", std::string name = "", std::string sub = "") {
  RequestAttributes a;
  a.user = std::move(user);
  a.verb = std::move(verb);
  a.api_group = std::move(group);
  a.resource = std::move(res);
  a.namespace_ = std::move(ns);
  a.name = std::move(name);
  a.subresource = std::move(sub);
  return a;
}

RequestAttributes non_resource(UserInfo user, std::string verb, std::string path) {
  RequestAttributes a;
  a.user = std::move(user);
  a.resource_request = false;
  a.verb = std::move(verb);
  a.path = std::move(path);
  return a;
}

// alice holds `rules` cluster-wide through ClusterRole "r".
std::shared_ptr<const RbacPolicy> granting(std::string_view rules) {
  return RbacPolicy::build({}, {cluster_role("r", rules)}, {},
                           {cluster_binding("b", "r", user_subject("alice"))});
}

bool allowed(const std::shared_ptr<const RbacPolicy>& p, const RequestAttributes& a) {
  return p->authorize(a).allowed;
}

TEST(RbacAuthorizer, VerbsMatchExactlyOrByStar) {
  auto p = granting(R"([{"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}])");
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "x")));
  EXPECT_TRUE(allowed(p, resource(alice(), "list", "", "pods", "ns1")));
  EXPECT_FALSE(allowed(p, resource(alice(), "delete", "", "pods", "ns1", "x")));
  auto star = granting(R"([{"verbs":["*"],"apiGroups":[""],"resources":["pods"]}])");
  EXPECT_TRUE(allowed(star, resource(alice(), "delete", "", "pods", "ns1", "x")));
  EXPECT_TRUE(allowed(star, resource(alice(), "escalate", "", "pods")));
}

TEST(RbacAuthorizer, ApiGroupsMatchExactlyOrByStar) {
  auto p = granting(R"([{"verbs":["get"],"apiGroups":["apps"],"resources":["deployments"]}])");
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "apps", "deployments", "ns1", "d")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "deployments", "ns1", "d")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "extensions", "deployments", "ns1", "d")));
  auto star = granting(R"([{"verbs":["get"],"apiGroups":["*"],"resources":["deployments"]}])");
  EXPECT_TRUE(allowed(star, resource(alice(), "get", "extensions", "deployments", "ns1", "d")));
  EXPECT_TRUE(allowed(star, resource(alice(), "get", "", "deployments", "ns1", "d")));
}

TEST(RbacAuthorizer, ResourcesMatchByStarExactSubresourceAndStarSlashSubresource) {
  auto all = granting(R"([{"verbs":["get"],"apiGroups":[""],"resources":["*"]}])");
  EXPECT_TRUE(allowed(all, resource(alice(), "get", "", "secrets", "ns1", "s")));
  EXPECT_TRUE(allowed(all, resource(alice(), "get", "", "pods", "ns1", "p", "log")));

  auto pods = granting(R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}])");
  EXPECT_TRUE(allowed(pods, resource(alice(), "get", "", "pods", "ns1", "p")));
  EXPECT_FALSE(allowed(pods, resource(alice(), "get", "", "pods", "ns1", "p", "log")))
      << "a resource does not grant its subresources";

  auto status = granting(R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods/status"]}])");
  EXPECT_TRUE(allowed(status, resource(alice(), "get", "", "pods", "ns1", "p", "status")));
  EXPECT_FALSE(allowed(status, resource(alice(), "get", "", "pods", "ns1", "p")));
  EXPECT_FALSE(allowed(status, resource(alice(), "get", "", "pods", "ns1", "p", "log")));
  EXPECT_FALSE(allowed(status, resource(alice(), "get", "", "nodes", "", "n", "status")));

  auto any_scale = granting(R"([{"verbs":["get"],"apiGroups":["*"],"resources":["*/scale"]}])");
  EXPECT_TRUE(
      allowed(any_scale, resource(alice(), "get", "apps", "deployments", "ns1", "d", "scale")));
  EXPECT_TRUE(allowed(any_scale,
                      resource(alice(), "get", "", "replicationcontrollers", "ns1", "r", "scale")));
  EXPECT_FALSE(allowed(any_scale, resource(alice(), "get", "apps", "deployments", "ns1", "d")));
  EXPECT_FALSE(
      allowed(any_scale, resource(alice(), "get", "apps", "deployments", "ns1", "d", "status")));
}

TEST(RbacAuthorizer, AResourceSlashStarRuleIsLiteralAsInKube) {
  // kube's ResourceMatches knows `*`, exact and `*/sub`; `pods/*` is not a wildcard.
  auto p = granting(R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods/*"]}])");
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p", "log")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p")));
}

TEST(RbacAuthorizer, ResourceNamesLimitNamedRequestsAndNeverMatchUnnamedOnes) {
  auto p = granting(
      R"([{"verbs":["get","update","list","watch","create","deletecollection"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["settings","flags"]}])");
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "", "configmaps", "ns1", "settings")));
  EXPECT_TRUE(allowed(p, resource(alice(), "update", "", "configmaps", "ns1", "flags")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "configmaps", "ns1", "other")));
  for (const char* verb : {"list", "watch", "create", "deletecollection"}) {
    EXPECT_FALSE(allowed(p, resource(alice(), verb, "", "configmaps", "ns1"))) << verb;
  }
  auto any = granting(R"([{"verbs":["list"],"apiGroups":[""],"resources":["configmaps"]}])");
  EXPECT_TRUE(allowed(any, resource(alice(), "list", "", "configmaps", "ns1")))
      << "an empty resourceNames list matches any name";
}

TEST(RbacAuthorizer, NonResourceUrlsMatchExactlyOrByTrailingStarPrefix) {
  auto p = granting(
      R"([{"verbs":["get"],"nonResourceURLs":["/healthz","/apis/*","/logs*"]},{"verbs":["post"],"nonResourceURLs":["/hooks"]}])");
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/healthz")));
  EXPECT_FALSE(allowed(p, non_resource(alice(), "get", "/healthz/etcd")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/apis/apps/v1")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/apis/")));
  EXPECT_FALSE(allowed(p, non_resource(alice(), "get", "/apis")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/logsfoo")));
  EXPECT_FALSE(allowed(p, non_resource(alice(), "post", "/healthz")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "post", "/hooks")));
  auto all = granting(R"([{"verbs":["*"],"nonResourceURLs":["*"]}])");
  EXPECT_TRUE(allowed(all, non_resource(alice(), "put", "/anything/at/all")));
  // A non-resource rule never grants resources, and a resource rule never grants URLs.
  EXPECT_FALSE(allowed(all, resource(alice(), "get", "", "pods", "ns1", "p")));
  auto res = granting(R"([{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}])");
  EXPECT_FALSE(allowed(res, non_resource(alice(), "get", "/healthz")));
}

TEST(RbacAuthorizer, GroupAndUserSubjectsApplyOnlyToTheirMembers) {
  auto p = RbacPolicy::build(
      {}, {cluster_role("reader", R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}])")},
      {}, {cluster_binding("b", "reader", R"([{"kind":"Group","name":"devs"}])")});
  UserInfo dev{"bob", "", {"devs", "system:authenticated"}};
  EXPECT_TRUE(allowed(p, resource(dev, "get", "", "pods", "ns1", "p")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p")));
  UserInfo named_devs{"devs", "", {}};
  EXPECT_FALSE(allowed(p, resource(named_devs, "get", "", "pods", "ns1", "p")))
      << "a Group subject is not a user of that name";
}

TEST(RbacAuthorizer, ARoleBindingOfClusterRoleViewGrantsOnlyInItsNamespace) {
  auto p = RbacPolicy::build(
      {}, bootstrap_cluster_roles(),
      {binding("ns1", "alice-view", "ClusterRole", "view", user_subject("alice"))},
      bootstrap_cluster_role_bindings());
  EXPECT_TRUE(allowed(p, resource(alice(), "list", "", "pods", "ns1")));
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "apps", "deployments", "ns1", "d")));
  EXPECT_FALSE(allowed(p, resource(alice(), "list", "", "pods", "ns2")));
  EXPECT_FALSE(allowed(p, resource(alice(), "list", "", "pods", ""))) << "all namespaces";
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "secrets", "ns1", "s")))
      << "view does not read secrets";
  EXPECT_FALSE(allowed(p, resource(alice(), "create", "", "pods", "ns1")));
}

TEST(RbacAuthorizer, ARoleBindingOfARoleUsesTheRoleOfItsOwnNamespace) {
  const char* rules = R"([{"verbs":["get"],"apiGroups":[""],"resources":["configmaps"]}])";
  auto p = RbacPolicy::build({role("ns1", "cm-reader", rules)}, {},
                             {binding("ns1", "b", "Role", "cm-reader", user_subject("alice")),
                              binding("ns2", "b", "Role", "cm-reader", user_subject("alice"))},
                             {});
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "", "configmaps", "ns1", "c")));
  auto denied = p->authorize(resource(alice(), "get", "", "configmaps", "ns2", "c"));
  EXPECT_FALSE(denied.allowed) << "ns2 has no Role cm-reader";
  EXPECT_EQ(denied.reason, R"(RBAC: role.rbac.authorization.k8s.io "cm-reader" not found)");
}

TEST(RbacAuthorizer, AServiceAccountSubjectIsTheServiceAccountUser) {
  const char* rules = R"([{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}])";
  auto p =
      RbacPolicy::build({}, {cluster_role("secret-reader", rules)},
                        {binding("ns1", "explicit", "ClusterRole", "secret-reader",
                                 R"([{"kind":"ServiceAccount","name":"robot","namespace":"ns1"}])"),
                         binding("ns2", "implicit", "ClusterRole", "secret-reader",
                                 R"([{"kind":"ServiceAccount","name":"robot"}])")},
                        {cluster_binding("no-namespace", "secret-reader",
                                         R"([{"kind":"ServiceAccount","name":"ghost"}])")});
  UserInfo robot1{"system:serviceaccount:ns1:robot", "", {"system:serviceaccounts"}};
  UserInfo robot2{"system:serviceaccount:ns2:robot", "", {"system:serviceaccounts"}};
  EXPECT_TRUE(allowed(p, resource(robot1, "get", "", "secrets", "ns1", "s")));
  EXPECT_FALSE(allowed(p, resource(robot1, "get", "", "secrets", "ns2", "s")));
  EXPECT_TRUE(allowed(p, resource(robot2, "get", "", "secrets", "ns2", "s")))
      << "a subject without namespace is the binding's namespace";
  UserInfo named_robot{"robot", "", {}};
  EXPECT_FALSE(allowed(p, resource(named_robot, "get", "", "secrets", "ns1", "s")));
  UserInfo ghost{"system:serviceaccount::ghost", "", {}};
  EXPECT_FALSE(allowed(p, resource(ghost, "get", "", "secrets", "ns1", "s")))
      << "a ClusterRoleBinding's ServiceAccount without namespace matches nobody";
  EXPECT_EQ(
      p->authorize(resource(robot2, "get", "", "secrets", "ns2", "s")).reason,
      R"(RBAC: allowed by RoleBinding "implicit/ns2" of ClusterRole "secret-reader" to ServiceAccount "robot/ns2")");
}

TEST(RbacAuthorizer, GroupSystemMastersIsAlwaysAllowed) {
  auto p = RbacPolicy::build({}, {}, {}, {});
  UserInfo admin{"root", "", {"system:authenticated", "system:masters"}};
  auto d = p->authorize(resource(admin, "delete", "", "secrets", "kube-system", "x"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason, "");
  EXPECT_TRUE(allowed(p, non_resource(admin, "post", "/anything")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p")));
}

TEST(RbacAuthorizer, TheReasonNamesTheBindingTheRoleAndTheSubjectAsKubeDoes) {
  auto p = RbacPolicy::build(
      {role("ns1", "pod-reader", R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}])")},
      {cluster_role("node-reader",
                    R"([{"verbs":["get"],"apiGroups":[""],"resources":["nodes"]}])")},
      {binding("ns1", "read-pods", "Role", "pod-reader",
               R"([{"kind":"Group","name":"nobody"},{"kind":"User","name":"alice"}])")},
      {cluster_binding("read-nodes", "node-reader",
                       R"([{"kind":"Group","name":"system:authenticated"}])")});
  EXPECT_EQ(
      p->authorize(resource(alice(), "get", "", "nodes", "", "n1")).reason,
      R"(RBAC: allowed by ClusterRoleBinding "read-nodes" of ClusterRole "node-reader" to Group "system:authenticated")");
  EXPECT_EQ(p->authorize(resource(alice(), "get", "", "pods", "ns1", "p")).reason,
            R"(RBAC: allowed by RoleBinding "read-pods/ns1" of Role "pod-reader" to User "alice")");
  auto denied = p->authorize(resource(alice(), "delete", "", "pods", "ns1", "p"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.reason, "") << "kube's RBAC denies without a reason";
}

TEST(RbacAuthorizer, ABindingToAMissingClusterRoleIsReportedOnDenial) {
  auto p = RbacPolicy::build({}, {}, {},
                             {cluster_binding("b1", "gone", user_subject("alice")),
                              cluster_binding("b2", "gone", user_subject("alice")),
                              cluster_binding("b3", "also-gone", user_subject("alice"))});
  auto d = p->authorize(resource(alice(), "get", "", "pods", "ns1", "p"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(
      d.reason,
      R"(RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, clusterrole.rbac.authorization.k8s.io "also-gone" not found])");
  auto rules = p->rules_for(alice(), "ns1");
  EXPECT_FALSE(rules.evaluation_error.empty());
}

TEST(RbacAuthorizer, ViewAggregatesTheRulesOfLabelledClusterRoles) {
  auto roles = bootstrap_cluster_roles();
  std::vector<json::object> rbs = {
      binding("ns1", "alice-view", "ClusterRole", "view", user_subject("alice"))};
  auto before = RbacPolicy::build({}, roles, rbs, {});
  auto widgets = resource(alice(), "list", "example.com", "widgets", "ns1");
  EXPECT_FALSE(allowed(before, widgets));

  roles.push_back(cluster_role(
      "widget-viewer",
      R"([{"verbs":["get","list","watch"],"apiGroups":["example.com"],"resources":["widgets"]}])",
      R"({"rbac.authorization.k8s.io/aggregate-to-view":"true"})"));
  auto after = RbacPolicy::build({}, roles, rbs, {});
  EXPECT_TRUE(allowed(after, widgets)) << "a new labelled role extends view after a rebuild";
  EXPECT_TRUE(allowed(after, resource(alice(), "list", "", "pods", "ns1")));

  // view is aggregated into edit, edit into admin: the new rule reaches both.
  auto admin_policy = RbacPolicy::build(
      {}, roles, {binding("ns1", "alice-admin", "ClusterRole", "admin", user_subject("alice"))},
      {});
  EXPECT_TRUE(allowed(admin_policy, widgets));
  EXPECT_TRUE(allowed(admin_policy, resource(alice(), "create", "rbac.authorization.k8s.io",
                                             "rolebindings", "ns1")));
  EXPECT_TRUE(allowed(admin_policy, resource(alice(), "delete", "", "secrets", "ns1", "s")));
}

TEST(RbacAuthorizer, AggregationUsesMatchExpressionsAndReplacesTheStoredRules) {
  Objects roles = {
      obj(R"({"metadata":{"name":"combined"},
              "aggregationRule":{"clusterRoleSelectors":[{"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]}]}]},
              "rules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}]})"),
      cluster_role("part-a", R"([{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}])",
                   R"({"tier":"a"})"),
      cluster_role("part-c", R"([{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}])",
                   R"({"tier":"c"})"),
  };
  auto p =
      RbacPolicy::build({}, roles, {}, {cluster_binding("b", "combined", user_subject("alice"))});
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p")));
  EXPECT_FALSE(allowed(p, resource(alice(), "get", "", "secrets", "ns1", "s")));
  EXPECT_FALSE(allowed(p, resource(alice(), "delete", "", "pods", "ns1", "p")))
      << "stale stored rules of an aggregated role are replaced";
  auto rules = p->rules_for(alice(), "ns1");
  ASSERT_EQ(rules.resource_rules.size(), 1u);
  EXPECT_EQ(json::serialize(rules.resource_rules[0]),
            R"({"verbs":["get"],"apiGroups":[""],"resources":["pods"]})");
}

TEST(RbacAuthorizer, RulesForListsResourceAndNonResourceRulesOfTheNamespace) {
  auto p = RbacPolicy::build(
      {}, bootstrap_cluster_roles(),
      {binding("ns1", "alice-view", "ClusterRole", "view", user_subject("alice"))},
      bootstrap_cluster_role_bindings());
  auto in_ns1 = p->rules_for(alice(), "ns1");
  auto in_ns2 = p->rules_for(alice(), "ns2");
  EXPECT_GT(in_ns1.resource_rules.size(), in_ns2.resource_rules.size());
  EXPECT_EQ(in_ns1.non_resource_rules.size(), in_ns2.non_resource_rules.size());
  EXPECT_FALSE(in_ns2.non_resource_rules.empty()) << "system:discovery and public-info-viewer";
  EXPECT_EQ(in_ns2.resource_rules.size(), 2u) << "system:basic-user's self reviews (authorization, authentication)";
  EXPECT_EQ(in_ns1.evaluation_error, "");
  EXPECT_FALSE(in_ns1.incomplete);
}

TEST(RbacAuthorizer, AUserWithEditInANamespaceCannotGrantSecretsClusterWide) {
  auto p = RbacPolicy::build(
      {}, bootstrap_cluster_roles(),
      {binding("ns1", "alice-edit", "ClusterRole", "edit", user_subject("alice"))},
      bootstrap_cluster_role_bindings());
  Objects secrets_all = {obj(R"({"verbs":["*"],"apiGroups":[""],"resources":["secrets"]})")};
  auto missing = p->not_covered(alice(), "", secrets_all);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(json::serialize(missing[0]),
            R"({"verbs":["*"],"apiGroups":[""],"resources":["secrets"]})");
  EXPECT_FALSE(p->not_covered(alice(), "ns1", secrets_all).empty())
      << "edit holds the secret verbs one by one, not `*`";

  Objects secrets_rw = {obj(
      R"({"verbs":["get","list","watch","create","update","patch","delete"],"apiGroups":[""],"resources":["secrets"]})")};
  EXPECT_TRUE(p->not_covered(alice(), "ns1", secrets_rw).empty());
  EXPECT_EQ(p->not_covered(alice(), "", secrets_rw).size(), 7u) << "nothing cluster-wide";
  EXPECT_EQ(p->not_covered(alice(), "ns2", secrets_rw).size(), 7u);

  Objects within = {
      obj(R"({"verbs":["get","list"],"apiGroups":[""],"resources":["pods","pods/log"]})"),
      obj(R"({"verbs":["update"],"apiGroups":["apps"],"resources":["deployments/scale"],"resourceNames":["web"]})"),
      obj(R"({"verbs":["get"],"nonResourceURLs":["/apis/apps/v1"]})")};
  EXPECT_TRUE(p->not_covered(alice(), "ns1", within).empty());

  UserInfo root{"root", "", {"system:masters"}};
  EXPECT_TRUE(p->not_covered(root, "", secrets_all).empty());
}

TEST(RbacAuthorizer, CoveringFollowsKubesSubresourceAndResourceNameRules) {
  auto p = granting(R"([{"verbs":["get"],"apiGroups":["*"],"resources":["*/status"]},
                         {"verbs":["get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["a"]}])");
  EXPECT_TRUE(
      p->not_covered(
           alice(), "",
           {obj(R"({"verbs":["get"],"apiGroups":["apps"],"resources":["deployments/status"]})")})
          .empty());
  EXPECT_FALSE(
      p->not_covered(alice(), "",
                     {obj(R"({"verbs":["get"],"apiGroups":["apps"],"resources":["deployments"]})")})
          .empty());
  EXPECT_TRUE(
      p->not_covered(
           alice(), "",
           {obj(
               R"({"verbs":["get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["a"]})")})
          .empty());
  auto unnamed = p->not_covered(
      alice(), "",
      {obj(
          R"({"verbs":["get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["a","b"]})")});
  ASSERT_EQ(unnamed.size(), 1u);
  EXPECT_EQ(
      json::serialize(unnamed[0]),
      R"({"verbs":["get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["b"]})");
  EXPECT_FALSE(
      p->not_covered(alice(), "",
                     {obj(R"({"verbs":["get"],"apiGroups":[""],"resources":["configmaps"]})")})
          .empty())
      << "a named grant does not cover all names";
}

TEST(RbacAuthorizer, AnAuthenticatedUserMayDiscoverButNotListPodsUnderTheBootstrapPolicy) {
  auto p = RbacPolicy::build({}, bootstrap_cluster_roles(), {}, bootstrap_cluster_role_bindings());
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/api")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/api/v1")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/apis/apps/v1")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/version")));
  EXPECT_TRUE(allowed(p, non_resource(alice(), "get", "/healthz")));
  EXPECT_FALSE(allowed(p, non_resource(alice(), "get", "/metrics")));
  EXPECT_FALSE(allowed(p, resource(alice(), "list", "", "pods", "default")));
  EXPECT_TRUE(
      allowed(p, resource(alice(), "create", "authorization.k8s.io", "selfsubjectaccessreviews")));
  EXPECT_EQ(
      p->authorize(non_resource(alice(), "get", "/version")).reason,
      R"(RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated")");

  UserInfo anonymous{"system:anonymous", "", {"system:unauthenticated"}};
  EXPECT_TRUE(allowed(p, non_resource(anonymous, "get", "/version")));
  EXPECT_TRUE(allowed(p, non_resource(anonymous, "get", "/healthz")));
  EXPECT_FALSE(allowed(p, non_resource(anonymous, "get", "/api")));

  UserInfo admin{"admin", "", {"system:masters", "system:authenticated"}};
  EXPECT_TRUE(allowed(p, resource(admin, "list", "", "pods", "default")));
  EXPECT_FALSE(p->rules_for(admin, "default").resource_rules.empty()) << "via cluster-admin";
}

TEST(RbacAuthorizer, UnreadableObjectsAreSkipped) {
  Objects bad_roles = {
      obj(R"({"metadata":{}})"), obj(R"({"rules":"x"})"),
      obj(R"({"metadata":{"name":"ok"},"rules":[{"verbs":"get"},7,{"verbs":["get",3],"apiGroups":[""],"resources":["pods"]}]})")};
  Objects bad_bindings = {
      obj(R"({"metadata":{"name":"no-ns"},"roleRef":{"kind":"Role","name":"ok"}})")};
  auto p = RbacPolicy::build(
      {}, bad_roles, bad_bindings,
      {cluster_binding("b", "ok", R"([{"kind":"User"},5,{"kind":"User","name":"alice"}])")});
  EXPECT_TRUE(allowed(p, resource(alice(), "get", "", "pods", "ns1", "p")));
  EXPECT_FALSE(allowed(p, resource(alice(), "list", "", "pods", "ns1")));
}

}  // namespace
}  // namespace kwatch::auth
