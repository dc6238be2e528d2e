// What a ValidatingAdmissionPolicy costs a write: in-process Google Benchmark (not a ctest test).
//
//   cmake --build build --target admission_policy_bench -j 2
//   build/bench/admission_policy_bench
//
// One policy with one simple validation (`object.spec.replicas <= 5`) on apps/v1 deployments,
// bound with Deny, in force through the plugin's load() (what its cache followers call). Each
// benchmark asks the admission stage what a write asks: whether the plugin handles the write,
// then, when it does, its judgement.
//   NoPolicies         the plugin with nothing in force (every server's default)
//   OtherResource      a ConfigMap write: the policy is about deployments (`handles` says no)
//   ObjectNotSelected  a Deployment write the binding's objectSelector does not select
//   Evaluated          a Deployment write the policy judges and admits
//   Denied             a Deployment write the policy refuses (the Status built)
//   TenPolicies        Evaluated with ten such policies in force, each judging the write
#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include <string>
#include <vector>

#include "admission/validating_policy.hpp"
#include "kinds/scheme.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using kwatch::admission::ValidatingPolicyPlugin;
using kwatch::registry::AdmissionAttributes;
using kwatch::registry::AdmissionOperation;

json::object policy(const std::string& name) {
  return json::parse(R"({"apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": ")" + name + R"(", "resourceVersion": "1", "generation": 1},
    "spec": {"failurePolicy": "Fail",
      "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"], "scope": "*"}]},
      "validations": [{"expression": "object.spec.replicas <= 5"}]}})")
      .as_object();
}

json::object binding(const std::string& name, const std::string& policy_name,
                     bool object_selector) {
  std::string match;
  if (object_selector) {
    match = R"(, "matchResources": {"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {"matchLabels": {"judged": "yes"}}})";
  }
  return json::parse(R"({"apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": ")" + name + R"("},
    "spec": {"policyName": ")" + policy_name + R"(", "validationActions": ["Deny"])" + match +
                     "}}")
      .as_object();
}

json::object deployment(int replicas) {
  return json::parse(R"({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
    "spec": {"replicas": )" + std::to_string(replicas) + R"(,
      "selector": {"matchLabels": {"app": "web"}},
      "template": {"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
          "ports": [{"containerPort": 80}]}]}}}})")
      .as_object();
}

const json::object kConfigMap = json::parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "default"}, "data": {"a": "b"}})")
                                    .as_object();

std::shared_ptr<kwatch::kinds::Scheme> scheme() {
  static const auto s = kwatch::kinds::Scheme::builtin();
  return s;
}

// Runs the benchmark's loop as the admission stage does: `handles`, then `validate`.
void judge(benchmark::State& state, const std::shared_ptr<ValidatingPolicyPlugin>& plugin,
           const std::string& resource, const json::object& object, bool expect_refusal) {
  const auto s = scheme();
  auto info = resource == "deployments" ? s->find("apps", "v1", "deployments")
                                        : s->find("", "v1", "configmaps");
  const std::string ns = "default", name = "web", no_subresource;
  const kwatch::apimachinery::UserInfo user{"alice", "", {"system:authenticated"}};
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> annotations;
  AdmissionAttributes a{*info, ns, name, no_subresource, AdmissionOperation::create, false,
                        &user, nullptr, &warnings, &annotations};
  asio::io_context ioc;
  std::size_t refused = 0;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        for (auto _ : state) {
          if (plugin->handles(a)) {
            auto e = co_await plugin->validate(a, &object);
            if (e) ++refused;
            benchmark::DoNotOptimize(e);
          }
        }
      },
      asio::detached);
  ioc.run();
  if ((refused > 0) != expect_refusal) state.SkipWithError("unexpected judgement");
}

std::shared_ptr<ValidatingPolicyPlugin> plugin_with(int policies, bool object_selector) {
  auto plugin = std::make_shared<ValidatingPolicyPlugin>(scheme(), nullptr);
  std::vector<json::object> p, b;
  for (int i = 0; i < policies; ++i) {
    const std::string name = "replicas-" + std::to_string(i) + ".example.com";
    p.push_back(policy(name));
    b.push_back(binding("b-" + std::to_string(i), name, object_selector));
  }
  plugin->load(p, b);
  return plugin;
}

void NoPolicies(benchmark::State& state) {
  judge(state, plugin_with(0, false), "deployments", deployment(3), false);
}
void OtherResource(benchmark::State& state) {
  judge(state, plugin_with(1, false), "configmaps", kConfigMap, false);
}
void ObjectNotSelected(benchmark::State& state) {
  judge(state, plugin_with(1, true), "deployments", deployment(3), false);
}
void Evaluated(benchmark::State& state) {
  judge(state, plugin_with(1, false), "deployments", deployment(3), false);
}
void Denied(benchmark::State& state) {
  judge(state, plugin_with(1, false), "deployments", deployment(9), true);
}
void TenPolicies(benchmark::State& state) {
  judge(state, plugin_with(10, false), "deployments", deployment(3), false);
}

BENCHMARK(NoPolicies);
BENCHMARK(OtherResource);
BENCHMARK(ObjectNotSelected);
BENCHMARK(Evaluated);
BENCHMARK(Denied);
BENCHMARK(TenPolicies);

}  // namespace

BENCHMARK_MAIN();
