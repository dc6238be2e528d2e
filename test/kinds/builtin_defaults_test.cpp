#include "base/base64.hpp"
#include "kinds/builtin_defaults.hpp"
#include "kinds/horizontal_pod_autoscaler.hpp"
#include "kinds/scheme.hpp"
#include "schema/protobuf_decoder.hpp"
#include "schema/structural_schema.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::kinds {
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
  // A template is not a pod: no status, no admission-plugin tolerations, and none of
  // SetDefaults_Pod's own (enableServiceLinks, requests from limits).
  EXPECT_FALSE(spec.at("template").as_object().contains("status"));
  EXPECT_FALSE(spec.at("template").at("spec").as_object().contains("tolerations"));
  EXPECT_FALSE(spec.at("template").at("spec").as_object().contains("enableServiceLinks"));

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

TEST(BuiltinDefaults, ATemplateGetsThePodSpecDefaultsButNotThePodOnes) {
  auto spec = parse(R"({"hostNetwork":true,"containers":[{"name":"c","image":"x",
      "ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]})");
  default_pod_spec(spec);
  const auto& c = spec.at("containers").as_array()[0].as_object();
  EXPECT_EQ(c.at("ports").as_array()[0], parse(R"({"containerPort":80,"protocol":"TCP"})"));
  EXPECT_EQ(c.at("resources"), parse(R"({"limits":{"cpu":"1"}})"));
  EXPECT_FALSE(spec.contains("enableServiceLinks"));
  auto pod = json::object{{"spec", spec}};
  default_pod(pod);
  const auto& pc = pod.at("spec").at("containers").as_array()[0].as_object();
  EXPECT_EQ(pc.at("ports").as_array()[0].at("hostPort"), 80);
  EXPECT_EQ(pc.at("resources").at("requests"), parse(R"({"cpu":"1"})"));
  EXPECT_EQ(pod.at("spec").at("enableServiceLinks"), true);
}

TEST(BuiltinDefaults, AnUpdateKeepsThePodsPriorityAndTolerations) {
  auto old = parse(R"({"spec":{"containers":[{"name":"c","image":"x"}]}})");
  default_pod(old);
  default_pod_on_create(old);
  auto update = parse(R"({"spec":{"containers":[{"name":"c","image":"y"}]}})");
  default_pod(update);
  default_pod_on_update(update, old);
  EXPECT_EQ(update.at("spec").at("priority"), 0);
  EXPECT_EQ(update.at("spec").at("preemptionPolicy"), "PreemptLowerPriority");
  EXPECT_EQ(update.at("spec").at("tolerations"), old.at("spec").at("tolerations"));
}

TEST(BuiltinDefaults, AReplicationControllerTakesSelectorAndLabelsFromItsTemplate) {
  auto rc = parse(R"({"metadata":{"name":"r"},"spec":{"template":{
      "metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}})");
  default_replication_controller(rc);
  EXPECT_EQ(rc.at("spec").at("selector"), parse(R"({"app":"a"})"));
  EXPECT_EQ(rc.at("metadata").at("labels"), parse(R"({"app":"a"})"));
  EXPECT_EQ(rc.at("spec").at("replicas"), 1);
  EXPECT_EQ(rc.at("spec").at("template").at("spec").at("dnsPolicy"), "ClusterFirst");
  auto own = parse(R"({"metadata":{"labels":{"own":"1"}},"spec":{"selector":{"s":"1"},
      "template":{"metadata":{"labels":{"app":"a","s":"1"}}}}})");
  default_replication_controller(own);
  EXPECT_EQ(own.at("spec").at("selector"), parse(R"({"s":"1"})"));
  EXPECT_EQ(own.at("metadata").at("labels"), parse(R"({"own":"1"})"));
}

TEST(BuiltinDefaults, AStatefulSetGetsStrategyRetentionAndDefaultedClaimTemplates) {
  auto sts = parse(R"({"spec":{"selector":{"matchLabels":{"a":"b"}},
      "template":{"spec":{"containers":[{"name":"c","image":"x"}]}},
      "volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],
          "resources":{"requests":{"storage":"1Gi"}}}}]}})");
  default_stateful_set(sts);
  const auto& spec = sts.at("spec").as_object();
  EXPECT_EQ(spec.at("podManagementPolicy"), "OrderedReady");
  EXPECT_EQ(spec.at("updateStrategy"),
            parse(R"({"type":"RollingUpdate","rollingUpdate":{"partition":0}})"));
  EXPECT_EQ(spec.at("persistentVolumeClaimRetentionPolicy"),
            parse(R"({"whenDeleted":"Retain","whenScaled":"Retain"})"));
  EXPECT_EQ(spec.at("replicas"), 1);
  EXPECT_EQ(spec.at("revisionHistoryLimit"), 10);
  const auto& claim = spec.at("volumeClaimTemplates").as_array()[0].as_object();
  EXPECT_EQ(claim.at("apiVersion"), "v1");
  EXPECT_EQ(claim.at("kind"), "PersistentVolumeClaim");
  EXPECT_EQ(claim.at("spec").at("volumeMode"), "Filesystem");
  EXPECT_EQ(claim.at("status"), parse(R"({"phase":"Pending"})"));
  auto on_delete = parse(R"({"spec":{"updateStrategy":{"type":"OnDelete"}}})");
  default_stateful_set(on_delete);
  EXPECT_EQ(on_delete.at("spec").at("updateStrategy"), parse(R"({"type":"OnDelete"})"));
}

TEST(BuiltinDefaults, ADaemonSetRollsOneAtATimeWithoutSurge) {
  auto ds = parse(R"({"spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}})");
  default_daemon_set(ds);
  EXPECT_EQ(ds.at("spec").at("updateStrategy"),
            parse(R"({"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,"maxSurge":0}})"));
  EXPECT_EQ(ds.at("spec").at("revisionHistoryLimit"), 10);
}

TEST(BuiltinDefaults, AJobGetsOneCompletionAndOnCreateTheSelectorKubeGenerates) {
  auto job = parse(R"({"metadata":{"name":"pi","uid":"u-1"},"spec":{"template":{
      "spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"perl"}]}}}})");
  default_job(job);
  default_job_on_create(job);
  const auto& spec = job.at("spec").as_object();
  EXPECT_EQ(spec.at("completions"), 1);
  EXPECT_EQ(spec.at("parallelism"), 1);
  EXPECT_EQ(spec.at("backoffLimit"), 6);
  EXPECT_EQ(spec.at("completionMode"), "NonIndexed");
  EXPECT_EQ(spec.at("suspend"), false);
  EXPECT_EQ(spec.at("podReplacementPolicy"), "TerminatingOrFailed");
  EXPECT_EQ(spec.at("selector"),
            parse(R"({"matchLabels":{"batch.kubernetes.io/controller-uid":"u-1"}})"));
  const auto generated = parse(R"({"batch.kubernetes.io/controller-uid":"u-1",
      "batch.kubernetes.io/job-name":"pi","controller-uid":"u-1","job-name":"pi"})");
  EXPECT_EQ(spec.at("template").at("metadata").at("labels"), generated);
  EXPECT_EQ(job.at("metadata").at("labels"), generated);

  auto manual = parse(R"({"metadata":{"name":"m","uid":"u-2"},"spec":{"manualSelector":true,
      "parallelism":3,"selector":{"matchLabels":{"a":"b"}},
      "template":{"metadata":{"labels":{"a":"b"}}}}})");
  default_job(manual);
  default_job_on_create(manual);
  EXPECT_FALSE(manual.at("spec").as_object().contains("completions"));
  EXPECT_EQ(manual.at("spec").at("selector"), parse(R"({"matchLabels":{"a":"b"}})"));
  EXPECT_EQ(manual.at("spec").at("template").at("metadata").at("labels"), parse(R"({"a":"b"})"));
  EXPECT_EQ(manual.at("metadata").at("labels"), parse(R"({"a":"b"})"));
}

TEST(BuiltinDefaults, ACronJobAndItsJobTemplatesPodTemplate) {
  auto cj = parse(R"({"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{
      "spec":{"restartPolicy":"OnFailure","containers":[{"name":"c","image":"x"}]}}}}}})");
  default_cron_job(cj);
  const auto& spec = cj.at("spec").as_object();
  EXPECT_EQ(spec.at("concurrencyPolicy"), "Allow");
  EXPECT_EQ(spec.at("suspend"), false);
  EXPECT_EQ(spec.at("successfulJobsHistoryLimit"), 3);
  EXPECT_EQ(spec.at("failedJobsHistoryLimit"), 1);
  EXPECT_EQ(spec.at("jobTemplate").at("spec").at("template").at("spec").at("schedulerName"),
            "default-scheduler");
  // The job template is not a job: no completions or backoffLimit.
  EXPECT_FALSE(spec.at("jobTemplate").at("spec").as_object().contains("backoffLimit"));
}

TEST(BuiltinDefaults, VolumesAndClaimsStartPending) {
  auto pv = parse(R"({"spec":{"capacity":{"storage":"1Gi"},"hostPath":{"path":"/d"}}})");
  default_persistent_volume(pv);
  default_persistent_volume_on_create(pv);
  EXPECT_EQ(pv.at("spec").at("persistentVolumeReclaimPolicy"), "Retain");
  EXPECT_EQ(pv.at("spec").at("volumeMode"), "Filesystem");
  EXPECT_EQ(pv.at("spec").at("hostPath").at("type"), "");
  EXPECT_EQ(pv.at("status").at("phase"), "Pending");
  EXPECT_TRUE(pv.at("status").as_object().contains("lastPhaseTransitionTime"));
  auto pvc = parse(R"({"spec":{"resources":{"requests":{"storage":"1Gi"}}},
      "status":{"phase":"Bound"}})");
  default_persistent_volume_claim(pvc);
  EXPECT_EQ(pvc.at("status").at("phase"), "Bound");
  default_persistent_volume_claim_on_create(pvc);
  EXPECT_EQ(pvc.at("status"), parse(R"({"phase":"Pending"})"));
  EXPECT_EQ(pvc.at("spec").at("volumeMode"), "Filesystem");
}

TEST(BuiltinDefaults, AContainerLimitRangeDefaultsLimitsFromMaxAndRequestsFromLimitsOrMin) {
  auto lr = parse(R"({"spec":{"limits":[
      {"type":"Container","max":{"cpu":"2"},"min":{"memory":"64Mi"}},
      {"type":"Pod","max":{"cpu":"4"}}]}})");
  default_limit_range(lr);
  const auto& items = lr.at("spec").at("limits").as_array();
  EXPECT_EQ(items[0].at("default"), parse(R"({"cpu":"2"})"));
  EXPECT_EQ(items[0].at("defaultRequest"), parse(R"({"cpu":"2","memory":"64Mi"})"));
  EXPECT_FALSE(items[1].as_object().contains("default"));
}

TEST(BuiltinDefaults, NetworkingDiscoverySchedulingAndStorageKinds) {
  auto np = parse(R"({"spec":{"podSelector":{},"egress":[{"ports":[{"port":53}]}]}})");
  default_network_policy(np);
  EXPECT_EQ(np.at("spec").at("policyTypes"), json::parse(R"(["Ingress","Egress"])"));
  EXPECT_EQ(np.at("spec").at("egress").at(0).at("ports").at(0).at("protocol"), "TCP");
  auto ingress_only = parse(R"({"spec":{"podSelector":{}}})");
  default_network_policy(ingress_only);
  EXPECT_EQ(ingress_only.at("spec").at("policyTypes"), json::parse(R"(["Ingress"])"));

  auto ic = parse(R"({"spec":{"controller":"x/y","parameters":{"kind":"K","name":"n"}}})");
  default_ingress_class(ic);
  EXPECT_EQ(ic.at("spec").at("parameters").at("scope"), "Cluster");

  auto slice = parse(R"({"addressType":"IPv4","endpoints":[],"ports":[{"port":80}]})");
  default_endpoint_slice(slice);
  EXPECT_EQ(slice.at("ports").at(0), parse(R"({"port":80,"name":"","protocol":"TCP"})"));

  auto pc = parse(R"({"value":1000})");
  default_priority_class(pc);
  EXPECT_EQ(pc.at("preemptionPolicy"), "PreemptLowerPriority");

  auto sc = parse(R"({"provisioner":"x"})");
  default_storage_class(sc);
  EXPECT_EQ(sc.at("reclaimPolicy"), "Delete");
  EXPECT_EQ(sc.at("volumeBindingMode"), "Immediate");

  auto driver = parse(R"({"spec":{}})");
  default_csi_driver(driver);
  EXPECT_EQ(driver.at("spec"), parse(R"({"attachRequired":true,"podInfoOnMount":false,
      "storageCapacity":false,"fsGroupPolicy":"ReadWriteOnceWithFSType",
      "volumeLifecycleModes":["Persistent"],"requiresRepublish":false,"seLinuxMount":false})"));
}

// SetDefaults_Volume, in pods and in templates alike.
TEST(BuiltinDefaults, AVolumeWithoutASourceIsAnEmptyDir) {
  auto pod = parse(R"({"spec":{"containers":[{"name":"c","image":"x"}],
      "volumes":[{"name":"scratch"},{"name":"cfg","configMap":{"name":"c"}},
                 {"name":"nulled","hostPath":null}]}})");
  default_pod(pod);
  const auto& volumes = pod.at("spec").at("volumes").as_array();
  EXPECT_EQ(volumes[0], parse(R"({"name":"scratch","emptyDir":{}})"));
  EXPECT_FALSE(volumes[1].as_object().contains("emptyDir"));
  EXPECT_EQ(volumes[2].at("emptyDir"), json::object());
  auto deployment = parse(R"({"spec":{"template":{"spec":{"containers":[{"name":"c","image":"x"}],
      "volumes":[{"name":"scratch"}]}}}})");
  default_deployment(deployment);
  EXPECT_EQ(deployment.at("spec").at("template").at("spec").at("volumes").at(0).at("emptyDir"),
            json::object());
}

// The rest of kube's SetDefaults_* that kwatch lacked: a projected token's lifetime, the
// affinity configuration of a Service without affinity, a load balancer ingress's ipMode, and a
// node's allocatable resources.
TEST(BuiltinDefaults, TokenLifetimeAffinityIpModeAndAllocatable) {
  auto pod = parse(R"({"spec":{"containers":[{"name":"c","image":"x"}],"volumes":[{"name":"t",
      "projected":{"sources":[{"serviceAccountToken":{"path":"token"}},
                              {"serviceAccountToken":{"path":"short","expirationSeconds":600}},
                              {"configMap":{"name":"c"}}]}}]}})");
  default_pod(pod);
  const auto& sources = pod.at("spec").at("volumes").at(0).at("projected").at("sources");
  EXPECT_EQ(sources.at(0).at("serviceAccountToken").at("expirationSeconds"), 3600);
  EXPECT_EQ(sources.at(1).at("serviceAccountToken").at("expirationSeconds"), 600);
  EXPECT_FALSE(sources.at(2).as_object().contains("serviceAccountToken"));

  auto svc = parse(R"({"spec":{"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":5}},
      "ports":[{"port":80}]}})");
  default_service(svc);
  EXPECT_FALSE(svc.at("spec").as_object().contains("sessionAffinityConfig"));

  auto lb = parse(R"({"spec":{"type":"LoadBalancer","ports":[{"port":80}]},
      "status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"},{"hostname":"lb.example.com"},
                                           {"ip":"192.0.2.2","ipMode":"Proxy"}]}}})");
  default_service(lb);
  const auto& ingress = lb.at("status").at("loadBalancer").at("ingress");
  EXPECT_EQ(ingress.at(0).at("ipMode"), "VIP");
  EXPECT_FALSE(ingress.at(1).as_object().contains("ipMode"));
  EXPECT_EQ(ingress.at(2).at("ipMode"), "Proxy");

  auto node = parse(R"({"status":{"capacity":{"cpu":"4","memory":"8Gi"}}})");
  default_node(node);
  EXPECT_EQ(node.at("status").at("allocatable"), parse(R"({"cpu":"4","memory":"8Gi"})"));
  auto set = parse(R"({"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"3"}}})");
  default_node(set);
  EXPECT_EQ(set.at("status").at("allocatable").at("cpu"), "3");
}

TEST(BuiltinDefaults, InitialStatusReplacesWhatACreateSent) {
  auto rs = parse(R"({"status":{"replicas":5,"readyReplicas":5}})");
  initial_status(json::object{{"replicas", 0}})(rs);
  EXPECT_EQ(rs.at("status"), parse(R"({"replicas":0})"));
  initial_status({})(rs);
  EXPECT_EQ(rs.at("status"), json::object());
}

// ---- Each kind's minimal object, stored as kube-apiserver 1.34 stores it ----

// What the server does to a created object of a built-in kind before it is stored, in
// registry's order (decode_and_default, then check_written once the object is valid): Go's
// omitempty, pruning, the schema's defaults, the kind's defaulting and create hook, then the
// structs and zero scalars Go writes. Server-set metadata (uid, creationTimestamp, ...) and
// admission are not part of it.
json::object stored_form(const ResourceInfo& info, json::object obj) {
  schema::omit_empty_fields(info.api_version(), info.kind, obj);
  json::value value(std::move(obj));
  if (info.schema) {
    info.schema->prune(value);
    info.schema->apply_defaults(value);
  }
  obj = std::move(value.get_object());
  if (info.hooks.set_defaults) info.hooks.set_defaults(obj);
  if (info.hooks.prepare_for_create) info.hooks.prepare_for_create(obj);
  schema::write_zero_fields(info.api_version(), info.kind, obj);
  return obj;
}

struct StoredCase {
  const char* group;
  const char* version;
  const char* kind;
  const char* sent;    // the body a client creates, without apiVersion and kind
  const char* stored;  // what kube-apiserver stores from it (the same leaving out)
};

// A pod spec as a client writes it, and as every pod template stores it (SetDefaults_PodSpec,
// SetDefaults_Container, Go's `resources: {}`).
#define KW_SPEC R"({"containers":[{"name":"c","image":"nginx:1.25"}]})"
#define KW_SPEC_STORED                                                                        \
  R"({"containers":[{"name":"c","image":"nginx:1.25","imagePullPolicy":"IfNotPresent",)"      \
  R"("resources":{},"terminationMessagePath":"/dev/termination-log",)"                        \
  R"("terminationMessagePolicy":"File"}],"restartPolicy":"Always",)"                          \
  R"("terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},)"    \
  R"("schedulerName":"default-scheduler"})"
#define KW_TEMPLATE R"({"metadata":{"labels":{"app":"a"}},"spec":)" KW_SPEC "}"
#define KW_TEMPLATE_STORED R"({"metadata":{"labels":{"app":"a"}},"spec":)" KW_SPEC_STORED "}"
#define KW_SELECTOR R"("selector":{"matchLabels":{"app":"a"}})"

const StoredCase kStoredCases[] = {
    // ---- core/v1 ----
    {"", "v1", "Pod", R"({"metadata":{"name":"p"},"spec":)" KW_SPEC "}",
     R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx:1.25",)"
     R"("imagePullPolicy":"IfNotPresent","resources":{},)"
     R"("terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],)"
     R"("restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",)"
     R"("securityContext":{},"schedulerName":"default-scheduler","enableServiceLinks":true,)"
     R"("priority":0,"preemptionPolicy":"PreemptLowerPriority","tolerations":[)"
     R"({"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",)"
     R"("tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable","operator":"Exists",)"
     R"("effect":"NoExecute","tolerationSeconds":300}]},)"
     R"("status":{"phase":"Pending","qosClass":"BestEffort"}})"},
    {"", "v1", "Service", R"({"metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}})",
     R"({"metadata":{"name":"s"},"spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":80}],)"
     R"("type":"ClusterIP","sessionAffinity":"None","internalTrafficPolicy":"Cluster"},)"
     R"("status":{"loadBalancer":{}}})"},
    {"", "v1", "ConfigMap", R"({"metadata":{"name":"c"},"data":{"a":"b"}})",
     R"({"metadata":{"name":"c"},"data":{"a":"b"}})"},
    {"", "v1", "Secret", R"({"metadata":{"name":"s"}})",
     R"({"metadata":{"name":"s"},"type":"Opaque"})"},
    {"", "v1", "Namespace", R"({"metadata":{"name":"n"}})",
     R"({"metadata":{"name":"n","labels":{"kubernetes.io/metadata.name":"n"}},)"
     R"("spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})"},
    {"", "v1", "Node", R"({"metadata":{"name":"n"}})",
     R"({"metadata":{"name":"n"},"spec":{},"status":{"daemonEndpoints":{"kubeletEndpoint":)"
     R"({"Port":0}},"nodeInfo":{"machineID":"","systemUUID":"","bootID":"","kernelVersion":"",)"
     R"("osImage":"","containerRuntimeVersion":"","kubeletVersion":"","kubeProxyVersion":"",)"
     R"("operatingSystem":"","architecture":""}}})"},
    {"", "v1", "PersistentVolumeClaim",
     R"({"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"]}})",
     R"({"metadata":{"name":"c"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{},)"
     R"("volumeMode":"Filesystem"},"status":{"phase":"Pending"}})"},
    {"", "v1", "ReplicationController",
     R"({"metadata":{"name":"r"},"spec":{"template":)" KW_TEMPLATE "}}",
     R"({"metadata":{"name":"r","labels":{"app":"a"}},"spec":{"replicas":1,)"
     R"("selector":{"app":"a"},"template":)" KW_TEMPLATE_STORED R"(},"status":{"replicas":0}})"},
    {"", "v1", "PodTemplate", R"({"metadata":{"name":"t"},"template":{"spec":)" KW_SPEC "}}",
     R"({"metadata":{"name":"t"},"template":{"metadata":{},"spec":)" KW_SPEC_STORED "}}"},
    {"", "v1", "ResourceQuota", R"({"metadata":{"name":"q"}})",
     R"({"metadata":{"name":"q"},"spec":{},"status":{}})"},
    {"", "v1", "LimitRange", R"({"metadata":{"name":"l"}})",
     R"({"metadata":{"name":"l"},"spec":{"limits":null}})"},
    {"", "v1", "Event",
     R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R"})",
     R"({"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R",)"
     R"("source":{},"firstTimestamp":null,"lastTimestamp":null,"eventTime":null,)"
     R"("reportingComponent":"","reportingInstance":""})"},
    {"", "v1", "Endpoints",
     R"({"metadata":{"name":"e"},"subsets":[{"addresses":[{"ip":"10.0.0.1"}],)"
     R"("ports":[{"port":80}]}]})",
     R"({"metadata":{"name":"e"},"subsets":[{"addresses":[{"ip":"10.0.0.1"}],)"
     R"("ports":[{"port":80,"protocol":"TCP"}]}]})"},
    {"", "v1", "ServiceAccount", R"({"metadata":{"name":"a"}})", R"({"metadata":{"name":"a"}})"},
    // ---- apps/v1 ----
    {"apps", "v1", "Deployment",
     R"({"metadata":{"name":"d"},"spec":{)" KW_SELECTOR R"(,"template":)" KW_TEMPLATE "}}",
     R"({"metadata":{"name":"d"},"spec":{"replicas":1,)" KW_SELECTOR R"(,"template":)"
     KW_TEMPLATE_STORED R"(,"strategy":{"type":"RollingUpdate","rollingUpdate":)"
     R"({"maxUnavailable":"25%","maxSurge":"25%"}},"revisionHistoryLimit":10,)"
     R"("progressDeadlineSeconds":600},"status":{}})"},
    {"apps", "v1", "ReplicaSet",
     R"({"metadata":{"name":"r"},"spec":{)" KW_SELECTOR R"(,"template":)" KW_TEMPLATE "}}",
     R"({"metadata":{"name":"r"},"spec":{"replicas":1,)" KW_SELECTOR R"(,"template":)"
     KW_TEMPLATE_STORED R"(},"status":{"replicas":0}})"},
    {"apps", "v1", "StatefulSet",
     R"({"metadata":{"name":"s"},"spec":{)" KW_SELECTOR R"(,"template":)" KW_TEMPLATE "}}",
     R"({"metadata":{"name":"s"},"spec":{"replicas":1,)" KW_SELECTOR R"(,"template":)"
     KW_TEMPLATE_STORED R"(,"serviceName":"","podManagementPolicy":"OrderedReady",)"
     R"("updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0}},)"
     R"("revisionHistoryLimit":10,"persistentVolumeClaimRetentionPolicy":)"
     R"({"whenDeleted":"Retain","whenScaled":"Retain"}},)"
     R"("status":{"replicas":0,"availableReplicas":0}})"},
    {"apps", "v1", "DaemonSet",
     R"({"metadata":{"name":"d"},"spec":{)" KW_SELECTOR R"(,"template":)" KW_TEMPLATE "}}",
     R"({"metadata":{"name":"d"},"spec":{)" KW_SELECTOR R"(,"template":)" KW_TEMPLATE_STORED
     R"(,"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1,)"
     R"("maxSurge":0}},"revisionHistoryLimit":10},"status":{"currentNumberScheduled":0,)"
     R"("numberMisscheduled":0,"desiredNumberScheduled":0,"numberReady":0}})"},
    // ---- batch/v1 ----
    {"batch", "v1", "Job",
     R"({"metadata":{"name":"j","uid":"u"},"spec":{"template":{"spec":)"
     R"({"containers":[{"name":"c","image":"nginx:1.25"}],"restartPolicy":"Never"}}}})",
     R"({"metadata":{"name":"j","uid":"u","labels":{"batch.kubernetes.io/controller-uid":"u",)"
     R"("batch.kubernetes.io/job-name":"j","controller-uid":"u","job-name":"j"}},)"
     R"("spec":{"parallelism":1,"completions":1,"backoffLimit":6,"selector":{"matchLabels":)"
     R"({"batch.kubernetes.io/controller-uid":"u"}},"template":{"metadata":{"labels":)"
     R"({"batch.kubernetes.io/controller-uid":"u","batch.kubernetes.io/job-name":"j",)"
     R"("controller-uid":"u","job-name":"j"}},"spec":{"containers":[{"name":"c",)"
     R"("image":"nginx:1.25","imagePullPolicy":"IfNotPresent","resources":{},)"
     R"("terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],)"
     R"("restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",)"
     R"("securityContext":{},"schedulerName":"default-scheduler"}},)"
     R"("completionMode":"NonIndexed","suspend":false,)"
     R"("podReplacementPolicy":"TerminatingOrFailed"},"status":{}})"},
    {"batch", "v1", "CronJob",
     R"({"metadata":{"name":"c"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":)"
     R"({"template":{"spec":)" KW_SPEC "}}}}}",
     R"({"metadata":{"name":"c"},"spec":{"schedule":"* * * * *","concurrencyPolicy":"Allow",)"
     R"("suspend":false,"jobTemplate":{"metadata":{},"spec":{"template":{"metadata":{},)"
     R"("spec":)" KW_SPEC_STORED R"(}}},"successfulJobsHistoryLimit":3,)"
     R"("failedJobsHistoryLimit":1},"status":{}})"},
    // ---- networking.k8s.io/v1 ----
    {"networking.k8s.io", "v1", "Ingress",
     R"({"metadata":{"name":"i"},"spec":{"defaultBackend":{"service":{"name":"s",)"
     R"("port":{"number":80}}}}})",
     R"({"metadata":{"name":"i"},"spec":{"defaultBackend":{"service":{"name":"s",)"
     R"("port":{"number":80}}}},"status":{"loadBalancer":{}}})"},
    {"networking.k8s.io", "v1", "NetworkPolicy", R"({"metadata":{"name":"n"}})",
     R"({"metadata":{"name":"n"},"spec":{"podSelector":{},"policyTypes":["Ingress"]}})"},
    {"networking.k8s.io", "v1", "IngressClass", R"({"metadata":{"name":"i"}})",
     R"({"metadata":{"name":"i"},"spec":{}})"},
    // ---- autoscaling, policy ----
    {"autoscaling", "v2", "HorizontalPodAutoscaler",
     R"({"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1",)"
     R"("kind":"Deployment","name":"d"},"maxReplicas":3},"status":{"desiredReplicas":5}})",
     R"({"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1",)"
     R"("kind":"Deployment","name":"d"},"minReplicas":1,"maxReplicas":3,"metrics":[{"type":)"
     R"("Resource","resource":{"name":"cpu","target":{"type":"Utilization",)"
     R"("averageUtilization":80}}}]},"status":{"desiredReplicas":0,"currentMetrics":null}})"},
    {"autoscaling", "v1", "HorizontalPodAutoscaler",
     R"({"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d"},)"
     R"("maxReplicas":3}})",
     R"({"metadata":{"name":"h"},"spec":{"scaleTargetRef":{"kind":"Deployment","name":"d"},)"
     R"("minReplicas":1,"maxReplicas":3},"status":{"currentReplicas":0,"desiredReplicas":0}})"},
    {"policy", "v1", "PodDisruptionBudget",
     R"({"metadata":{"name":"p"},"spec":{"minAvailable":1}})",
     R"({"metadata":{"name":"p"},"spec":{"minAvailable":1},"status":{"disruptionsAllowed":0,)"
     R"("currentHealthy":0,"desiredHealthy":0,"expectedPods":0}})"},
    // ---- rbac, scheduling, node, coordination, discovery ----
    {"rbac.authorization.k8s.io", "v1", "Role",
     R"({"metadata":{"name":"r"},"rules":[{"verbs":["get"],"apiGroups":[""],)"
     R"("resources":["pods"]}]})",
     R"({"metadata":{"name":"r"},"rules":[{"verbs":["get"],"apiGroups":[""],)"
     R"("resources":["pods"]}]})"},
    // A list without omitempty left out reads back null; one sent empty stays empty.
    {"rbac.authorization.k8s.io", "v1", "Role", R"({"metadata":{"name":"r"}})",
     R"({"metadata":{"name":"r"},"rules":null})"},
    {"rbac.authorization.k8s.io", "v1", "ClusterRole", R"({"metadata":{"name":"r"},"rules":[]})",
     R"({"metadata":{"name":"r"},"rules":[]})"},
    {"rbac.authorization.k8s.io", "v1", "RoleBinding",
     R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
     R"("kind":"Role","name":"r"}})",
     R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
     R"("kind":"Role","name":"r"}})"},
    {"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding",
     R"({"metadata":{"name":"b"},"roleRef":{"kind":"ClusterRole","name":"r"},"subjects":[)"
     R"({"kind":"User","name":"u"},{"kind":"Group","name":"g"},)"
     R"({"kind":"ServiceAccount","name":"s","namespace":"n"}]})",
     R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
     R"("kind":"ClusterRole","name":"r"},"subjects":[{"kind":"User","name":"u",)"
     R"("apiGroup":"rbac.authorization.k8s.io"},{"kind":"Group","name":"g",)"
     R"("apiGroup":"rbac.authorization.k8s.io"},)"
     R"({"kind":"ServiceAccount","name":"s","namespace":"n"}]})"},
    {"scheduling.k8s.io", "v1", "PriorityClass", R"({"metadata":{"name":"p"},"value":10})",
     R"({"metadata":{"name":"p"},"value":10,"preemptionPolicy":"PreemptLowerPriority"})"},
    {"node.k8s.io", "v1", "RuntimeClass", R"({"metadata":{"name":"r"},"handler":"h"})",
     R"({"metadata":{"name":"r"},"handler":"h"})"},
    {"coordination.k8s.io", "v1", "Lease", R"({"metadata":{"name":"l"}})",
     R"({"metadata":{"name":"l"},"spec":{}})"},
    {"discovery.k8s.io", "v1", "EndpointSlice",
     R"({"metadata":{"name":"e"},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],)"
     R"("ports":[{"port":80}]})",
     R"({"metadata":{"name":"e"},"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"],)"
     R"("conditions":{}}],"ports":[{"name":"","protocol":"TCP","port":80}]})"},
    {"discovery.k8s.io", "v1", "EndpointSlice",
     R"({"metadata":{"name":"e"},"addressType":"IPv4"})",
     R"({"metadata":{"name":"e"},"addressType":"IPv4","endpoints":null,"ports":null})"},
    // ---- storage.k8s.io/v1 ----
    {"storage.k8s.io", "v1", "StorageClass", R"({"metadata":{"name":"s"},"provisioner":"p"})",
     R"({"metadata":{"name":"s"},"provisioner":"p","reclaimPolicy":"Delete",)"
     R"("volumeBindingMode":"Immediate"})"},
    {"storage.k8s.io", "v1", "CSIDriver", R"({"metadata":{"name":"d"}})",
     R"({"metadata":{"name":"d"},"spec":{"attachRequired":true,"podInfoOnMount":false,)"
     R"("volumeLifecycleModes":["Persistent"],"storageCapacity":false,)"
     R"("fsGroupPolicy":"ReadWriteOnceWithFSType","requiresRepublish":false,)"
     R"("seLinuxMount":false}})"},
    {"storage.k8s.io", "v1", "VolumeAttachment",
     R"({"metadata":{"name":"v"},"spec":{"attacher":"a","nodeName":"n",)"
     R"("source":{"persistentVolumeName":"pv"}}})",
     R"({"metadata":{"name":"v"},"spec":{"attacher":"a","nodeName":"n",)"
     R"("source":{"persistentVolumeName":"pv"}},"status":{"attached":false}})"},
    // ---- admissionregistration.k8s.io/v1 ----
    {"admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
     R"({"metadata":{"name":"w"},"webhooks":[{"name":"w.example.com","clientConfig":)"
     R"({"service":{"namespace":"n","name":"s"}},"sideEffects":"None",)"
     R"("admissionReviewVersions":["v1"]}]})",
     R"({"metadata":{"name":"w"},"webhooks":[{"name":"w.example.com","clientConfig":)"
     R"({"service":{"namespace":"n","name":"s","port":443}},"failurePolicy":"Fail",)"
     R"("matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},)"
     R"("sideEffects":"None","timeoutSeconds":10,"admissionReviewVersions":["v1"]}]})"},
};

#undef KW_SPEC
#undef KW_SPEC_STORED
#undef KW_TEMPLATE
#undef KW_TEMPLATE_STORED
#undef KW_SELECTOR

TEST(BuiltinDefaults, EachKindsMinimalObjectIsStoredAsKubeStoresIt) {
  const auto scheme = Scheme::builtin();
  for (const StoredCase& c : kStoredCases) {
    SCOPED_TRACE(std::string(c.group) + "/" + c.version + " " + c.kind);
    const auto info = scheme->find_kind(c.group, c.version, c.kind);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(json::value(stored_form(*info, parse(c.sent))), json::parse(c.stored))
        << json::serialize(stored_form(*info, parse(c.sent)));
  }
}

TEST(BuiltinDefaults, AnAutoscalerStoredInV2ReadsInV1WithBothCounts) {
  auto hpa = parse(R"({"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
      "spec":{"scaleTargetRef":{"kind":"Deployment","name":"d"},"maxReplicas":3},
      "status":{"desiredReplicas":0}})");
  horizontal_pod_autoscaler_to_v1(hpa);
  EXPECT_EQ(hpa.at("status"), parse(R"({"currentReplicas":0,"desiredReplicas":0})"));
}

TEST(BuiltinDefaults, APersistentVolumeIsStoredPendingSinceItsCreation) {
  const auto info = Scheme::builtin()->find_kind("", "v1", "PersistentVolume");
  ASSERT_NE(info, nullptr);
  auto pv = stored_form(*info, parse(R"({"metadata":{"name":"v"},"spec":{"capacity":)"
                                     R"({"storage":"1Gi"},"hostPath":{"path":"/x"}}})"));
  ASSERT_TRUE(pv.at("status").as_object().contains("lastPhaseTransitionTime"));
  pv.at("status").as_object().erase("lastPhaseTransitionTime");
  EXPECT_EQ(pv, parse(R"({"metadata":{"name":"v"},"spec":{"capacity":{"storage":"1Gi"},)"
                      R"("hostPath":{"path":"/x","type":""},)"
                      R"("persistentVolumeReclaimPolicy":"Retain","volumeMode":"Filesystem"},)"
                      R"("status":{"phase":"Pending"}})"));
}

TEST(BuiltinDefaults, VolumeSourcesGetTheirDeclarativeDefaults) {
  const auto info = Scheme::builtin()->find_kind("", "v1", "Pod");
  ASSERT_NE(info, nullptr);
  const auto pod = stored_form(*info, parse(R"({"spec":{"containers":[{"name":"c","image":"x",
      "livenessProbe":{"grpc":{"port":9000}}}],"volumes":[
      {"name":"rbd","rbd":{"monitors":["m"],"image":"i"}},
      {"name":"iscsi","iscsi":{"targetPortal":"t","iqn":"q","lun":0}},
      {"name":"azure","azureDisk":{"diskName":"d","diskURI":"u"}},
      {"name":"scaleio","scaleIO":{"gateway":"g","system":"s","secretRef":{"name":"n"}}},
      {"name":"down","downwardAPI":{"items":[{"path":"p","fieldRef":{"fieldPath":"metadata.name"}}]}},
      {"name":"proj","projected":{"sources":[{"downwardAPI":{"items":[{"path":"p",
          "fieldRef":{"fieldPath":"metadata.name"}}]}}]}},
      {"name":"eph","ephemeral":{"volumeClaimTemplate":{"spec":{"accessModes":["ReadWriteOnce"]}}}}
      ]}})"));
  const auto& spec = pod.at("spec").as_object();
  EXPECT_EQ(spec.at("containers").at(0).at("livenessProbe").at("grpc"),
            parse(R"({"port":9000,"service":""})"));
  const auto& v = spec.at("volumes").as_array();
  EXPECT_EQ(v.at(0).at("rbd"), parse(R"({"monitors":["m"],"image":"i","pool":"rbd",
      "user":"admin","keyring":"/etc/ceph/keyring"})"));
  EXPECT_EQ(v.at(1).at("iscsi").at("iscsiInterface"), "default");
  EXPECT_EQ(v.at(2).at("azureDisk"), parse(R"({"diskName":"d","diskURI":"u",
      "cachingMode":"ReadWrite","fsType":"ext4","readOnly":false,"kind":"Shared"})"));
  EXPECT_EQ(v.at(3).at("scaleIO").at("storageMode"), "ThinProvisioned");
  EXPECT_EQ(v.at(3).at("scaleIO").at("fsType"), "xfs");
  EXPECT_EQ(v.at(4).at("downwardAPI"), parse(R"({"items":[{"path":"p",
      "fieldRef":{"apiVersion":"v1","fieldPath":"metadata.name"}}],"defaultMode":420})"));
  EXPECT_EQ(v.at(5).at("projected").at("sources").at(0).at("downwardAPI").at("items").at(0)
                .at("fieldRef").at("apiVersion"),
            "v1");
  EXPECT_EQ(v.at(6).at("ephemeral").at("volumeClaimTemplate").at("spec"),
            parse(R"({"accessModes":["ReadWriteOnce"],"resources":{},
                      "volumeMode":"Filesystem"})"));
}

// PodLevelResources (on by default in kube 1.34): where a pod sets pod-level limits, what it
// does not request is its containers' effective request, else its own limit.
TEST(BuiltinDefaults, PodLevelRequestsComeFromTheContainersOrTheLimits) {
  auto requests_of = [](std::string_view text) {
    auto pod = parse(text);
    default_pod(pod);
    const auto& resources = pod.at("spec").at("resources").as_object();
    return resources.contains("requests") ? resources.at("requests") : json::value(nullptr);
  };
  // No container asks: the pod's limits.
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"limits":{"cpu":"2","memory":"1Gi"}},
      "containers":[{"name":"a","image":"x"}]}})"),
            parse(R"({"cpu":"2","memory":"1Gi"})"));
  // The containers' sum (a container's limit standing for its request), and the pod's limit for
  // what none asks.
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"limits":{"cpu":"4","memory":"8Mi"}},
      "containers":[{"name":"a","image":"x","resources":{"requests":{"cpu":"100m"}}},
                    {"name":"b","image":"x","resources":{"limits":{"cpu":"200m"}}}]}})"),
            parse(R"({"cpu":"300m","memory":"8Mi"})"));
  // Init containers: the largest need while one runs beside the sidecars started before it.
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"limits":{"cpu":"8"}},
      "initContainers":[{"name":"s","image":"x","restartPolicy":"Always",
                         "resources":{"requests":{"cpu":"500m"}}},
                        {"name":"i","image":"x","resources":{"requests":{"cpu":"2"}}}],
      "containers":[{"name":"a","image":"x","resources":{"requests":{"cpu":"1"}}}]}})"),
            parse(R"({"cpu":"2500m"})"));
  // What the pod requests itself is kept; without pod-level limits nothing is defaulted.
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"limits":{"cpu":"2"},"requests":{"cpu":"1"}},
      "containers":[{"name":"a","image":"x","resources":{"requests":{"cpu":"100m"}}}]}})"),
            parse(R"({"cpu":"1"})"));
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"requests":{"cpu":"1"}},
      "containers":[{"name":"a","image":"x","resources":{"requests":{"memory":"1Mi"}}}]}})"),
            parse(R"({"cpu":"1"})"));
  // Only cpu, memory and huge pages are pod-level resources.
  EXPECT_EQ(requests_of(R"({"spec":{"resources":{"limits":{"cpu":"1"}},
      "containers":[{"name":"a","image":"x",
                     "resources":{"requests":{"ephemeral-storage":"1Gi"}}}]}})"),
            parse(R"({"cpu":"1"})"));
}

// defaultHugePagePodLimits: a huge page size the containers limit becomes a pod-level limit (then
// a request) where the pod sets resources of its own; a templates' pod spec gets none of this.
TEST(BuiltinDefaults, PodLevelHugePageLimitsComeFromTheContainers) {
  auto pod = parse(R"({"spec":{"resources":{"requests":{"cpu":"1"}},
      "containers":[{"name":"a","image":"x","resources":{"limits":{"hugepages-2Mi":"4Mi"}}},
                    {"name":"b","image":"x","resources":{"limits":{"hugepages-2Mi":"2Mi"}}}]}})");
  default_pod(pod);
  EXPECT_EQ(pod.at("spec").at("resources"),
            parse(R"({"requests":{"cpu":"1","hugepages-2Mi":"6Mi"},
                      "limits":{"hugepages-2Mi":"6Mi"}})"));
  auto bare = parse(R"({"spec":{"containers":[{"name":"a","image":"x",
      "resources":{"limits":{"hugepages-2Mi":"4Mi"}}}]}})");
  default_pod(bare);
  EXPECT_FALSE(bare.at("spec").as_object().contains("resources"));
}

TEST(Base64, EncodesWithPadding) {
  EXPECT_EQ(base::base64_encode(""), "");
  EXPECT_EQ(base::base64_encode("f"), "Zg==");
  EXPECT_EQ(base::base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base::base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base::base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base::base64_encode(std::string("\xff\x00\x80", 3)), "/wCA");
}

}  // namespace
}  // namespace kwatch::kinds
