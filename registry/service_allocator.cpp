#include "registry/service_allocator.hpp"

#include "apimachinery/json_path.hpp"
#include "storage/storage.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <random>
#include <set>

namespace kwatch::registry {

using apimachinery::ApiError;
using apimachinery::api_error;
using apimachinery::ApiResult;
using apimachinery::Cause;
using base::Errc;
using apimachinery::object_member;
using apimachinery::string_member;

namespace json = boost::json;

namespace {

using apimachinery::string_at;

json::object* spec_of(json::object& svc) {
  json::value* v = svc.if_contains("spec");
  return v != nullptr ? v->if_object() : nullptr;
}

const json::object* spec_of(const json::object& svc) { return object_member(svc, "spec"); }

std::string type_of(const json::object* spec) {
  const std::string t = string_at(spec, "type");
  return t.empty() ? "ClusterIP" : t;
}

bool needs_cluster_ip(const json::object* spec) { return type_of(spec) != "ExternalName"; }

bool needs_node_ports(const json::object* spec) {
  const std::string t = type_of(spec);
  if (t == "NodePort") return true;
  if (t != "LoadBalancer") return false;
  const json::value* alloc = spec->if_contains("allocateLoadBalancerNodePorts");
  return alloc == nullptr || !alloc->is_bool() || alloc->get_bool();
}

// The cluster IP a spec names: clusterIP, else the first of clusterIPs.
std::string requested_ip(const json::object* spec) {
  std::string ip = string_at(spec, "clusterIP");
  if (!ip.empty() || spec == nullptr) return ip;
  const json::value* ips = spec->if_contains("clusterIPs");
  if (ips != nullptr && ips->is_array() && !ips->get_array().empty() &&
      ips->get_array()[0].is_string()) {
    return std::string(ips->get_array()[0].get_string());
  }
  return {};
}

std::optional<std::uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string format_ipv4(std::uint32_t ip) {
  in_addr a{};
  a.s_addr = htonl(ip);
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::int64_t int_at(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : 0;
}

void set_cluster_ip(json::object& spec, const std::string& ip) {
  spec["clusterIP"] = ip;
  spec["clusterIPs"] = json::array{json::value(ip)};
  if (!spec.contains("ipFamilies")) spec["ipFamilies"] = json::array{"IPv4"};
  if (!spec.contains("ipFamilyPolicy")) spec["ipFamilyPolicy"] = "SingleStack";
}

std::set<std::int64_t> node_ports_of(const json::object* spec) {
  std::set<std::int64_t> out;
  const json::value* ports = spec != nullptr ? spec->if_contains("ports") : nullptr;
  if (ports == nullptr || !ports->is_array()) return out;
  for (const auto& p : ports->get_array()) {
    if (const json::object* po = p.if_object(); po != nullptr && int_at(*po, "nodePort") != 0) {
      out.insert(int_at(*po, "nodePort"));
    }
  }
  return out;
}

std::string held_ip(const json::object& svc) {
  const json::object* spec = spec_of(svc);
  if (!needs_cluster_ip(spec)) return {};
  std::string ip = requested_ip(spec);
  return ip == "None" ? std::string() : ip;
}

// A port's protocol; unset means TCP (the default the write gets later).
std::string protocol_of(const json::object* port) {
  std::string p = string_at(port, "protocol");
  return p.empty() ? "TCP" : p;
}

// A storage failure while allocating: 500.
ApiError allocation_failed(const boost::system::error_code& e) {
  return api_error(Errc::internal, "failed to allocate a service value: " + e.message());
}

std::string holder_value(const std::string& ns, const std::string& name) {
  return "{\"service\":\"" + ns + "/" + name + "\"}";
}

}  // namespace

std::optional<ServiceRanges> parse_service_cidr(const std::string& cidr, ServiceRanges base) {
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) return std::nullopt;
  auto ip = parse_ipv4(cidr.substr(0, slash));
  int len = 0;
  const std::string bits = cidr.substr(slash + 1);
  auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), len);
  if (!ip || ec != std::errc() || end != bits.data() + bits.size() || len < 8 || len > 30) {
    return std::nullopt;
  }
  const std::uint32_t mask = len == 0 ? 0 : ~std::uint32_t{0} << (32 - len);
  base.network = *ip & mask;
  base.prefix_length = len;
  return base;
}

std::optional<ServiceRanges> parse_node_port_range(const std::string& range, ServiceRanges base) {
  const auto dash = range.find('-');
  if (dash == std::string::npos) return std::nullopt;
  int lo = 0, hi = 0;
  const std::string a = range.substr(0, dash), b = range.substr(dash + 1);
  auto [e1, c1] = std::from_chars(a.data(), a.data() + a.size(), lo);
  auto [e2, c2] = std::from_chars(b.data(), b.data() + b.size(), hi);
  if (c1 != std::errc() || c2 != std::errc() || e1 != a.data() + a.size() ||
      e2 != b.data() + b.size() || lo < 1 || hi > 65535 || lo > hi) {
    return std::nullopt;
  }
  base.node_port_low = lo;
  base.node_port_high = hi;
  return base;
}

ServiceAllocator::ServiceAllocator(std::shared_ptr<storage::Storage> storage,
                                   std::string storage_prefix, ServiceRanges ranges)
    : storage_(std::move(storage)), prefix_(std::move(storage_prefix)), ranges_(ranges) {}

std::string ServiceAllocator::ip_key(const std::string& ip) const {
  return prefix_ + "/ranges/serviceips/" + ip;
}

std::string ServiceAllocator::port_key(std::int64_t port) const {
  return prefix_ + "/ranges/servicenodeports/" + std::to_string(port);
}

std::string ServiceAllocator::first_ip() const { return format_ipv4(ranges_.network + 1); }

boost::asio::awaitable<ApiResult<ServiceReservation>> ServiceAllocator::allocate(
    json::object& service, const std::string& ns, const std::string& name,
    const json::object* old) {
  ServiceReservation reservation;
  reservation.holder = holder_value(ns, name);
  json::object* spec = spec_of(service);
  if (spec == nullptr) co_return reservation;
  const json::object* old_spec = old != nullptr ? spec_of(*old) : nullptr;
  std::vector<Cause> causes;
  // A failure of storage, or a range that is full (what was reserved is then released).
  if (auto e = co_await allocate_cluster_ip(*spec, old_spec, reservation, causes)) co_return *e;
  if (causes.empty()) {
    if (auto e = co_await allocate_node_ports(*spec, old_spec, reservation, causes)) co_return *e;
  }
  if (!causes.empty()) {
    co_await release(std::move(reservation));
    co_return ApiError(Errc::invalid, "", std::move(causes));
  }
  co_return reservation;
}

boost::asio::awaitable<base::Result<bool>> ServiceAllocator::reserve(
    ServiceReservation& reservation, std::string key) {
  std::string value = reservation.holder;
  auto r = co_await storage_->create(key, std::move(value));
  if (r) {
    reservation.keys.push_back(std::move(key));
    co_return true;
  }
  if (r.error() == base::Errc::already_exists) co_return false;
  co_return base::Result<bool>(boost::system::in_place_error, r.error());
}

// The cluster IP: kept from the old object, checked and reserved when asked for, else chosen.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_cluster_ip(
    json::object& service_spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes) {
  json::object* spec = &service_spec;
  if (needs_cluster_ip(spec)) {
    std::string ip = requested_ip(spec);
    const std::string old_ip = old_spec != nullptr && needs_cluster_ip(old_spec)
                                   ? requested_ip(old_spec)
                                   : std::string();
    if (!old_ip.empty()) {
      if (ip.empty()) {
        for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
          if (const json::value* v = old_spec->if_contains(f)) (*spec)[f] = *v;
        }
      } else if (ip != old_ip) {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: []string{\"" + ip + "\"}: may not change once set",
                          "spec.clusterIPs[0]"});
      }
    } else if (ip == "None") {
      if (type_of(spec) == "NodePort" || type_of(spec) == "LoadBalancer") {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: \"None\": may not be set to 'None' for " + type_of(spec) +
                              " services",
                          "spec.clusterIPs[0]"});
      }
      set_cluster_ip(*spec, "None");
    } else if (!ip.empty()) {
      const std::uint32_t size = std::uint32_t{1} << (32 - ranges_.prefix_length);
      auto parsed = parse_ipv4(ip);
      const std::string range = format_ipv4(ranges_.network) + "/" + std::to_string(ranges_.prefix_length);
      if (!parsed) {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: \"" + ip +
                              "\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                          "spec.clusterIPs[0]"});
      } else if (*parsed <= ranges_.network || *parsed >= ranges_.network + size - 1) {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: \"" + ip + "\": failed to allocate IP " + ip +
                              ": provided IP is not in the valid range. The range of valid IPs "
                              "is " + range,
                          "spec.clusterIPs[0]"});
      } else {
        std::string key = ip_key(format_ipv4(*parsed));  // named: GCC 12 and co_await temporaries
        auto r = co_await reserve(reservation, std::move(key));
        if (!r) co_return allocation_failed(r.error());
        if (!*r) {
          causes.push_back({"FieldValueInvalid",
                            "Invalid value: \"" + ip + "\": failed to allocate IP " + ip +
                                ": provided IP is already allocated",
                            "spec.clusterIPs[0]"});
        } else {
          set_cluster_ip(*spec, format_ipv4(*parsed));
        }
      }
    } else {
      // Dynamic: above the static band first (kept for addresses clients ask for), then in it.
      const std::uint32_t usable = (std::uint32_t{1} << (32 - ranges_.prefix_length)) - 2;
      const std::uint32_t band = std::min<std::uint32_t>(std::max<std::uint32_t>(16, usable / 16), 256);
      storage::ListOptions options;
      options.prefix = prefix_ + "/ranges/serviceips/";
      auto taken_list = co_await storage_->list(options);
      if (!taken_list) co_return allocation_failed(taken_list.error());
      std::set<std::string> taken;
      for (const auto& kv : taken_list->kvs) taken.insert(kv.key);
      thread_local std::mt19937 rng{std::random_device{}()};
      std::string chosen;
      for (auto [lo, hi] : {std::pair{std::min(band, usable) + 1, usable},
                            std::pair{std::uint32_t{1}, std::min(band, usable)}}) {
        if (lo > hi || !chosen.empty()) continue;
        const std::uint32_t count = hi - lo + 1;
        const std::uint32_t start = std::uniform_int_distribution<std::uint32_t>(0, count - 1)(rng);
        for (std::uint32_t i = 0; i < count && chosen.empty(); ++i) {
          const std::string candidate = format_ipv4(ranges_.network + lo + (start + i) % count);
          std::string key = ip_key(candidate);
          if (taken.count(key)) continue;
          auto r = co_await reserve(reservation, std::move(key));
          if (!r) co_return allocation_failed(r.error());
          if (*r) chosen = candidate;
        }
      }
      if (chosen.empty()) {
        co_await release(std::move(reservation));
        co_return api_error(Errc::internal,
                            "Internal error occurred: failed to allocate a serviceIP: range is full");
      }
      set_cluster_ip(*spec, chosen);
    }
  } else {
    for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) spec->erase(f);
  }

  co_return std::nullopt;
}

// Node ports, for the types that need them: kept from the old object for the same port and
// protocol, checked and reserved when asked for, else chosen.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_node_ports(
    json::object& service_spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes) {
  json::object* spec = &service_spec;
  json::value* ports = spec->if_contains("ports");
  if (ports != nullptr && ports->is_array()) {
    const bool wanted = needs_node_ports(spec);
    const std::set<std::int64_t> old_held = old_spec != nullptr && needs_node_ports(old_spec)
                                                ? node_ports_of(old_spec)
                                                : std::set<std::int64_t>();
    std::optional<std::set<std::string>> taken;
    std::size_t i = 0;
    for (auto& p : ports->get_array()) {
      const std::string field = "spec.ports[" + std::to_string(i++) + "].nodePort";
      json::object* port = p.if_object();
      if (port == nullptr) continue;
      std::int64_t np = int_at(*port, "nodePort");
      if (!wanted) {
        if (np != 0) {
          causes.push_back({"FieldValueForbidden",
                            "Forbidden: may not be used when `type` is '" + type_of(spec) + "'",
                            field});
        }
        continue;
      }
      if (np == 0 && old_spec != nullptr) {
        // Kept from the old object for the same port and protocol.
        const json::value* old_ports = old_spec->if_contains("ports");
        if (old_ports != nullptr && old_ports->is_array() && !old_held.empty()) {
          for (const auto& op : old_ports->get_array()) {
            const json::object* o = op.if_object();
            if (o != nullptr && int_at(*o, "port") == int_at(*port, "port") &&
                protocol_of(o) == protocol_of(port) && int_at(*o, "nodePort")) {
              np = int_at(*o, "nodePort");
              (*port)["nodePort"] = np;
            }
          }
        }
      }
      if (np != 0) {
        if (old_held.count(np)) continue;  // already this Service's
        if (np < ranges_.node_port_low || np > ranges_.node_port_high) {
          causes.push_back({"FieldValueInvalid",
                            "Invalid value: " + std::to_string(np) +
                                ": provided port is not in the valid range. The range of valid "
                                "ports is " + std::to_string(ranges_.node_port_low) + "-" +
                                std::to_string(ranges_.node_port_high),
                            field});
          continue;
        }
        std::string key = port_key(np);
        auto r = co_await reserve(reservation, std::move(key));
        if (!r) co_return allocation_failed(r.error());
        if (!*r) {
          causes.push_back({"FieldValueInvalid",
                            "Invalid value: " + std::to_string(np) +
                                ": provided port is already allocated",
                            field});
        }
        continue;
      }
      if (!taken) {
        storage::ListOptions options;
        options.prefix = prefix_ + "/ranges/servicenodeports/";
        auto listed = co_await storage_->list(options);
        if (!listed) co_return allocation_failed(listed.error());
        taken.emplace();
        for (const auto& kv : listed->kvs) taken->insert(kv.key);
      }
      const int count = ranges_.node_port_high - ranges_.node_port_low + 1;
      thread_local std::mt19937 rng{std::random_device{}()};
      const int start = std::uniform_int_distribution<int>(0, count - 1)(rng);
      std::int64_t chosen = 0;
      for (int k = 0; k < count && chosen == 0; ++k) {
        const std::int64_t candidate = ranges_.node_port_low + (start + k) % count;
        std::string key = port_key(candidate);
        if (taken->count(key)) continue;
        auto r = co_await reserve(reservation, std::move(key));
        if (!r) co_return allocation_failed(r.error());
        if (*r) chosen = candidate;
      }
      if (chosen == 0) {
        co_await release(std::move(reservation));
        co_return api_error(Errc::internal,
                            "Internal error occurred: failed to allocate a nodePort: range is full");
      }
      taken->insert(port_key(chosen));
      (*port)["nodePort"] = chosen;
    }
  }
  co_return std::nullopt;
}

boost::asio::awaitable<void> ServiceAllocator::release(ServiceReservation reservation) {
  for (auto& key : reservation.keys) {
    auto held = co_await storage_->get(key);
    if (!held || held->value != reservation.holder) continue;
    co_await storage_->delete_if(std::move(key), held->mod_revision);
  }
}

boost::asio::awaitable<void> ServiceAllocator::release_unused(const json::object& old,
                                                              const json::object* now,
                                                              const std::string& ns,
                                                              const std::string& name) {
  ServiceReservation unused;
  unused.holder = holder_value(ns, name);
  const std::string old_ip = held_ip(old);
  if (!old_ip.empty() && (now == nullptr || held_ip(*now) != old_ip)) {
    unused.keys.push_back(ip_key(old_ip));
  }
  const json::object* old_spec = spec_of(old);
  if (old_spec != nullptr && needs_node_ports(old_spec)) {
    const json::object* now_spec = now != nullptr ? spec_of(*now) : nullptr;
    const std::set<std::int64_t> kept = now_spec != nullptr && needs_node_ports(now_spec)
                                            ? node_ports_of(now_spec)
                                            : std::set<std::int64_t>();
    for (std::int64_t p : node_ports_of(old_spec)) {
      if (!kept.count(p)) unused.keys.push_back(port_key(p));
    }
  }
  co_await release(std::move(unused));
}

}  // namespace kwatch::registry
