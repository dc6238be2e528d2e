#include "kinds/builtin_kinds.hpp"

#include "schema/field_type.hpp"
#include "kinds/horizontal_pod_autoscaler.hpp"

#include "kinds/admission_policy.hpp"
#include "kinds/api_service.hpp"
#include "kinds/certificate_signing_request.hpp"
#include "kinds/dynamic_resources.hpp"
#include "kinds/flow_control.hpp"
#include "kinds/service_addresses.hpp"
#include "kinds/service_validation.hpp"
#include "kinds/storage_kinds.hpp"
#include "kinds/webhook_configuration.hpp"
#include "kinds/builtin_columns.hpp"
#include "kinds/builtin_defaults.hpp"
#include "schema/builtin_schemas.hpp"
#include "kinds/builtin_validation.hpp"
#include "kinds/custom_resource_definition.hpp"
#include "schema/field_type.hpp"
#include "apimachinery/json_path.hpp"
#include "kinds/scheme.hpp"
#include "schema/strategic_merge_patch.hpp"
#include "schema/structural_schema.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cctype>
#include <stdexcept>

namespace kwatch::kinds {

using schema::FieldTypes;
using schema::KindSchemas;
using schema::PatchSchema;
using schema::SchemaCompileOptions;
using schema::StructuralSchema;
using apimachinery::Cause;
using apimachinery::find_field;

namespace json = boost::json;

namespace {

using apimachinery::object_member;

using apimachinery::string_member;

// A pod's spec.ephemeralContainers change only through /ephemeralcontainers, which changes
// nothing else (`kubectl debug`); a binding writes what it writes.
void keep_ephemeral_containers(json::object& obj, const json::object& old,
                               std::string_view subresource) {
  if (subresource == "binding") return;
  const bool ephemeral = subresource == "ephemeralcontainers";
  const json::value* from_spec = (ephemeral ? obj : old).if_contains("spec");
  const json::value* containers = from_spec != nullptr && from_spec->is_object()
                                      ? from_spec->get_object().if_contains("ephemeralContainers")
                                      : nullptr;
  json::value taken = containers != nullptr ? *containers : json::value();
  if (ephemeral) obj = old;
  json::value& spec = obj["spec"];
  if (!spec.is_object()) spec = json::object();
  if (containers != nullptr) {
    spec.get_object()["ephemeralContainers"] = std::move(taken);
  } else {
    spec.get_object().erase("ephemeralContainers");
  }
}

// A namespace's spec.finalizers change only through /finalize, which changes nothing else of
// the spec or status (only the metadata it sends).
void keep_namespace_finalizers(json::object& obj, const json::object& old,
                               std::string_view subresource) {
  const bool finalize = subresource == "finalize";
  json::object base = finalize ? old : obj;
  const json::object& from = finalize ? obj : old;
  const json::value* from_spec = from.if_contains("spec");
  const json::value* finalizers = from_spec != nullptr && from_spec->is_object()
                                      ? from_spec->get_object().if_contains("finalizers")
                                      : nullptr;
  json::value& spec = base["spec"];
  if (!spec.is_object()) spec = json::object();
  if (finalizers != nullptr) {
    spec.get_object()["finalizers"] = *finalizers;
  } else {
    spec.get_object().erase("finalizers");
  }
  if (finalize) base["metadata"] = obj["metadata"];
  obj = std::move(base);
}

// Deleting a definition first deletes its objects: the finalizer kube's cleanup controller
// removes when they are gone.
constexpr std::string_view kCustomResourceCleanup = "customresourcecleanup.apiextensions.k8s.io";

void prepare_crd_for_create(json::object& crd) {
  reset_custom_resource_definition_status(crd);
  json::value& meta = crd["metadata"];
  if (!meta.is_object()) return;
  json::value& finalizers = meta.get_object()["finalizers"];
  if (!finalizers.is_array()) finalizers = json::array();
  for (const auto& f : finalizers.get_array()) {
    if (f.is_string() && f.get_string() == kCustomResourceCleanup) return;
  }
  finalizers.get_array().emplace_back(kCustomResourceCleanup);
}

void validate_crd(const json::object& crd, const json::object* old, std::vector<Cause>& causes) {
  for (auto& c : validate_custom_resource_definition(crd, old)) causes.push_back(std::move(c));
}

// Booleans a field selector reads as "false" when absent, as Go's zero value.
std::function<std::optional<std::string>(const json::object&, std::string_view)> false_when_absent(
    std::string field_name) {
  return [field_name](const json::object& obj, std::string_view field) -> std::optional<std::string> {
    if (field != field_name || find_field(obj, field) != nullptr) return std::nullopt;
    return std::string("false");
  };
}

// Events select on "source", which is the reporting component.
std::optional<std::string> event_field(const json::object& obj, std::string_view field) {
  if (field != "source") return std::nullopt;
  const json::object* source = object_member(obj, "source");
  return std::string(string_member(source, "component"));
}

// events.k8s.io/v1 Events are core/v1 Events in storage, as in kube: the same objects under
// other names (kube's events/v1 conversion).
constexpr std::pair<std::string_view, std::string_view> kEventFieldNames[] = {
    {"regarding", "involvedObject"},
    {"note", "message"},
    {"deprecatedSource", "source"},
    {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"},
    {"deprecatedCount", "count"},
    {"reportingController", "reportingComponent"},
};

void rename_fields(json::object& obj, bool to_core) {
  for (auto [served, stored] : kEventFieldNames) {
    const std::string_view from = to_core ? served : stored;
    const std::string_view to = to_core ? stored : served;
    if (auto it = obj.find(from); it != obj.end()) {
      json::value v = std::move(it->value());
      obj.erase(it);
      obj[to] = std::move(v);
    }
  }
}

void event_to_core(json::object& event) {
  rename_fields(event, true);
  event["apiVersion"] = "v1";
}

void event_from_core(json::object& event) {
  rename_fields(event, false);
  event["apiVersion"] = "events.k8s.io/v1";
}

// autoscaling/v1's only default.
void default_min_replicas(json::object& hpa) {
  json::value& spec = hpa["spec"];
  if (!spec.is_object()) spec = json::object();
  json::value& min = spec.get_object()["minReplicas"];
  if (min.is_null()) min = 1;
}

// A selectable field whose value is a number the object may leave out, which Go reads as 0
// (a replica set's "status.replicas", a job's "status.successful" from status.succeeded).
std::function<std::optional<std::string>(const json::object&, std::string_view)> count_field(
    std::string field_name, std::string path) {
  return [field_name, path](const json::object& obj,
                            std::string_view field) -> std::optional<std::string> {
    if (field != field_name) return std::nullopt;
    const json::value* v = find_field(obj, path);
    if (v != nullptr && v->is_int64()) return std::to_string(v->get_int64());
    return std::string("0");
  };
}

// Volumes and claims also select on "name", the object's name (kept for compatibility).
std::optional<std::string> name_field(const json::object& obj, std::string_view field) {
  if (field != "name") return std::nullopt;
  return std::string(string_member(object_member(obj, "metadata"), "name"));
}

// The scale subresource of a workload: spec.replicas, status.replicas and its selector.
ScaleSubresource workload_scale(ScaleSelector form) {
  return {".spec.replicas", ".status.replicas", ".spec.selector", form};
}

struct Kind {
  std::string group;
  std::string version = "v1";
  std::string kind;
  std::string resource;
  bool namespaced = true;
  std::vector<std::string> short_names = {};
  // Field-selector fields beyond metadata.name and metadata.namespace.
  std::vector<std::string> fields = {};
  bool has_status = false;
  std::optional<ScaleSubresource> scale = std::nullopt;
  std::vector<std::string> categories = {};
  std::string trigger_field = {};
  KindHooks hooks = {};
  bool delete_returns_object = false;
  bool orphans_by_default = false;
  DeletionRule deletion = DeletionRule::standard;
  bool allocates_service_addresses = false;
};

const std::vector<std::string> kAll = {"all"};

// The kinds whose strategies count generations in kube-apiserver 1.32; every other built-in kind
// leaves metadata.generation alone.
GenerationRule generation_rule(std::string_view group, std::string_view kind) {
  struct Counted {
    std::string_view group, kind;
    GenerationRule rule;
  };
  static constexpr Counted kCounted[] = {
      {"", "ReplicationController", GenerationRule::spec},
      {"apps", "Deployment", GenerationRule::spec},
      {"apps", "ReplicaSet", GenerationRule::spec},
      {"apps", "StatefulSet", GenerationRule::spec},
      {"apps", "DaemonSet", GenerationRule::spec},
      {"batch", "Job", GenerationRule::spec},
      {"batch", "CronJob", GenerationRule::spec},
      {"networking.k8s.io", "Ingress", GenerationRule::spec},
      {"networking.k8s.io", "IngressClass", GenerationRule::spec},
      {"networking.k8s.io", "NetworkPolicy", GenerationRule::spec},
      {"policy", "PodDisruptionBudget", GenerationRule::spec},
      {"apiextensions.k8s.io", "CustomResourceDefinition", GenerationRule::spec},
      {"discovery.k8s.io", "EndpointSlice", GenerationRule::content_and_labels},
      {"storage.k8s.io", "CSIDriver", GenerationRule::spec_on_update},
      {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", GenerationRule::content},
      {"admissionregistration.k8s.io", "MutatingWebhookConfiguration", GenerationRule::content},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicy", GenerationRule::spec},
      {"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", GenerationRule::spec},
      {"admissionregistration.k8s.io", "MutatingAdmissionPolicy", GenerationRule::spec},
      {"admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding", GenerationRule::spec},
      {"flowcontrol.apiserver.k8s.io", "FlowSchema", GenerationRule::spec},
      {"flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration", GenerationRule::spec},
      {"resource.k8s.io", "DeviceClass", GenerationRule::spec},
      {"resource.k8s.io", "ResourceSlice", GenerationRule::spec},
  };
  for (const Counted& c : kCounted) {
    if (c.group == group && c.kind == kind) return c.rule;
  }
  return GenerationRule::none;
}

}  // namespace

void add_builtin_kinds(Scheme& scheme, const std::string& storage_prefix) {
  // kube's ValidateEndpointIP, but for loopback addresses: kwatch's own `kubernetes` Endpoints
  // names its loopback bind address, and a loopback endpoint is refused where it would be
  // dialed instead (registry/service_endpoints.cpp: webhooks, aggregated APIs).
  const auto endpoints_rules = [](const json::object& obj, const json::object* old,
                                  std::vector<Cause>& causes) {
    validate_endpoints(obj, old, causes, /*allow_loopback=*/true);
  };
  const auto slice_rules = [](const json::object& obj, const json::object* old,
                              std::vector<Cause>& causes) {
    validate_endpoint_slice(obj, old, causes, /*allow_loopback=*/true);
  };
  const KindSchemas& schemas = KindSchemas::builtin();
  // As kube-apiserver 1.32 serves them: names, scope, short names, categories, selectable
  // fields and subresources; defaulting and the strategies' rules as hooks.
  // Each entry names only what the kind has. GCC 12 warns about the members a designated
  // initializer leaves to their defaults (-Wmissing-field-initializers; later GCCs do not).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  const std::vector<Kind> kinds = {
      // ---- core/v1 ----
      {.kind = "Namespace", .resource = "namespaces", .namespaced = false,
       .short_names = {"ns"}, .fields = {"status.phase"}, .has_status = true,
       .hooks = {.set_defaults = default_namespace,
                 .prepare_for_create = default_namespace_on_create,
                 .keep_owned_fields = keep_namespace_finalizers}, .delete_returns_object = true,
       .deletion = DeletionRule::terminating},
      {.kind = "Pod", .resource = "pods", .short_names = {"po"},
       .fields = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                  "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                  "status.nominatedNodeName"},
       .has_status = true, .categories = kAll, .trigger_field = "spec.nodeName",
       .hooks = {.set_defaults = default_pod,
                 .prepare_for_create = default_pod_on_create,
                 .prepare_for_update = default_pod_on_update,
                 .keep_owned_fields = keep_ephemeral_containers,
                 .field_value = false_when_absent("spec.hostNetwork"),
                 .validate = validate_pod}, .delete_returns_object = true,
       .deletion = DeletionRule::graceful},
      {.kind = "Service", .resource = "services", .short_names = {"svc"},
       .fields = {"spec.clusterIP", "spec.type"}, .has_status = true, .categories = kAll,
       // Created with an empty status, which Go writes as {"loadBalancer": {}}.
       .hooks = {.set_defaults = default_service,
                 .prepare_for_create = prepare_service_for_create,
                 .prepare_for_update = prepare_service_for_update,
                 .validate = validate_service},
       .delete_returns_object = true,
       .allocates_service_addresses = true},
      {.kind = "ConfigMap", .resource = "configmaps", .short_names = {"cm"},
       .hooks = {.validate = validate_config_map}},
      {.kind = "Secret", .resource = "secrets", .fields = {"type"},
       .hooks = {.set_defaults = default_secret, .validate = validate_secret}},
      {.kind = "Node", .resource = "nodes", .namespaced = false, .short_names = {"no"},
       .fields = {"spec.unschedulable"}, .has_status = true,
       .hooks = {.set_defaults = default_node,
                 .field_value = false_when_absent("spec.unschedulable")}},
      {.kind = "Event", .resource = "events", .short_names = {"ev"},
       .fields = {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                  "involvedObject.uid", "involvedObject.apiVersion",
                  "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                  "reportingComponent", "source", "type"},
       .hooks = {.field_value = event_field}},
      {.kind = "Endpoints", .resource = "endpoints", .short_names = {"ep"},
       .hooks = {.set_defaults = default_endpoints, .validate = endpoints_rules}},
      {.kind = "ServiceAccount", .resource = "serviceaccounts", .short_names = {"sa"}, .delete_returns_object = true},
      {.kind = "ReplicationController", .resource = "replicationcontrollers",
       .short_names = {"rc"}, .fields = {"status.replicas"}, .has_status = true,
       .scale = workload_scale(ScaleSelector::label_map), .categories = kAll,
       .hooks = {.set_defaults = default_replication_controller,
                 .prepare_for_create = initial_status(json::object{{"replicas", 0}}),
                 .field_value = count_field("status.replicas", "status.replicas"),
                 .validate = validate_replication_controller}, .orphans_by_default = true},
      {.kind = "PersistentVolume", .resource = "persistentvolumes", .namespaced = false,
       .short_names = {"pv"}, .fields = {"name"}, .has_status = true,
       .hooks = {.set_defaults = default_persistent_volume,
                 .prepare_for_create = default_persistent_volume_on_create,
                 .field_value = name_field,
                 .validate = validate_persistent_volume}, .delete_returns_object = true},
      {.kind = "PersistentVolumeClaim", .resource = "persistentvolumeclaims",
       .short_names = {"pvc"}, .fields = {"name"}, .has_status = true,
       .hooks = {.set_defaults = default_persistent_volume_claim,
                 .prepare_for_create = default_persistent_volume_claim_on_create,
                 .field_value = name_field,
                 .validate = validate_persistent_volume_claim}, .delete_returns_object = true},
      {.kind = "ResourceQuota", .resource = "resourcequotas", .short_names = {"quota"},
       .has_status = true, .hooks = {.prepare_for_create = initial_status({})}},
      {.kind = "LimitRange", .resource = "limitranges", .short_names = {"limits"},
       .hooks = {.set_defaults = default_limit_range}},
      {.kind = "PodTemplate", .resource = "podtemplates",
       .hooks = {.set_defaults = default_pod_template}},
      // ---- apps/v1 ----
      {.group = "apps", .kind = "Deployment", .resource = "deployments",
       .short_names = {"deploy"}, .has_status = true,
       .scale = workload_scale(ScaleSelector::label_selector), .categories = kAll,
       .hooks = {.set_defaults = default_deployment,
                 .prepare_for_create = initial_status({}),
                 .validate = validate_deployment}},
      {.group = "apps", .kind = "ReplicaSet", .resource = "replicasets", .short_names = {"rs"},
       .fields = {"status.replicas"}, .has_status = true,
       .scale = workload_scale(ScaleSelector::label_selector), .categories = kAll,
       .hooks = {.set_defaults = default_replica_set,
                 .prepare_for_create = initial_status(json::object{{"replicas", 0}}),
                 .field_value = count_field("status.replicas", "status.replicas"),
                 .validate = validate_replica_set}},
      {.group = "apps", .kind = "StatefulSet", .resource = "statefulsets",
       .short_names = {"sts"}, .has_status = true,
       .scale = workload_scale(ScaleSelector::label_selector), .categories = kAll,
       .hooks = {.set_defaults = default_stateful_set,
                 .prepare_for_create =
                     initial_status(json::object{{"replicas", 0}, {"availableReplicas", 0}}),
                 .validate = validate_stateful_set}},
      {.group = "apps", .kind = "DaemonSet", .resource = "daemonsets", .short_names = {"ds"},
       .has_status = true, .categories = kAll,
       .hooks = {.set_defaults = default_daemon_set,
                 .prepare_for_create = initial_status(json::object{
                     {"currentNumberScheduled", 0}, {"numberMisscheduled", 0},
                     {"desiredNumberScheduled", 0}, {"numberReady", 0}}),
                 .validate = validate_daemon_set}},
      {.group = "apps", .kind = "ControllerRevision", .resource = "controllerrevisions"},
      // ---- batch/v1 ----
      {.group = "batch", .kind = "Job", .resource = "jobs", .fields = {"status.successful"},
       .has_status = true, .categories = kAll,
       .hooks = {.set_defaults = default_job,
                 .prepare_for_create = default_job_on_create,
                 .field_value = count_field("status.successful", "status.succeeded"),
                 .validate = validate_job}, .orphans_by_default = true},
      {.group = "batch", .kind = "CronJob", .resource = "cronjobs", .short_names = {"cj"},
       .has_status = true, .categories = kAll,
       .hooks = {.set_defaults = default_cron_job,
                 .prepare_for_create = initial_status({}),
                 .validate = validate_cron_job}},
      // ---- networking.k8s.io/v1 ----
      {.group = "networking.k8s.io", .kind = "Ingress", .resource = "ingresses",
       .short_names = {"ing"}, .has_status = true,
       .hooks = {.prepare_for_create =
                     initial_status(json::object{{"loadBalancer", json::object()}})}},
      {.group = "networking.k8s.io", .kind = "IngressClass", .resource = "ingressclasses",
       .namespaced = false, .hooks = {.set_defaults = default_ingress_class}},
      // Written by the Service allocator (an IPAddress per cluster IP) and the ServiceCIDR
      // controller (the default range, finalizers, Ready), and by administrators.
      {.group = "networking.k8s.io", .kind = "ServiceCIDR", .resource = "servicecidrs",
       .namespaced = false, .has_status = true, .hooks = {.validate = validate_service_cidr}},
      {.group = "networking.k8s.io", .kind = "IPAddress", .resource = "ipaddresses",
       .namespaced = false, .short_names = {"ip"}, .hooks = {.validate = validate_ip_address}},
      {.group = "networking.k8s.io", .kind = "NetworkPolicy", .resource = "networkpolicies",
       .short_names = {"netpol"}, .hooks = {.set_defaults = default_network_policy}},
      // ---- discovery.k8s.io/v1, policy/v1, scheduling.k8s.io/v1 ----
      {.group = "discovery.k8s.io", .kind = "EndpointSlice", .resource = "endpointslices",
       .hooks = {.set_defaults = default_endpoint_slice, .validate = slice_rules}},
      {.group = "policy", .kind = "PodDisruptionBudget", .resource = "poddisruptionbudgets",
       .short_names = {"pdb"}, .has_status = true,
       .hooks = {.prepare_for_create = initial_status(json::object{{"disruptionsAllowed", 0},
                                                                   {"currentHealthy", 0},
                                                                   {"desiredHealthy", 0},
                                                                   {"expectedPods", 0}})}},
      {.group = "scheduling.k8s.io", .kind = "PriorityClass", .resource = "priorityclasses",
       .namespaced = false, .short_names = {"pc"},
       .hooks = {.set_defaults = default_priority_class}},
      // ---- storage.k8s.io/v1, node.k8s.io/v1 ----
      {.group = "storage.k8s.io", .kind = "StorageClass", .resource = "storageclasses",
       .namespaced = false, .short_names = {"sc"},
       .hooks = {.set_defaults = default_storage_class}},
      {.group = "storage.k8s.io", .kind = "CSIDriver", .resource = "csidrivers",
       .namespaced = false, .hooks = {.set_defaults = default_csi_driver}},
      {.group = "storage.k8s.io", .kind = "VolumeAttachment", .resource = "volumeattachments",
       .namespaced = false, .has_status = true,
       .hooks = {.prepare_for_create = initial_status(json::object{{"attached", false}})}},
      // No defaults, no status, no generation (kube's strategies leave it alone). A delete of a
      // CSINode or a VolumeAttributesClass answers with the object (ReturnDeletedObject).
      {.group = "storage.k8s.io", .kind = "CSINode", .resource = "csinodes", .namespaced = false,
       .hooks = {.validate = validate_csi_node}, .delete_returns_object = true},
      {.group = "storage.k8s.io", .kind = "CSIStorageCapacity",
       .resource = "csistoragecapacities", .hooks = {.validate = validate_csi_storage_capacity}},
      {.group = "storage.k8s.io", .kind = "VolumeAttributesClass",
       .resource = "volumeattributesclasses", .namespaced = false, .short_names = {"vac"},
       .hooks = {.validate = validate_volume_attributes_class}, .delete_returns_object = true},
      {.group = "node.k8s.io", .kind = "RuntimeClass", .resource = "runtimeclasses",
       .namespaced = false},
      // ---- the rest ----
      // autoscaling/v2 is the stored form; v1 is served over it (kube's conversion).
      {.group = "autoscaling", .version = "v2", .kind = "HorizontalPodAutoscaler",
       .resource = "horizontalpodautoscalers", .short_names = {"hpa"}, .has_status = true,
       .categories = kAll,
       // Created with an empty status (kube's strategy clears it), whose counts Go writes.
       .hooks = {.set_defaults = default_horizontal_pod_autoscaler,
                 .prepare_for_create = initial_status(json::object{{"desiredReplicas", 0}}),
                 .validate = validate_horizontal_pod_autoscaler}},
      {.group = "autoscaling", .version = "v1", .kind = "HorizontalPodAutoscaler",
       .resource = "horizontalpodautoscalers", .short_names = {"hpa"}, .has_status = true,
       .categories = kAll,
       .hooks = {.set_defaults = default_min_replicas,
                 .prepare_for_create = initial_status(
                     json::object{{"currentReplicas", 0}, {"desiredReplicas", 0}}),
                 .validate = validate_horizontal_pod_autoscaler,
                 .to_stored = horizontal_pod_autoscaler_to_v2,
                 .to_served = horizontal_pod_autoscaler_to_v1}},
      {.group = "coordination.k8s.io", .kind = "Lease", .resource = "leases"},
      {.group = "events.k8s.io", .kind = "Event", .resource = "events", .short_names = {"ev"},
       .hooks = {.to_stored = event_to_core, .to_served = event_from_core}},
      {.group = "rbac.authorization.k8s.io", .kind = "Role", .resource = "roles"},
      {.group = "rbac.authorization.k8s.io", .kind = "ClusterRole", .resource = "clusterroles",
       .namespaced = false},
      {.group = "rbac.authorization.k8s.io", .kind = "RoleBinding", .resource = "rolebindings",
       .hooks = {.set_defaults = default_role_binding}},
      {.group = "rbac.authorization.k8s.io", .kind = "ClusterRoleBinding",
       .resource = "clusterrolebindings", .namespaced = false,
       .hooks = {.set_defaults = default_role_binding}},
      {.group = "admissionregistration.k8s.io", .kind = "ValidatingWebhookConfiguration",
       .resource = "validatingwebhookconfigurations", .namespaced = false,
       .categories = {"api-extensions"},
       .hooks = {.validate = validate_validating_webhook_configuration}},
      {.group = "admissionregistration.k8s.io", .kind = "MutatingWebhookConfiguration",
       .resource = "mutatingwebhookconfigurations", .namespaced = false,
       .categories = {"api-extensions"},
       .hooks = {.validate = validate_mutating_webhook_configuration}},
      {.group = "admissionregistration.k8s.io", .kind = "ValidatingAdmissionPolicy",
       .resource = "validatingadmissionpolicies", .namespaced = false, .has_status = true,
       .categories = {"api-extensions"},
       .hooks = {.prepare_for_create = initial_status({}),
                 .validate = validate_validating_admission_policy}},
      {.group = "admissionregistration.k8s.io", .kind = "ValidatingAdmissionPolicyBinding",
       .resource = "validatingadmissionpolicybindings", .namespaced = false,
       .categories = {"api-extensions"},
       .hooks = {.validate = validate_validating_admission_policy_binding}},
      {.group = "admissionregistration.k8s.io", .version = "v1beta1",
       .kind = "MutatingAdmissionPolicy", .resource = "mutatingadmissionpolicies",
       .namespaced = false, .categories = {"api-extensions"},
       .hooks = {.validate = validate_mutating_admission_policy}},
      {.group = "admissionregistration.k8s.io", .version = "v1beta1",
       .kind = "MutatingAdmissionPolicyBinding", .resource = "mutatingadmissionpolicybindings",
       .namespaced = false, .categories = {"api-extensions"},
       .hooks = {.validate = validate_mutating_admission_policy_binding}},
      // ---- certificates.k8s.io/v1 ----
      {.group = "certificates.k8s.io", .kind = "CertificateSigningRequest",
       .resource = "certificatesigningrequests", .namespaced = false, .short_names = {"csr"},
       .fields = {"spec.signerName"}, .has_status = true,
       .hooks = {.prepare_for_create = prepare_csr_for_create,
                 .keep_owned_fields = keep_csr_owned_fields,
                 .validate = validate_csr,
                 .record_requester = record_csr_requester,
                 .validate_update_path = validate_csr_update_path}},
      // ---- flowcontrol.apiserver.k8s.io/v1 ----
      // Created with an empty status (kube's strategies clear it); only /status writes it.
      {.group = "flowcontrol.apiserver.k8s.io", .kind = "FlowSchema", .resource = "flowschemas",
       .namespaced = false, .has_status = true,
       .hooks = {.set_defaults = default_flow_schema,
                 .prepare_for_create = initial_status({}),
                 .validate = validate_flow_schema}},
      {.group = "flowcontrol.apiserver.k8s.io", .kind = "PriorityLevelConfiguration",
       .resource = "prioritylevelconfigurations", .namespaced = false, .has_status = true,
       .hooks = {.set_defaults = default_priority_level_configuration,
                 .prepare_for_create = initial_status({}),
                 .validate = validate_priority_level_configuration}},
      // ---- resource.k8s.io/v1 ----
      {.group = "resource.k8s.io", .kind = "DeviceClass", .resource = "deviceclasses",
       .namespaced = false,
       .hooks = {.set_defaults = default_device_class, .validate = validate_device_class}},
      // Created with an empty status (kube's strategy clears it); only /status writes it.
      {.group = "resource.k8s.io", .kind = "ResourceClaim", .resource = "resourceclaims",
       .has_status = true,
       .hooks = {.set_defaults = default_resource_claim,
                 .prepare_for_create = initial_status({}),
                 .keep_owned_fields = keep_resource_claim_owned_fields,
                 .validate = validate_resource_claim,
                 .validate_update_path = validate_resource_claim_update_path}},
      {.group = "resource.k8s.io", .kind = "ResourceClaimTemplate",
       .resource = "resourceclaimtemplates",
       .hooks = {.set_defaults = default_resource_claim_template,
                 .validate = validate_resource_claim_template}},
      // Selectable by node and driver; the watch cache indexes the node, as kube's does.
      {.group = "resource.k8s.io", .kind = "ResourceSlice", .resource = "resourceslices",
       .namespaced = false, .fields = {"spec.nodeName", "spec.driver"},
       .trigger_field = "spec.nodeName",
       .hooks = {.set_defaults = default_resource_slice, .validate = validate_resource_slice}},
      {.group = "apiregistration.k8s.io", .kind = "APIService", .resource = "apiservices",
       .namespaced = false, .has_status = true, .categories = {"api-extensions"},
       .hooks = {.prepare_for_create = prepare_api_service, .validate = validate_api_service}},
      {.group = "apiextensions.k8s.io", .kind = "CustomResourceDefinition",
       .resource = "customresourcedefinitions", .namespaced = false,
       .short_names = {"crd", "crds"}, .has_status = true, .categories = {"api-extensions"},
       .hooks = {.set_defaults = default_custom_resource_definition,
                 .prepare_for_create = prepare_crd_for_create,
                 .validate = validate_crd}},
  };
#pragma GCC diagnostic pop
  for (const Kind& k : kinds) {
    ResourceInfo info;
    info.group = k.group;
    info.version = k.version;
    info.kind = k.kind;
    info.resource = k.resource;
    info.singular = k.kind;
    for (auto& ch : info.singular) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    info.namespaced = k.namespaced;
    info.short_names = k.short_names;
    info.categories = k.categories;
    info.selectable_fields = k.fields;
    info.has_status = k.has_status;
    info.scale = k.scale;
    info.storage_prefix = storage_prefix;
    info.trigger_field = k.trigger_field;
    info.hooks = k.hooks;
    info.delete_returns_object = k.delete_returns_object;
    info.orphans_by_default = k.orphans_by_default;
    info.deletion = k.deletion;
    info.allocates_service_addresses = k.allocates_service_addresses;
    info.generation = generation_rule(k.group, k.kind);
    if (k.kind == "Namespace" || k.kind == "Service") info.name_rule = NameRule::dns_label;
    if (k.group.empty() && k.kind == "Namespace") info.deletes_collections = false;
    if (k.group == "rbac.authorization.k8s.io" || k.kind == "APIService" ||
        k.kind == "CertificateSigningRequest") {
      info.name_rule = NameRule::path_segment;
    }
    if (k.kind == "IPAddress") info.name_rule = NameRule::ip_address;
    info.printer_columns = builtin_columns(k.group, k.kind);
    if (auto schema = schemas.structural_schema(k.group, k.version, k.kind)) {
      SchemaCompileOptions options;
      options.path = "";
      options.allow_unique_items = true;
      auto compiled = StructuralSchema::compile(*schema, options);
      if (!compiled) {
        throw std::runtime_error("the built-in schema of " + k.kind +
                                 " does not compile: " + compiled.error().message);
      }
      info.schema = std::move(*compiled);
      info.field_types = FieldTypes::of_resource(*schema);
    }
    info.patch_schema = std::make_shared<const PatchSchema>(
        schemas.patch_schema(k.group, k.version, k.kind));
    scheme.add(std::move(info));
  }
}

}  // namespace kwatch::kinds
