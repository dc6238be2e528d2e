#include "registry/builtin_kinds.hpp"

#include "registry/builtin_columns.hpp"
#include "registry/builtin_defaults.hpp"
#include "registry/builtin_schemas.hpp"
#include "registry/custom_resource_definition.hpp"
#include "registry/json_path.hpp"
#include "registry/scheme.hpp"
#include "registry/strategic_merge_patch.hpp"
#include "registry/structural_schema.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <stdexcept>

namespace kwatch::registry {

namespace json = boost::json;

namespace {

const json::object* object_at(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

std::string_view string_at(const json::object* obj, std::string_view key) {
  if (obj == nullptr) return {};
  const json::value* v = obj->if_contains(key);
  return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

// ValidatePodSpec's rules that the schema cannot say: a pod has containers, each with an image.
void validate_pod(const json::object& pod, const json::object*, std::vector<Cause>& causes) {
  const json::object* spec = object_at(pod, "spec");
  const json::value* containers = spec != nullptr ? spec->if_contains("containers") : nullptr;
  if (containers == nullptr || !containers->is_array() || containers->get_array().empty()) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.containers"});
    return;
  }
  std::size_t i = 0;
  for (const auto& c : containers->get_array()) {
    const std::string field = "spec.containers[" + std::to_string(i++) + "]";
    const json::object* co = c.if_object();
    if (string_at(co, "name").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".name"});
    }
    if (string_at(co, "image").empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field + ".image"});
    }
  }
}

void validate_deployment(const json::object& deployment, const json::object*,
                         std::vector<Cause>& causes) {
  const json::object* spec = object_at(deployment, "spec");
  if (spec == nullptr || object_at(*spec, "selector") == nullptr) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.selector"});
  }
}

// Deleting a definition first deletes its objects: the finalizer kube's cleanup controller
// removes when they are gone.
constexpr std::string_view kCustomResourceCleanup = "customresourcecleanup.apiextensions.k8s.io";

void prepare_crd_for_create(json::object& crd) {
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
  const json::object* source = object_at(obj, "source");
  return std::string(string_at(source, "component"));
}

struct Kind {
  std::string group;
  std::string kind;
  std::string resource;
  std::string singular;
  bool namespaced = true;
  std::vector<std::string> short_names;
  std::vector<std::string> fields = {};
  bool has_status = false;
  std::vector<std::string> categories = {};
  std::string trigger_field = {};
  KindHooks hooks = {};
};

}  // namespace

void add_builtin_kinds(Scheme& scheme, const std::string& storage_prefix) {
  const KindSchemas& schemas = KindSchemas::builtin();
  const std::vector<Kind> kinds = {
      {"", "Namespace", "namespaces", "namespace", false, {"ns"}, {"status.phase"}, true, {}, {},
       {.set_defaults = default_namespace, .prepare_for_create = default_namespace_on_create}},
      {"", "Pod", "pods", "pod", true, {"po"},
       {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"},
       true, {"all"}, "spec.nodeName",
       {.set_defaults = default_pod, .prepare_for_create = default_pod_on_create,
        .field_value = false_when_absent("spec.hostNetwork"), .validate = validate_pod}},
      {"", "Service", "services", "service", true, {"svc"}, {"spec.clusterIP", "spec.type"}, true,
       {"all"}, {}, {.set_defaults = default_service}},
      {"", "ConfigMap", "configmaps", "configmap", true, {"cm"}},
      {"", "Secret", "secrets", "secret", true, {}, {"type"}, false, {}, {},
       {.set_defaults = default_secret}},
      {"", "Node", "nodes", "node", false, {"no"}, {"spec.unschedulable"}, true, {}, {},
       {.field_value = false_when_absent("spec.unschedulable")}},
      {"", "Event", "events", "event", true, {"ev"},
       {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
       false, {}, {}, {.field_value = event_field}},
      {"", "Endpoints", "endpoints", "endpoints", true, {"ep"}, {}, false, {}, {},
       {.set_defaults = default_endpoints}},
      {"", "ServiceAccount", "serviceaccounts", "serviceaccount", true, {"sa"}},
      {"apps", "Deployment", "deployments", "deployment", true, {"deploy"}, {}, true, {"all"}, {},
       {.set_defaults = default_deployment, .validate = validate_deployment}},
      {"coordination.k8s.io", "Lease", "leases", "lease", true, {}},
      {"rbac.authorization.k8s.io", "Role", "roles", "role", true, {}},
      {"rbac.authorization.k8s.io", "ClusterRole", "clusterroles", "clusterrole", false, {}},
      {"rbac.authorization.k8s.io", "RoleBinding", "rolebindings", "rolebinding", true, {}},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings",
       "clusterrolebinding", false, {}},
      {"apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions",
       "customresourcedefinition", false, {"crd", "crds"}, {}, true, {"api-extensions"}, {},
       {.set_defaults = default_custom_resource_definition,
        .prepare_for_create = prepare_crd_for_create, .validate = validate_crd}},
  };
  for (const Kind& k : kinds) {
    ResourceInfo info;
    info.group = k.group;
    info.version = "v1";
    info.kind = k.kind;
    info.resource = k.resource;
    info.singular = k.singular;
    info.namespaced = k.namespaced;
    info.short_names = k.short_names;
    info.categories = k.categories;
    info.selectable_fields = k.fields;
    info.has_status = k.has_status;
    info.storage_prefix = storage_prefix;
    info.trigger_field = k.trigger_field;
    info.hooks = k.hooks;
    if (k.kind == "Namespace" || k.kind == "Service") info.name_rule = NameRule::dns_label;
    if (k.group == "rbac.authorization.k8s.io") info.name_rule = NameRule::path_segment;
    info.printer_columns = builtin_columns(k.kind);
    if (auto schema = schemas.structural_schema(k.group, "v1", k.kind)) {
      SchemaCompileOptions options;
      options.path = "";
      options.allow_unique_items = true;
      auto compiled = StructuralSchema::compile(*schema, options);
      if (!compiled) {
        throw std::runtime_error("the built-in schema of " + k.kind +
                                 " does not compile: " + compiled.error().message);
      }
      info.schema = std::move(*compiled);
    }
    info.patch_schema =
        std::make_shared<const PatchSchema>(schemas.patch_schema(k.group, "v1", k.kind));
    scheme.add(std::move(info));
  }
}

}  // namespace kwatch::registry
