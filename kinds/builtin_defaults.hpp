// kube-apiserver's defaulting of the built-in kinds kwatch serves, on the JSON object: the
// SetDefaults_* functions of the kinds' v1 APIs, the defaults its default-on admission plugins
// add (Priority, DefaultTolerationSeconds) and the status a pod or namespace starts with.
//
// Each function fills absent fields only; what a client set is left alone, so applying a function
// twice changes nothing the second time. The `*_on_create` functions also set what only a create
// decides (a pod's initial status). Values that are not objects where an object is expected are
// skipped: the schema reports them.
// Pure functions; safe from any thread.
#pragma once

#include <boost/json/fwd.hpp>

#include <functional>
#include <string>
#include <string_view>

namespace kwatch::kinds {

// SetDefaults_PodSpec, for pods and pod templates alike: restartPolicy, dnsPolicy,
// terminationGracePeriodSeconds, schedulerName, securityContext; per container
// imagePullPolicy (by image tag), terminationMessagePath and -Policy, port protocol, probe
// timings; volume source default modes.
void default_pod_spec(boost::json::object& spec);
// The pod spec, then SetDefaults_Pod's own: enableServiceLinks, requests from limits, host
// ports on the host's network (none of which a template gets).
void default_pod(boost::json::object& pod);
// What admission adds when a pod is created (priority, tolerations for not-ready and
// unreachable nodes), then status.phase Pending and status.qosClass.
void default_pod_on_create(boost::json::object& pod);
// What admission does on an update: the priority the create assigned is kept when the update
// leaves it out, and the not-ready and unreachable tolerations are added again.
void default_pod_on_update(boost::json::object& pod, const boost::json::object& old);

// type, sessionAffinity, port protocol and targetPort, traffic policies.
void default_node(boost::json::object& node);
void default_service(boost::json::object& service);

// replicas, strategy, revisionHistoryLimit, progressDeadlineSeconds, the pod template.
void default_deployment(boost::json::object& deployment);

// ReplicationController: the template's labels as selector and labels when those are empty;
// replicas; the pod template.
void default_replication_controller(boost::json::object& rc);
// ReplicaSet: replicas; the pod template.
void default_replica_set(boost::json::object& rs);
// StatefulSet: podManagementPolicy, updateStrategy (RollingUpdate, partition 0),
// persistentVolumeClaimRetentionPolicy (Retain), replicas, revisionHistoryLimit; the pod
// template; each claim template with apiVersion, kind, volumeMode and status.phase.
void default_stateful_set(boost::json::object& sts);
// DaemonSet: updateStrategy (RollingUpdate, maxUnavailable 1, maxSurge 0),
// revisionHistoryLimit; the pod template.
void default_daemon_set(boost::json::object& ds);
// Job: completions and parallelism, backoffLimit, completionMode, suspend,
// podReplacementPolicy, pod failure rule statuses, the template's labels as the job's; the pod
// template.
void default_job(boost::json::object& job);
// A new job: status cleared and, unless spec.manualSelector, the selector kube generates
// (batch.kubernetes.io/controller-uid=<uid>) with the labels it puts on the pod template
// (controller-uid and job-name, also under their legacy keys). Needs metadata.uid.
void default_job_on_create(boost::json::object& job);
// CronJob: concurrencyPolicy, suspend, the two history limits; the job template's pod template.
void default_cron_job(boost::json::object& cron_job);
// PodTemplate: its pod template.
void default_pod_template(boost::json::object& pod_template);
// PersistentVolume: reclaim policy Retain, volumeMode Filesystem, status.phase Pending.
void default_persistent_volume(boost::json::object& pv);
// A new volume: status Pending with its lastPhaseTransitionTime now.
void default_persistent_volume_on_create(boost::json::object& pv);
// PersistentVolumeClaim: volumeMode Filesystem, status.phase Pending.
void default_persistent_volume_claim(boost::json::object& pvc);
// A new claim: status Pending.
void default_persistent_volume_claim_on_create(boost::json::object& pvc);
// LimitRange: a Container item's default from max, defaultRequest from default or min.
void default_limit_range(boost::json::object& limit_range);
// NetworkPolicy: port protocol TCP; policyTypes Ingress (and Egress with egress rules).
void default_network_policy(boost::json::object& policy);
// IngressClass: parameters.scope Cluster.
void default_ingress_class(boost::json::object& ingress_class);
// EndpointSlice: ports' name "" and protocol TCP.
void default_endpoint_slice(boost::json::object& slice);
// PriorityClass: preemptionPolicy PreemptLowerPriority.
void default_priority_class(boost::json::object& priority_class);
// StorageClass: reclaimPolicy Delete, volumeBindingMode Immediate.
void default_storage_class(boost::json::object& storage_class);
// CSIDriver: attachRequired, podInfoOnMount, storageCapacity, fsGroupPolicy,
// volumeLifecycleModes, requiresRepublish, seLinuxMount.
void default_csi_driver(boost::json::object& driver);

// RoleBinding and ClusterRoleBinding: roleRef.apiGroup rbac.authorization.k8s.io when empty; a
// User or Group subject's apiGroup the same (a ServiceAccount's stays "").
void default_role_binding(boost::json::object& binding);

// A create hook that replaces the status with `status`, as kube's strategies reset it; the
// zero fields Go always writes go in `status` (`{}` when there are none).
std::function<void(boost::json::object&)> initial_status(boost::json::object status);

// type Opaque; stringData folded into data (base64), as the API's conversion does.
void default_secret(boost::json::object& secret);

// The `kubernetes.io/metadata.name` label, equal to the name.
void default_namespace(boost::json::object& ns);
// status.phase Active and the `kubernetes` finalizer.
void default_namespace_on_create(boost::json::object& ns);

// subsets[].ports[].protocol.
void default_endpoints(boost::json::object& endpoints);

// The imagePullPolicy kube gives an image: Always for `:latest` or no tag (and no digest),
// IfNotPresent otherwise.
std::string default_image_pull_policy(std::string_view image);

}  // namespace kwatch::kinds
