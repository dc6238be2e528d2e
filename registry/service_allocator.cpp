#include "registry/service_allocator.hpp"

#include "apimachinery/json_path.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/scheme.hpp"
#include "kinds/service_addresses.hpp"
#include "registry/deletion.hpp"
#include "registry/resource_store.hpp"
#include "storage/storage.hpp"

#include <boost/json/array.hpp>
#include <spdlog/spdlog.h>
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
    : storage_(std::move(storage)), prefix_(std::move(storage_prefix)), ranges_(ranges) {
  apimachinery::IpPrefix flag;
  flag.address.v4 = true;
  for (int i = 0; i < 4; ++i) {
    flag.address.bytes[static_cast<std::size_t>(i)] =
        static_cast<std::uint8_t>(ranges_.network >> (24 - 8 * i));
  }
  flag.bits = ranges_.prefix_length;
  cidrs_.push_back({flag, true});
}

void ServiceAllocator::use_ip_addresses(ResourceStore* store,
                                        std::shared_ptr<const kinds::ResourceInfo> info) {
  store_ = store;
  ip_info_ = std::move(info);
}

void ServiceAllocator::set_service_cidrs(std::vector<ServiceCidrRange> ranges) {
  std::erase_if(ranges, [](const ServiceCidrRange& r) { return !r.prefix.address.v4; });
  std::lock_guard lock(mutex_);
  cidrs_ = std::move(ranges);
}

std::vector<ServiceCidrRange> ServiceAllocator::service_cidrs() const {
  std::lock_guard lock(mutex_);
  return cidrs_;
}

json::object ServiceAllocator::ip_address_object(const std::string& ip, const std::string& ns,
                                                 const std::string& name) {
  // The core group is empty, which the parentRef leaves out (Go's omitempty).
  return json::object{
      {"apiVersion", "networking.k8s.io/v1"},
      {"kind", "IPAddress"},
      {"metadata",
       json::object{{"name", ip},
                    {"labels", json::object{{kinds::kIPAddressFamilyLabel, "IPv4"},
                                            {kinds::kIPAddressManagedByLabel,
                                             kinds::kIPAllocatorName}}}}},
      {"spec", json::object{{"parentRef", json::object{{"resource", "services"},
                                                       {"namespace", ns},
                                                       {"name", name}}}}}};
}

std::string ServiceAllocator::port_key(std::int64_t port) const {
  return prefix_ + "/ranges/servicenodeports/" + std::to_string(port);
}

std::string ServiceAllocator::first_ip() const { return format_ipv4(ranges_.network + 1); }

boost::asio::awaitable<ApiResult<ServiceReservation>> ServiceAllocator::allocate(
    json::object& service, const std::string& ns, const std::string& name,
    const json::object* old, bool dry_run) {
  ServiceReservation reservation;
  reservation.holder = holder_value(ns, name);
  reservation.ns = ns;
  reservation.name = name;
  json::object* spec = spec_of(service);
  if (spec == nullptr) co_return reservation;
  const json::object* old_spec = old != nullptr ? spec_of(*old) : nullptr;
  std::vector<Cause> causes;
  // A failure of storage, or a range that is full (what was reserved is then released).
  if (auto e = co_await allocate_cluster_ip(*spec, old_spec, reservation, causes, dry_run)) {
    co_return *e;
  }
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

boost::asio::awaitable<base::Result<bool>> ServiceAllocator::reserve_address(
    ServiceReservation& reservation, std::string ip, bool dry_run, bool check_legacy) {
  if (store_ == nullptr || !ip_info_) {
    // use_ip_addresses was never called: a wiring bug, not a taken address.
    co_return base::Result<bool>(boost::system::in_place_error, Errc::internal);
  }
  // An address kwatch kept before ServiceCIDRs, not moved to an IPAddress yet, is held.
  if (check_legacy) {
    auto legacy = co_await storage_->get(legacy_ip_prefix() + ip);
    if (legacy) co_return base::Result<bool>(false);
    if (legacy.error() != Errc::not_found) {
      co_return base::Result<bool>(boost::system::in_place_error, legacy.error());
    }
  }
  if (dry_run) {
    auto existing = co_await store_->get(*ip_info_, "", ip, "");
    if (existing) co_return base::Result<bool>(false);
    if (existing.error().code == Errc::not_found) co_return base::Result<bool>(true);
    co_return base::Result<bool>(boost::system::in_place_error, Errc::internal);
  }
  WriteQuery query;
  query.field_manager = "kube-apiserver";
  auto created = co_await store_->create(*ip_info_, "", ip_address_object(ip, reservation.ns,
                                                                          reservation.name),
                                         std::move(query));
  if (created) {
    reservation.addresses.push_back(std::move(ip));
    co_return base::Result<bool>(true);
  }
  if (created.error().code == Errc::already_exists) co_return base::Result<bool>(false);
  spdlog::warn("cannot create the IPAddress {}: {}", ip, created.error().message);
  co_return base::Result<bool>(boost::system::in_place_error, Errc::internal);
}

boost::asio::awaitable<void> ServiceAllocator::release_address(std::string ip,
                                                               const std::string& ns,
                                                               const std::string& name) {
  if (store_ == nullptr || !ip_info_) co_return;
  auto held = co_await store_->get(*ip_info_, "", ip, "");
  if (!held) co_return;
  const json::value* ref = apimachinery::find_field(*held, "spec.parentRef");
  const json::object* parent = ref != nullptr ? ref->if_object() : nullptr;
  if (parent == nullptr || string_member(*parent, "resource") != "services" ||
      string_member(*parent, "namespace") != ns || string_member(*parent, "name") != name ||
      !string_member(*parent, "group").empty()) {
    co_return;  // another Service's by now
  }
  DeleteQuery del;
  del.uid = string_at(object_member(*held, "metadata"), "uid");
  auto r = co_await store_->remove(*ip_info_, "", std::move(ip), std::move(del));
  if (!r && r.error().code != Errc::not_found && r.error().code != Errc::conflict) {
    spdlog::warn("cannot release an IPAddress of service {}/{}: {}", ns, name, r.error().message);
  }
}

boost::asio::awaitable<base::Result<std::set<std::string>>> ServiceAllocator::taken_addresses() {
  std::set<std::string> taken;
  std::vector<std::string> prefixes{legacy_ip_prefix()};
  if (ip_info_) prefixes.push_back(ip_info_->key_prefix());
  for (auto& prefix : prefixes) {
    storage::ListOptions options;
    options.prefix = prefix;
    auto listed = co_await storage_->list(options);
    if (!listed) {
      co_return base::Result<std::set<std::string>>(boost::system::in_place_error, listed.error());
    }
    for (const auto& kv : listed->kvs) taken.insert(kv.key.substr(prefix.size()));
  }
  co_return taken;
}

// The cluster IP: kept from the old object, checked and reserved when asked for, else chosen.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_cluster_ip(
    json::object& service_spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes, bool dry_run) {
  json::object* spec = &service_spec;
  if (!needs_cluster_ip(spec)) {
    for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) spec->erase(f);
    co_return std::nullopt;
  }
  std::string ip = requested_ip(spec);
  const std::string old_ip =
      old_spec != nullptr && needs_cluster_ip(old_spec) ? requested_ip(old_spec) : std::string();
  // kube's words for an address it cannot give: on spec.clusterIPs, showing them all.
  auto refuse = [&](const std::string& detail) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: []string{" + apimachinery::go_quote(ip) +
                          "}: failed to allocate IP " + ip + ": " + detail,
                      "spec.clusterIPs"});
  };
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
    co_return std::nullopt;
  }
  if (ip == "None") {
    if (type_of(spec) == "NodePort" || type_of(spec) == "LoadBalancer") {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"None\": may not be set to 'None' for " + type_of(spec) +
                            " services",
                        "spec.clusterIPs[0]"});
    }
    set_cluster_ip(*spec, "None");
    co_return std::nullopt;
  }
  const std::vector<ServiceCidrRange> cidrs = service_cidrs();
  // The usable addresses of a range: all but its network and broadcast addresses.
  // (A /0 holds 2^32 addresses: counted in 64 bits, and at most 2^32 - 2 usable.)
  auto usable_of = [](const apimachinery::IpPrefix& p) -> std::uint32_t {
    if (p.bits >= 31) return 0;
    return static_cast<std::uint32_t>((std::uint64_t{1} << (32 - p.bits)) - 2);
  };
  auto base_of = [](const apimachinery::IpPrefix& p) {
    return (std::uint32_t{p.address.bytes[0]} << 24) | (std::uint32_t{p.address.bytes[1]} << 16) |
           (std::uint32_t{p.address.bytes[2]} << 8) | std::uint32_t{p.address.bytes[3]};
  };
  if (!ip.empty()) {
    auto parsed = parse_ipv4(ip);
    if (!parsed) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"" + ip +
                            "\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                        "spec.clusterIPs[0]"});
      co_return std::nullopt;
    }
    auto address = apimachinery::parse_ip(format_ipv4(*parsed));
    // The largest ready range that holds it (all the others lie inside it).
    const ServiceCidrRange* range = nullptr;
    for (const auto& c : cidrs) {
      if (c.ready && apimachinery::prefix_contains(c.prefix, *address) &&
          (range == nullptr || c.prefix.bits < range->prefix.bits)) {
        range = &c;
      }
    }
    if (range == nullptr) {
      refuse("the provided network does not match the current range");
      co_return std::nullopt;
    }
    const std::uint32_t base = base_of(range->prefix);
    if (*parsed <= base || *parsed > base + usable_of(range->prefix)) {
      refuse("the provided IP (" + ip + ") is not in the valid range. The range of valid IPs is " +
             apimachinery::format_cidr(range->prefix));
      co_return std::nullopt;
    }
    auto r = co_await reserve_address(reservation, format_ipv4(*parsed), dry_run, true);
    if (!r) co_return allocation_failed(r.error());
    if (!*r) {
      refuse("provided IP is already allocated");
    } else {
      set_cluster_ip(*spec, format_ipv4(*parsed));
    }
    co_return std::nullopt;
  }
  // Dynamic: from the top-level ready ranges (those no other ready range holds), in order; in
  // each, above the static band first (kept for addresses clients ask for), then in it.
  auto taken = co_await taken_addresses();
  if (!taken) co_return allocation_failed(taken.error());
  thread_local std::mt19937 rng{std::random_device{}()};
  std::string chosen;
  for (const auto& c : cidrs) {
    if (!c.ready || !chosen.empty()) continue;
    const bool nested = std::any_of(cidrs.begin(), cidrs.end(), [&](const ServiceCidrRange& o) {
      return &o != &c && o.ready && o.prefix.bits < c.prefix.bits &&
             apimachinery::prefix_covers(o.prefix, c.prefix);
    });
    if (nested) continue;
    const std::uint32_t usable = usable_of(c.prefix);
    const std::uint32_t base = base_of(c.prefix);
    const std::uint32_t band =
        std::min<std::uint32_t>(std::max<std::uint32_t>(16, usable / 16), 256);
    for (auto [lo, hi] : {std::pair{std::min(band, usable) + 1, usable},
                          std::pair{std::uint32_t{1}, std::min(band, usable)}}) {
      if (lo > hi || !chosen.empty()) continue;
      const std::uint32_t count = hi - lo + 1;
      const std::uint32_t start = std::uniform_int_distribution<std::uint32_t>(0, count - 1)(rng);
      for (std::uint32_t i = 0; i < count && chosen.empty(); ++i) {
        std::string candidate = format_ipv4(base + lo + (start + i) % count);
        if (taken->count(candidate)) continue;
        auto r = co_await reserve_address(reservation, candidate, dry_run, false);
        if (!r) co_return allocation_failed(r.error());
        if (*r) chosen = std::move(candidate);
      }
    }
  }
  if (chosen.empty()) {
    co_await release(std::move(reservation));
    co_return api_error(Errc::internal,
                        "Internal error occurred: failed to allocate a serviceIP: range is full");
  }
  set_cluster_ip(*spec, chosen);
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
  for (auto& ip : reservation.addresses) {
    co_await release_address(std::move(ip), reservation.ns, reservation.name);
  }
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
  unused.ns = ns;
  unused.name = name;
  const std::string old_ip = held_ip(old);
  if (!old_ip.empty() && (now == nullptr || held_ip(*now) != old_ip)) {
    unused.addresses.push_back(old_ip);
    // An address still kept the way kwatch kept them before ServiceCIDRs.
    unused.keys.push_back(legacy_ip_prefix() + old_ip);
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
