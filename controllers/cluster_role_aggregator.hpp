// kube's clusterrole-aggregation controller: every ClusterRole with an aggregationRule gets the
// rules of the ClusterRoles its selectors match written into its stored `rules` (in name order,
// each rule once), so `kubectl get clusterrole admin -o yaml` shows what `admin` grants, as on
// kube. The rules are worked out by auth::cluster_roles_to_aggregate, the same resolution the
// authorizer and the escalation check use (registry/rbac_authorizer.hpp), so what is stored,
// what is granted and what a binding is checked against never disagree.
//
// Every replica runs one; its writes are compare-and-swap on the version it read and are made only
// when the stored rules differ, so replicas converge without coordination.
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

class ClusterRoleAggregator : public Reconciler {
 public:
  ClusterRoleAggregator(std::shared_ptr<kinds::Scheme> scheme,
                        std::shared_ptr<registry::ResourceStore> store,
                        std::shared_ptr<registry::CacherRegistry> cachers);

 private:
  boost::asio::awaitable<void> reconcile_once() override;

  std::shared_ptr<registry::ResourceStore> store_;
};

}  // namespace kwatch::controllers
