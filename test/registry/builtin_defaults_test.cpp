#include "registry/base64.hpp"
#include "registry/builtin_defaults.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::registry {
namespace {

namespace json = boost::json;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

TEST(BuiltinDefaults, APodGetsKubesSpecContainerAndPortDefaults) {
  auto pod = parse(R"({"spec":{"containers":[{"name":"c","image":"nginx:1.25",
      "ports":[{"containerPort":80}],
      "readinessProbe":{"httpGet":{"port":"http"}}}]}})");
  default_pod(pod);
  default_pod_on_create(pod);
  const auto& spec = pod.at("spec").as_object();
  EXPECT_EQ(spec.at("restartPolicy"), "Always");
  EXPECT_EQ(spec.at("dnsPolicy"), "ClusterFirst");
  EXPECT_EQ(spec.at("terminationGracePeriodSeconds"), 30);
  EXPECT_EQ(spec.at("schedulerName"), "default-scheduler");
  EXPECT_EQ(spec.at("securityContext"), json::object());
  EXPECT_EQ(spec.at("enableServiceLinks"), true);
  EXPECT_EQ(spec.at("priority"), 0);
  EXPECT_EQ(spec.at("tolerations").as_array().size(), 2u);
  const auto& c = spec.at("containers").as_array()[0].as_object();
  EXPECT_EQ(c.at("imagePullPolicy"), "IfNotPresent");
  EXPECT_EQ(c.at("terminationMessagePath"), "/dev/termination-log");
  EXPECT_EQ(c.at("terminationMessagePolicy"), "File");
  EXPECT_EQ(c.at("resources"), json::object());
  EXPECT_EQ(c.at("ports").as_array()[0].at("protocol"), "TCP");
  const auto& probe = c.at("readinessProbe").as_object();
  EXPECT_EQ(probe.at("timeoutSeconds"), 1);
  EXPECT_EQ(probe.at("periodSeconds"), 10);
  EXPECT_EQ(probe.at("successThreshold"), 1);
  EXPECT_EQ(probe.at("failureThreshold"), 3);
  EXPECT_EQ(probe.at("httpGet").at("scheme"), "HTTP");
  EXPECT_EQ(probe.at("httpGet").at("path"), "/");
}

TEST(BuiltinDefaults, DefaultingAPodTwiceChangesNothingTheSecondTime) {
  auto pod = parse(R"({"spec":{"containers":[{"name":"c","image":"nginx"}],
      "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",
                      "effect":"NoExecute","tolerationSeconds":60}]}})");
  default_pod(pod);
  default_pod_on_create(pod);
  const json::object once = pod;
  default_pod(pod);
  default_pod_on_create(pod);
  EXPECT_EQ(pod, once);
  // The client's own toleration for not-ready stays; only unreachable is added.
  const auto& tolerations = pod.at("spec").at("tolerations").as_array();
  ASSERT_EQ(tolerations.size(), 2u);
  EXPECT_EQ(tolerations[0].at("tolerationSeconds"), 60);
  EXPECT_EQ(tolerations[1].at("key"), "node.kubernetes.io/unreachable");
}

TEST(BuiltinDefaults, WhatAClientSetIsNeverOverwritten) {
  auto pod = parse(R"({"spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":0,
      "containers":[{"name":"c","image":"nginx","imagePullPolicy":"Never",
                     "ports":[{"containerPort":53,"protocol":"UDP"}]}]}})");
  default_pod(pod);
  const auto& spec = pod.at("spec").as_object();
  EXPECT_EQ(spec.at("restartPolicy"), "Never");
  EXPECT_EQ(spec.at("terminationGracePeriodSeconds"), 0);
  const auto& c = spec.at("containers").as_array()[0].as_object();
  EXPECT_EQ(c.at("imagePullPolicy"), "Never");
  EXPECT_EQ(c.at("ports").as_array()[0].at("protocol"), "UDP");
}

TEST(BuiltinDefaults, ImagePullPolicyFollowsTheTag) {
  EXPECT_EQ(default_image_pull_policy("nginx"), "Always");
  EXPECT_EQ(default_image_pull_policy("nginx:latest"), "Always");
  EXPECT_EQ(default_image_pull_policy("nginx:1.25"), "IfNotPresent");
  EXPECT_EQ(default_image_pull_policy("registry:5000/nginx"), "Always");
  EXPECT_EQ(default_image_pull_policy("registry:5000/nginx:1"), "IfNotPresent");
  EXPECT_EQ(default_image_pull_policy("nginx@sha256:abcd"), "IfNotPresent");
}

TEST(BuiltinDefaults, LimitsWithoutRequestsBecomeRequestsAndDecideTheQosClass) {
  auto pod = parse(R"({"spec":{"containers":[{"name":"c","image":"x",
      "resources":{"limits":{"cpu":"1","memory":"1Gi"}}}]}})");
  default_pod(pod);
  default_pod_on_create(pod);
  EXPECT_EQ(pod.at("spec").at("containers").as_array()[0].at("resources").at("requests"),
            parse(R"({"cpu":"1","memory":"1Gi"})"));
  EXPECT_EQ(pod.at("status"), parse(R"({"phase":"Pending","qosClass":"Guaranteed"})"));

  auto burstable = parse(R"({"spec":{"containers":[{"name":"c","image":"x",
      "resources":{"requests":{"cpu":"100m"}}}]}})");
  default_pod_on_create(burstable);
  EXPECT_EQ(burstable.at("status").at("qosClass"), "Burstable");
  auto best_effort = parse(R"({"spec":{"containers":[{"name":"c","image":"x"}]}})");
  default_pod_on_create(best_effort);
  EXPECT_EQ(best_effort.at("status").at("qosClass"), "BestEffort");
}

TEST(BuiltinDefaults, AServiceGetsTypeAffinityProtocolAndTargetPort) {
  auto svc = parse(R"({"spec":{"ports":[{"port":80},{"port":53,"protocol":"UDP","targetPort":"dns"}]}})");
  default_service(svc);
  const auto& spec = svc.at("spec").as_object();
  EXPECT_EQ(spec.at("type"), "ClusterIP");
  EXPECT_EQ(spec.at("sessionAffinity"), "None");
  EXPECT_EQ(spec.at("internalTrafficPolicy"), "Cluster");
  EXPECT_FALSE(spec.contains("externalTrafficPolicy"));
  const auto& ports = spec.at("ports").as_array();
  EXPECT_EQ(ports[0].at("protocol"), "TCP");
  EXPECT_EQ(ports[0].at("targetPort"), 80);
  EXPECT_EQ(ports[1].at("protocol"), "UDP");
  EXPECT_EQ(ports[1].at("targetPort"), "dns");

  auto node_port = parse(R"({"spec":{"type":"NodePort","sessionAffinity":"ClientIP"}})");
  default_service(node_port);
  EXPECT_EQ(node_port.at("spec").at("externalTrafficPolicy"), "Cluster");
  EXPECT_EQ(node_port.at("spec").at("sessionAffinityConfig").at("clientIP").at("timeoutSeconds"),
            10800);
}

TEST(BuiltinDefaults, ADeploymentGetsReplicasStrategyLimitsAndATemplateDefaulted) {
  auto d = parse(R"({"spec":{"selector":{"matchLabels":{"app":"a"}},
      "template":{"spec":{"containers":[{"name":"c","image":"nginx"}]}}}})");
  default_deployment(d);
  const auto& spec = d.at("spec").as_object();
  EXPECT_EQ(spec.at("replicas"), 1);
  EXPECT_EQ(spec.at("strategy"),
            parse(R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}})"));
  EXPECT_EQ(spec.at("revisionHistoryLimit"), 10);
  EXPECT_EQ(spec.at("progressDeadlineSeconds"), 600);
  EXPECT_EQ(spec.at("template").at("spec").at("restartPolicy"), "Always");
  // A template is not a pod: no status, no admission-plugin tolerations.
  EXPECT_FALSE(spec.at("template").as_object().contains("status"));
  EXPECT_FALSE(spec.at("template").at("spec").as_object().contains("tolerations"));

  auto recreate = parse(R"({"spec":{"replicas":0,"strategy":{"type":"Recreate"}}})");
  default_deployment(recreate);
  EXPECT_EQ(recreate.at("spec").at("replicas"), 0);
  EXPECT_EQ(recreate.at("spec").at("strategy"), parse(R"({"type":"Recreate"})"));
}

TEST(BuiltinDefaults, ASecretsStringDataIsFoldedIntoDataAndWins) {
  auto s = parse(R"({"data":{"a":"eA==","b":"eQ=="},"stringData":{"b":"hello","c":"é"}})");
  default_secret(s);
  EXPECT_EQ(s.at("type"), "Opaque");
  EXPECT_FALSE(s.contains("stringData"));
  EXPECT_EQ(s.at("data"), parse(R"({"a":"eA==","b":"aGVsbG8=","c":"w6k="})"));
}

TEST(BuiltinDefaults, ANamespaceIsLabelledWithItsName) {
  auto ns = parse(R"({"metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"x"}}})");
  default_namespace(ns);
  EXPECT_EQ(ns.at("metadata").at("labels").at("kubernetes.io/metadata.name"), "team-a");
  default_namespace_on_create(ns);
  EXPECT_EQ(ns.at("status").at("phase"), "Active");
  EXPECT_EQ(ns.at("spec").at("finalizers"), json::array{"kubernetes"});
}

TEST(BuiltinDefaults, ValuesOfTheWrongTypeAreLeftForTheSchemaToReport) {
  auto pod = parse(R"({"spec":{"containers":"nope","volumes":[1,{"secret":"x"}]}})");
  default_pod(pod);
  EXPECT_EQ(pod.at("spec").at("containers"), "nope");
  auto svc = parse(R"({"spec":{"ports":[{"port":"eighty"}]}})");
  default_service(svc);
  EXPECT_FALSE(svc.at("spec").at("ports").as_array()[0].as_object().contains("targetPort"));
}

TEST(Base64, EncodesWithPadding) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\x00\x80", 3)), "/wCA");
}

}  // namespace
}  // namespace kwatch::registry
