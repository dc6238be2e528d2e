// Cluster IPs and node ports of Services, allocated as kube-apiserver allocates them: from
// --service-cluster-ip-range (default 10.0.0.0/24; dynamic allocations from above the range's
// static band first) and --service-node-port-range (default 30000-32767), each value held by at
// most one Service, a value the client asks for checked against the range and the holders.
//
// Each allocated value is a key in storage (`<prefix>/ranges/serviceips/<ip>`,
// `<prefix>/ranges/servicenodeports/<port>`) created only if absent, so replicas sharing etcd
// never hand out one value twice; the value names the Service that holds it. Deleting a Service
// releases its values; a failed create releases what it took.
//
// Thread-safety: stateless but for its configuration; call from any thread. Cancellation: none
// (each storage call is short).
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::storage {
class Storage;
}

namespace kwatch::registry {

struct ServiceRanges {
  std::uint32_t network = 0x0a000000;  // 10.0.0.0
  int prefix_length = 24;
  int node_port_low = 30000;
  int node_port_high = 32767;
};

// "10.0.0.0/24" (IPv4 only); nullopt when it is not one or is too small to allocate from.
std::optional<ServiceRanges> parse_service_cidr(const std::string& cidr, ServiceRanges base = {});
// "30000-32767"; nullopt when it is not a range of ports.
std::optional<ServiceRanges> parse_node_port_range(const std::string& range, ServiceRanges base = {});

// Values a write took, to release when the write fails.
struct ServiceReservation {
  std::vector<std::string> keys;
  std::string holder;  // the value the keys hold: the Service that took them
};

class ServiceAllocator {
 public:
  ServiceAllocator(std::shared_ptr<storage::Storage> storage, std::string storage_prefix,
                   ServiceRanges ranges);

  // Completes `service` (after defaulting) for a create, or for an update from `old`: values the
  // old object held and the new one omits are kept (a change of an allocated IP is refused);
  // a cluster IP and node ports the type needs are allocated or checked and reserved. 422 with
  // kube's causes for a value out of range or held by another Service.
  boost::asio::awaitable<apimachinery::ApiResult<ServiceReservation>> allocate(
      boost::json::object& service, const std::string& ns, const std::string& name,
      const boost::json::object* old);
  // Releases `reservation` (a write that did not happen); a key another Service holds by now
  // is left alone.
  boost::asio::awaitable<void> release(ServiceReservation reservation);
  // Releases what the Service `ns`/`name` held as `old` and does not hold as `now` (null: the
  // Service is gone).
  boost::asio::awaitable<void> release_unused(const boost::json::object& old,
                                              const boost::json::object* now,
                                              const std::string& ns, const std::string& name);

  // The range's first address: the `kubernetes` Service's.
  std::string first_ip() const;
  const ServiceRanges& ranges() const { return ranges_; }

 private:
  // Reserves one key for `reservation`'s holder; false when another Service holds it.
  boost::asio::awaitable<base::Result<bool>> reserve(ServiceReservation& reservation,
                                                     std::string key);
  // allocate()'s two halves: causes for what the spec asks wrongly; an error when storage fails
  // or a range is full (`reservation` is then released).
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> allocate_cluster_ip(
      boost::json::object& spec, const boost::json::object* old_spec,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes);
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> allocate_node_ports(
      boost::json::object& spec, const boost::json::object* old_spec,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes);
  std::string ip_key(const std::string& ip) const;
  std::string port_key(std::int64_t port) const;

  std::shared_ptr<storage::Storage> storage_;
  std::string prefix_;
  ServiceRanges ranges_;
};

}  // namespace kwatch::registry
