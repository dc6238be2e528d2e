// The RBAC escalation guard as a validating admission plugin of every write (registry/
// admission.hpp): a Role, ClusterRole, RoleBinding or ClusterRoleBinding written by a user who is
// not in system:masters is judged by RbacAdmission (auth/rbac_escalation.hpp) against a policy
// that holds every RBAC object written before (RbacPolicySource::consistent), the same policy
// the authorizer answers from. kwatch's own writes (no user) are not judged, as kube's loopback
// writes, made as a member of system:masters, are not. Deletes grant nothing and pass.
//
// Thread-safety: immutable after construction; any thread.
#pragma once

#include "registry/admission.hpp"

#include <memory>

namespace kwatch::auth {

class RbacPolicySource;

class EscalationGuard final : public registry::ValidatingAdmission {
 public:
  explicit EscalationGuard(std::shared_ptr<RbacPolicySource> policies);

  std::string_view name() const override { return "RBACEscalationGuard"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  std::shared_ptr<RbacPolicySource> policies_;
};

}  // namespace kwatch::auth
