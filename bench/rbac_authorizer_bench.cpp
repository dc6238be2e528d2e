// RBAC decision cost: in-process Google Benchmark (not a ctest test).
//
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKWATCH_BUILD_BENCH=ON
//   cmake --build build-bench --target rbac_authorizer_bench -j 2
//   build-bench/bench/rbac_authorizer_bench
//
// The policy: kube's bootstrap ClusterRoles and ClusterRoleBindings (aggregated admin/edit/view)
// plus 100 namespaces with one Role each and 10 RoleBindings each (1,000 bindings): 450 users,
// each bound in two namespaces (as User subjects, to view, edit or the namespace's Role), and 50
// team groups, each bound to view in two namespaces. Users are in `system:authenticated` and one
// team, as an authenticator would report them. Objects are built once, outside the timed loops.
//
// Decisions measured: allowed by the user's own RoleBinding (view/edit walk), allowed through a
// group, allowed non-resource (/version via system:discovery), denied in a namespace where the
// user holds nothing, and denied where the user holds edit (every rule of its bindings walked).
// `Build` is the cost of rebuilding the index from the stored objects after any RBAC change.
#include <benchmark/benchmark.h>

#include <boost/json/parse.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "auth/rbac_authorizer.hpp"

namespace {

namespace json = boost::json;
using kwatch::auth::RbacPolicy;
using kwatch::auth::RequestAttributes;
using kwatch::auth::UserInfo;

constexpr int kNamespaces = 100;
constexpr int kBindingsPerNamespace = 10;
constexpr int kUsers = 450;
constexpr int kTeams = 50;

struct Objects {
  std::vector<json::object> roles, cluster_roles, role_bindings, cluster_role_bindings;
};

std::string ns_name(int i) { return "ns-" + std::to_string(i); }

json::object role_binding(const std::string& ns, const std::string& name,
                          const std::string& role_kind, const std::string& role_name,
                          const std::string& subject_kind, const std::string& subject) {
  return json::parse(R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
      "metadata":{"name":")" +
                     name + R"(","namespace":")" + ns + R"("},
      "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":")" +
                     role_kind + R"(","name":")" + role_name + R"("},
      "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":")" +
                     subject_kind + R"(","name":")" + subject + R"("}]})")
      .as_object();
}

const Objects& objects() {
  static const Objects o = [] {
    Objects o;
    o.cluster_roles = kwatch::auth::bootstrap_cluster_roles();
    o.cluster_role_bindings = kwatch::auth::bootstrap_cluster_role_bindings();
    for (int n = 0; n < kNamespaces; ++n) {
      o.roles.push_back(json::parse(R"({"kind":"Role","metadata":{"name":"app","namespace":")" +
                                    ns_name(n) + R"("},"rules":[
          {"verbs":["get","list","watch"],"apiGroups":["","apps"],"resources":["configmaps","deployments"]},
          {"verbs":["get","update"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["settings"]}]})")
                            .as_object());
    }
    // User u is bound in namespaces u % 100 and (u + 50) % 100 (900 bindings, 9 per namespace)
    // to view, edit or the namespace's Role; each namespace n also binds view to the group
    // team-((n + 25) % 50), whose members are bound elsewhere.
    const char* roles[] = {"view", "edit", "app"};
    int per_ns[kNamespaces] = {};
    for (int u = 0; u < kUsers; ++u) {
      for (int k = 0; k < 2; ++k) {
        int n = (u + 50 * k) % kNamespaces;
        std::string role = roles[(u + k) % 3];
        std::string kind = role == "app" ? "Role" : "ClusterRole";
        o.role_bindings.push_back(role_binding(ns_name(n), "rb-" + std::to_string(per_ns[n]++),
                                               kind, role, "User", "user-" + std::to_string(u)));
      }
    }
    for (int n = 0; n < kNamespaces; ++n) {
      o.role_bindings.push_back(role_binding(ns_name(n), "team-view", "ClusterRole", "view",
                                             "Group", "team-" + std::to_string((n + 25) % kTeams)));
    }
    if (o.role_bindings.size() != kNamespaces * kBindingsPerNamespace) {
      throw std::logic_error("unexpected binding count");
    }
    return o;
  }();
  return o;
}

std::shared_ptr<const RbacPolicy> policy() {
  static const auto p = [] {
    const auto& o = objects();
    return RbacPolicy::build(o.roles, o.cluster_roles, o.role_bindings, o.cluster_role_bindings);
  }();
  return p;
}

UserInfo user(int u) {
  return UserInfo{"user-" + std::to_string(u),
                  "",
                  {"system:authenticated", "team-" + std::to_string(u % kTeams)}};
}

RequestAttributes request(UserInfo who, std::string verb, std::string group, std::string resource,
                          std::string ns, std::string name = "") {
  RequestAttributes a;
  a.user = std::move(who);
  a.verb = std::move(verb);
  a.api_group = std::move(group);
  a.resource = std::move(resource);
  a.namespace_ = std::move(ns);
  a.name = std::move(name);
  return a;
}

void run(benchmark::State& state, const RequestAttributes& a, bool expect) {
  auto p = policy();
  if (p->authorize(a).allowed != expect) {
    state.SkipWithError("unexpected decision");
    return;
  }
  for (auto _ : state) {
    auto d = p->authorize(a);
    benchmark::DoNotOptimize(d);
  }
}

// user-7 is bound in ns-7 to edit ((7 + 0) % 3 == 1) and in ns-57 to app.
void BM_AllowedByUserRoleBinding(benchmark::State& state) {
  run(state, request(user(7), "update", "apps", "deployments", ns_name(7), "web"), true);
}
BENCHMARK(BM_AllowedByUserRoleBinding);

void BM_AllowedByNamespaceRole(benchmark::State& state) {
  run(state, request(user(7), "update", "", "configmaps", ns_name(57), "settings"), true);
}
BENCHMARK(BM_AllowedByNamespaceRole);

// ns-3 binds view to team-28; user-28 itself is bound in ns-28 and ns-78 only.
void BM_AllowedThroughGroup(benchmark::State& state) {
  run(state, request(user(28), "list", "", "pods", ns_name(3)), true);
}
BENCHMARK(BM_AllowedThroughGroup);

void BM_AllowedNonResource(benchmark::State& state) {
  RequestAttributes a;
  a.user = user(7);
  a.resource_request = false;
  a.verb = "get";
  a.path = "/version";
  run(state, a, true);
}
BENCHMARK(BM_AllowedNonResource);

void BM_DeniedNoBindingInNamespace(benchmark::State& state) {
  run(state, request(user(7), "get", "", "secrets", ns_name(20), "s"), false);
}
BENCHMARK(BM_DeniedNoBindingInNamespace);

// Every rule of the bootstrap cluster bindings and of user-7's edit binding in ns-7 is tried.
void BM_DeniedAfterWalkingEdit(benchmark::State& state) {
  run(state, request(user(7), "delete", "", "nodes", ns_name(7), "n1"), false);
}
BENCHMARK(BM_DeniedAfterWalkingEdit);

void BM_AllowedConcurrently(benchmark::State& state) {
  run(state, request(user(7), "update", "apps", "deployments", ns_name(7), "web"), true);
}
BENCHMARK(BM_AllowedConcurrently)->Threads(2);

void BM_RulesFor(benchmark::State& state) {
  auto p = policy();
  for (auto _ : state) {
    auto r = p->rules_for(user(7), ns_name(7));
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RulesFor);

void BM_Build(benchmark::State& state) {
  const auto& o = objects();
  for (auto _ : state) {
    auto p = RbacPolicy::build(o.roles, o.cluster_roles, o.role_bindings, o.cluster_role_bindings);
    benchmark::DoNotOptimize(p);
  }
  state.counters["bindings"] =
      static_cast<double>(o.role_bindings.size() + o.cluster_role_bindings.size());
}
BENCHMARK(BM_Build)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
