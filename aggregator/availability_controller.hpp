// kube-aggregator's availability controllers, in one loop: every remote APIService (one with
// spec.service) gets the Available condition kube writes, checked in kube's order and with its
// reasons and messages: the Service (ServiceNotFound), its port (ServicePortError), its
// Endpoints (EndpointsNotFound, MissingEndpoints), then the discovery check: 5 GETs of
// /apis/<group>/<version> at the resolved endpoint at once, one that passes is enough (TLS
// unverified as kube's check is, the proxy client certificate presented, as
// system:kube-aggregator in system:masters, within 5 s each; else FailedDiscoveryCheck with the
// last failure), then True "Passed". Local APIServices are Available from
// their create (kinds/api_service.hpp).
//
// kube rechecks every 30 s and on Service and Endpoints events; this loop rechecks every
// `interval` (2 s by default), so an extension server that comes back is used again within it.
// The status is written only when the condition changes (lastTransitionTime only when its
// status does); replicas that agree write nothing.
//
// Ownership: shared; its task holds it. Cancellation: stop() ends the loop at its next wait.
#pragma once

#include "aggregator/api_service_proxy.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace kwatch::registry {
class ResourceStore;
}

namespace kwatch::aggregator {

// The Available condition of `target` now: status, reason, message.
struct Availability {
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
};

// Called after each check of an APIService (kube's aggregator_unavailable_apiservice metrics):
// its name, whether it is available now, and, when it just turned unavailable, the reason.
using AvailabilityObserver =
    std::function<void(const std::string& name, bool available, const std::string& became)>;

class AvailabilityController : public std::enable_shared_from_this<AvailabilityController> {
 public:
  AvailabilityController(std::shared_ptr<const kinds::Scheme> scheme,
                         std::shared_ptr<const registry::CacherRegistry> cachers,
                         std::shared_ptr<registry::ResourceStore> store,
                         std::shared_ptr<const ApiServiceProxy> proxy,
                         std::chrono::milliseconds interval = std::chrono::seconds(2));

  void start(boost::asio::any_io_executor executor);
  void use_observer(AvailabilityObserver observer) { observer_ = std::move(observer); }
  void stop() { stopped_ = true; }

  // One check of `target` (for tests and the loop).
  boost::asio::awaitable<Availability> check(const RemoteApiService& target) const;

 private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<void> write(const RemoteApiService& target, const Availability& now);

  std::shared_ptr<const kinds::Scheme> scheme_;
  std::shared_ptr<const registry::CacherRegistry> cachers_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<const ApiServiceProxy> proxy_;
  std::chrono::milliseconds interval_;
  AvailabilityObserver observer_;
  std::atomic<bool> stopped_{false};
};

}  // namespace kwatch::aggregator
