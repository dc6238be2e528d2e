// The resource scheme: which resources kwatch serves and how each maps to storage keys.
//
// A `ResourceInfo` ties group/version/kind to the plural resource name, its scope, short names and
// the fields it offers to field selectors. The scheme is built once at start-up and is read-only
// afterwards except through `add` (CustomResourceDefinitions), which takes a lock.
// Thread-safety: all const methods may be called from any thread.
#pragma once

#include <boost/json/fwd.hpp>

#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::registry {

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
  // Patch types accepted; strategic merge patch only for built-in kinds.
  bool strategic_merge_patch = true;
  bool has_status = false;  // serves a /status subresource
  std::string storage_prefix = "/registry";  // --etcd-prefix: where every key of kwatch lives

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  std::string list_kind() const { return kind + "List"; }
  // "/registry/pods/" — every object of the resource lives below it.
  std::string key_prefix() const { return storage_prefix + "/" + resource + "/"; }
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

class Scheme {
 public:
  // The built-in core/v1, apps/v1 and coordination.k8s.io/v1 resources.
  // Keys live under `storage_prefix` (no trailing slash), "/registry" by default.
  static std::shared_ptr<Scheme> builtin(const std::string& storage_prefix = "/registry");

  const ResourceInfo* find(std::string_view group, std::string_view version,
                           std::string_view resource) const;
  const ResourceInfo* find_kind(std::string_view group, std::string_view version,
                                std::string_view kind) const;
  // Every resource, in registration order.
  std::vector<const ResourceInfo*> resources() const;
  std::vector<const ResourceInfo*> resources(std::string_view group,
                                             std::string_view version) const;
  // Served group-versions, core first; API groups in registration order.
  std::vector<GroupVersion> group_versions() const;

  void add(ResourceInfo info);

 private:
  mutable std::shared_mutex mutex_;
  // unique_ptr keeps each ResourceInfo at a stable address while the vector grows.
  std::vector<std::unique_ptr<ResourceInfo>> resources_;
};

}  // namespace kwatch::registry
