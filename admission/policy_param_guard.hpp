// Who may point an admission policy at params, as kube-apiserver's registry strategies for the
// policy kinds decide: a policy's expressions read every object of its paramKind (a
// messageExpression can copy a Secret's data into an error a client sees), so a user who writes
// a ValidatingAdmissionPolicy or MutatingAdmissionPolicy with a paramKind must be allowed to
// `get` every object of that kind, and one who writes a binding with a paramRef must be allowed
// to `get` the object it names (with the kind its policy's paramKind gives, every kind when the
// policy is not there). Refused writes are 422 with a Forbidden cause at spec.paramKind or
// spec.paramRef, in kube's words. An update that keeps the paramKind (or the paramRef and
// policyName) is not checked again; members of system:masters and kwatch's own writes pass.
//
// A validating admission plugin of every write of the four policy kinds; the decision is the
// RBAC policy's of every RBAC object written before the write (RbacPolicySource::consistent).
// Thread-safety: immutable after construction; any thread.
#pragma once

#include "registry/admission.hpp"

#include <memory>

namespace kwatch::auth {
class RbacPolicySource;
}

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::admission {

class PolicyParamGuard final : public registry::ValidatingAdmission {
 public:
  PolicyParamGuard(std::shared_ptr<auth::RbacPolicySource> rbac,
                   std::shared_ptr<kinds::Scheme> scheme,
                   std::shared_ptr<registry::CacherRegistry> cachers);

  std::string_view name() const override { return "AdmissionPolicyParamAuthorization"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  std::shared_ptr<auth::RbacPolicySource> rbac_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
};

}  // namespace kwatch::admission
