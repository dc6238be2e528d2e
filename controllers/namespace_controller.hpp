// Finishes the deletion of namespaces, as kube-controller-manager's namespace controller does: a
// namespace being deleted (Terminating) has every object in it deleted, resource by resource
// (background propagation, so objects held by their own finalizers are only marked); its status
// conditions say what remains; once nothing remains its `kubernetes` finalizer is removed, and
// with no other finalizer left the namespace goes.
//
// It also keeps a `default` ServiceAccount in every namespace that is not being deleted, as
// kube-controller-manager's serviceaccounts controller does (re-created when deleted).
//
// Every replica runs one over the same storage; deletes of what is gone are not-found and the
// finalizer write is compare-and-swap, so replicas agree.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp).
#pragma once

#include "controllers/reconciler.hpp"

#include <boost/json/object.hpp>

#include <memory>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry
namespace kwatch::storage {
class Storage;
}

namespace kwatch::controllers {

class NamespaceController : public Reconciler {
 public:
  NamespaceController(std::shared_ptr<kinds::Scheme> scheme,
                      std::shared_ptr<registry::ResourceStore> store,
                      std::shared_ptr<registry::CacherRegistry> cachers,
                      std::shared_ptr<storage::Storage> storage);

 private:
  boost::asio::awaitable<void> reconcile_once() override;
  // Deletes what is left in the namespace; true when it is empty.
  boost::asio::awaitable<bool> empty_namespace(boost::json::object ns);
  boost::asio::awaitable<void> write_conditions(const std::string& name,
                                                boost::json::array conditions);
  boost::asio::awaitable<void> finalize(const std::string& name);
  boost::asio::awaitable<void> ensure_default_service_account(const std::string& ns);

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<const kinds::ResourceInfo> service_accounts_;
};

}  // namespace kwatch::controllers
