// kube's validatingadmissionpolicy-status controller: a ValidatingAdmissionPolicy whose
// generation its status has not observed gets its expressions type-checked against the kinds its
// rules name (kinds::type_check_validating_policy) and the result written to
// status.typeChecking.expressionWarnings, with status.observedGeneration, through the status
// subresource (field manager `validatingadmissionpolicy-status`). The warnings inform; they
// never change what the policy does.
//
// Every replica runs one; its writes are compare-and-swap on the version it read and are made
// only for a generation not yet observed, so replicas converge without coordination.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp).
#pragma once

#include "controllers/reconciler.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class AdmissionPolicyStatus : public Reconciler {
 public:
  AdmissionPolicyStatus(std::shared_ptr<kinds::Scheme> scheme,
                        std::shared_ptr<registry::ResourceStore> store,
                        std::shared_ptr<registry::CacherRegistry> cachers);

 private:
  boost::asio::awaitable<void> reconcile_once() override;

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
};

}  // namespace kwatch::controllers
