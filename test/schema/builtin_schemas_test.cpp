#include "schema/builtin_schemas.hpp"

#include "schema/strategic_merge_patch.hpp"
#include "schema/structural_schema.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

namespace kwatch::schema {

using apimachinery::Cause;
using base::Errc;

namespace {

namespace json = boost::json;
using Schema = std::shared_ptr<const StructuralSchema>;

// Every kind kwatch serves or is about to serve.
const std::vector<std::tuple<std::string, std::string, std::string>> kKinds = {
    {"", "v1", "Namespace"},
    {"", "v1", "Pod"},
    {"", "v1", "Service"},
    {"", "v1", "ConfigMap"},
    {"", "v1", "Secret"},
    {"", "v1", "Node"},
    {"", "v1", "Event"},
    {"", "v1", "Endpoints"},
    {"", "v1", "ServiceAccount"},
    {"", "v1", "PersistentVolumeClaim"},
    {"", "v1", "PersistentVolume"},
    {"", "v1", "PodTemplate"},
    {"", "v1", "ReplicationController"},
    {"", "v1", "LimitRange"},
    {"", "v1", "ResourceQuota"},
    {"apps", "v1", "Deployment"},
    {"apps", "v1", "ReplicaSet"},
    {"apps", "v1", "StatefulSet"},
    {"apps", "v1", "DaemonSet"},
    {"apps", "v1", "ControllerRevision"},
    {"batch", "v1", "Job"},
    {"batch", "v1", "CronJob"},
    {"coordination.k8s.io", "v1", "Lease"},
    {"networking.k8s.io", "v1", "Ingress"},
    {"networking.k8s.io", "v1", "IngressClass"},
    {"networking.k8s.io", "v1", "NetworkPolicy"},
    {"policy", "v1", "PodDisruptionBudget"},
    {"discovery.k8s.io", "v1", "EndpointSlice"},
    {"events.k8s.io", "v1", "Event"},
    {"scheduling.k8s.io", "v1", "PriorityClass"},
    {"storage.k8s.io", "v1", "StorageClass"},
    {"storage.k8s.io", "v1", "CSIDriver"},
    {"storage.k8s.io", "v1", "VolumeAttachment"},
    {"storage.k8s.io", "v1", "CSINode"},
    {"storage.k8s.io", "v1", "CSIStorageCapacity"},
    {"storage.k8s.io", "v1", "VolumeAttributesClass"},
    {"node.k8s.io", "v1", "RuntimeClass"},
    {"rbac.authorization.k8s.io", "v1", "Role"},
    {"rbac.authorization.k8s.io", "v1", "ClusterRole"},
    {"rbac.authorization.k8s.io", "v1", "RoleBinding"},
    {"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"},
    {"apiextensions.k8s.io", "v1", "CustomResourceDefinition"},
    {"autoscaling", "v1", "Scale"},
    {"autoscaling", "v1", "HorizontalPodAutoscaler"},
    {"autoscaling", "v2", "HorizontalPodAutoscaler"},
    {"admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"},
    {"admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy"},
    {"admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding"},
    {"admissionregistration.k8s.io", "v1beta1", "MutatingAdmissionPolicy"},
    {"admissionregistration.k8s.io", "v1beta1", "MutatingAdmissionPolicyBinding"},
    {"apiregistration.k8s.io", "v1", "APIService"},
    {"certificates.k8s.io", "v1", "CertificateSigningRequest"},
    {"flowcontrol.apiserver.k8s.io", "v1", "FlowSchema"},
    {"flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration"},
    {"networking.k8s.io", "v1", "ServiceCIDR"},
    {"networking.k8s.io", "v1", "IPAddress"},
    {"resource.k8s.io", "v1", "DeviceClass"},
    {"resource.k8s.io", "v1", "ResourceClaim"},
    {"resource.k8s.io", "v1", "ResourceClaimTemplate"},
    {"resource.k8s.io", "v1", "ResourceSlice"},
};

Schema compile_kind(std::string_view group, std::string_view kind) {
  auto s = KindSchemas::builtin().structural_schema(group, "v1", kind);
  EXPECT_TRUE(s.has_value()) << group << "/" << kind;
  if (!s) return nullptr;
  auto r = StructuralSchema::compile(*s, {.path = "", .allow_unique_items = true});
  if (!r) {
    std::string causes;
    for (const auto& c : r.error().causes) causes += c.field + ": " + c.message + "\n";
    ADD_FAILURE() << group << "/" << kind << ": " << r.error().message << "\n" << causes;
    return nullptr;
  }
  return *r;
}

// One line per cause: "<field> | <type> | <message>".
std::string text(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + " | " + c.type + " | " + c.message + "\n";
  return out;
}

const char* const kPod = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "web", "namespace": "demo", "labels": {"app": "web"}},
  "spec": {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [3000]},
    "os": {"name": "linux"},
    "containers": [{
      "name": "app",
      "image": "nginx:1.27",
      "imagePullPolicy": "IfNotPresent",
      "args": ["--port", "8080"],
      "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"containerPort": 9090}],
      "env": [{"name": "MODE", "value": "fast"},
              {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
      "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 2}},
      "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
      "readinessProbe": {"tcpSocket": {"port": 8080}},
      "startupProbe": {"grpc": {"port": 9090}},
      "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
      "volumeMounts": [{"name": "data", "mountPath": "/data"},
                       {"name": "config", "mountPath": "/etc/app", "readOnly": true}]
    }],
    "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}],
    "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300}],
    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "config", "configMap": {"name": "settings", "defaultMode": 420}},
                {"name": "token", "projected": {"sources": [
                  {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}]
  },
  "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True",
             "lastTransitionTime": "2024-05-01T10:00:00Z"}]}
})";

TEST(BuiltinSchemas, TheCompiledInFormLoadsAndNamesEveryKind) {
  const KindSchemas& s = KindSchemas::builtin();
  EXPECT_EQ(s.kinds().size(), kKinds.size());
  for (const auto& [g, v, k] : kKinds) {
    const std::string* def = s.definition(g, v, k);
    ASSERT_NE(def, nullptr) << g << "/" << v << " " << k;
  }
  EXPECT_EQ(*s.definition("", "v1", "Pod"), "io.k8s.api.core.v1.Pod");
  EXPECT_EQ(*s.definition("core", "v1", "Pod"), "io.k8s.api.core.v1.Pod");
  EXPECT_EQ(*s.definition("events.k8s.io", "v1", "Event"), "io.k8s.api.events.v1.Event");
  EXPECT_EQ(*s.definition("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition");
  EXPECT_EQ(s.definition("apps", "v1", "Pod"), nullptr);
  EXPECT_FALSE(s.structural_schema("apps", "v1", "Pod").has_value());
}

TEST(BuiltinSchemas, EveryKindsStructuralSchemaCompiles) {
  auto start = std::chrono::steady_clock::now();
  std::size_t bytes = 0;
  for (const auto& [g, v, k] : kKinds) {
    auto schema = KindSchemas::builtin().structural_schema(g, v, k);
    ASSERT_TRUE(schema.has_value());
    bytes += json::serialize(*schema).size();
    auto r = StructuralSchema::compile(*schema, {.path = "", .allow_unique_items = true});
    std::string causes;
    if (!r) {
      for (const auto& c : r.error().causes) causes += c.field + ": " + c.message + "\n";
    }
    EXPECT_TRUE(r.has_value()) << g << "/" << k << "\n" << causes;
  }
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::printf("expanded and compiled %zu structural schemas (%zu bytes of JSON) in %.1f ms\n",
              kKinds.size(), bytes, ms.count());
}

TEST(BuiltinSchemas, ARealisticPodValidatesAndKeepsEveryField) {
  Schema s = compile_kind("", "Pod");
  ASSERT_TRUE(s);
  json::value pod = json::parse(kPod);
  EXPECT_EQ(text(s->validate(pod)), "");
  json::value copy = pod;
  EXPECT_TRUE(s->prune(copy).empty());
  EXPECT_EQ(copy, pod);
}

TEST(BuiltinSchemas, UnknownFieldsArePrunedWithTheirPaths) {
  Schema s = compile_kind("", "Pod");
  ASSERT_TRUE(s);
  json::value pod = json::parse(kPod);
  pod.as_object()["bogusTop"] = 1;
  pod.at("spec").at("containers").as_array()[0].as_object()["bogus"] = "x";
  EXPECT_EQ(s->prune(pod),
            (std::vector<std::string>{"bogusTop", "spec.containers[0].bogus"}));
  EXPECT_EQ(pod, json::parse(kPod));
}

TEST(BuiltinSchemas, AStringContainerPortIsATypeCause) {
  Schema s = compile_kind("", "Pod");
  ASSERT_TRUE(s);
  json::value pod = json::parse(kPod);
  pod.at("spec").at("containers").as_array()[0].at("ports").as_array()[0].as_object()
      ["containerPort"] = "eighty";
  auto causes = s->validate(pod);
  ASSERT_EQ(causes.size(), 1u) << text(causes);
  EXPECT_EQ(causes[0].field, "spec.containers[0].ports[0].containerPort");
  EXPECT_EQ(causes[0].type, "FieldValueTypeInvalid") << text(causes);
}

TEST(BuiltinSchemas, AnUnknownRestartPolicyIsAnEnumCause) {
  Schema s = compile_kind("", "Pod");
  ASSERT_TRUE(s);
  json::value pod = json::parse(kPod);
  pod.at("spec").as_object()["restartPolicy"] = "Sometimes";
  auto causes = s->validate(pod);
  ASSERT_EQ(causes.size(), 1u) << text(causes);
  EXPECT_EQ(causes[0].field, "spec.restartPolicy");
  EXPECT_EQ(causes[0].type, "FieldValueNotSupported") << text(causes);
}

TEST(BuiltinSchemas, NegativeDeploymentReplicasAreAMinimumCause) {
  Schema s = compile_kind("apps", "Deployment");
  ASSERT_TRUE(s);
  json::value d = json::parse(R"({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {"replicas": -3, "selector": {"matchLabels": {"app": "web"}},
             "strategy": {"type": "RollingUpdate",
                          "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})");
  auto causes = s->validate(d);
  ASSERT_EQ(causes.size(), 1u) << text(causes);
  EXPECT_EQ(causes[0].field, "spec.replicas");
  EXPECT_NE(causes[0].message.find("greater than or equal to 0"), std::string::npos)
      << text(causes);
}

TEST(BuiltinSchemas, SecretDataThatIsNotBase64IsAFormatCause) {
  Schema s = compile_kind("", "Secret");
  ASSERT_TRUE(s);
  EXPECT_EQ(text(s->validate(json::parse(
                R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},
                    "type":"Opaque","data":{"password":"c2VjcmV0"},"stringData":{"a":"b"}})"))),
            "");
  auto causes = s->validate(json::parse(
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"not base64!"}})"));
  ASSERT_EQ(causes.size(), 1u) << text(causes);
  EXPECT_EQ(causes[0].field, "data.password") << text(causes);
  EXPECT_NE(causes[0].message.find("byte"), std::string::npos) << text(causes);
}

// Strategic merge patch facts of Kubernetes' API (patchStrategy "merge" with these merge keys;
// retainKeys where marked), as kwatch's first, hand-written patch table had them: the data must
// keep every one.
struct MergeFact {
  const char* group;
  const char* kind;
  const char* path;
  const char* merge_key;
  bool retain_keys;
};
constexpr MergeFact kMergeFacts[] = {
      {"", "Pod", "spec.containers", "name", false},
      {"", "Pod", "spec.containers[].env", "name", false},
      {"", "Pod", "spec.containers[].ports", "containerPort", false},
      {"", "Pod", "spec.containers[].volumeDevices", "devicePath", false},
      {"", "Pod", "spec.containers[].volumeMounts", "mountPath", false},
      {"", "Pod", "spec.ephemeralContainers", "name", false},
      {"", "Pod", "spec.ephemeralContainers[].env", "name", false},
      {"", "Pod", "spec.ephemeralContainers[].ports", "containerPort", false},
      {"", "Pod", "spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"", "Pod", "spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"", "Pod", "spec.hostAliases", "ip", false},
      {"", "Pod", "spec.imagePullSecrets", "name", false},
      {"", "Pod", "spec.initContainers", "name", false},
      {"", "Pod", "spec.initContainers[].env", "name", false},
      {"", "Pod", "spec.initContainers[].ports", "containerPort", false},
      {"", "Pod", "spec.initContainers[].volumeDevices", "devicePath", false},
      {"", "Pod", "spec.initContainers[].volumeMounts", "mountPath", false},
      {"", "Pod", "spec.resourceClaims", "name", true},
      {"", "Pod", "spec.schedulingGates", "name", false},
      {"", "Pod", "spec.topologySpreadConstraints", "topologyKey", false},
      {"", "Pod", "spec.volumes", "name", true},
      {"", "Pod", "status.conditions", "type", false},
      {"", "Pod", "status.hostIPs", "ip", false},
      {"", "Pod", "status.podIPs", "ip", false},
      {"", "Pod", "status.resourceClaimStatuses", "name", true},
      {"", "PodTemplate", "template.metadata.finalizers", "", false},
      {"", "PodTemplate", "template.metadata.ownerReferences", "uid", false},
      {"", "PodTemplate", "template.spec.containers", "name", false},
      {"", "PodTemplate", "template.spec.containers[].env", "name", false},
      {"", "PodTemplate", "template.spec.containers[].ports", "containerPort", false},
      {"", "PodTemplate", "template.spec.containers[].volumeDevices", "devicePath", false},
      {"", "PodTemplate", "template.spec.containers[].volumeMounts", "mountPath", false},
      {"", "PodTemplate", "template.spec.ephemeralContainers", "name", false},
      {"", "PodTemplate", "template.spec.ephemeralContainers[].env", "name", false},
      {"", "PodTemplate", "template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"", "PodTemplate", "template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"", "PodTemplate", "template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"", "PodTemplate", "template.spec.hostAliases", "ip", false},
      {"", "PodTemplate", "template.spec.imagePullSecrets", "name", false},
      {"", "PodTemplate", "template.spec.initContainers", "name", false},
      {"", "PodTemplate", "template.spec.initContainers[].env", "name", false},
      {"", "PodTemplate", "template.spec.initContainers[].ports", "containerPort", false},
      {"", "PodTemplate", "template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"", "PodTemplate", "template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"", "PodTemplate", "template.spec.resourceClaims", "name", true},
      {"", "PodTemplate", "template.spec.schedulingGates", "name", false},
      {"", "PodTemplate", "template.spec.topologySpreadConstraints", "topologyKey", false},
      {"", "PodTemplate", "template.spec.volumes", "name", true},
      {"", "Service", "spec.ports", "port", false},
      {"", "Service", "status.conditions", "type", false},
      {"", "Node", "spec.podCIDRs", "", false},
      {"", "Node", "status.addresses", "type", false},
      {"", "Node", "status.conditions", "type", false},
      {"", "Namespace", "status.conditions", "type", false},
      {"", "ServiceAccount", "secrets", "name", false},
      {"apps", "Deployment", "spec.strategy", "", true},
      {"apps", "Deployment", "spec.template.metadata.finalizers", "", false},
      {"apps", "Deployment", "spec.template.metadata.ownerReferences", "uid", false},
      {"apps", "Deployment", "spec.template.spec.containers", "name", false},
      {"apps", "Deployment", "spec.template.spec.containers[].env", "name", false},
      {"apps", "Deployment", "spec.template.spec.containers[].ports", "containerPort", false},
      {"apps", "Deployment", "spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"apps", "Deployment", "spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"apps", "Deployment", "spec.template.spec.ephemeralContainers", "name", false},
      {"apps", "Deployment", "spec.template.spec.ephemeralContainers[].env", "name", false},
      {"apps", "Deployment", "spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"apps", "Deployment", "spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"apps", "Deployment", "spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"apps", "Deployment", "spec.template.spec.hostAliases", "ip", false},
      {"apps", "Deployment", "spec.template.spec.imagePullSecrets", "name", false},
      {"apps", "Deployment", "spec.template.spec.initContainers", "name", false},
      {"apps", "Deployment", "spec.template.spec.initContainers[].env", "name", false},
      {"apps", "Deployment", "spec.template.spec.initContainers[].ports", "containerPort", false},
      {"apps", "Deployment", "spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"apps", "Deployment", "spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"apps", "Deployment", "spec.template.spec.resourceClaims", "name", true},
      {"apps", "Deployment", "spec.template.spec.schedulingGates", "name", false},
      {"apps", "Deployment", "spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"apps", "Deployment", "spec.template.spec.volumes", "name", true},
      {"apps", "Deployment", "status.conditions", "type", false},
      {"apps", "ReplicaSet", "spec.template.metadata.finalizers", "", false},
      {"apps", "ReplicaSet", "spec.template.metadata.ownerReferences", "uid", false},
      {"apps", "ReplicaSet", "spec.template.spec.containers", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.containers[].env", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.containers[].ports", "containerPort", false},
      {"apps", "ReplicaSet", "spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"apps", "ReplicaSet", "spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"apps", "ReplicaSet", "spec.template.spec.ephemeralContainers", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.ephemeralContainers[].env", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"apps", "ReplicaSet", "spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"apps", "ReplicaSet", "spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"apps", "ReplicaSet", "spec.template.spec.hostAliases", "ip", false},
      {"apps", "ReplicaSet", "spec.template.spec.imagePullSecrets", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.initContainers", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.initContainers[].env", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.initContainers[].ports", "containerPort", false},
      {"apps", "ReplicaSet", "spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"apps", "ReplicaSet", "spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"apps", "ReplicaSet", "spec.template.spec.resourceClaims", "name", true},
      {"apps", "ReplicaSet", "spec.template.spec.schedulingGates", "name", false},
      {"apps", "ReplicaSet", "spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"apps", "ReplicaSet", "spec.template.spec.volumes", "name", true},
      {"apps", "ReplicaSet", "status.conditions", "type", false},
      {"apps", "StatefulSet", "spec.template.metadata.finalizers", "", false},
      {"apps", "StatefulSet", "spec.template.metadata.ownerReferences", "uid", false},
      {"apps", "StatefulSet", "spec.template.spec.containers", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.containers[].env", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.containers[].ports", "containerPort", false},
      {"apps", "StatefulSet", "spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"apps", "StatefulSet", "spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"apps", "StatefulSet", "spec.template.spec.ephemeralContainers", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.ephemeralContainers[].env", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"apps", "StatefulSet", "spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"apps", "StatefulSet", "spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"apps", "StatefulSet", "spec.template.spec.hostAliases", "ip", false},
      {"apps", "StatefulSet", "spec.template.spec.imagePullSecrets", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.initContainers", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.initContainers[].env", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.initContainers[].ports", "containerPort", false},
      {"apps", "StatefulSet", "spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"apps", "StatefulSet", "spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"apps", "StatefulSet", "spec.template.spec.resourceClaims", "name", true},
      {"apps", "StatefulSet", "spec.template.spec.schedulingGates", "name", false},
      {"apps", "StatefulSet", "spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"apps", "StatefulSet", "spec.template.spec.volumes", "name", true},
      {"apps", "StatefulSet", "status.conditions", "type", false},
      {"apps", "DaemonSet", "spec.template.metadata.finalizers", "", false},
      {"apps", "DaemonSet", "spec.template.metadata.ownerReferences", "uid", false},
      {"apps", "DaemonSet", "spec.template.spec.containers", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.containers[].env", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.containers[].ports", "containerPort", false},
      {"apps", "DaemonSet", "spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"apps", "DaemonSet", "spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"apps", "DaemonSet", "spec.template.spec.ephemeralContainers", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.ephemeralContainers[].env", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"apps", "DaemonSet", "spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"apps", "DaemonSet", "spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"apps", "DaemonSet", "spec.template.spec.hostAliases", "ip", false},
      {"apps", "DaemonSet", "spec.template.spec.imagePullSecrets", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.initContainers", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.initContainers[].env", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.initContainers[].ports", "containerPort", false},
      {"apps", "DaemonSet", "spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"apps", "DaemonSet", "spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"apps", "DaemonSet", "spec.template.spec.resourceClaims", "name", true},
      {"apps", "DaemonSet", "spec.template.spec.schedulingGates", "name", false},
      {"apps", "DaemonSet", "spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"apps", "DaemonSet", "spec.template.spec.volumes", "name", true},
      {"apps", "DaemonSet", "status.conditions", "type", false},
      {"batch", "Job", "spec.template.metadata.finalizers", "", false},
      {"batch", "Job", "spec.template.metadata.ownerReferences", "uid", false},
      {"batch", "Job", "spec.template.spec.containers", "name", false},
      {"batch", "Job", "spec.template.spec.containers[].env", "name", false},
      {"batch", "Job", "spec.template.spec.containers[].ports", "containerPort", false},
      {"batch", "Job", "spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"batch", "Job", "spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"batch", "Job", "spec.template.spec.ephemeralContainers", "name", false},
      {"batch", "Job", "spec.template.spec.ephemeralContainers[].env", "name", false},
      {"batch", "Job", "spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"batch", "Job", "spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"batch", "Job", "spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"batch", "Job", "spec.template.spec.hostAliases", "ip", false},
      {"batch", "Job", "spec.template.spec.imagePullSecrets", "name", false},
      {"batch", "Job", "spec.template.spec.initContainers", "name", false},
      {"batch", "Job", "spec.template.spec.initContainers[].env", "name", false},
      {"batch", "Job", "spec.template.spec.initContainers[].ports", "containerPort", false},
      {"batch", "Job", "spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"batch", "Job", "spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"batch", "Job", "spec.template.spec.resourceClaims", "name", true},
      {"batch", "Job", "spec.template.spec.schedulingGates", "name", false},
      {"batch", "Job", "spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"batch", "Job", "spec.template.spec.volumes", "name", true},
      {"batch", "Job", "status.conditions", "type", false},
      {"batch", "CronJob", "spec.jobTemplate.metadata.finalizers", "", false},
      {"batch", "CronJob", "spec.jobTemplate.metadata.ownerReferences", "uid", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.metadata.finalizers", "", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.metadata.ownerReferences", "uid", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers[].env", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers[].ports", "containerPort", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers[].volumeDevices", "devicePath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.containers[].volumeMounts", "mountPath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.ephemeralContainers", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.ephemeralContainers[].env", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.ephemeralContainers[].ports", "containerPort", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.ephemeralContainers[].volumeDevices", "devicePath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.ephemeralContainers[].volumeMounts", "mountPath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.hostAliases", "ip", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.imagePullSecrets", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.initContainers", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.initContainers[].env", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.initContainers[].ports", "containerPort", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.initContainers[].volumeDevices", "devicePath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.initContainers[].volumeMounts", "mountPath", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.resourceClaims", "name", true},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.schedulingGates", "name", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.topologySpreadConstraints", "topologyKey", false},
      {"batch", "CronJob", "spec.jobTemplate.spec.template.spec.volumes", "name", true},
      {"storage.k8s.io", "CSINode", "spec.drivers", "name", false},
};

TEST(BuiltinSchemas, EveryKnownMergeKeyIsInTheData) {
  std::size_t checked = 0;
  for (const auto& f : kMergeFacts) {
    PatchSchema data = KindSchemas::builtin().patch_schema(f.group, "v1", f.kind);
    const PatchRule* got = data.find(f.path);
    ASSERT_NE(got, nullptr) << f.group << "/" << f.kind << " " << f.path;
    EXPECT_EQ(got->strategy, PatchStrategy::merge) << f.group << "/" << f.kind << " " << f.path;
    EXPECT_EQ(got->merge_key, f.merge_key) << f.group << "/" << f.kind << " " << f.path;
    EXPECT_EQ(got->retain_keys, f.retain_keys) << f.group << "/" << f.kind << " " << f.path;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
  // Unknown kinds still get the metadata rules.
  PatchSchema unknown = KindSchemas::builtin().patch_schema("example.com", "v1", "Widget");
  ASSERT_NE(unknown.find("metadata.ownerReferences"), nullptr);
  EXPECT_EQ(unknown.find("metadata.ownerReferences")->merge_key, "uid");
  EXPECT_NE(unknown.find("metadata.finalizers"), nullptr);
}

TEST(BuiltinSchemas, OpenApiComponentsOfCoreV1DescribeThePod) {
  json::object c = KindSchemas::builtin().openapi_components("", "v1");
  ASSERT_TRUE(c.contains("io.k8s.api.core.v1.Pod"));
  const json::object& pod = c.at("io.k8s.api.core.v1.Pod").as_object();
  EXPECT_EQ(pod.at("x-kubernetes-group-version-kind"),
            json::parse(R"([{"group":"","kind":"Pod","version":"v1"}])"));
  // A reference with kube's description beside it (its doc comment), as kube writes v3.
  EXPECT_EQ(pod.at("properties").at("spec"),
            json::parse(R"({"allOf":[{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}],)"
                        R"("description":"Specification of the desired behavior of the pod. More )"
                        R"(info: https://git.k8s.io/community/contributors/devel/sig-architecture/)"
                        R"(api-conventions.md#spec-and-status"})"));
  EXPECT_EQ(pod.at("description"),
            "Pod is a collection of containers that can run on a host. This resource is created by "
            "clients and scheduled onto hosts.");
  const json::object& spec = c.at("io.k8s.api.core.v1.PodSpec").as_object();
  const json::value& containers = spec.at("properties").at("containers");
  EXPECT_EQ(containers.at("items"),
            json::parse(R"({"$ref":"#/components/schemas/io.k8s.api.core.v1.Container"})"));
  EXPECT_EQ(containers.at("x-kubernetes-patch-merge-key"), "name");
  EXPECT_EQ(containers.at("x-kubernetes-list-type"), "map");
  EXPECT_TRUE(c.contains("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
  EXPECT_FALSE(c.contains("io.k8s.api.apps.v1.Deployment"));
  for (const auto& kv : c) {
    EXPECT_TRUE(kv.value().as_object().contains("type")) << kv.key();
  }
  EXPECT_TRUE(KindSchemas::builtin().openapi_components("apps", "v1").contains(
      "io.k8s.api.apps.v1.Deployment"));
  EXPECT_TRUE(KindSchemas::builtin().openapi_components("example.com", "v1").empty());
}

TEST(BuiltinSchemas, LoadRefusesDanglingReferencesAndUnknownTypes) {
  auto dangling = KindSchemas::load(R"({"kinds": [], "definitions": {
      "a.b.C": {"fields": {"x": "[]a.b.Missing"}}}})");
  ASSERT_FALSE(dangling.has_value());
  EXPECT_EQ(dangling.error().code, Errc::invalid);
  EXPECT_EQ(dangling.error().message,
            "invalid compact schema: definition \"a.b.C\" field \"x\": reference to unknown "
            "definition \"a.b.Missing\"");

  auto unknown = KindSchemas::load(R"({"kinds": [], "definitions": {
      "a.b.C": {"fields": {"y": {"type": "map[strin]"}}}}})");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().message,
            "invalid compact schema: definition \"a.b.C\" field \"y\": unknown type "
            "\"map[strin]\"");

  auto kind = KindSchemas::load(R"({"kinds": [{"group":"","version":"v1","kind":"X",
      "definition":"a.b.X"}], "definitions": {}})");
  ASSERT_FALSE(kind.has_value());
  EXPECT_EQ(kind.error().message,
            "invalid compact schema: kind /v1 X: unknown definition \"a.b.X\"");

  auto ok = KindSchemas::load(R"({"kinds": [{"group":"","version":"v1","kind":"X",
      "definition":"a.b.X"}], "definitions": {"a.b.X": {"required": ["n"],
      "fields": {"n": "int32", "self": "a.b.X", "l": {"type": "[]a.b.X", "list": "atomic"}}}}})");
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  // The recursion guard: the definition reached again on its own path preserves unknown fields.
  EXPECT_EQ((*ok)->structural_schema("", "v1", "X")->at("properties").at("self"),
            json::parse(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true})"));
}

}  // namespace
}  // namespace kwatch::schema

namespace kwatch::schema {
namespace {

// Where a merged object cannot become the kind's Go type, as kube's converter says it.
TEST(GoConversion, FindsTheFirstValueOfTheWrongShape) {
  Schema pod = compile_kind("", "Pod");
  ASSERT_NE(pod, nullptr);
  auto error = [&](std::string_view text) {
    return pod->go_conversion_error(boost::json::parse(text)).value_or("none");
  };
  EXPECT_EQ(error(R"({"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}})"),
            "none");
  EXPECT_EQ(error(R"({"spec":"x"})"), "cannot restore struct from: string");
  EXPECT_EQ(error(R"({"spec":{"containers":"x"}})"), "cannot restore slice from string");
  EXPECT_EQ(error(R"({"spec":{"containers":[7]}})"), "cannot restore struct from: int64");
  EXPECT_EQ(error(R"({"spec":{"nodeSelector":[1]}})"), "cannot restore map from slice");
  EXPECT_EQ(error(R"({"metadata":{"labels":7},"spec":"x"})"), "cannot restore map from int64");
  EXPECT_EQ(error(R"({"metadata":{"finalizers":"f"}})"), "cannot restore slice from string");
  EXPECT_EQ(error(R"({"metadata":true})"), "cannot restore struct from: bool");
  // Primitives and int-or-string are left to validation; nulls are absent values.
  EXPECT_EQ(error(R"({"spec":{"containers":[{"name":1.5,"ports":[{"containerPort":"x"}]}],"volumes":null}})"),
            "none");
}

}  // namespace
}  // namespace kwatch::schema

