// The object semantics of kube-apiserver's generic registry, on top of `storage::Storage`.
//
// `ResourceStore` turns API verbs into storage operations: it fills server-managed metadata
// (uid, creationTimestamp, generation, generateName), validates names and labels, runs the
// admission stages (registry/admission.hpp; NamespaceLifecycle always among them), enforces
// optimistic concurrency on `metadata.resourceVersion`, applies patches and pages lists. Objects are stored as JSON without `resourceVersion`; it is set from the key's
// mod revision on every read, so the stored bytes never disagree with the revision.
//
// Thread-safety: stateless apart from shared, thread-safe collaborators; call from any thread.
// Cancellation: operations are not cancellable once started (each storage call is short).
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/user_info.hpp"
#include "registry/admission.hpp"
#include "registry/deletion.hpp"
#include "registry/list_query.hpp"
#include "kinds/scheme.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::storage {
class Storage;
struct KeyValue;
}

namespace kwatch::registry {

class ServiceAllocator;

// apply: server-side apply (`application/apply-patch+yaml`), which creates absent objects.
enum class PatchType { json, merge, strategic_merge, apply };


// fieldValidation: what a write does with fields the kind's schema does not know and fields a
// JSON body holds twice. Ignore drops them silently, Warn drops them with a warning each
// (kube-apiserver's default when a request names none), Strict refuses the write (400).
enum class FieldValidation { ignore, warn, strict };

struct WriteQuery {
  bool dry_run = false;
  // "" or the subresource written: "status", "scale", "finalize", "binding",
  // "ephemeralcontainers".
  std::string subresource;
  FieldValidation field_validation = FieldValidation::warn;
  // Fields the request body held more than once (kube's notation, `metadata.name`).
  std::vector<std::string> duplicate_fields;
  // Where the write's warnings go (unknown and duplicate fields under Warn, admission plugins);
  // may be null.
  std::shared_ptr<std::vector<std::string>> warnings;
  // Where the admission plugins' audit annotations go (the request's audit event); may be null.
  std::shared_ptr<std::vector<std::pair<std::string, std::string>>> audit_annotations;
  // Who the write is recorded under in metadata.managedFields (schema/managed_fields.hpp):
  // the request's fieldManager or its User-Agent's product; kwatch's own writes by default.
  std::string field_manager = "kwatch-apiserver";
  // The request's fieldManager and fieldValidation parameters as sent ("" when absent), as
  // admission sees the write's options.
  std::string requested_field_manager;
  std::string requested_field_validation;
  // Apply patches: take contested fields from their managers instead of failing with 409.
  bool force = false;
  // The subresource the write is recorded under when it is not `subresource` ("scale").
  std::string tracked_subresource;
  // Set by apply: the object carries the managedFields it is to be stored with.
  bool applied = false;
  // Who asks, as the admission stages see it; null for kwatch's own writes.
  std::shared_ptr<const apimachinery::UserInfo> user;
  // Where the store puts the revision storage committed the write at (left alone when nothing
  // was written: a dry run, a refusal); may be null.
  std::shared_ptr<std::int64_t> written_revision;
};

// `configmaps "x" not found`, as kube-apiserver words it, with the Status details.
apimachinery::ApiError not_found_error(const kinds::ResourceInfo& info, const std::string& name);

// Recent object states that updates may start from instead of reading storage: in the server,
// the watch caches. Answers may lag behind storage; an update still compare-and-swaps against
// storage and re-reads it when the state it started from was stale.
// Thread-safety: `lookup` is called concurrently from any thread.
class StateCache {
 public:
  struct State {
    // The object, with metadata.resourceVersion; the text lives as long as this pointer.
    std::shared_ptr<const std::string_view> json;
    std::int64_t mod_revision = 0;
  };
  virtual ~StateCache() = default;
  // The object under `key` as the cache holds it; nullopt when not known.
  virtual std::optional<State> lookup(const kinds::ResourceInfo& info, const std::string& key) const = 0;
};

// `current` with `patch` (of `type`) applied, as a PATCH request does before validation.
apimachinery::ApiResult<boost::json::object> apply_patch(const kinds::ResourceInfo& info, PatchType type,
                                           const boost::json::object& current,
                                           const boost::json::value& patch);

// `config` (an apply patch body) applied to `current` (null when absent) for `query`'s field
// manager, as ResourceStore::apply does before the write (schema/managed_fields.hpp).
apimachinery::ApiResult<boost::json::object> apply_configuration(const kinds::ResourceInfo& info,
                                                   const boost::json::object* current,
                                                   const boost::json::object& config,
                                                   const WriteQuery& query);

// The write pipeline of a create: the object `body` becomes, in order: the request's kind,
// metadata (no resourceVersion; the namespace of the URL; a generated name; uid, creation time,
// generation); decoding and defaults; *mutating admission*; the kind's validation; *validating
// admission*; the managed fields. Nothing is written: the caller stores the result. No I/O but
// what the admission plugins do.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> create_object(
    const kinds::ResourceInfo& info, const std::string& ns, boost::json::object body,
    WriteQuery& query, const Admission& admission);

// The write pipeline of an update: the object an update makes when `next` (what the caller's
// change made of the stored object) replaces `existing` (the stored object in its served form,
// at `revision`), in order: the request's kind, metadata, resourceVersion (409 when not
// `revision`), name and namespace; server-managed metadata kept; each subresource's half (what
// the kind's subresources own, then status); decoding and defaults; *mutating admission*; the
// kind's preparation and the generation; the kind's validation and finalizers that may not be
// added; *validating admission*; the managed fields. The caller writes the result with a
// compare-and-swap at `revision`. No I/O but what the admission plugins do.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> update_object(
    const kinds::ResourceInfo& info, const std::string& ns, const std::string& name,
    const boost::json::object& existing, std::int64_t revision, boost::json::object next,
    WriteQuery& query, const Admission& admission);

class ResourceStore {
 public:
  ResourceStore(std::shared_ptr<storage::Storage> storage, std::shared_ptr<kinds::Scheme> scheme,
                std::shared_ptr<const StateCache> state_cache = nullptr);

  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> get(const kinds::ResourceInfo& info,
                                                             std::string ns, std::string name,
                                                             std::string resource_version);
  // The list object (`<Kind>List`) with items, resourceVersion, continue and remainingItemCount.
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> list(
      const kinds::ResourceInfo& info, std::string ns, CompiledListQuery query);
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> create(
      const kinds::ResourceInfo& info, std::string ns, boost::json::object body, WriteQuery query);
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> update(
      const kinds::ResourceInfo& info, std::string ns, std::string name, boost::json::object body,
      WriteQuery query);
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> patch(
      const kinds::ResourceInfo& info, std::string ns, std::string name, PatchType type,
      boost::json::value patch, WriteQuery query);
  // Server-side apply: `config` merged into the object, created when it does not exist
  // (`*created` tells which), with field ownership and conflicts (schema/managed_fields.hpp).
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> apply(
      const kinds::ResourceInfo& info, std::string ns, std::string name, boost::json::object config,
      WriteQuery query, bool* created);
  // pods/binding: puts the pod on `binding.target.name` (a Node) with the binding's
  // annotations and a True PodScheduled condition; 409 when it is on a node already or being
  // deleted, 422 for a target that is not a named Node.
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> bind(
      const kinds::ResourceInfo& info, std::string ns, std::string name, boost::json::object binding,
      WriteQuery query);
  // Deletes as kube-apiserver does (registry/deletion.hpp): an object that stays (finalizers,
  // a pod's grace period, a terminating namespace) is answered with its new state; one deleted
  // now with itself (its resourceVersion the delete's revision) or a Status naming it, by kind.
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> remove(
      const kinds::ResourceInfo& info, std::string ns, std::string name, DeleteQuery query);
  // Deletes every object matching the selectors; the result is the list of them as they were.
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> remove_collection(
      const kinds::ResourceInfo& info, std::string ns, CompiledListQuery query, DeleteQuery del);

  // The scale subresource (autoscaling/v1 Scale) of a resource that has one (`info.scale`):
  // `mutate` null reads it; otherwise it gets the current Scale and returns the new one, whose
  // spec.replicas is written to the object (with its metadata.resourceVersion as precondition).
  using ScaleFn =
      std::function<apimachinery::ApiResult<boost::json::object>(boost::json::object scale)>;
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> scale(
      const kinds::ResourceInfo& info, std::string ns, std::string name, ScaleFn mutate, WriteQuery query);

  // --enable-garbage-collector: whether deletes add the `orphan` and `foregroundDeletion`
  // finalizers the garbage collector acts on. On by default; set before serving.
  void set_garbage_collection(bool enabled) { garbage_collection_ = enabled; }
  bool garbage_collection() const { return garbage_collection_; }
  // Allocates Services' cluster IPs and node ports on writes and releases them on deletes;
  // without one, Services keep whatever they were given. Set before serving.
  void set_service_allocator(std::shared_ptr<ServiceAllocator> allocator) {
    services_ = std::move(allocator);
  }
  // The admission plugins every write goes through: NamespaceLifecycle from the start; add
  // others before serving.
  Admission& admission() { return *admission_; }

  // Whether storage answers within `timeout` (the health checks).
  boost::asio::awaitable<apimachinery::ApiResult<void>> ping(std::chrono::milliseconds timeout);

  // Creates the namespace if it is absent (start-up defaults).
  boost::asio::awaitable<apimachinery::ApiResult<void>> ensure_namespace(std::string name);
  // Creates `body` (in its metadata.namespace when `info` is namespaced) if no object of its
  // name exists; an existing one is left as it is (start-up defaults such as the bootstrap RBAC
  // roles and the `kubernetes` Service).
  boost::asio::awaitable<apimachinery::ApiResult<void>> ensure(const kinds::ResourceInfo& info,
                                                               boost::json::object body);

  // Parses a stored object (allocated from `sp`) and sets `metadata.resourceVersion` to its mod
  // revision; an object that cannot be decoded is a 500 naming its key and the way to delete it.
  static apimachinery::ApiResult<boost::json::object> decode(const storage::KeyValue& kv,
                                               boost::json::storage_ptr sp = {});

 private:
  using MutateFn = std::function<apimachinery::ApiResult<boost::json::object>(
      const boost::json::object& current)>;
  // An update of the object `mutate` makes from the current one; Services get their
  // allocations worked out first, then every kind goes through guarded_update.
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> write_update(
      const kinds::ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
      MutateFn mutate);
  // The compare-and-swap write of an update, with kube's update rules (metadata kept, status
  // halves, generation, finalizers, validation).
  boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> guarded_update(
      const kinds::ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
      MutateFn mutate);

  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<const StateCache> state_cache_;
  bool garbage_collection_ = true;
  std::shared_ptr<ServiceAllocator> services_;
  std::shared_ptr<Admission> admission_;
};

}  // namespace kwatch::registry
