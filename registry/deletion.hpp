// What a DELETE does to the object it finds, decided as kube-apiserver's generic registry decides
// it: graceful deletion of pods, the garbage collector's `orphan` and `foregroundDeletion`
// finalizers chosen by the propagation policy, finalizers that keep an object (marked with
// deletionTimestamp) until they are removed, namespaces that turn Terminating before they go,
// and whether the answer is the deleted object or a Status.
//
// Pure functions on JSON; safe from any thread. Storage is the caller's (ResourceStore::remove).
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/user_info.hpp"

#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::kinds {
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {

// DeleteOptions.propagationPolicy.
enum class Propagation { orphan, background, foreground };

// "Orphan", "Background", "Foreground"; nullopt for anything else.
std::optional<Propagation> parse_propagation(std::string_view s);

// The finalizers the garbage collector acts on (metav1.FinalizerOrphanDependents and
// metav1.FinalizerDeleteDependents).
inline constexpr std::string_view kOrphanFinalizer = "orphan";
inline constexpr std::string_view kForegroundFinalizer = "foregroundDeletion";

// DeleteOptions, from the body and the query.
struct DeleteQuery {
  std::optional<std::string> uid;               // preconditions.uid
  std::optional<std::string> resource_version;  // preconditions.resourceVersion
  std::optional<Propagation> propagation;
  std::optional<bool> orphan_dependents;        // the deprecated form of propagation
  std::optional<std::int64_t> grace_period_seconds;
  bool dry_run = false;
  // ignoreStoreReadErrorWithClusterBreakingPotential: an object that cannot be decoded is
  // deleted anyway (no preconditions can be checked on it).
  bool ignore_read_errors = false;
  // Who asks, as the admission stages see it; null for kwatch's own deletes.
  std::shared_ptr<const apimachinery::UserInfo> user;
  // Where the admission plugins' warnings and audit annotations go; may be null.
  std::shared_ptr<std::vector<std::string>> warnings;
  std::shared_ptr<std::vector<std::pair<std::string, std::string>>> audit_annotations;
  // Where the store puts the revision of what it wrote (the delete, or the object marked as
  // being deleted); left alone when nothing was written. May be null.
  std::shared_ptr<std::int64_t> written_revision;
};

struct DeletionPlan {
  enum class Action {
    remove,  // delete it from storage now
    write,   // write `object` (now marked as being deleted); it stays
    keep,    // it is already being deleted as asked: answer with `object`, write nothing
  };
  Action action = Action::remove;
  boost::json::object object;
};

// The plan for deleting `current` (an object as served, with metadata) under `query`.
// `garbage_collection` is --enable-garbage-collector: without it no GC finalizers are added.
DeletionPlan plan_deletion(const kinds::ResourceInfo& info, boost::json::object current,
                           const DeleteQuery& query, bool garbage_collection,
                           std::chrono::system_clock::time_point now);

// Whether an object being deleted has nothing left to wait for: no finalizers (a namespace also
// none in spec.finalizers) and no grace period running (a pod on a node waits for its kubelet).
// An update that leaves such an object deletes it.
bool deletion_complete(const kinds::ResourceInfo& info, const boost::json::object& obj);

}  // namespace kwatch::registry
