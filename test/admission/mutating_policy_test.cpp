// The MutatingAdmissionPolicy plugin's changes to writes, with policies put in force by load().
#include "admission/mutating_policy.hpp"

#include "policy_test_support.hpp"

#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

namespace kwatch::admission {
namespace {

using testing::parse;
using testing::run;
using testing::scheme;
using testing::Write;

boost::json::object policy(std::string_view name, std::string_view mutations,
                           std::string_view extra = "", std::string_view failure = "Fail") {
  return parse(std::string(R"({"metadata": {"name": ")") + std::string(name) +
               R"(", "resourceVersion": "1"}, "spec": {"failurePolicy": ")" +
               std::string(failure) + R"(", "reinvocationPolicy": "Never",
      "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {}, "resourceRules": [{"apiGroups": ["", "apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["configmaps", "deployments"],
        "scope": "*"}]}, "mutations": )" +
               std::string(mutations) + std::string(extra) + "}}");
}

boost::json::object binding(std::string_view name, std::string_view policy_name) {
  return parse(std::string(R"({"metadata": {"name": ")") + std::string(name) +
               R"("}, "spec": {"policyName": ")" + std::string(policy_name) + R"("}})");
}

boost::json::object config_map() {
  return parse(R"({"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "default", "labels": {"app": "web"}},
    "data": {"a": "b"}})");
}

Write config_map_write() {
  Write w;
  w.info = scheme()->find("", "v1", "configmaps");
  w.ns = "default";
  w.name = "settings";
  return w;
}

std::optional<apimachinery::ApiError> mutate(MutatingPolicyPlugin& plugin, Write& w,
                                             boost::json::object& object) {
  auto a = w.attributes();
  if (!plugin.handles(a)) return std::nullopt;
  return run(plugin.admit(a, &object));
}

TEST(MutatingPolicy, AnApplyConfigurationMergesIntoTheObject) {
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("label", R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{metadata: Object.metadata{labels: {'env': 'prod'}}, data: {'c': object.data.a + '!'}}"}}])")},
              {binding("b", "label")});
  auto w = config_map_write();
  auto cm = config_map();
  EXPECT_FALSE(mutate(plugin, w, cm));
  EXPECT_EQ(boost::json::serialize(cm.at("metadata").at("labels")), R"({"app":"web","env":"prod"})");
  EXPECT_EQ(boost::json::serialize(cm.at("data")), R"({"a":"b","c":"b!"})");
}

TEST(MutatingPolicy, AJsonPatchIsApplied) {
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("annotate", R"([{"patchType": "JSONPatch", "jsonPatch": {"expression":
      "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/owner'), value: request.userInfo.username}]"}}])")},
              {binding("b", "annotate")});
  auto w = config_map_write();
  auto cm = config_map();
  EXPECT_FALSE(mutate(plugin, w, cm));
  EXPECT_EQ(boost::json::serialize(cm.at("metadata").at("annotations")),
            R"({"example.com/owner":"alice"})");
}

TEST(MutatingPolicy, AFailedTestLeavesTheObjectAlone) {
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("guarded", R"([{"patchType": "JSONPatch", "jsonPatch": {"expression":
      "[JSONPatch{op: 'test', path: '/data/a', value: 'zzz'}, JSONPatch{op: 'replace', path: '/data/a', value: 'changed'}]"}}])")},
              {binding("b", "guarded")});
  auto w = config_map_write();
  auto cm = config_map();
  EXPECT_FALSE(mutate(plugin, w, cm));
  EXPECT_EQ(cm.at("data").at("a"), "b");
}

TEST(MutatingPolicy, AtomicListsMayNotBeSetByAnApplyConfiguration) {
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("atomic", R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'web', args: ['-v']}]}}}}"}}])")},
              {binding("b", "atomic")});
  Write w;
  w.info = scheme()->find("apps", "v1", "deployments");
  w.ns = "default";
  w.name = "web";
  auto d = parse(R"({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"}, "spec": {"template": {"spec":
    {"containers": [{"name": "web", "image": "nginx"}]}}}})");
  auto e = mutate(plugin, w, d);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, base::Errc::forbidden);
  EXPECT_EQ(e->message, "policy 'atomic' with binding 'b' denied request: error applying patch: "
                        "invalid ApplyConfiguration: may not mutate atomic arrays, maps or "
                        "structs: .spec.template.spec.containers[0].args");
}

TEST(MutatingPolicy, ErrorsRefuseUnderFailAndPassUnderIgnore) {
  const std::string broken = R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{data: {'x': object.data.missing}}"}}])";
  MutatingPolicyPlugin fail(scheme(), nullptr);
  fail.load({policy("broken", broken)}, {binding("b", "broken")});
  auto w = config_map_write();
  auto cm = config_map();
  auto e = mutate(fail, w, cm);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, base::Errc::forbidden);
  EXPECT_EQ(e->reason, "Invalid");  // kube's: the code stays 403
  EXPECT_EQ(e->message, "policy 'broken' with binding 'b' denied request: expression "
                        "'Object{data: {'x': object.data.missing}}' resulted in error: no such "
                        "key: missing");
  MutatingPolicyPlugin ignore(scheme(), nullptr);
  ignore.load({policy("broken", broken, "", "Ignore")}, {binding("b", "broken")});
  EXPECT_FALSE(mutate(ignore, w, cm));
}

TEST(MutatingPolicy, IfNeededRunsAgainAfterALaterPolicyChangedTheObject) {
  // "a-copy" (first by name) copies label `tier` into `copied`; "b-tier" then sets `tier`.
  // Only with IfNeeded does the copy see the tier.
  const std::string copy = R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{metadata: Object.metadata{labels: {'copied': 'tier' in object.metadata.labels ? object.metadata.labels['tier'] : 'none'}}}"}}])";
  const std::string tier = R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{metadata: Object.metadata{labels: {'tier': 'gold'}}}"}}])";
  for (const bool reinvoke : {false, true}) {
    auto a = policy("a-copy", copy);
    if (reinvoke) a["spec"].as_object()["reinvocationPolicy"] = "IfNeeded";
    MutatingPolicyPlugin plugin(scheme(), nullptr);
    plugin.load({a, policy("b-tier", tier)}, {binding("b1", "a-copy"), binding("b2", "b-tier")});
    auto w = config_map_write();
    auto cm = config_map();
    EXPECT_FALSE(mutate(plugin, w, cm));
    EXPECT_EQ(cm.at("metadata").at("labels").at("copied"), reinvoke ? "gold" : "none");
  }
}

TEST(MutatingPolicy, AnEquivalentVersionIsMutatedAsTheRuleNamesIt) {
  // The rule names autoscaling/v2; a v1 write is converted, mutated as v2 (which has metrics),
  // and converted back.
  auto p = parse(R"j({"metadata": {"name": "hpa", "resourceVersion": "1"}, "spec": {
      "failurePolicy": "Fail", "reinvocationPolicy": "Never",
      "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
        "resourceRules": [{"apiGroups": ["autoscaling"], "apiVersions": ["v2"],
          "operations": ["CREATE"], "resources": ["horizontalpodautoscalers"], "scope": "*"}]},
      "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
        "Object{spec: Object.spec{minReplicas: size(object.spec.metrics) + 2}}"}}]}})j");
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({p}, {binding("b", "hpa")});
  Write w;
  w.info = scheme()->find("autoscaling", "v1", "horizontalpodautoscalers");
  w.ns = "default";
  w.name = "web";
  auto hpa = parse(R"({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
             "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}})");
  EXPECT_FALSE(mutate(plugin, w, hpa));
  EXPECT_EQ(hpa.at("apiVersion"), "autoscaling/v1");
  EXPECT_EQ(hpa.at("spec").at("minReplicas"), 3);
  EXPECT_EQ(hpa.at("spec").at("targetCPUUtilizationPercentage"), 50);
}

TEST(MutatingPolicy, DeletesAndPolicyKindsAreNotMutated) {
  MutatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("label", R"([{"patchType": "ApplyConfiguration", "applyConfiguration":
      {"expression": "Object{}"}}])")},
              {binding("b", "label")});
  auto w = config_map_write();
  EXPECT_TRUE(plugin.handles(w.attributes()));
  w.operation = registry::AdmissionOperation::remove;
  EXPECT_FALSE(plugin.handles(w.attributes()));
}

}  // namespace
}  // namespace kwatch::admission
