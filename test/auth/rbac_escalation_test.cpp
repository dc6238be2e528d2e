#include "auth/rbac_escalation.hpp"

#include "auth/escalation_guard.hpp"
#include "kinds/scheme.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <string>
#include <vector>

namespace kwatch::auth {

using base::Errc;

namespace {

namespace json = boost::json;
using Objects = std::vector<json::object>;

json::object obj(const std::string& text) { return json::parse(text).as_object(); }

std::string user_subject(const std::string& name) {
  return R"([{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":")" + name + R"("}])";
}

json::object role(const std::string& ns, const std::string& name, const std::string& rules) {
  return obj(R"({"kind":"Role","metadata":{"name":")" + name + R"(","namespace":")" + ns +
             R"("},"rules":)" + rules + "}");
}

json::object binding(const std::string& ns, const std::string& name, const std::string& kind,
                     const std::string& role_name, const std::string& user) {
  return obj(R"({"kind":"RoleBinding","metadata":{"name":")" + name + R"(","namespace":")" + ns +
             R"("},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":")" + kind +
             R"(","name":")" + role_name + R"("},"subjects":)" + user_subject(user) + "}");
}

json::object cluster_binding(const std::string& name, const std::string& role_name,
                             const std::string& user) {
  return obj(R"({"kind":"ClusterRoleBinding","metadata":{"name":")" + name +
             R"("},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":")" +
             role_name + R"("},"subjects":)" + user_subject(user) + "}");
}

UserInfo bob() { return UserInfo{"bob", "", {"system:authenticated"}}; }

const std::string kCreateRoleBindings =
    R"([{"verbs":["create"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings"]}])";
const std::string kCreateClusterRoles =
    R"([{"verbs":["create","update","patch"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles","clusterrolebindings"]}])";

// The bootstrap policy plus what the scenario grants.
std::shared_ptr<const RbacPolicy> policy(Objects roles, Objects cluster_roles, Objects bindings,
                                         Objects cluster_bindings) {
  for (auto& r : bootstrap_cluster_roles()) cluster_roles.push_back(std::move(r));
  for (auto& b : bootstrap_cluster_role_bindings()) cluster_bindings.push_back(std::move(b));
  return RbacPolicy::build(roles, cluster_roles, bindings, cluster_bindings);
}

TEST(RbacAdmission, BindingAnAggregatedRoleIsCheckedAgainstTheRulesItAggregates) {
  // admin is stored with `rules: []`: the check must see what it grants, not what is stored.
  auto p = policy({role("team", "rb-creator", kCreateRoleBindings)}, {},
                  {binding("team", "bob-rb", "Role", "rb-creator", "bob")}, {});
  RbacAdmission admission(p, bob(), "rolebindings", "team", "");
  for (const char* granted : {"admin", "edit", "view"}) {
    auto e = admission.admit(nullptr, binding("team", "bob-x", "ClusterRole", granted, "bob"));
    ASSERT_TRUE(e) << granted;
    EXPECT_EQ(e->code, Errc::forbidden);
    EXPECT_NE(e->message.find("rolebindings.rbac.authorization.k8s.io \"bob-x\" is forbidden: "
                              "user \"bob\" (groups=[\"system:authenticated\"]) is attempting to "
                              "grant RBAC permissions not currently held:\n{APIGroups:"),
              std::string::npos)
        << e->message;
  }
}

TEST(RbacAdmission, ClusterRoleBindingOfEditIsForbiddenToWhoHoldsOnlyCreate) {
  auto p = policy({},
                  {obj(R"({"kind":"ClusterRole","metadata":{"name":"crb-creator"},"rules":[{"verbs":["create"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterrolebindings"]}]})")},
                  {}, {cluster_binding("bob-crb", "crb-creator", "bob")});
  RbacAdmission admission(p, bob(), "clusterrolebindings", "", "");
  auto e = admission.admit(nullptr, cluster_binding("bob-edit", "edit", "bob"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Errc::forbidden);
  EXPECT_NE(e->message.find("Resources:[\"secrets\"]"), std::string::npos) << e->message;
}

TEST(RbacAdmission, BindingWhatTheWriterHoldsIsAllowed) {
  auto p = policy({role("team", "rb-creator", kCreateRoleBindings)}, {},
                  {binding("team", "bob-rb", "Role", "rb-creator", "bob"),
                   binding("team", "bob-admin", "ClusterRole", "admin", "bob")},
                  {});
  RbacAdmission admission(p, bob(), "rolebindings", "team", "");
  EXPECT_FALSE(admission.admit(nullptr, binding("team", "carol-view", "ClusterRole", "view", "carol")));
  EXPECT_FALSE(admission.admit(nullptr, binding("team", "carol-edit", "ClusterRole", "edit", "carol")));
}

TEST(RbacAdmission, BindingARoleThatDoesNotExistIsNotFound) {
  auto p = policy({role("team", "rb-creator", kCreateRoleBindings)}, {},
                  {binding("team", "bob-rb", "Role", "rb-creator", "bob")}, {});
  RbacAdmission admission(p, bob(), "rolebindings", "team", "");
  auto e = admission.admit(nullptr, binding("team", "later", "Role", "not-yet", "bob"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Errc::not_found);
  EXPECT_EQ(e->message, "roles.rbac.authorization.k8s.io \"not-yet\" not found");
  e = admission.admit(nullptr, binding("team", "later", "ClusterRole", "not-yet", "bob"));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "clusterroles.rbac.authorization.k8s.io \"not-yet\" not found");
}

TEST(RbacAdmission, BindOnTheRoleAllowsBindingItEvenBeforeItExists) {
  auto p = policy(
      {role("team", "binder",
            R"([{"verbs":["create"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings"]},)"
            R"({"verbs":["bind"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"],"resourceNames":["not-yet"]}])")},
      {}, {binding("team", "bob-binder", "Role", "binder", "bob")}, {});
  RbacAdmission admission(p, bob(), "rolebindings", "team", "");
  EXPECT_FALSE(admission.admit(nullptr, binding("team", "later", "Role", "not-yet", "bob")));
}

TEST(RbacAdmission, AnAggregationRuleNeedsEveryPermission) {
  auto p = policy({}, {obj(R"({"kind":"ClusterRole","metadata":{"name":"cr-creator"},"rules":)" +
                           kCreateClusterRoles + "}")},
                  {}, {cluster_binding("bob-cr", "cr-creator", "bob")});
  RbacAdmission admission(p, bob(), "clusterroles", "", "");
  auto gatherer = obj(
      R"({"kind":"ClusterRole","metadata":{"name":"everything"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"kubernetes.io/bootstrapping":"rbac-defaults"}}]},"rules":[]})");
  auto e = admission.admit(nullptr, gatherer);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, Errc::forbidden);
  EXPECT_EQ(e->message,
            "clusterroles.rbac.authorization.k8s.io \"everything\" is forbidden: must have "
            "cluster-admin privileges to use the aggregationRule");
  // Removing it from a role that has one is the same change of the rule.
  auto plain = obj(R"({"kind":"ClusterRole","metadata":{"name":"everything"},"rules":[]})");
  EXPECT_TRUE(admission.admit(&gatherer, plain));
  // Without an aggregationRule, no rules are granted: allowed.
  EXPECT_FALSE(admission.admit(nullptr, plain));
}

TEST(RbacAdmission, EscalateOnTheRoleAllowsAnyRulesAndAnAggregationRule) {
  auto p = policy(
      {}, {obj(R"({"kind":"ClusterRole","metadata":{"name":"escalator"},"rules":[{"verbs":["create","escalate"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["clusterroles"]}]})")},
      {}, {cluster_binding("bob-esc", "escalator", "bob")});
  RbacAdmission admission(p, bob(), "clusterroles", "", "");
  EXPECT_FALSE(admission.admit(nullptr, obj(
      R"({"kind":"ClusterRole","metadata":{"name":"everything"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"a":"b"}}]},"rules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}]})")));
}

TEST(RbacAdmission, ARoleMayHoldOnlyWhatTheWriterHolds) {
  auto p = policy({role("team", "role-writer",
                        R"([{"verbs":["create","update"],"apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"]},)"
                        R"({"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}])")},
                  {}, {binding("team", "bob-rw", "Role", "role-writer", "bob")}, {});
  RbacAdmission admission(p, bob(), "roles", "team", "");
  EXPECT_FALSE(admission.admit(nullptr, role("team", "reader", R"([{"verbs":["get"],"apiGroups":[""],"resources":["configmaps"]}])")));
  auto e = admission.admit(nullptr, role("team", "writer", R"([{"verbs":["get","delete"],"apiGroups":[""],"resources":["configmaps","secrets"]}])"));
  ASSERT_TRUE(e);
  // kube's compact form: one line per group, resource and name, its verbs together, sorted.
  EXPECT_EQ(e->message,
            "roles.rbac.authorization.k8s.io \"writer\" is forbidden: user \"bob\" "
            "(groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not "
            "currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n"
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}");
  // An update is judged on everything the role will hold, not only what changed.
  auto reader = role("team", "reader", R"([{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}])");
  auto labelled = reader;
  labelled["metadata"].as_object()["labels"] = json::object{{"a", "b"}};
  EXPECT_TRUE(admission.admit(&reader, labelled));
}

TEST(RbacAdmission, ChangingOnlyOwnerReferencesAndFinalizersIsNotJudged) {
  auto p = policy({}, {}, {}, {});
  RbacAdmission admission(p, bob(), "roles", "team", "r");
  auto old = role("team", "r", R"([{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}])");
  auto next = old;
  next["metadata"].as_object()["finalizers"] = json::array{"example.com/keep"};
  EXPECT_FALSE(admission.admit(&old, next));
  next["metadata"].as_object()["labels"] = json::object{{"a", "b"}};
  EXPECT_TRUE(admission.admit(&old, next));
}

TEST(RbacAdmission, SystemMastersMayWriteAnything) {
  auto p = policy({}, {}, {}, {});
  RbacAdmission admission(p, UserInfo{"root", "", {"system:masters"}}, "rolebindings", "team", "");
  EXPECT_FALSE(admission.admit(nullptr, binding("team", "x", "Role", "missing", "bob")));
}

TEST(ClusterRoleAggregation, WritesTheRulesTheSelectorsGatherAndNothingWhenStored) {
  auto roles = bootstrap_cluster_roles();
  auto changes = cluster_roles_to_aggregate(roles);
  std::vector<std::string> names;
  for (const auto& c : changes) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"admin", "edit", "view"}));
  // Once written, nothing more to do; the policy grants what is stored.
  for (auto& r : roles) {
    for (auto& c : changes) {
      if (r["metadata"].as_object()["name"].as_string() == c.name) r["rules"] = c.rules;
    }
  }
  EXPECT_TRUE(cluster_roles_to_aggregate(roles).empty());
  auto p = RbacPolicy::build({}, roles, {}, {});
  auto view = p->role_rules("ClusterRole", "", "view");
  ASSERT_TRUE(view);
  for (const auto& c : changes) {
    if (c.name == "view") {
      EXPECT_EQ(view->size(), c.rules.size());
    }
  }
  // `edit` gathers view's rules too (view is labelled aggregate-to-edit).
  auto edit = p->role_rules("ClusterRole", "", "edit");
  ASSERT_TRUE(edit);
  EXPECT_GT(edit->size(), view->size());
}

}  // namespace
// The guard judges the writes of roles and bindings by users outside system:masters; kwatch's own
// writes (no user) and deletes pass without a policy.
TEST(EscalationGuard, JudgesRbacWritesOfOrdinaryUsersOnly) {
  auto scheme = kinds::Scheme::builtin();
  auto bindings = scheme->find("rbac.authorization.k8s.io", "v1", "rolebindings");
  auto configmaps = scheme->find("", "v1", "configmaps");
  const EscalationGuard guard(nullptr);
  UserInfo bob{"bob", "", {"system:authenticated"}};
  UserInfo admin{"admin", "", {"system:masters"}};
  const std::string ns = "team";
  const std::string name = "b";
  const std::string none;
  auto judged = [&](const kinds::ResourceInfo& info, registry::AdmissionOperation op,
                    const UserInfo* user) {
    const registry::AdmissionAttributes a{info, ns, name, none, op, false, user, nullptr};
    return guard.handles(a);
  };
  using Op = registry::AdmissionOperation;
  EXPECT_TRUE(judged(*bindings, Op::create, &bob));
  EXPECT_TRUE(judged(*bindings, Op::update, &bob));
  EXPECT_FALSE(judged(*bindings, Op::remove, &bob));
  EXPECT_FALSE(judged(*bindings, Op::create, &admin));
  EXPECT_FALSE(judged(*bindings, Op::create, nullptr));
  EXPECT_FALSE(judged(*configmaps, Op::create, &bob));
}

}  // namespace kwatch::auth
