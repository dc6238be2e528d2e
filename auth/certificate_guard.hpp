// kube-apiserver's three admission plugins for CertificateSigningRequests, as one validating
// stage: CertificateApproval (a write through /approval needs the `approve` verb on the
// request's signer: `signers` of certificates.k8s.io named by the signerName, or its
// `<domain>/*`), CertificateSigning (setting status.certificate through /status needs `sign`
// the same way) and CertificateSubjectRestriction (no request to the kube-apiserver-client signer
// may ask for the system:masters group). The verbs are checked against RBAC when kwatch
// authorizes with it; every authorizer kwatch has allows them otherwise.
#pragma once

#include "registry/admission.hpp"

#include <memory>

namespace kwatch::auth {

class RbacPolicySource;

class CertificateGuard final : public registry::ValidatingAdmission {
 public:
  // `policies` null: no RBAC (AlwaysAllow), only the subject restriction applies.
  explicit CertificateGuard(std::shared_ptr<RbacPolicySource> policies);

  std::string_view name() const override { return "CertificateApproval"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  std::shared_ptr<RbacPolicySource> policies_;
};

}  // namespace kwatch::auth
