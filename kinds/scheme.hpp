// The resource scheme: which resources kwatch serves and how each maps to storage keys.
//
// A `ResourceInfo` ties group/version/kind to the plural resource name, its scope, short names and
// the fields it offers to field selectors. The scheme is built once at start-up and is read-only
// afterwards except through `add` and `set_owned` (CustomResourceDefinitions), which take a lock.
// Thread-safety: all const methods may be called from any thread.
// Lifetime: lookups return shared pointers. A description `set_owned` replaces or removes is
// freed once the last of them goes, so whoever uses one across a wait (a request, a watch
// stream) holds the pointer for that long; whoever follows a resource across definition changes
// (a controller, the garbage collector) keeps its group/version/resource and looks it up again.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/user_info.hpp"

#include <boost/json/fwd.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::schema {
class FieldTypes;
class PatchSchema;
class StructuralSchema;
}  // namespace kwatch::schema

namespace kwatch::kinds {

// How a kind's objects are decoded. A built-in kind is decoded as kube-apiserver decodes it into
// its Go struct: a value of the wrong type is a 400 decoding error. A custom resource is checked
// against its schema: the same value is a 422 Invalid cause.
struct ConversionWebhook;
class VersionConverter;

enum class KindOrigin { builtin, custom };

// What a delete does beyond finalizers and the garbage collector's propagation, as the kind's
// registry in kube-apiserver does it.
enum class DeletionRule {
  standard,     // the object goes when nothing (no finalizer) holds it
  graceful,     // pods: a grace period for the kubelet first (deletionGracePeriodSeconds)
  terminating,  // namespaces: phase Terminating, then gone once spec.finalizers is empty too
};

// What `metadata.generation` counts for a kind, as its strategy in kube-apiserver 1.32 does it.
// Kinds that count nothing keep what the client sent on create and the stored value on update.
enum class GenerationRule {
  none,            // ConfigMaps, Services, Pods (in 1.32), RBAC, ...
  spec,            // 1 on create, +1 when the spec changes (workloads, CRDs, ...)
  spec_on_update,  // not set on create, +1 when the spec changes (CSIDrivers)
  content,         // 1 on create, +1 when anything but metadata (and a status subresource's
                   // status) changes: custom resources
  content_and_labels,  // as content, and labels count too (EndpointSlices)
};

// What a kind's names must look like, as kube validates them.
enum class NameRule {
  dns_subdomain,  // most kinds: lowercase RFC 1123 subdomain
  dns_label,      // namespaces, services: one RFC 1123 label
  path_segment,   // RBAC objects: anything usable as one URL path segment ("system:basic-user")
  ip_address,     // IPAddresses: an IP address in canonical form
};

// What a kind does beyond its schema, as kube-apiserver's defaulting and strategy for it do.
// Every hook may be empty; each is called on a writer's thread, concurrently with others.
struct KindHooks {
  // Defaults of every write (create, update, patch), after the schema's defaults.
  std::function<void(boost::json::object& obj)> set_defaults;
  // What only a create decides, after set_defaults (a pod's initial status).
  std::function<void(boost::json::object& obj)> prepare_for_create;
  // What an update carries over from the stored object `old`, after set_defaults (a pod's
  // priority, which only a create assigns). Not called for status writes.
  std::function<void(boost::json::object& obj, const boost::json::object& old)>
      prepare_for_update;
  // What a subresource owns beyond status (which the status subresource owns for every kind
  // that has one): an update `obj` written through `subresource` ("" the main resource) takes
  // back from the stored `old` what that write may not change (a pod's ephemeral containers
  // belong to /ephemeralcontainers, a namespace's spec.finalizers to /finalize).
  std::function<void(boost::json::object& obj, const boost::json::object& old,
                     std::string_view subresource)>
      keep_owned_fields;
  // A selectable field whose value is not simply the field's (an event's "source", a node's
  // absent spec.unschedulable reading "false"); nullopt leaves it to the field.
  std::function<std::optional<std::string>(const boost::json::object& obj, std::string_view field)>
      field_value;
  // Rules the schema cannot say (a pod's containers need images); appends causes. `old` is the
  // stored object on updates, null on creates.
  std::function<void(const boost::json::object& obj, const boost::json::object* old,
                     std::vector<apimachinery::Cause>& causes)>
      validate;
  // Who made a create (the requesting user), for a kind that records it in the object (a
  // CertificateSigningRequest's spec.username, groups, ...), after prepare_for_create.
  std::function<void(boost::json::object& obj, const apimachinery::UserInfo& user)>
      record_requester;
  // Rules of an update that depend on the path it was written through (`subresource`, "" the
  // main resource), after `validate` (a CertificateSigningRequest is approved only through
  // /approval). Appends causes.
  std::function<void(const boost::json::object& obj, const boost::json::object& old,
                     std::string_view subresource, std::vector<apimachinery::Cause>& causes)>
      validate_update_path;
  // A kind served over another kind's objects (events.k8s.io/v1 Event over core/v1 Event): its
  // object in the stored kind's form before a write, and back after a read. Both or neither.
  std::function<void(boost::json::object& obj)> to_stored;
  std::function<void(boost::json::object& obj)> to_served;
};

// A column of kubectl's table: a custom resource's additionalPrinterColumn, or one of the
// columns kubectl users know for a built-in kind.
struct PrinterColumn {
  std::string name;
  std::string type;    // integer, number, string, boolean, date
  std::string format;  // "" or an OpenAPI format (int32, date-time, name, ...)
  std::string description;
  std::string json_path;  // a simple JSONPath without the braces: ".spec.replicas"
  int priority = 0;
  // Built-in kinds: shown when the path holds nothing (custom resources show null).
  std::string fallback;
  // Built-in kinds: a cell computed from the whole object (a pod's READY) and the time the table
  // is printed at (a job's DURATION), instead of the path.
  std::function<boost::json::value(const boost::json::object& obj,
                                   std::chrono::system_clock::time_point now)>
      cell;
};

// What the label selector of a scale subresource is, at its path.
enum class ScaleSelector {
  text,            // the selector's string form (a custom resource's labelSelectorPath)
  label_selector,  // a metav1.LabelSelector object (apps/v1 workloads' spec.selector)
  label_map,       // a plain label map (a ReplicationController's spec.selector)
};

// The scale subresource (autoscaling/v1 Scale) of a resource: where replicas and the selector
// live, as dotted JSON paths (".spec.replicas"). Scale.status.selector is always the string form.
struct ScaleSubresource {
  std::string spec_replicas_path;
  std::string status_replicas_path;
  std::string label_selector_path;  // "" when the resource has none
  ScaleSelector selector_form = ScaleSelector::text;
};

// One kind, described once: every layer (storage keys, validation, patching, the watch cache,
// discovery, OpenAPI) reads it from here, for built-in kinds and custom resources alike.
struct ResourceInfo {
  std::string group;    // "" for the core group
  std::string version;  // "v1"
  std::string kind;     // "Pod"
  std::string resource;  // plural, "pods"
  std::string singular;  // "pod"
  bool namespaced = true;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  // Field-selector fields beyond metadata.name and metadata.namespace, as dotted JSON paths.
  std::vector<std::string> selectable_fields;
  bool has_status = false;  // serves a /status subresource
  std::string storage_prefix = "/registry";  // --etcd-prefix: where every key of kwatch lives
  // The resource's step in storage keys when it is not `resource`: custom resources live under
  // "<group>/<plural>" ("/registry/example.com/widgets/..."), as kube-apiserver stores them.
  std::string key_resource;
  KindOrigin origin = KindOrigin::builtin;
  GenerationRule generation = GenerationRule::none;
  NameRule name_rule = NameRule::dns_subdomain;
  // The shape of the kind's objects; null means anything goes (no pruning, no validation).
  std::shared_ptr<const schema::StructuralSchema> schema;
  // Strategic merge patch strategies and merge keys; null for none (metadata rules only).
  std::shared_ptr<const schema::PatchSchema> patch_schema;
  // Server-side apply's view of the kind (schema/field_type.hpp); null: everything of deduced
  // shape (objects merge field by field, lists are atomic).
  std::shared_ptr<const schema::FieldTypes> field_types;
  // A field the watch cache indexes for selectors on it (a pod's spec.nodeName); "" for none.
  std::string trigger_field;
  KindHooks hooks;
  // Deletion as the kind's registry in kube-apiserver does it: an immediate delete answers with
  // the deleted object rather than a Status naming it (pods, services, ...), and dependents are
  // orphaned unless the delete says otherwise (core/v1 ReplicationControllers, batch/v1 Jobs).
  bool delete_returns_object = false;
  bool orphans_by_default = false;
  DeletionRule deletion = DeletionRule::standard;
  // Whether a DELETE of the collection deletes what it selects (`deletecollection`): not for
  // namespaces, whose storage in kube-apiserver has no collection delete.
  bool deletes_collections = true;
  // Services: writes allocate cluster IPs and node ports (--service-cluster-ip-range,
  // --service-node-port-range) and deletes release them.
  bool allocates_service_addresses = false;
  // Columns for kubectl's table. Built-in kinds list every column (NAME included); a custom
  // resource's NAME comes first by itself; none at all means NAME and AGE.
  std::vector<PrinterColumn> printer_columns;
  std::optional<ScaleSubresource> scale;
  // Custom resources: set while their definition is being deleted; creates are refused then.
  std::shared_ptr<std::atomic<bool>> terminating;
  // Custom resources: the version's openAPIV3Schema as the definition gives it, published in
  // the OpenAPI v3 document of the group-version (built-in kinds publish schema/schemas).
  std::shared_ptr<const boost::json::value> openapi_schema;
  // Custom resources: the name of the CustomResourceDefinition that serves them; "" for built-in
  // kinds.
  std::string owner;
  // Custom resources: the version objects are stored as (apiVersion is rewritten on the way in
  // and out, conversion strategy None); "" means `version`.
  std::string storage_version;
  // Custom resources whose definition converts through a webhook (strategy Webhook): the
  // webhook as the definition names it, and the converter that calls it, which whoever serves
  // the definition sets (kinds/version_converter.hpp; null until then: conversions fail). Both
  // null for strategy None, where only apiVersion changes.
  std::shared_ptr<const ConversionWebhook> conversion_webhook;
  std::shared_ptr<const VersionConverter> converter;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  // Whether this version's objects are converted by the definition's webhook: a version other
  // than the storage version of a definition whose strategy is Webhook.
  bool converted_by_webhook() const {
    return conversion_webhook != nullptr && !storage_version.empty() && storage_version != version;
  }
  std::string list_kind() const { return kind + "List"; }
  // "/registry/pods/" — every object of the resource lives below it.
  std::string key_prefix() const {
    return storage_prefix + "/" + (key_resource.empty() ? resource : key_resource) + "/";
  }
  // "/registry/pods/<ns>/" or, cluster-scoped or across namespaces (empty ns), key_prefix().
  std::string namespace_prefix(std::string_view ns) const;
  std::string key(std::string_view ns, std::string_view name) const;
  // The value of a selectable field of `object`, or nullopt if the field is not selectable.
  // Absent fields read as "" (booleans as "true"/"false"), as in Kubernetes.
  std::optional<std::string> field_value(const boost::json::object& object,
                                         std::string_view field) const;
  bool is_selectable(std::string_view field) const;
};

struct GroupVersion {
  std::string group;
  std::string version;
  std::string str() const { return group.empty() ? version : group + "/" + version; }
};

// An apiVersion as written in objects: "apps/v1" is {apps, v1}, "v1" the core group's.
GroupVersion parse_group_version(std::string_view api_version);

class Scheme {
 public:
  // The built-in kinds (kinds/builtin_kinds.cpp), with their schemas compiled.
  // Keys live under `storage_prefix` (no trailing slash), "/registry" by default.
  static std::shared_ptr<Scheme> builtin(const std::string& storage_prefix = "/registry");

  std::shared_ptr<const ResourceInfo> find(std::string_view group, std::string_view version,
                                           std::string_view resource) const;
  std::shared_ptr<const ResourceInfo> find_kind(std::string_view group, std::string_view version,
                                                std::string_view kind) const;
  // The resource whose objects live under `key_prefix` (ResourceInfo::key_prefix(): every
  // version of a resource shares it), or null: the version objects are stored as where one is
  // named (a custom resource's storage version), else the first registered.
  std::shared_ptr<const ResourceInfo> find_prefix(std::string_view key_prefix) const;
  // Every resource, in registration order.
  std::vector<std::shared_ptr<const ResourceInfo>> resources() const;
  std::vector<std::shared_ptr<const ResourceInfo>> resources(std::string_view group,
                                                             std::string_view version) const;
  // Served group-versions, core first; API groups in registration order.
  std::vector<GroupVersion> group_versions() const;

  void add(ResourceInfo info);
  // Replaces every resource `owner` serves (a CustomResourceDefinition's name) with `infos`; an
  // empty `infos` removes them. Each replaced description is freed when its last holder lets go
  // of it; call this when a definition changes, not on every look at it.
  void set_owned(const std::string& owner, std::vector<ResourceInfo> infos);
  // Every owner with resources in the scheme.
  std::vector<std::string> owners() const;
  // Counts changes (add, set_owned): documents derived from the scheme are current while it
  // stays the same.
  std::uint64_t generation() const { return generation_.load(); }

 private:
  mutable std::shared_mutex mutex_;
  std::vector<std::shared_ptr<const ResourceInfo>> resources_;
  std::atomic<std::uint64_t> generation_{0};
};

}  // namespace kwatch::kinds
