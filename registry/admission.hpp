// The admission stages of every write, as kube-apiserver's admission chain runs them: after a
// write's object is decoded and defaulted, the *mutating* plugins may change it (in order; the
// first refusal ends the write); the kind's own preparation and validation follow; then the
// *validating* plugins judge what is about to be stored (in order; the first refusal ends it).
// A delete runs the mutating stage before the object is read (no object) and the validating
// stage on the object it deletes.
//
// Inside an update both stages run in the guarded write, on the state it starts from: when
// another writer gets there first, the write starts over and the plugins are asked again, so
// they always judge what is stored. They may wait (a plugin that asks another server); the
// write's compare-and-swap happens when they are done.
//
// Plugins are added while the server is composed (Application), before any write; afterwards
// the chain is read-only and used from any thread. A plugin must allow concurrent calls.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/user_info.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatch::kinds {
struct ResourceInfo;
}

namespace kwatch::registry {

// kube's admission.Operation (CONNECT has no plugin here yet).
// connect: a kubelet's stream or a proxy (pods/exec, attach, portforward, proxy; services' and
// nodes' proxy), judged on its options before kwatch answers it.
enum class AdmissionOperation { create, update, remove, connect };

// "CREATE", "UPDATE", "DELETE", "CONNECT": as AdmissionReview and the audit log spell them.
std::string_view operation_name(AdmissionOperation operation);

// What a plugin is told about a write (kube's admission.Attributes). The references live as
// long as the call they are passed to.
struct DeleteQuery;

struct AdmissionAttributes {
  const kinds::ResourceInfo& info;
  const std::string& ns;    // "" for cluster-scoped objects
  const std::string& name;  // "" on a create whose name the server will generate
  const std::string& subresource;
  AdmissionOperation operation;
  bool dry_run = false;
  // Who asked; null for kwatch's own writes (its controllers and bootstrap), which act as a
  // member of system:masters does.
  const apimachinery::UserInfo* user = nullptr;
  // The stored object an update or delete starts from (null on create).
  const boost::json::object* old_object = nullptr;
  // Where a plugin's warnings go (the response's `Warning` headers); may be null. A warning
  // already there is not added again (an update's plugins may run once per retry).
  std::vector<std::string>* warnings = nullptr;
  // Where a plugin's audit annotations go (key, value: the request's audit event); may be null.
  std::vector<std::pair<std::string, std::string>>* audit_annotations = nullptr;
  // The write's options as the client sent them (CreateOptions, UpdateOptions): empty when it
  // sent none.
  std::string_view field_manager;
  std::string_view field_validation;
  // A delete's options as the client sent them (grace period, preconditions, propagation).
  const DeleteQuery* delete_query = nullptr;
};

// Adds `warning` to `attributes.warnings` unless it is there already (or there is no list).
void add_warning(const AdmissionAttributes& attributes, std::string warning);
// Sets the audit annotation `key` (a later value for the same key replaces the earlier one).
void add_audit_annotation(const AdmissionAttributes& attributes, std::string key,
                          std::string value);

class MutatingAdmission {
 public:
  virtual ~MutatingAdmission() = default;
  // The plugin's name, as --enable-admission-plugins spells it.
  virtual std::string_view name() const = 0;
  // Whether the write concerns this plugin; a plugin that does not handle it is not called.
  virtual bool handles(const AdmissionAttributes& attributes) const = 0;
  // Whether admit() may change the object at all (a plugin that only refuses says no, and the
  // store then need not settle what admission made: registry/store_rules.hpp settle_admitted).
  virtual bool changes_objects() const { return true; }
  // May change `object` (null on delete); an error refuses the write with it.
  virtual boost::asio::awaitable<std::optional<apimachinery::ApiError>> admit(
      const AdmissionAttributes& attributes, boost::json::object* object) = 0;
};

class ValidatingAdmission {
 public:
  virtual ~ValidatingAdmission() = default;
  virtual std::string_view name() const = 0;
  virtual bool handles(const AdmissionAttributes& attributes) const = 0;
  // Judges `object` (null on delete: `attributes.old_object` is what goes); an error refuses the
  // write with it.
  virtual boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const AdmissionAttributes& attributes, const boost::json::object* object) = 0;
};

// The plugins of both stages, in the order they were added.
class Admission {
 public:
  void add(std::shared_ptr<MutatingAdmission> plugin);
  void add(std::shared_ptr<ValidatingAdmission> plugin);

  // Whether any plugin of the stage handles the write: when none does, the stage costs nothing.
  bool mutates(const AdmissionAttributes& attributes) const;
  // Whether a plugin that handles the write may change its object.
  bool may_change(const AdmissionAttributes& attributes) const;
  bool validates(const AdmissionAttributes& attributes) const;

  boost::asio::awaitable<std::optional<apimachinery::ApiError>> mutate(
      const AdmissionAttributes& attributes, boost::json::object* object) const;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const AdmissionAttributes& attributes, const boost::json::object* object) const;

  // The plugins' names, mutating then validating (for logs and tests).
  std::vector<std::string> names() const;

 private:
  std::vector<std::shared_ptr<MutatingAdmission>> mutating_;
  std::vector<std::shared_ptr<ValidatingAdmission>> validating_;
};

}  // namespace kwatch::registry
