// Which requests a policy's or binding's MatchResources selects, as kube's matcher decides.
#include "admission/policy_matching.hpp"

#include "policy_test_support.hpp"

#include <gtest/gtest.h>

namespace kwatch::admission {
namespace {

using testing::parse;
using testing::scheme;

struct Probe {
  std::string group, version, resource, subresource, ns, name, operation = "CREATE";
  const boost::json::object* object = nullptr;
  const boost::json::object* old_object = nullptr;
};

MatchOutcome ask(const CompiledMatch& m, const Probe& p,
                 const NamespaceLabels& labels = [](std::string_view) {
                   return std::optional<boost::json::object>(boost::json::object());
                 }) {
  auto info = scheme()->find(p.group, p.version, p.resource);
  EXPECT_TRUE(info) << p.resource;
  MatchRequest r{info.get(), p.subresource, p.ns, p.name, p.operation, p.object, p.old_object};
  return m.matches(r, scheme().get(), labels);
}

CompiledMatch rules(std::string_view rule_json, std::string_view extra = "") {
  return CompiledMatch::compile(
      parse(std::string(R"({"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {}, "resourceRules": [)") + std::string(rule_json) + "]" +
            std::string(extra) + "}"),
      false);
}

TEST(PolicyMatching, ResourcesSubresourcesAndOperations) {
  auto m = rules(R"({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["deployments"]})");
  EXPECT_TRUE(ask(m, {"apps", "v1", "deployments", "", "default", "web"}).matched);
  EXPECT_FALSE(ask(m, {"apps", "v1", "deployments", "scale", "default", "web"}).matched);
  EXPECT_FALSE(ask(m, {"apps", "v1", "deployments", "", "default", "web", "UPDATE"}).matched);
  EXPECT_FALSE(ask(m, {"apps", "v1", "replicasets", "", "default", "web"}).matched);
  auto sub = rules(R"({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                       "resources": ["deployments/*"]})");
  EXPECT_TRUE(ask(sub, {"apps", "v1", "deployments", "status", "default", "web"}).matched);
  // kube's matcher: `*` as the subresource matches none as well.
  EXPECT_TRUE(ask(sub, {"apps", "v1", "deployments", "", "default", "web"}).matched);
  EXPECT_FALSE(ask(sub, {"apps", "v1", "replicasets", "status", "default", "web"}).matched);
  auto all = rules(R"({"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
                       "resources": ["*/*"]})");
  EXPECT_TRUE(ask(all, {"", "v1", "pods", "status", "default", "p"}).matched);
}

TEST(PolicyMatching, ScopeNamesAndExclusions) {
  auto namespaced = rules(R"({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                              "resources": ["*"], "scope": "Namespaced"})");
  EXPECT_TRUE(ask(namespaced, {"", "v1", "configmaps", "", "default", "c"}).matched);
  EXPECT_FALSE(ask(namespaced, {"", "v1", "namespaces", "", "", "default"}).matched);
  auto named = rules(R"({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                         "resources": ["configmaps"], "resourceNames": ["a"]})");
  EXPECT_TRUE(ask(named, {"", "v1", "configmaps", "", "default", "a"}).matched);
  EXPECT_FALSE(ask(named, {"", "v1", "configmaps", "", "default", "b"}).matched);
  auto excluded = rules(R"({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                            "resources": ["*"]})",
                        R"(, "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                            "operations": ["*"], "resources": ["secrets"]}])");
  EXPECT_TRUE(ask(excluded, {"", "v1", "configmaps", "", "default", "c"}).matched);
  EXPECT_FALSE(ask(excluded, {"", "v1", "secrets", "", "default", "s"}).matched);
}

TEST(PolicyMatching, EquivalentVersionsMatchUnlessExact) {
  const std::string rule = R"({"apiGroups": ["autoscaling"], "apiVersions": ["v2"],
                               "operations": ["*"], "resources": ["horizontalpodautoscalers"]})";
  auto equivalent = rules(rule);
  auto outcome = ask(equivalent, {"autoscaling", "v1", "horizontalpodautoscalers", "", "d", "h"});
  ASSERT_TRUE(outcome.matched);
  EXPECT_EQ(outcome.matched_info->version, "v2");
  auto exact = CompiledMatch::compile(
      parse(R"({"matchPolicy": "Exact", "resourceRules": [)" + rule + "]}"), false);
  EXPECT_FALSE(ask(exact, {"autoscaling", "v1", "horizontalpodautoscalers", "", "d", "h"}).matched);
}

TEST(PolicyMatching, SelectorsLookAtTheNamespaceAndTheObjectOrItsOldSelf) {
  auto m = rules(R"({"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"],
                     "resources": ["configmaps"]})",
                 "");
  m = CompiledMatch::compile(
      parse(R"({"namespaceSelector": {"matchLabels": {"env": "prod"}},
                "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                  "operations": ["*"], "resources": ["configmaps"]}]})"),
      false);
  auto labels = [](std::string_view ns) -> std::optional<boost::json::object> {
    if (ns == "prod") return parse(R"({"env": "prod"})");
    if (ns == "dev") return boost::json::object();
    return std::nullopt;
  };
  const auto with_tier = parse(R"({"metadata": {"labels": {"tier": "web"}}})");
  const auto without = parse(R"({"metadata": {}})");
  Probe p{"", "v1", "configmaps", "", "prod", "c"};
  p.object = &with_tier;
  EXPECT_TRUE(ask(m, p, labels).matched);
  p.object = &without;
  EXPECT_FALSE(ask(m, p, labels).matched);
  p.old_object = &with_tier;  // an update that drops the label is still selected
  EXPECT_TRUE(ask(m, p, labels).matched);
  p.ns = "dev";
  EXPECT_FALSE(ask(m, p, labels).matched);
  p.ns = "gone";
  EXPECT_EQ(ask(m, p, labels).error, "namespaces \"gone\" not found");
}

TEST(PolicyMatching, MayMatchLooksOnlyAtGroupsAndResources) {
  auto m = rules(R"({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["deployments"]})");
  EXPECT_TRUE(m.may_match("apps", "deployments"));
  EXPECT_FALSE(m.may_match("", "configmaps"));
  auto binding = CompiledMatch::compile(parse(R"({"namespaceSelector": {}})"), true);
  EXPECT_TRUE(binding.may_match("", "configmaps"));
}

}  // namespace
}  // namespace kwatch::admission
