// Cluster IPs and node ports of Services, allocated as kube-apiserver 1.34 allocates them.
//
// Cluster IPs come from the ServiceCIDRs (networking.k8s.io/v1): the ServiceCIDR controller
// hands over their ranges, and until it first does, --service-cluster-ip-range (default
// 10.0.0.0/24) is the one range. A range is used while its ServiceCIDR is not being deleted and
// its Ready condition is not False; dynamic allocations come from the largest ranges, above each
// range's static band first. Each cluster IP a Service holds is an IPAddress object named by the
// address, created only if absent (so replicas sharing etcd never hand out one address twice),
// whose parentRef names the Service. IPv4, IPv6 or both (dual-stack): a Service's ipFamilyPolicy
// and ipFamilies are worked out against the families of --service-cluster-ip-range as kube's
// initIPFamilyFields does, and it gets one address of each of its families.
//
// Node ports come from --service-node-port-range (default 30000-32767); each is a key in
// storage (`<prefix>/ranges/servicenodeports/<port>`) created only if absent, its value naming
// the Service that holds it.
//
// Deleting a Service releases its values; a failed create releases what it took.
//
// Thread-safety: the ranges are behind a mutex; call from any thread. Cancellation: none
// (each storage call is short).
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/ip_address.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kwatch::storage {
class Storage;
}
namespace kwatch::kinds {
struct ResourceInfo;
}

namespace kwatch::registry {

struct ServiceRanges {
  // --service-cluster-ip-range: one range, or two of different IP families (dual-stack). The
  // first is the primary: its family is a Service's default, its first address the
  // `kubernetes` Service's.
  std::vector<apimachinery::IpPrefix> cluster_ip_ranges{
      apimachinery::IpPrefix{{{10, 0, 0, 0}, true}, 24}};
  int node_port_low = 30000;
  int node_port_high = 32767;
};

// "10.0.0.0/24", "fd00::/108" or "10.0.0.0/24,fd00::/108" (one range of each family at most;
// IPv4 from /8 to /30, IPv6 from /64 to /125); nullopt with `error` set when it is not.
std::optional<ServiceRanges> parse_service_cidr(const std::string& cidr, ServiceRanges base = {},
                                                std::string* error = nullptr);
// "30000-32767"; nullopt when it is not a range of ports.
std::optional<ServiceRanges> parse_node_port_range(const std::string& range, ServiceRanges base = {});

class ResourceStore;

// A ServiceCIDR's range as the allocator uses it.
struct ServiceCidrRange {
  apimachinery::IpPrefix prefix;
  bool ready = true;  // not being deleted, and its Ready condition not False
};

// Values a write took, to release when the write fails.
struct ServiceReservation {
  std::vector<std::string> keys;       // node ports' keys
  std::vector<std::string> addresses;  // the IPAddresses created
  std::string holder;                  // the value the keys hold: the Service that took them
  std::string ns, name;                // that Service
};

class ServiceAllocator {
 public:
  ServiceAllocator(std::shared_ptr<storage::Storage> storage, std::string storage_prefix,
                   ServiceRanges ranges);

  // Where IPAddresses are written (`store`, which must outlive the allocator) and their kind.
  // Set before serving.
  void use_ip_addresses(ResourceStore* store, std::shared_ptr<const kinds::ResourceInfo> info);
  // The ServiceCIDRs' ranges now (the ServiceCIDR controller calls it after each change).
  void set_service_cidrs(std::vector<ServiceCidrRange> ranges);
  std::vector<ServiceCidrRange> service_cidrs() const;

  // Completes `service` (after defaulting) for a create, or for an update from `old`: values the
  // old object held and the new one omits are kept (a change of an allocated IP is refused);
  // a cluster IP and node ports the type needs are allocated or checked and reserved. 422 with
  // kube's causes for a value out of range or held by another Service. A dry run writes no
  // IPAddress (it checks that the address is free) but reserves node ports, to release.
  boost::asio::awaitable<apimachinery::ApiResult<ServiceReservation>> allocate(
      boost::json::object& service, const std::string& ns, const std::string& name,
      const boost::json::object* old, bool dry_run = false);
  // Releases `reservation` (a write that did not happen); a key another Service holds by now
  // is left alone.
  boost::asio::awaitable<void> release(ServiceReservation reservation);
  // Releases what the Service `ns`/`name` held as `old` and does not hold as `now` (null: the
  // Service is gone).
  boost::asio::awaitable<void> release_unused(const boost::json::object& old,
                                              const boost::json::object* now,
                                              const std::string& ns, const std::string& name);

  // The first address of --service-cluster-ip-range's primary range: the `kubernetes`
  // Service's.
  std::string first_ip() const;
  // The IP families Services may have here ("IPv4", "IPv6"), the primary first.
  std::vector<std::string> families() const;
  // The IPAddress kube's allocator writes for a cluster IP `ip` of the Service `ns`/`name`.
  static boost::json::object ip_address_object(const std::string& ip, const std::string& ns,
                                               const std::string& name);
  // Storage prefix of the node-port-style keys under which kwatch before ServiceCIDRs kept
  // cluster IPs (`<prefix>/ranges/serviceips/<ip>`): still counted as taken until the
  // ServiceCIDR controller has moved them to IPAddresses.
  std::string legacy_ip_prefix() const { return prefix_ + "/ranges/serviceips/"; }
  const ServiceRanges& ranges() const { return ranges_; }

 private:
  // Reserves one key for `reservation`'s holder; false when another Service holds it.
  boost::asio::awaitable<base::Result<bool>> reserve(ServiceReservation& reservation,
                                                     std::string key);
  // Creates the IPAddress of `ip` for `reservation`'s Service (only checks that none exists on
  // a dry run); false when one exists, or when `check_legacy` and an earlier version's key holds
  // it (the dynamic path skips that get: its taken set has those keys already).
  boost::asio::awaitable<base::Result<bool>> reserve_address(ServiceReservation& reservation,
                                                             std::string ip, bool dry_run,
                                                             bool check_legacy);
  // Deletes the IPAddress `ip` if the Service `ns`/`name` holds it.
  boost::asio::awaitable<void> release_address(std::string ip, const std::string& ns,
                                               const std::string& name);
  // Every address held now: the IPAddresses and the legacy keys.
  boost::asio::awaitable<base::Result<std::set<std::string>>> taken_addresses();
  // allocate()'s two halves: causes for what the spec asks wrongly; an error when storage fails
  // or a range is full (`reservation` is then released).
  // kube's initIPFamilyFields: ipFamilyPolicy and ipFamilies defaulted (from the old object on
  // updates) and checked against the cluster's families; causes for what cannot be.
  void init_ip_families(boost::json::object& spec, const boost::json::object* old_spec,
                        std::vector<apimachinery::Cause>& causes) const;
  // One address of `family` for `reservation`: `requested` checked and reserved, or ("") one
  // chosen; the address, or "" with a cause (for `shown`, the Service's clusterIPs) or an error.
  boost::asio::awaitable<apimachinery::ApiResult<std::string>> allocate_address(
      const std::string& family, const std::string& requested, const std::string& shown,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes, bool dry_run);
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> allocate_cluster_ip(
      boost::json::object& spec, const boost::json::object* old_spec,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes, bool dry_run);
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> allocate_node_ports(
      boost::json::object& spec, const boost::json::object* old_spec,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes);
  boost::asio::awaitable<apimachinery::ApiResult<std::int64_t>> free_node_port(
      ServiceReservation& reservation, std::optional<std::set<std::string>>& taken);
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> allocate_health_check_port(
      boost::json::object& spec, const boost::json::object* old_spec,
      ServiceReservation& reservation, std::vector<apimachinery::Cause>& causes,
      std::optional<std::set<std::string>>& taken);
  std::string port_key(std::int64_t port) const;

  std::shared_ptr<storage::Storage> storage_;
  std::string prefix_;
  ServiceRanges ranges_;
  ResourceStore* store_ = nullptr;
  std::shared_ptr<const kinds::ResourceInfo> ip_info_;
  mutable std::mutex mutex_;
  std::vector<ServiceCidrRange> cidrs_;  // guarded by mutex_
};

}  // namespace kwatch::registry
