// kube-controller-manager's csrsigning controller for the signers whose certificates kube-apiserver
// itself trusts: an approved CertificateSigningRequest for kubernetes.io/kube-apiserver-client or
// kubernetes.io/kube-apiserver-client-kubelet that has no certificate and has not failed gets one,
// signed by --cluster-signing-cert-file/--cluster-signing-key-file, written to
// status.certificate through the status subresource. A request its signer does not accept (usages
// other than client ones; for kubelets, a subject other than system:nodes / system:node:<name>, or
// any subject alternative name) gets a Failed condition (SignerValidationFailure) instead.
//
// The certificate: the request's subject, public key and subject alternative names; a random
// 128-bit serial; not a CA; the key and extended key usages asked for; valid from five minutes
// ago for the shorter of --cluster-signing-duration and spec.expirationSeconds (a duration under
// eight hours starts from now), never past the signer's own expiry.
//
// Every replica runs one; its writes are compare-and-swap on the version it read, and a request
// that already has a certificate is left alone, so replicas converge without coordination.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp).
#pragma once

#include "controllers/reconciler.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class CertificateSigner : public Reconciler {
 public:
  struct Authority;
  // The signer's certificate and key (PEM); nullopt with `error` set when they do not load or do
  // not match.
  static std::shared_ptr<const Authority> load(const std::string& cert_pem,
                                               const std::string& key_pem, std::string& error);

  CertificateSigner(std::shared_ptr<kinds::Scheme> scheme,
                    std::shared_ptr<registry::ResourceStore> store,
                    std::shared_ptr<registry::CacherRegistry> cachers,
                    std::shared_ptr<const Authority> authority, std::chrono::seconds duration);

  // The certificate (PEM) for the request `request_pem` with `usages`, valid for `ttl`; or
  // nullopt with `error` set. Public for tests.
  static std::optional<std::string> sign(const Authority& authority, const std::string& request_pem,
                                         const std::vector<std::string>& usages,
                                         std::chrono::seconds ttl, std::string& error);

 private:
  boost::asio::awaitable<void> reconcile_once() override;

  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<const Authority> authority_;
  std::chrono::seconds duration_;
};

}  // namespace kwatch::controllers
