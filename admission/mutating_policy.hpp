// The MutatingAdmissionPolicy admission plugin (admissionregistration.k8s.io/v1beta1, kube's
// plugin of that name): creates and updates are changed by the policies whose bindings match
// them, before the kind's validation and every validating plugin, as kube-apiserver changes them.
//
// Policies and bindings come from their watch caches as the validating plugin's do
// (policy_runtime.hpp: PolicySource). Per write, for each policy (by name) whose
// matchConstraints match, each binding (by name) whose matchResources match and each param:
// the match conditions, then the mutations in order, each seeing the object as the ones before
// left it:
//   ApplyConfiguration: an `Object{...}` merged into the object as server-side apply merges
//     (structures and granular maps field by field, keyed lists by key, sets by value); one
//     that sets an atomic list, map or structure is refused, as kube refuses it.
//   JSONPatch: a list of `JSONPatch{op, path, from, value}` applied as RFC 6902; a failing
//     `test` operation leaves the object as it was.
// A policy with reinvocationPolicy IfNeeded runs once more when a later policy changed the
// object after it ran. A mutation that fails refuses the write under failurePolicy Fail (403,
// `policy 'p' with binding 'b' denied request: <why>`) and is skipped under Ignore.
//
// Deletes are never mutated; the admission policy kinds are never judged.
//
// Ownership: shared (the admission chain); see PolicyPluginBase. Thread-safety: handles() and
// admit() from any thread.
#pragma once

#include "admission/policy_plugin.hpp"
#include "registry/admission.hpp"

#include <memory>

namespace kwatch::admission {

class MutatingPolicyPlugin final : public registry::MutatingAdmission, public PolicyPluginBase {
 public:
  MutatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                       std::shared_ptr<registry::CacherRegistry> cachers);
  ~MutatingPolicyPlugin() override;

  std::string_view name() const override { return "MutatingAdmissionPolicy"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> admit(
      const registry::AdmissionAttributes& attributes, boost::json::object* object) override;

 private:
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> mutate(
      const registry::AdmissionAttributes& attributes, boost::json::object* object);
};

}  // namespace kwatch::admission
