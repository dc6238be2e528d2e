// kube-apiserver's APIService autoregistration: every group/version kwatch serves itself has a
// local APIService (no spec.service), as `kubectl get apiservices` shows on kube. Built-in
// group/versions get theirs once at start-up (label kube-aggregator.kubernetes.io/automanaged:
// onstart, kube's priorities); the group/versions a CustomResourceDefinition serves get theirs
// for as long as one does (label "true", priorities 1000/100), and lose it after. An APIService
// without the label is never touched; one labelled onstart that a user changes or deletes later
// is left so (kube syncs those once).
//
// Every replica runs one; creates that lose a race find the object there, updates are
// compare-and-swap on the version read, deletes carry the uid read, so replicas converge.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp).
#pragma once

#include "controllers/reconciler.hpp"

#include <boost/asio/awaitable.hpp>

#include "kinds/scheme.hpp"

#include <atomic>
#include <memory>
#include <vector>

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class ApiServiceRegistration : public Reconciler {
 public:
  // `builtin`: the group/versions served without a definition (discovery's list at start-up).
  ApiServiceRegistration(std::shared_ptr<kinds::Scheme> scheme,
                         std::shared_ptr<registry::ResourceStore> store,
                         std::shared_ptr<registry::CacherRegistry> cachers,
                         std::vector<kinds::GroupVersion> builtin);

  // Whether every built-in group/version has its APIService (the first pass is done): kube's
  // autoregister-completion readiness check. Any thread.
  bool registered() const { return started_.load(); }

 private:
  boost::asio::awaitable<void> reconcile_once() override;

  std::vector<kinds::GroupVersion> builtin_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<const kinds::ResourceInfo> crds_;
  std::atomic<bool> started_{false};  // the built-in group/versions were synced once
};

}  // namespace kwatch::controllers
