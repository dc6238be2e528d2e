#include "auth/certificate_guard.hpp"

#include "apimachinery/json_members.hpp"
#include "auth/rbac_authorizer.hpp"
#include "auth/rbac_policy_source.hpp"
#include "kinds/certificate_signing_request.hpp"
#include "kinds/scheme.hpp"

#include <algorithm>
#include <utility>

namespace kwatch::auth {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::object_member;
using apimachinery::string_member;
using base::Errc;
using registry::AdmissionAttributes;
using registry::AdmissionOperation;

namespace {

constexpr std::string_view kGroup = "certificates.k8s.io";

// admission.NewForbidden: `certificatesigningrequests.certificates.k8s.io "<name>" is
// forbidden: <reason>`.
ApiError forbidden(const AdmissionAttributes& a, std::string reason) {
  ApiError e(Errc::forbidden, a.info.resource + "." + std::string(kGroup) + " \"" + a.name +
                                  "\" is forbidden: " + std::move(reason));
  e.name = a.name;
  e.group = std::string(kGroup);
  e.kind = a.info.resource;
  return e;
}

// IsAuthorizedForSignerName: `verb` on the signer itself, or on every signer of its domain.
bool authorized_for_signer(const RbacPolicy& policy, const UserInfo& user, std::string_view verb,
                           const std::string& signer) {
  RequestAttributes attributes;
  attributes.user = user;
  attributes.verb = std::string(verb);
  attributes.api_group = std::string(kGroup);
  attributes.api_version = "*";
  attributes.resource = "signers";
  attributes.name = signer;
  if (policy.authorize(attributes).allowed) return true;
  attributes.name = signer.substr(0, signer.find('/')) + "/*";
  return policy.authorize(attributes).allowed;
}

}  // namespace

CertificateGuard::CertificateGuard(std::shared_ptr<RbacPolicySource> policies)
    : policies_(std::move(policies)) {}

bool CertificateGuard::handles(const AdmissionAttributes& a) const {
  if (a.info.group != kGroup || a.info.resource != "certificatesigningrequests") return false;
  if (a.operation == AdmissionOperation::create) return a.subresource.empty();
  return a.operation == AdmissionOperation::update && a.user != nullptr &&
         (a.subresource == "approval" || a.subresource == "status");
}

asio::awaitable<std::optional<ApiError>> CertificateGuard::validate(const AdmissionAttributes& a,
                                                                    const json::object* object) {
  if (object == nullptr) co_return std::nullopt;
  const std::string signer(string_member(object_member(*object, "spec"), "signerName"));
  if (a.operation == AdmissionOperation::create) {
    // CertificateSubjectRestriction.
    if (signer != kinds::kKubeApiServerClientSigner) co_return std::nullopt;
    const auto request = kinds::read_certificate_request(*object);
    if (!request.error.empty()) co_return std::nullopt;  // validation words it
    const auto& orgs = request.organizations;
    if (std::find(orgs.begin(), orgs.end(), "system:masters") != orgs.end()) {
      co_return forbidden(a, "use of " + signer + " signer with system:masters group is not allowed");
    }
    co_return std::nullopt;
  }
  if (!policies_ || is_superuser(*a.user)) co_return std::nullopt;
  if (a.subresource == "status") {
    // CertificateSigning: only a write that changes the certificate.
    const std::string_view before =
        a.old_object != nullptr ? string_member(object_member(*a.old_object, "status"), "certificate")
                                : std::string_view();
    if (string_member(object_member(*object, "status"), "certificate") == before) {
      co_return std::nullopt;
    }
  }
  auto policy = co_await policies_->consistent();
  if (!policy) co_return policy.error();
  const bool approval = a.subresource == "approval";
  if (authorized_for_signer(**policy, *a.user, approval ? "approve" : "sign", signer)) {
    co_return std::nullopt;
  }
  co_return forbidden(a, std::string("user not permitted to ") + (approval ? "approve" : "sign") +
                             " requests with signerName \"" + signer + "\"");
}

}  // namespace kwatch::auth
