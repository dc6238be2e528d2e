#include "registry/service_allocator.hpp"

#include "apimachinery/json_path.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/field_errors.hpp"
#include "kinds/scheme.hpp"
#include "kinds/service_addresses.hpp"
#include "kinds/service_validation.hpp"
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
using kinds::field_errors::go_strings;
using kinds::needs_cluster_ip;
using kinds::needs_health_check_node_port;
using kinds::service_type;
using kinds::field_errors::string_items;

namespace {

using apimachinery::string_at;

json::object* spec_of(json::object& svc) {
  json::value* v = svc.if_contains("spec");
  return v != nullptr ? v->if_object() : nullptr;
}

const json::object* spec_of(const json::object& svc) { return object_member(svc, "spec"); }

bool needs_node_ports(const json::object* spec) {
  const std::string t = service_type(spec);
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

using U128 = unsigned __int128;

int width_of(const apimachinery::IpAddress& a) { return a.v4 ? 32 : 128; }

U128 to_int(const apimachinery::IpAddress& a) {
  U128 v = 0;
  for (int i = 0; i < width_of(a) / 8; ++i) v = (v << 8) | a.bytes[static_cast<std::size_t>(i)];
  return v;
}

apimachinery::IpAddress from_int(U128 v, bool v4) {
  apimachinery::IpAddress a;
  a.v4 = v4;
  const int n = v4 ? 4 : 16;
  for (int i = n - 1; i >= 0; --i) {
    a.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v & 0xff);
    v >>= 8;
  }
  return a;
}

std::string family_of(const apimachinery::IpAddress& a) { return a.v4 ? "IPv4" : "IPv6"; }

// The addresses a range hands out: all but the network address, and an IPv4 range's broadcast
// address (kube's ipallocator); counted up to 2^126.
U128 usable_of(const apimachinery::IpPrefix& p) {
  const int host_bits = std::min(width_of(p.address) - p.bits, 126);
  if (host_bits <= 0) return 0;
  const U128 size = U128{1} << host_bits;
  const U128 reserved = p.address.v4 ? 2 : 1;
  return size > reserved ? size - reserved : 0;
}

json::array string_array(const std::vector<std::string>& items) {
  json::array out;
  for (const auto& i : items) out.emplace_back(i);
  return out;
}

std::int64_t int_at(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_int64() ? v->get_int64() : 0;
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

// The cluster IPs a Service holds (none for ExternalName and headless ones).
std::vector<std::string> held_ips(const json::object& svc) {
  const json::object* spec = spec_of(svc);
  if (!needs_cluster_ip(spec)) return {};
  std::vector<std::string> ips = string_items(spec, "clusterIPs");
  if (ips.empty() && !string_at(spec, "clusterIP").empty()) ips.push_back(string_at(spec, "clusterIP"));
  std::erase_if(ips, [](const std::string& ip) { return ip.empty() || ip == "None"; });
  return ips;
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

std::optional<ServiceRanges> parse_service_cidr(const std::string& cidr, ServiceRanges base,
                                                std::string* error) {
  auto fail = [&](std::string why) -> std::optional<ServiceRanges> {
    if (error != nullptr) *error = std::move(why);
    return std::nullopt;
  };
  std::vector<apimachinery::IpPrefix> ranges;
  std::size_t start = 0;
  while (start <= cidr.size()) {
    const std::size_t comma = std::min(cidr.find(',', start), cidr.size());
    const std::string text = cidr.substr(start, comma - start);
    start = comma + 1;
    auto prefix = apimachinery::parse_cidr(text);
    if (!prefix || !apimachinery::cidr_errors(text).empty()) {
      return fail(apimachinery::go_quote(text) + " is not a CIDR");
    }
    if (prefix->address.v4 ? prefix->bits < 8 || prefix->bits > 30
                           : prefix->bits < 64 || prefix->bits > 125) {
      return fail(text + ": an IPv4 range from /8 to /30, or an IPv6 range from /64 to /125");
    }
    ranges.push_back(*prefix);
  }
  if (ranges.size() > 2) return fail("at most two ranges, one of each IP family");
  if (ranges.size() == 2 && ranges[0].address.v4 == ranges[1].address.v4) {
    return fail("--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of "
                "different IP family");
  }
  base.cluster_ip_ranges = std::move(ranges);
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
  for (const auto& r : ranges_.cluster_ip_ranges) cidrs_.push_back({r, true});
}

void ServiceAllocator::use_ip_addresses(ResourceStore* store,
                                        std::shared_ptr<const kinds::ResourceInfo> info) {
  store_ = store;
  ip_info_ = std::move(info);
}

void ServiceAllocator::set_service_cidrs(std::vector<ServiceCidrRange> ranges) {
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
                    {"labels", json::object{{kinds::kIPAddressFamilyLabel,
                                             ip.find(':') == std::string::npos ? "IPv4" : "IPv6"},
                                            {kinds::kIPAddressManagedByLabel,
                                             kinds::kIPAllocatorName}}}}},
      {"spec", json::object{{"parentRef", json::object{{"resource", "services"},
                                                       {"namespace", ns},
                                                       {"name", name}}}}}};
}

std::string ServiceAllocator::port_key(std::int64_t port) const {
  return prefix_ + "/ranges/servicenodeports/" + std::to_string(port);
}

std::string ServiceAllocator::first_ip() const {
  const auto& primary = ranges_.cluster_ip_ranges.front();
  return apimachinery::format_ip(from_int(to_int(primary.address) + 1, primary.address.v4));
}

std::vector<std::string> ServiceAllocator::families() const {
  std::vector<std::string> out;
  for (const auto& r : ranges_.cluster_ip_ranges) out.push_back(family_of(r.address));
  return out;
}

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

void ServiceAllocator::init_ip_families(json::object& spec, const json::object* old_spec,
                                        std::vector<Cause>& causes) const {
  const std::vector<std::string> cluster = families();
  auto configured = [&](const std::string& f) {
    return std::find(cluster.begin(), cluster.end(), f) != cluster.end();
  };
  const bool selectorless = object_member(spec, "selector") == nullptr ||
                            object_member(spec, "selector")->empty();
  const bool headless = string_at(&spec, "clusterIP") == "None";
  // A PreferDualStack Service is not upgraded or downgraded because the cluster changed: only
  // when its policy or its IPs and families do.
  if (old_spec != nullptr && string_at(old_spec, "ipFamilyPolicy") == "PreferDualStack" &&
      string_at(&spec, "ipFamilyPolicy") == "PreferDualStack" &&
      string_items(&spec, "clusterIPs") == string_items(old_spec, "clusterIPs") &&
      string_items(&spec, "ipFamilies") == string_items(old_spec, "ipFamilies")) {
    return;
  }
  if (string_at(&spec, "ipFamilyPolicy").empty()) {
    if (old_spec != nullptr && !string_at(old_spec, "ipFamilyPolicy").empty()) {
      spec["ipFamilyPolicy"] = string_at(old_spec, "ipFamilyPolicy");
    } else if (headless && selectorless) {
      spec["ipFamilyPolicy"] = "RequireDualStack";  // headless and selectorless: both
    } else {
      spec["ipFamilyPolicy"] = "SingleStack";
    }
  }
  const std::string policy = string_at(&spec, "ipFamilyPolicy");
  std::vector<std::string> ips = string_items(&spec, "clusterIPs");
  std::vector<std::string> families_asked = string_items(&spec, "ipFamilies");
  const std::string shown_policy = apimachinery::go_quote(policy);
  const std::size_t before = causes.size();
  if (old_spec != nullptr) {
    const auto old_ips = string_items(old_spec, "clusterIPs");
    const auto old_families = string_items(old_spec, "ipFamilies");
    if (policy == "SingleStack") {
      // Clear intent: the secondary goes (the primary is immutable).
      if (ips == old_ips && ips.size() > 1) ips.resize(1);
      if (families_asked == old_families && families_asked.size() > 1) families_asked.resize(1);
    } else {
      if (ips.size() < old_ips.size()) {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: " + shown_policy +
                              ": must be 'SingleStack' to release the secondary cluster IP",
                          "spec.ipFamilyPolicy"});
      }
      if (families_asked.size() < old_families.size()) {
        causes.push_back({"FieldValueInvalid",
                          "Invalid value: " + shown_policy +
                              ": must be 'SingleStack' to release the secondary IP family",
                          "spec.ipFamilyPolicy"});
      }
    }
  }
  if (policy == "SingleStack") {
    if (ips.size() == 2) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + shown_policy +
                            ": must be 'RequireDualStack' or 'PreferDualStack' when multiple "
                            "cluster IPs are specified",
                        "spec.ipFamilyPolicy"});
    }
    if (families_asked.size() == 2) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + shown_policy +
                            ": must be 'RequireDualStack' or 'PreferDualStack' when multiple IP "
                            "families are specified",
                        "spec.ipFamilyPolicy"});
    }
  }
  // Families inferred from the addresses asked for.
  for (std::size_t i = 0; i < ips.size(); ++i) {
    if (ips[i] == "None") break;
    auto ip = apimachinery::parse_ip(ips[i]);
    if (!ip || i < families_asked.size()) continue;
    const std::string family = family_of(*ip);
    if (!configured(family)) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + go_strings(ips) + ": " + family +
                            " is not configured on this cluster",
                        "spec.clusterIPs[" + std::to_string(i) + "]"});
    } else {
      families_asked.push_back(family);
    }
  }
  auto write_back = [&] {
    if (!ips.empty()) spec["clusterIPs"] = string_array(ips);
    if (!families_asked.empty()) spec["ipFamilies"] = string_array(families_asked);
  };
  if (causes.size() > before) return;
  if (headless && selectorless) {
    // Headless and selectorless: any families, even on a single-stack cluster.
    if (families_asked.empty()) families_asked.push_back(cluster.front());
    if (families_asked.size() < 2 && policy != "SingleStack") {
      families_asked.push_back(families_asked[0] == "IPv4" ? "IPv6" : "IPv4");
    }
    write_back();
    return;
  }
  if (policy == "RequireDualStack" && cluster.size() < 2) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: " + shown_policy +
                          ": this cluster is not configured for dual-stack services",
                      "spec.ipFamilyPolicy"});
  }
  for (std::size_t i = 0; i < families_asked.size(); ++i) {
    if (!configured(families_asked[i])) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + apimachinery::go_quote(families_asked[i]) +
                            ": not configured on this cluster",
                        "spec.ipFamilies[" + std::to_string(i) + "]"});
    }
  }
  if (causes.size() > before) return;
  if (families_asked.empty()) families_asked.push_back(cluster.front());
  if (policy != "SingleStack" && families_asked.size() == 1 && cluster.size() == 2) {
    families_asked.push_back(families_asked[0] == "IPv4" ? "IPv6" : "IPv4");
  }
  write_back();
}

boost::asio::awaitable<ApiResult<std::string>> ServiceAllocator::allocate_address(
    const std::string& family, const std::string& requested, const std::string& shown,
    ServiceReservation& reservation, std::vector<Cause>& causes, bool dry_run) {
  const std::vector<ServiceCidrRange> cidrs = service_cidrs();
  if (!requested.empty()) {
    // kube's words for an address it cannot give: on spec.clusterIPs, showing them all.
    auto refuse = [&](const std::string& detail) -> ApiResult<std::string> {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + shown + ": failed to allocate IP " + requested + ": " +
                            detail,
                        "spec.clusterIPs"});
      return std::string();
    };
    auto address = apimachinery::parse_ip(requested);
    if (!address) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"" + requested +
                            "\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
                        "spec.clusterIPs[0]"});
      co_return std::string();
    }
    // The largest ready range that holds it (all the others lie inside it).
    const ServiceCidrRange* range = nullptr;
    for (const auto& c : cidrs) {
      if (c.ready && apimachinery::prefix_contains(c.prefix, *address) &&
          (range == nullptr || c.prefix.bits < range->prefix.bits)) {
        range = &c;
      }
    }
    if (range == nullptr) co_return refuse("the provided network does not match the current range");
    const U128 base = to_int(range->prefix.address);
    const U128 at = to_int(*address);
    if (at <= base || at > base + usable_of(range->prefix)) {
      co_return refuse("the provided IP (" + requested +
                       ") is not in the valid range. The range of valid IPs is " +
                       apimachinery::format_cidr(range->prefix));
    }
    const std::string canonical = apimachinery::format_ip(*address);
    auto r = co_await reserve_address(reservation, canonical, dry_run, true);
    if (!r) co_return allocation_failed(r.error());
    if (!*r) co_return refuse("provided IP is already allocated");
    co_return canonical;
  }
  // Dynamic: from the top-level ready ranges of the family (those no other ready range holds),
  // in order; in each, above the static band first (kept for addresses clients ask for), then
  // in it.
  auto taken = co_await taken_addresses();
  if (!taken) co_return allocation_failed(taken.error());
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string chosen;
  for (const auto& c : cidrs) {
    if (!c.ready || !chosen.empty() || family_of(c.prefix.address) != family) continue;
    const bool nested = std::any_of(cidrs.begin(), cidrs.end(), [&](const ServiceCidrRange& o) {
      return &o != &c && o.ready && o.prefix.bits < c.prefix.bits &&
             apimachinery::prefix_covers(o.prefix, c.prefix);
    });
    if (nested) continue;
    const U128 usable = usable_of(c.prefix);
    const U128 base = to_int(c.prefix.address);
    const U128 band = std::min<U128>(std::max<U128>(16, usable / 16), 256);
    for (auto [lo, hi] : {std::pair{std::min(band, usable) + 1, usable},
                          std::pair{U128{1}, std::min(band, usable)}}) {
      if (lo > hi || !chosen.empty()) continue;
      const U128 count = hi - lo + 1;
      const U128 start = ((U128{rng()} << 64) | rng()) % count;
      // A walk from a random start meets only the taken addresses on its way: it ends after at
      // most as many steps as there are (plus those taken meanwhile).
      for (U128 i = 0; i < count && chosen.empty(); ++i) {
        std::string candidate = apimachinery::format_ip(
            from_int(base + lo + (start + i) % count, c.prefix.address.v4));
        if (taken->count(candidate)) continue;
        auto r = co_await reserve_address(reservation, candidate, dry_run, false);
        if (!r) co_return allocation_failed(r.error());
        if (*r) chosen = std::move(candidate);
      }
    }
  }
  if (chosen.empty()) {
    co_return api_error(Errc::internal,
                        "Internal error occurred: failed to allocate a serviceIP: range is full");
  }
  co_return chosen;
}

// The cluster IPs: the families worked out, then each address kept from the old object,
// checked and reserved when asked for, else chosen.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_cluster_ip(
    json::object& service_spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes, bool dry_run) {
  json::object* spec = &service_spec;
  if (!needs_cluster_ip(spec)) {
    for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) spec->erase(f);
    co_return std::nullopt;
  }
  const bool had_ips = old_spec != nullptr && needs_cluster_ip(old_spec) &&
                       !requested_ip(old_spec).empty();
  if (had_ips) {
    // What the client left out is kept (patchAllocatedValues).
    if (string_at(spec, "clusterIP").empty()) (*spec)["clusterIP"] = string_at(old_spec, "clusterIP");
    if (string_items(spec, "clusterIPs").empty() && old_spec->contains("clusterIPs")) {
      (*spec)["clusterIPs"] = old_spec->at("clusterIPs");
    }
    if (requested_ip(spec) != requested_ip(old_spec)) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + go_strings(string_items(spec, "clusterIPs")) +
                            ": may not change once set",
                        "spec.clusterIPs[0]"});
      co_return std::nullopt;
    }
    if (string_items(spec, "ipFamilies").empty() && old_spec->contains("ipFamilies")) {
      (*spec)["ipFamilies"] = old_spec->at("ipFamilies");
    }
  } else {
    // An old client's clusterIP alone is the first of clusterIPs.
    const std::string ip = string_at(spec, "clusterIP");
    if (!ip.empty() && string_items(spec, "clusterIPs").empty()) {
      (*spec)["clusterIPs"] = json::array{json::value(ip)};
    }
  }
  const std::size_t before = causes.size();
  init_ip_families(*spec, had_ips ? old_spec : nullptr, causes);
  if (causes.size() > before) co_return std::nullopt;
  std::vector<std::string> ips = string_items(spec, "clusterIPs");
  if (!ips.empty() && ips[0] == "None") {
    if (service_type(spec) == "NodePort" || service_type(spec) == "LoadBalancer") {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"None\": may not be set to 'None' for " + service_type(spec) +
                            " services",
                        "spec.clusterIPs[0]"});
    }
    (*spec)["clusterIP"] = "None";
    (*spec)["clusterIPs"] = json::array{"None"};
    co_return std::nullopt;
  }
  const std::vector<std::string> families_of_service = string_items(spec, "ipFamilies");
  const std::vector<std::string> old_ips = had_ips ? held_ips(json::object{{"spec", *old_spec}})
                                                   : std::vector<std::string>();
  const std::string shown = go_strings(ips);
  ips.resize(families_of_service.size());
  for (std::size_t i = 0; i < families_of_service.size(); ++i) {
    if (i < old_ips.size() && ips[i] == old_ips[i]) continue;  // already the Service's
    auto got = co_await allocate_address(families_of_service[i], ips[i], shown, reservation,
                                         causes, dry_run);
    if (!got) {
      co_await release(std::move(reservation));
      co_return got.error();
    }
    if (got->empty()) co_return std::nullopt;  // a cause says why
    ips[i] = *got;
  }
  (*spec)["clusterIP"] = ips.empty() ? std::string() : ips[0];
  (*spec)["clusterIPs"] = string_array(ips);
  co_return std::nullopt;
}

// Node ports, for the types that need them: kept from the old object for the same port and
// protocol, checked and reserved when asked for, else chosen.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_node_ports(
    json::object& service_spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes) {
  json::object* spec = &service_spec;
  json::value* ports = spec->if_contains("ports");
  std::optional<std::set<std::string>> taken;
  if (ports != nullptr && ports->is_array()) {
    const bool wanted = needs_node_ports(spec);
    const std::set<std::int64_t> old_held = old_spec != nullptr && needs_node_ports(old_spec)
                                                ? node_ports_of(old_spec)
                                                : std::set<std::int64_t>();
    std::size_t i = 0;
    for (auto& p : ports->get_array()) {
      const std::string field = "spec.ports[" + std::to_string(i++) + "].nodePort";
      json::object* port = p.if_object();
      if (port == nullptr) continue;
      std::int64_t np = int_at(*port, "nodePort");
      if (!wanted) {
        if (np != 0) {
          causes.push_back({"FieldValueForbidden",
                            "Forbidden: may not be used when `type` is '" + service_type(spec) + "'",
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
      auto chosen = co_await free_node_port(reservation, taken);
      if (!chosen) co_return chosen.error();
      if (*chosen == 0) {
        co_await release(std::move(reservation));
        co_return api_error(Errc::internal,
                            "Internal error occurred: failed to allocate a nodePort: range is full");
      }
      (*port)["nodePort"] = *chosen;
    }
  }
  auto health = co_await allocate_health_check_port(*spec, old_spec, reservation, causes, taken);
  co_return health;
}

// One free node port, chosen at random and reserved for `reservation`; 0 when the range is
// full. `taken` (the reserved keys, listed on first use) is kept up to date.
boost::asio::awaitable<ApiResult<std::int64_t>> ServiceAllocator::free_node_port(
    ServiceReservation& reservation, std::optional<std::set<std::string>>& taken) {
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
  for (int k = 0; k < count; ++k) {
    const std::int64_t candidate = ranges_.node_port_low + (start + k) % count;
    std::string key = port_key(candidate);
    if (taken->count(key)) continue;
    auto r = co_await reserve(reservation, key);
    if (!r) co_return allocation_failed(r.error());
    if (*r) {
      taken->insert(std::move(key));
      co_return candidate;
    }
  }
  co_return std::int64_t{0};
}

// allocHealthCheckNodePort and updateHealthCheckNodePort: a LoadBalancer Service with
// externalTrafficPolicy Local gets a node port for its health checks (the one it asks for, or
// one chosen), kept while it needs one and fixed meanwhile.
boost::asio::awaitable<std::optional<ApiError>> ServiceAllocator::allocate_health_check_port(
    json::object& spec, const json::object* old_spec, ServiceReservation& reservation,
    std::vector<Cause>& causes, std::optional<std::set<std::string>>& taken) {
  if (!needs_health_check_node_port(&spec)) co_return std::nullopt;
  std::int64_t port = int_at(spec, "healthCheckNodePort");
  const std::int64_t old_port = old_spec != nullptr && needs_health_check_node_port(old_spec)
                                    ? int_at(*old_spec, "healthCheckNodePort")
                                    : 0;
  if (old_port != 0) {
    if (port == 0) spec["healthCheckNodePort"] = old_port;
    if (port != 0 && port != old_port) {
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: " + std::to_string(port) +
                            ": cannot change healthCheckNodePort on loadBalancer service with "
                            "externalTraffic=Local during update",
                        "spec.healthCheckNodePort"});
    }
    co_return std::nullopt;
  }
  if (port == 0) {
    auto chosen = co_await free_node_port(reservation, taken);
    if (!chosen) co_return chosen.error();
    if (*chosen == 0) {
      co_await release(std::move(reservation));
      co_return api_error(Errc::internal,
                          "Internal error occurred: failed to allocate a HealthCheck NodePort 0: "
                          "range is full");
    }
    spec["healthCheckNodePort"] = *chosen;
    co_return std::nullopt;
  }
  // One the client asks for: kube answers a port it cannot give with an internal error.
  std::string why;
  if (port < ranges_.node_port_low || port > ranges_.node_port_high) {
    why = "provided port is not in the valid range. The range of valid ports is " +
          std::to_string(ranges_.node_port_low) + "-" + std::to_string(ranges_.node_port_high);
  } else {
    auto r = co_await reserve(reservation, port_key(port));
    if (!r) co_return allocation_failed(r.error());
    if (!*r) why = "provided port is already allocated";
  }
  if (why.empty()) co_return std::nullopt;
  co_await release(std::move(reservation));
  co_return api_error(Errc::internal, "Internal error occurred: failed to allocate requested "
                                      "HealthCheck NodePort " + std::to_string(port) + ": " + why);
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
  const std::vector<std::string> kept = now != nullptr ? held_ips(*now) : std::vector<std::string>();
  for (const auto& ip : held_ips(old)) {
    if (std::find(kept.begin(), kept.end(), ip) != kept.end()) continue;
    unused.addresses.push_back(ip);
    // An address still kept the way kwatch kept them before ServiceCIDRs.
    unused.keys.push_back(legacy_ip_prefix() + ip);
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
  if (old_spec != nullptr && needs_health_check_node_port(old_spec)) {
    const std::int64_t port = int_at(*old_spec, "healthCheckNodePort");
    const json::object* now_spec = now != nullptr ? spec_of(*now) : nullptr;
    const bool still = now_spec != nullptr && needs_health_check_node_port(now_spec) &&
                       int_at(*now_spec, "healthCheckNodePort") == port;
    if (port != 0 && !still) unused.keys.push_back(port_key(port));
  }
  co_await release(std::move(unused));
}

}  // namespace kwatch::registry
