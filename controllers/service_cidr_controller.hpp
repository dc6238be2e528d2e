// What keeps Services' address ranges, as kube-apiserver's default-ServiceCIDR controller and
// kube-controller-manager's servicecidrs and IP repair controllers do, in one reconcile:
//
// - the Service allocator gets the ServiceCIDRs' ranges after every change (a range being
//   deleted, or whose Ready condition is False, gives no new addresses);
// - the `kubernetes` ServiceCIDR holds --service-cluster-ip-range, created when it is missing;
// - every ServiceCIDR carries the networking.k8s.io/service-cidr-finalizer and a True Ready
//   condition; one being deleted keeps its finalizer (Ready False, reason Terminating) while an
//   IPAddress of the allocator lies only inside it, and loses it 10 s after its deletion began
//   (so that every replica's allocator has stopped using it);
// - every minute, each Service's cluster IP has its IPAddress (created when missing), an
//   allocator's IPAddress whose Service is gone or holds another address is deleted once a
//   minute old (so that a Service being created keeps it), and cluster IPs kept by earlier
//   kwatch versions under `<prefix>/ranges/serviceips/` are moved to IPAddresses.
//
// Every replica runs one; each write is a compare-and-swap on the version read (or a create
// that fails if it exists), so replicas converge without coordination.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp).
#pragma once

#include "controllers/reconciler.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::storage {
class Storage;
}  // namespace kwatch::storage

namespace kwatch::registry {
class ResourceStore;
class ServiceAllocator;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class ServiceCIDRController : public Reconciler {
 public:
  // `default_cidrs`: the `kubernetes` ServiceCIDR's ranges (--service-cluster-ip-range).
  ServiceCIDRController(std::shared_ptr<kinds::Scheme> scheme,
                        std::shared_ptr<registry::ResourceStore> store,
                        std::shared_ptr<registry::CacherRegistry> cachers,
                        std::shared_ptr<storage::Storage> storage,
                        std::shared_ptr<registry::ServiceAllocator> allocator,
                        std::vector<std::string> default_cidrs);

  // Creates the `kubernetes` ServiceCIDR if it is missing (start-up, before the `kubernetes`
  // Service takes its address).
  boost::asio::awaitable<void> ensure_default();

 private:
  boost::asio::awaitable<void> reconcile_once() override;
  // Ready True, or False with reason Terminating, written when the stored condition differs.
  boost::asio::awaitable<void> write_ready(const boost::json::object& cidr, bool ready);
  boost::asio::awaitable<void> write_finalizers(const boost::json::object& cidr, bool keep);
  boost::asio::awaitable<void> repair();

  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<registry::ServiceAllocator> allocator_;
  std::shared_ptr<const kinds::ResourceInfo> ip_info_;
  std::shared_ptr<const kinds::ResourceInfo> service_info_;
  std::vector<std::string> default_cidrs_;
  std::chrono::steady_clock::time_point next_repair_{};
};

}  // namespace kwatch::controllers
