// CertificateSigningRequest (certificates.k8s.io/v1) as a kind, as kube-apiserver serves it:
// its strategy (a request is created without status, records who made it, and keeps its spec
// for good), the paths of its conditions (approval and denial only through /approval, the
// certificate only through /status), kube's validation word for word, and the PKCS#10 and PEM
// reading the signer shares.
//
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/user_info.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

// The signers kwatch can run itself (kube-controller-manager's csrsigning controller).
inline constexpr std::string_view kKubeApiServerClientSigner = "kubernetes.io/kube-apiserver-client";
inline constexpr std::string_view kKubeletClientSigner =
    "kubernetes.io/kube-apiserver-client-kubelet";

// KindHooks::prepare_for_create: no status (a request is never created approved).
void prepare_csr_for_create(boost::json::object& csr);
// KindHooks::record_requester: spec.username, uid, groups and extra are the requester's,
// whatever the body says.
void record_csr_requester(boost::json::object& csr, const apimachinery::UserInfo& user);
// KindHooks::keep_owned_fields: the spec never changes; /approval writes status.conditions only
// (the certificate stays), /status writes the status, the main resource neither. Conditions
// get kube's timestamps (lastUpdateTime now when unset; lastTransitionTime kept from the stored
// condition of the same type and status, else now).
void keep_csr_owned_fields(boost::json::object& csr, const boost::json::object& old,
                           std::string_view subresource);
// KindHooks::validate: kube's ValidateCertificateSigningRequestCreate.
void validate_csr(const boost::json::object& csr, const boost::json::object* old, Causes& causes);
// KindHooks::validate_update_path: conditions of type Approved, Denied or Failed are never
// removed; Approved and Denied are added or changed only through /approval; the certificate is
// set only through /status, and once.
void validate_csr_update_path(const boost::json::object& csr, const boost::json::object& old,
                              std::string_view subresource, Causes& causes);

// The request's PKCS#10 in PEM (spec.request decoded) and its subject and signature checked:
// the subject's organizations and common name; `error` is Go's words when it does not parse or
// its signature is wrong.
struct CertificateRequest {
  std::string pem;
  std::string common_name;
  std::vector<std::string> organizations;
  bool alternative_names = false;  // it asks for subject alternative names
  std::string error;  // empty: parsed and signed by its own key
};
CertificateRequest read_certificate_request(const boost::json::object& csr);

// Whether the request's conditions approve it, deny it or say it failed.
bool csr_has_condition(const boost::json::object& csr, std::string_view type);

// kubectl's CONDITION column: "Approved,Issued", "Pending", "Denied", "Failed", ...
std::string csr_condition_cell(const boost::json::object& csr);
// The REQUESTEDDURATION column: spec.expirationSeconds as kubectl prints a duration; "<none>".
std::string csr_requested_duration_cell(const boost::json::object& csr);

}  // namespace kwatch::kinds
