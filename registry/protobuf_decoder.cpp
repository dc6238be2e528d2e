#include "registry/protobuf_decoder.hpp"

#include "registry/base64.hpp"

#include "storage/stored_json.hpp"

#include <boost/json/array.hpp>

#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <string>
#include <vector>

namespace kwatch::registry {

namespace json = boost::json;

namespace {

enum class Kind {
  string,
  bytes,          // base64 in JSON
  int64,
  int32,
  boolean,
  message,
  time,           // metav1.Time: {seconds=1, nanos=2} -> RFC 3339
  quantity,       // resource.Quantity: {string=1} -> "100m"
  int_or_string,  // {type=1, intVal=2, strVal=3}
  map_string,     // map<string,string>
  map_bytes,      // map<string,bytes> -> base64 values
  map_quantity,   // map<string,Quantity>
};

struct Message;

struct Field {
  int number;
  std::string_view name;
  Kind kind;
  bool repeated = false;
  const Message* message = nullptr;
  // Go pointer fields (`*int32`): a zero on the wire was set on purpose and is kept. Other
  // scalars are written by the generated code even when empty and are dropped when zero, as
  // JSON's omitempty would.
  bool keep_zero = false;
  // An embedded struct JSON writes inline (`json:",inline"`, an IngressRule's
  // ingressRuleValue): its fields become the parent's.
  bool inline_fields = false;
};

struct Message {
  std::string_view name;
  std::vector<Field> fields;

  const Field* find(int number) const {
    for (const auto& f : fields) {
      if (f.number == number) return &f;
    }
    return nullptr;
  }
};

Field str(int n, std::string_view name) { return {n, name, Kind::string}; }
Field strs(int n, std::string_view name) { return {n, name, Kind::string, true}; }
Field i64(int n, std::string_view name) { return {n, name, Kind::int64}; }
Field i32(int n, std::string_view name) { return {n, name, Kind::int32}; }
Field flag(int n, std::string_view name) { return {n, name, Kind::boolean}; }
Field msg(int n, std::string_view name, const Message& m) { return {n, name, Kind::message, false, &m}; }
Field msgs(int n, std::string_view name, const Message& m) { return {n, name, Kind::message, true, &m}; }
Field of(int n, std::string_view name, Kind k) { return {n, name, k}; }
Field keep(Field f) {
  f.keep_zero = true;
  return f;
}
Field inlined(int n, const Message& m) {
  Field f{n, "", Kind::message, false, &m};
  f.inline_fields = true;
  return f;
}

// The messages, with field numbers from the Kubernetes generated.proto files (the wire contract).
struct Schema {
  Message owner_reference{"OwnerReference",
                          {str(1, "kind"), str(3, "name"), str(4, "uid"), str(5, "apiVersion"),
                           keep(flag(6, "controller")), keep(flag(7, "blockOwnerDeletion"))}};
  Message object_meta{"ObjectMeta",
                      {str(1, "name"), str(2, "generateName"), str(3, "namespace"),
                       str(4, "selfLink"), str(5, "uid"), str(6, "resourceVersion"),
                       i64(7, "generation"), of(8, "creationTimestamp", Kind::time),
                       of(9, "deletionTimestamp", Kind::time),
                       keep(i64(10, "deletionGracePeriodSeconds")), of(11, "labels", Kind::map_string),
                       of(12, "annotations", Kind::map_string),
                       msgs(13, "ownerReferences", owner_reference), strs(14, "finalizers")}};
  Message namespace_spec{"NamespaceSpec", {strs(1, "finalizers")}};
  Message namespace_status{"NamespaceStatus", {str(1, "phase")}};
  Message namespace_{"Namespace",
                     {msg(1, "metadata", object_meta), msg(2, "spec", namespace_spec),
                      msg(3, "status", namespace_status)}};
  Message config_map{"ConfigMap",
                     {msg(1, "metadata", object_meta), of(2, "data", Kind::map_string),
                      of(3, "binaryData", Kind::map_bytes), keep(flag(4, "immutable"))}};
  Message secret{"Secret",
                 {msg(1, "metadata", object_meta), of(2, "data", Kind::map_bytes), str(3, "type"),
                  of(4, "stringData", Kind::map_string), keep(flag(5, "immutable"))}};
  Message object_reference{"ObjectReference",
                           {str(1, "kind"), str(2, "namespace"), str(3, "name"), str(4, "uid"),
                            str(5, "apiVersion"), str(6, "resourceVersion"), str(7, "fieldPath")}};
  Message local_object_reference{"LocalObjectReference", {str(1, "name")}};
  Message service_account{"ServiceAccount",
                          {msg(1, "metadata", object_meta), msgs(2, "secrets", object_reference),
                           msgs(3, "imagePullSecrets", local_object_reference),
                           keep(flag(4, "automountServiceAccountToken"))}};
  Message container_port{"ContainerPort",
                         {str(1, "name"), i32(2, "hostPort"), i32(3, "containerPort"),
                          str(4, "protocol"), str(5, "hostIP")}};
  Message env_var{"EnvVar", {str(1, "name"), str(2, "value")}};
  Message resources{"ResourceRequirements",
                    {of(1, "limits", Kind::map_quantity), of(2, "requests", Kind::map_quantity)}};
  Message container{"Container",
                    {str(1, "name"), str(2, "image"), strs(3, "command"), strs(4, "args"),
                     str(5, "workingDir"), msgs(6, "ports", container_port),
                     msgs(7, "env", env_var), msg(8, "resources", resources),
                     str(13, "terminationMessagePath"), str(14, "imagePullPolicy"),
                     flag(16, "stdin"), flag(17, "stdinOnce"), flag(18, "tty"),
                     str(20, "terminationMessagePolicy")}};
  Message pod_spec{"PodSpec",
                   {msgs(2, "containers", container), str(3, "restartPolicy"),
                    keep(i64(4, "terminationGracePeriodSeconds")), keep(i64(5, "activeDeadlineSeconds")),
                    str(6, "dnsPolicy"), of(7, "nodeSelector", Kind::map_string),
                    str(8, "serviceAccountName"), str(10, "nodeName"), flag(11, "hostNetwork"),
                    msgs(15, "imagePullSecrets", local_object_reference),
                    str(19, "schedulerName"), msgs(20, "initContainers", container)}};
  Message pod_status{"PodStatus", {str(1, "phase")}};
  Message pod{"Pod",
              {msg(1, "metadata", object_meta), msg(2, "spec", pod_spec),
               msg(3, "status", pod_status)}};
  Message pod_template_spec{"PodTemplateSpec",
                            {msg(1, "metadata", object_meta), msg(2, "spec", pod_spec)}};
  Message selector_requirement{"LabelSelectorRequirement",
                               {str(1, "key"), str(2, "operator"), strs(3, "values")}};
  Message label_selector{"LabelSelector",
                         {of(1, "matchLabels", Kind::map_string),
                          msgs(2, "matchExpressions", selector_requirement)}};
  Message rolling_update{"RollingUpdateDeployment",
                         {of(1, "maxUnavailable", Kind::int_or_string),
                          of(2, "maxSurge", Kind::int_or_string)}};
  Message strategy{"DeploymentStrategy", {str(1, "type"), msg(2, "rollingUpdate", rolling_update)}};
  Message deployment_spec{"DeploymentSpec",
                          {keep(i32(1, "replicas")), msg(2, "selector", label_selector),
                           msg(3, "template", pod_template_spec), msg(4, "strategy", strategy),
                           i32(5, "minReadySeconds"), keep(i32(6, "revisionHistoryLimit")),
                           flag(7, "paused"), keep(i32(9, "progressDeadlineSeconds"))}};
  Message deployment_status{"DeploymentStatus",
                            {i64(1, "observedGeneration"), i32(2, "replicas"),
                             i32(3, "updatedReplicas"), i32(4, "availableReplicas"),
                             i32(5, "unavailableReplicas"), i32(7, "readyReplicas")}};
  Message deployment{"Deployment",
                     {msg(1, "metadata", object_meta), msg(2, "spec", deployment_spec),
                      msg(3, "status", deployment_status)}};

  // kubectl create service clusterip|nodeport|loadbalancer|externalname, kubectl expose.
  Message service_port{"ServicePort",
                       {str(1, "name"), str(2, "protocol"), i32(3, "port"),
                        of(4, "targetPort", Kind::int_or_string), i32(5, "nodePort"),
                        keep(str(6, "appProtocol"))}};
  Message client_ip_config{"ClientIPConfig", {keep(i32(1, "timeoutSeconds"))}};
  Message session_affinity_config{"SessionAffinityConfig",
                                  {msg(1, "clientIP", client_ip_config)}};
  Message service_spec{"ServiceSpec",
                       {msgs(1, "ports", service_port), of(2, "selector", Kind::map_string),
                        str(3, "clusterIP"), str(4, "type"), strs(5, "externalIPs"),
                        str(7, "sessionAffinity"), str(8, "loadBalancerIP"),
                        strs(9, "loadBalancerSourceRanges"), str(10, "externalName"),
                        str(11, "externalTrafficPolicy"), i32(12, "healthCheckNodePort"),
                        flag(13, "publishNotReadyAddresses"),
                        msg(14, "sessionAffinityConfig", session_affinity_config),
                        keep(str(17, "ipFamilyPolicy")), strs(18, "clusterIPs"),
                        strs(19, "ipFamilies"), keep(flag(20, "allocateLoadBalancerNodePorts")),
                        keep(str(21, "loadBalancerClass")), keep(str(22, "internalTrafficPolicy"))}};
  // Clients send the (empty) status too; a create or update ignores it.
  Message load_balancer_status{"LoadBalancerStatus", {}};
  Message service_status{"ServiceStatus", {msg(1, "loadBalancer", load_balancer_status)}};
  Message service{"Service",
                  {msg(1, "metadata", object_meta), msg(2, "spec", service_spec),
                   msg(3, "status", service_status)}};

  // batch/v1 (kubectl create job, create job --from=cronjob/..., create cronjob). Status
  // counters come as zeros from a client; the create resets the status anyway.
  Message job_spec{"JobSpec",
                   {keep(i32(1, "parallelism")), keep(i32(2, "completions")),
                    keep(i64(3, "activeDeadlineSeconds")), msg(4, "selector", label_selector),
                    keep(flag(5, "manualSelector")), msg(6, "template", pod_template_spec),
                    keep(i32(7, "backoffLimit")), keep(i32(8, "ttlSecondsAfterFinished")),
                    keep(str(9, "completionMode")), keep(flag(10, "suspend")),
                    keep(i32(12, "backoffLimitPerIndex")), keep(i32(13, "maxFailedIndexes")),
                    keep(str(14, "podReplacementPolicy")), keep(str(15, "managedBy"))}};
  Message job_status{"JobStatus",
                     {i32(4, "active"), i32(5, "succeeded"), i32(6, "failed"),
                      str(7, "completedIndexes")}};
  Message job{"Job",
              {msg(1, "metadata", object_meta), msg(2, "spec", job_spec),
               msg(3, "status", job_status)}};
  Message job_template_spec{"JobTemplateSpec",
                            {msg(1, "metadata", object_meta), msg(2, "spec", job_spec)}};
  Message cron_job_spec{"CronJobSpec",
                        {str(1, "schedule"), keep(i64(2, "startingDeadlineSeconds")),
                         str(3, "concurrencyPolicy"), keep(flag(4, "suspend")),
                         msg(5, "jobTemplate", job_template_spec),
                         keep(i32(6, "successfulJobsHistoryLimit")),
                         keep(i32(7, "failedJobsHistoryLimit")), keep(str(8, "timeZone"))}};
  Message cron_job_status{"CronJobStatus", {msgs(1, "active", object_reference)}};
  Message cron_job{"CronJob",
                   {msg(1, "metadata", object_meta), msg(2, "spec", cron_job_spec),
                    msg(3, "status", cron_job_status)}};

  // core/v1 ResourceQuota (kubectl create quota).
  Message scoped_requirement{"ScopedResourceSelectorRequirement",
                             {str(1, "scopeName"), str(2, "operator"), strs(3, "values")}};
  Message scope_selector{"ScopeSelector", {msgs(1, "matchExpressions", scoped_requirement)}};
  Message resource_quota_spec{"ResourceQuotaSpec",
                              {of(1, "hard", Kind::map_quantity), strs(2, "scopes"),
                               msg(3, "scopeSelector", scope_selector)}};
  Message resource_quota_status{"ResourceQuotaStatus",
                                {of(1, "hard", Kind::map_quantity),
                                 of(2, "used", Kind::map_quantity)}};
  Message resource_quota{"ResourceQuota",
                         {msg(1, "metadata", object_meta), msg(2, "spec", resource_quota_spec),
                          msg(3, "status", resource_quota_status)}};

  // policy/v1 (kubectl create poddisruptionbudget).
  Message pdb_spec{"PodDisruptionBudgetSpec",
                   {of(1, "minAvailable", Kind::int_or_string), msg(2, "selector", label_selector),
                    of(3, "maxUnavailable", Kind::int_or_string),
                    keep(str(4, "unhealthyPodEvictionPolicy"))}};
  Message pdb_status{"PodDisruptionBudgetStatus",
                     {i64(1, "observedGeneration"), i32(3, "disruptionsAllowed"),
                      i32(4, "currentHealthy"), i32(5, "desiredHealthy"), i32(6, "expectedPods")}};
  Message pdb{"PodDisruptionBudget",
              {msg(1, "metadata", object_meta), msg(2, "spec", pdb_spec),
               msg(3, "status", pdb_status)}};

  // autoscaling/v1 (kubectl autoscale).
  Message cross_version_object_reference{"CrossVersionObjectReference",
                                         {str(1, "kind"), str(2, "name"), str(3, "apiVersion")}};
  Message hpa_spec{"HorizontalPodAutoscalerSpec",
                   {msg(1, "scaleTargetRef", cross_version_object_reference),
                    keep(i32(2, "minReplicas")), keep(i32(3, "maxReplicas")),
                    keep(i32(4, "targetCPUUtilizationPercentage"))}};
  Message hpa_status{"HorizontalPodAutoscalerStatus",
                     {i64(1, "observedGeneration"), of(2, "lastScaleTime", Kind::time),
                      keep(i32(3, "currentReplicas")), keep(i32(4, "desiredReplicas")),
                      keep(i32(5, "currentCPUUtilizationPercentage"))}};
  Message hpa{"HorizontalPodAutoscaler",
              {msg(1, "metadata", object_meta), msg(2, "spec", hpa_spec),
               msg(3, "status", hpa_status)}};

  // scheduling.k8s.io/v1 (kubectl create priorityclass).
  Message priority_class{"PriorityClass",
                         {msg(1, "metadata", object_meta), keep(i32(2, "value")),
                          flag(3, "globalDefault"), str(4, "description"),
                          keep(str(5, "preemptionPolicy"))}};

  // networking.k8s.io/v1 (kubectl create ingress).
  Message typed_local_object_reference{"TypedLocalObjectReference",
                                       {keep(str(1, "apiGroup")), str(2, "kind"), str(3, "name")}};
  Message service_backend_port{"ServiceBackendPort", {str(1, "name"), i32(2, "number")}};
  Message service_backend{"IngressServiceBackend",
                          {str(1, "name"), msg(2, "port", service_backend_port)}};
  Message ingress_backend{"IngressBackend",
                          {msg(3, "resource", typed_local_object_reference),
                           msg(4, "service", service_backend)}};
  Message http_path{"HTTPIngressPath",
                    {str(1, "path"), msg(2, "backend", ingress_backend), keep(str(3, "pathType"))}};
  Message http_rule{"HTTPIngressRuleValue", {msgs(1, "paths", http_path)}};
  Message ingress_rule_value{"IngressRuleValue", {msg(1, "http", http_rule)}};
  Message ingress_rule{"IngressRule", {str(1, "host"), inlined(2, ingress_rule_value)}};
  Message ingress_tls{"IngressTLS", {strs(1, "hosts"), str(2, "secretName")}};
  Message ingress_spec{"IngressSpec",
                       {msg(1, "defaultBackend", ingress_backend), msgs(2, "tls", ingress_tls),
                        msgs(3, "rules", ingress_rule), keep(str(4, "ingressClassName"))}};
  Message ingress_port_status{"IngressPortStatus",
                              {i32(1, "port"), str(2, "protocol"), keep(str(3, "error"))}};
  Message ingress_lb_ingress{"IngressLoadBalancerIngress",
                             {str(1, "ip"), str(2, "hostname"),
                              msgs(4, "ports", ingress_port_status)}};
  Message ingress_lb_status{"IngressLoadBalancerStatus", {msgs(1, "ingress", ingress_lb_ingress)}};
  Message ingress_status{"IngressStatus", {msg(1, "loadBalancer", ingress_lb_status)}};
  Message ingress{"Ingress",
                  {msg(1, "metadata", object_meta), msg(2, "spec", ingress_spec),
                   msg(3, "status", ingress_status)}};

  // rbac.authorization.k8s.io/v1 (kubectl create role|clusterrole|rolebinding|clusterrolebinding).
  Message policy_rule{"PolicyRule",
                      {strs(1, "verbs"), strs(2, "apiGroups"), strs(3, "resources"),
                       strs(4, "resourceNames"), strs(5, "nonResourceURLs")}};
  Message aggregation_rule{"AggregationRule", {msgs(1, "clusterRoleSelectors", label_selector)}};
  Message role{"Role", {msg(1, "metadata", object_meta), msgs(2, "rules", policy_rule)}};
  Message cluster_role{"ClusterRole",
                       {msg(1, "metadata", object_meta), msgs(2, "rules", policy_rule),
                        msg(3, "aggregationRule", aggregation_rule)}};
  Message subject{"Subject",
                  {str(1, "kind"), str(2, "apiGroup"), str(3, "name"), str(4, "namespace")}};
  Message role_ref{"RoleRef", {str(1, "apiGroup"), str(2, "kind"), str(3, "name")}};
  Message role_binding{"RoleBinding",
                       {msg(1, "metadata", object_meta), msgs(2, "subjects", subject),
                        msg(3, "roleRef", role_ref)}};

  // authorization.k8s.io/v1 and authentication.k8s.io/v1 reviews (kubectl auth can-i, whoami).
  Message resource_attributes{"ResourceAttributes",
                              {str(1, "namespace"), str(2, "verb"), str(3, "group"),
                               str(4, "version"), str(5, "resource"), str(6, "subresource"),
                               str(7, "name")}};
  Message non_resource_attributes{"NonResourceAttributes", {str(1, "path"), str(2, "verb")}};
  Message access_review_spec{"SelfSubjectAccessReviewSpec",
                             {msg(1, "resourceAttributes", resource_attributes),
                              msg(2, "nonResourceAttributes", non_resource_attributes)}};
  // Clients send the (empty) status too; the server replaces it.
  Message access_review_status{"SubjectAccessReviewStatus",
                               {flag(1, "allowed"), str(2, "reason"), str(3, "evaluationError"),
                                flag(4, "denied")}};
  Message access_review{"SelfSubjectAccessReview",
                        {msg(1, "metadata", object_meta), msg(2, "spec", access_review_spec),
                         msg(3, "status", access_review_status)}};
  Message rules_review_spec{"SelfSubjectRulesReviewSpec", {str(1, "namespace")}};
  Message resource_rule{"ResourceRule",
                        {strs(1, "verbs"), strs(2, "apiGroups"), strs(3, "resources"),
                         strs(4, "resourceNames")}};
  Message non_resource_rule{"NonResourceRule", {strs(1, "verbs"), strs(2, "nonResourceURLs")}};
  Message rules_review_status{"SubjectRulesReviewStatus",
                              {msgs(1, "resourceRules", resource_rule),
                               msgs(2, "nonResourceRules", non_resource_rule),
                               flag(3, "incomplete"), str(4, "evaluationError")}};
  Message rules_review{"SelfSubjectRulesReview",
                       {msg(1, "metadata", object_meta), msg(2, "spec", rules_review_spec),
                        msg(3, "status", rules_review_status)}};
  Message user_info{"UserInfo", {str(1, "username"), str(2, "uid"), strs(3, "groups")}};
  Message self_review_status{"SelfSubjectReviewStatus", {msg(1, "userInfo", user_info)}};
  Message self_review{"SelfSubjectReview",
                      {msg(1, "metadata", object_meta), msg(2, "status", self_review_status)}};

  // Reviews about others and tokens (kubectl create token, webhooks, auth proxies).
  Message subject_access_review_spec{"SubjectAccessReviewSpec",
                                     {msg(1, "resourceAttributes", resource_attributes),
                                      msg(2, "nonResourceAttributes", non_resource_attributes),
                                      str(3, "user"), strs(4, "groups"), str(6, "uid")}};
  Message subject_access_review{"SubjectAccessReview",
                                {msg(1, "metadata", object_meta),
                                 msg(2, "spec", subject_access_review_spec),
                                 msg(3, "status", access_review_status)}};
  Message bound_object_reference{"BoundObjectReference",
                                 {str(1, "kind"), str(2, "apiVersion"), str(3, "name"),
                                  str(4, "uid")}};
  Message token_request_spec{"TokenRequestSpec",
                             {strs(1, "audiences"), i64(4, "expirationSeconds"),
                              msg(3, "boundObjectRef", bound_object_reference)}};
  Message token_request_status{"TokenRequestStatus",
                               {str(1, "token"), of(2, "expirationTimestamp", Kind::time)}};
  Message token_request{"TokenRequest",
                        {msg(1, "metadata", object_meta), msg(2, "spec", token_request_spec),
                         msg(3, "status", token_request_status)}};
  Message token_review_spec{"TokenReviewSpec", {str(1, "token"), strs(2, "audiences")}};
  Message token_review_status{"TokenReviewStatus",
                              {flag(1, "authenticated"), msg(2, "user", user_info),
                               str(3, "error"), strs(4, "audiences")}};
  Message token_review{"TokenReview",
                       {msg(1, "metadata", object_meta), msg(2, "spec", token_review_spec),
                        msg(3, "status", token_review_status)}};

  Message preconditions{"Preconditions", {str(1, "uid"), str(2, "resourceVersion")}};
  // Every group version serves meta/v1 DeleteOptions: clients send it with their own.
  Message delete_options{"DeleteOptions",
                         {keep(i64(1, "gracePeriodSeconds")), msg(2, "preconditions", preconditions),
                          keep(flag(3, "orphanDependents")), str(4, "propagationPolicy"),
                          strs(5, "dryRun"),
                          keep(flag(6, "ignoreStoreReadErrorWithClusterBreakingPotential"))}};
  Message binding{"Binding", {msg(1, "metadata", object_meta), msg(2, "target", object_reference)}};
  Message eviction{"Eviction",
                   {msg(1, "metadata", object_meta), msg(2, "deleteOptions", delete_options)}};

  const Message* by_kind(std::string_view api_version, std::string_view kind) const {
    if (kind == "DeleteOptions") return &delete_options;
    if (api_version == "policy/v1" && kind == "Eviction") return &eviction;
    if (api_version == "v1") {
      if (kind == "Namespace") return &namespace_;
      if (kind == "ConfigMap") return &config_map;
      if (kind == "Secret") return &secret;
      if (kind == "ServiceAccount") return &service_account;
      if (kind == "Pod") return &pod;
      if (kind == "Service") return &service;
      if (kind == "ResourceQuota") return &resource_quota;
      if (kind == "Binding") return &binding;  // what a scheduler posts to pods/binding
    }
    if (api_version == "apps/v1" && kind == "Deployment") return &deployment;
    if (api_version == "batch/v1") {
      if (kind == "Job") return &job;
      if (kind == "CronJob") return &cron_job;
    }
    if (api_version == "policy/v1" && kind == "PodDisruptionBudget") return &pdb;
    if (api_version == "scheduling.k8s.io/v1" && kind == "PriorityClass") return &priority_class;
    if (api_version == "autoscaling/v1" && kind == "HorizontalPodAutoscaler") return &hpa;
    if (api_version == "networking.k8s.io/v1" && kind == "Ingress") return &ingress;
    if (api_version == "authorization.k8s.io/v1") {
      if (kind == "SelfSubjectAccessReview") return &access_review;
      if (kind == "SelfSubjectRulesReview") return &rules_review;
      // The same fields and numbers.
      if (kind == "SubjectAccessReview" || kind == "LocalSubjectAccessReview") {
        return &subject_access_review;
      }
    }
    if (api_version == "authentication.k8s.io/v1") {
      if (kind == "SelfSubjectReview") return &self_review;
      if (kind == "TokenRequest") return &token_request;
      if (kind == "TokenReview") return &token_review;
    }
    if (api_version == "rbac.authorization.k8s.io/v1") {
      if (kind == "Role") return &role;
      if (kind == "ClusterRole") return &cluster_role;
      // A ClusterRoleBinding has the same fields and numbers as a RoleBinding.
      if (kind == "RoleBinding" || kind == "ClusterRoleBinding") return &role_binding;
    }
    return nullptr;
  }
};

const Schema& schema() {
  static const Schema s;
  return s;
}

ApiError unsupported(std::string message) {
  return ApiError(Errc::unsupported_media_type, std::move(message));
}

ApiError malformed() {
  return ApiError(Errc::bad_request, "the protobuf body of the request is malformed");
}

// A cursor over protobuf wire data.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  bool varint(std::uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto byte = static_cast<std::uint8_t>(data_[pos_++]);
      out |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  bool bytes(std::string_view& out) {
    std::uint64_t len = 0;
    if (!varint(len) || len > data_.size() - pos_) return false;
    out = data_.substr(pos_, len);
    pos_ += len;
    return true;
  }

  bool skip(int wire_type) {
    std::uint64_t v = 0;
    std::string_view b;
    switch (wire_type) {
      case 0: return varint(v);
      case 1: return advance(8);
      case 2: return bytes(b);
      case 5: return advance(4);
      default: return false;
    }
  }

 private:
  bool advance(std::size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view data_;
  std::size_t pos_ = 0;
};

// Reads the string fields 1 and 2 of a map entry (or any two-string message).
ApiResult<std::pair<std::string_view, std::string_view>> map_entry(std::string_view data) {
  Reader r(data);
  std::pair<std::string_view, std::string_view> kv;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    if ((number == 1 || number == 2) && wire == 2) {
      if (!r.bytes(number == 1 ? kv.first : kv.second)) return malformed();
    } else if (!r.skip(wire)) {
      return malformed();
    }
  }
  return kv;
}

ApiResult<json::value> decode_time(std::string_view data) {
  Reader r(data);
  std::int64_t seconds = 0;
  while (!r.done()) {
    std::uint64_t tag = 0, v = 0;
    if (!r.varint(tag)) return malformed();
    if ((tag >> 3) == 1 && (tag & 7) == 0) {
      if (!r.varint(v)) return malformed();
      seconds = static_cast<std::int64_t>(v);
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  if (seconds == 0) return json::value(nullptr);  // Go's zero Time, JSON null
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json::value(buf);
}

ApiResult<json::value> decode_int_or_string(std::string_view data) {
  Reader r(data);
  std::uint64_t type = 0, int_val = 0;
  std::string_view str_val;
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const auto number = tag >> 3;
    if (number == 1 && (tag & 7) == 0) {
      if (!r.varint(type)) return malformed();
    } else if (number == 2 && (tag & 7) == 0) {
      if (!r.varint(int_val)) return malformed();
    } else if (number == 3 && (tag & 7) == 2) {
      if (!r.bytes(str_val)) return malformed();
    } else if (!r.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  if (type == 1) return json::value(std::string(str_val));
  return json::value(static_cast<std::int32_t>(int_val));
}

ApiResult<json::object> decode_message(std::string_view data, const Message& message, int depth);

bool is_zero(const json::value& v) {
  return v.is_null() || (v.is_string() && v.get_string().empty()) || (v.is_bool() && !v.get_bool()) ||
         (v.is_int64() && v.get_int64() == 0);
}

// Consumes a field this decoder does not know if its value is the zero value (an empty string
// or message, a 0 varint), which Go's generated code writes for unset fields.
bool zero_value(Reader& r, int wire) {
  Reader probe = r;
  std::uint64_t v = 0;
  std::string_view b;
  if (wire == 0 && probe.varint(v) && v == 0) {
    r = probe;
    return true;
  }
  if (wire == 2 && probe.bytes(b) && b.empty()) {
    r = probe;
    return true;
  }
  return false;
}

ApiResult<json::value> decode_scalar(Reader& r, int wire, const Field& f, int depth) {
  std::uint64_t v = 0;
  std::string_view b;
  auto need = [&](int expected) { return wire == expected; };
  switch (f.kind) {
    case Kind::string:
      if (!need(2) || !r.bytes(b)) return malformed();
      return json::value(std::string(b));
    case Kind::bytes:
      if (!need(2) || !r.bytes(b)) return malformed();
      return json::value(base64_encode(b));
    case Kind::int64:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(static_cast<std::int64_t>(v));
    case Kind::int32:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(static_cast<std::int32_t>(v));
    case Kind::boolean:
      if (!need(0) || !r.varint(v)) return malformed();
      return json::value(v != 0);
    case Kind::message: {
      if (!need(2) || !r.bytes(b)) return malformed();
      auto m = decode_message(b, *f.message, depth + 1);
      if (!m) return m.error();
      return json::value(std::move(*m));
    }
    case Kind::time:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_time(b);
    case Kind::quantity: {
      if (!need(2) || !r.bytes(b)) return malformed();
      auto kv = map_entry(b);
      if (!kv) return kv.error();
      return json::value(std::string(kv->first));
    }
    case Kind::int_or_string:
      if (!need(2) || !r.bytes(b)) return malformed();
      return decode_int_or_string(b);
    default:
      return malformed();
  }
}

ApiResult<json::object> decode_message(std::string_view data, const Message& message, int depth) {
  if (depth > 32) return malformed();
  json::object out;
  Reader r(data);
  while (!r.done()) {
    std::uint64_t tag = 0;
    if (!r.varint(tag)) return malformed();
    const int number = static_cast<int>(tag >> 3);
    const int wire = static_cast<int>(tag & 7);
    const Field* f = message.find(number);
    if (f == nullptr && zero_value(r, wire)) continue;
    if (f == nullptr) {
      return unsupported("kwatch cannot decode field " + std::to_string(number) + " of " +
                         std::string(message.name) +
                         " in a protobuf request body; send the object as JSON instead");
    }
    if (f->kind == Kind::map_string || f->kind == Kind::map_bytes ||
        f->kind == Kind::map_quantity) {
      std::string_view entry;
      if (wire != 2 || !r.bytes(entry)) return malformed();
      auto kv = map_entry(entry);
      if (!kv) return kv.error();
      json::value& map = out[f->name];
      if (!map.is_object()) map = json::object();
      std::string value;
      if (f->kind == Kind::map_string) {
        value = std::string(kv->second);
      } else if (f->kind == Kind::map_bytes) {
        value = base64_encode(kv->second);
      } else {
        auto q = map_entry(kv->second);
        if (!q) return q.error();
        value = std::string(q->first);
      }
      map.get_object()[kv->first] = std::move(value);
      continue;
    }
    auto v = decode_scalar(r, wire, *f, depth);
    if (!v) return v.error();
    if (f->inline_fields) {
      for (auto& [key, value] : v->get_object()) out[key] = std::move(value);
      continue;
    }
    if (!f->repeated && !f->keep_zero && is_zero(*v)) continue;
    if (f->repeated) {
      json::value& arr = out[f->name];
      if (!arr.is_array()) arr = json::array();
      arr.get_array().push_back(std::move(*v));
    } else {
      out[f->name] = std::move(*v);
    }
  }
  return out;
}

}  // namespace

ApiResult<json::object> decode_protobuf_object(std::string_view bytes) {
  static constexpr std::string_view kMagic("k8s\0", 4);
  if (bytes.substr(0, 4) != kMagic) {
    return ApiError(Errc::bad_request, "the protobuf body does not start with the k8s magic");
  }
  Reader envelope(bytes.substr(4));
  std::string_view type_meta, raw;
  while (!envelope.done()) {
    std::uint64_t tag = 0;
    if (!envelope.varint(tag)) return malformed();
    const auto number = tag >> 3;
    if (number == 1 && (tag & 7) == 2) {
      if (!envelope.bytes(type_meta)) return malformed();
    } else if (number == 2 && (tag & 7) == 2) {
      if (!envelope.bytes(raw)) return malformed();
    } else if (!envelope.skip(static_cast<int>(tag & 7))) {
      return malformed();
    }
  }
  auto tm = map_entry(type_meta);
  if (!tm) return tm.error();
  const auto [api_version, kind] = *tm;
  const Message* message = schema().by_kind(api_version, kind);
  if (message == nullptr) {
    return unsupported("kwatch cannot decode " + std::string(kind) + " (" +
                       std::string(api_version) +
                       ") from protobuf; send the object as JSON instead");
  }
  auto obj = decode_message(raw, *message, 0);
  if (!obj) return obj.error();
  obj->emplace("apiVersion", std::string(api_version));
  obj->emplace("kind", std::string(kind));
  // Protobuf strings are raw bytes; JSON, and so everything kwatch stores, must be UTF-8.
  json::value value(std::move(*obj));
  if (auto problem = storage::json_problem(value)) {
    return ApiError(Errc::bad_request,
                    "the protobuf body of the request is malformed: " + problem->message());
  }
  return std::move(value.get_object());
}

}  // namespace kwatch::registry
