#include "controllers/service_cidr_controller.hpp"

#include "apimachinery/ip_address.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/timestamps.hpp"
#include "kinds/scheme.hpp"
#include "kinds/service_addresses.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/deletion.hpp"
#include "registry/resource_store.hpp"
#include "registry/service_allocator.hpp"
#include "storage/storage.hpp"
#include "watch/cacher.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::IpAddress;
using apimachinery::IpPrefix;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::string_member;
using base::Errc;

namespace {

constexpr std::string_view kReadyMessage = "Kubernetes Service CIDR is ready";
constexpr std::string_view kTerminatingMessage =
    "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new "
    "ServiceCIDR";
// How long a ServiceCIDR being deleted keeps its finalizer once nothing blocks it (kube's
// deletionGracePeriod), and how old an orphaned IPAddress must be before it is deleted.
constexpr auto kDeletionGrace = std::chrono::seconds(10);
constexpr auto kOrphanAge = std::chrono::seconds(60);
constexpr auto kRepairPeriod = std::chrono::seconds(60);

std::vector<json::object> cached_objects(registry::CacherRegistry& cachers,
                                         const kinds::ResourceInfo& info, bool* ready) {
  std::vector<json::object> out;
  auto cacher = cachers.find(info);
  if (!cacher || !cacher->ready()) {
    *ready = false;
    return out;
  }
  for (const auto& object : cacher->list(info.key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (parsed && parsed->is_object()) out.push_back(std::move(parsed->get_object()));
  }
  return out;
}

std::string name_of(const json::object& obj) { return string_at(object_member(obj, "metadata"), "name"); }

bool deleting(const json::object& obj) {
  return !string_at(object_member(obj, "metadata"), "deletionTimestamp").empty();
}

std::vector<IpPrefix> prefixes_of(const json::object& cidr) {
  std::vector<IpPrefix> out;
  const json::value* list = apimachinery::find_field(cidr, "spec.cidrs");
  if (list == nullptr || !list->is_array()) return out;
  for (const auto& c : list->get_array()) {
    if (!c.is_string()) continue;
    if (auto p = apimachinery::parse_cidr(c.get_string())) out.push_back(*p);
  }
  return out;
}

const json::object* ready_condition(const json::object& cidr) {
  const json::value* conditions = apimachinery::find_field(cidr, "status.conditions");
  if (conditions == nullptr || !conditions->is_array()) return nullptr;
  for (const auto& c : conditions->get_array()) {
    const json::object* o = c.if_object();
    if (o != nullptr && string_member(*o, "type") == "Ready") return o;
  }
  return nullptr;
}

bool has_finalizer(const json::object& obj) {
  const json::value* f = apimachinery::find_field(obj, "metadata.finalizers");
  if (f == nullptr || !f->is_array()) return false;
  return std::any_of(f->get_array().begin(), f->get_array().end(), [](const json::value& v) {
    return v.is_string() && v.get_string() == kinds::kServiceCIDRFinalizer;
  });
}

// kube's canDeleteCIDR: each of its ranges lies inside another ServiceCIDR's, or no IPAddress
// of the allocator lies inside this one alone.
bool can_delete(const json::object& cidr, const std::vector<json::object>& all,
                const std::vector<json::object>& addresses) {
  const std::string name = name_of(cidr);
  auto holders = [&](auto&& holds) {
    std::vector<std::string> out;
    for (const auto& other : all) {
      for (const auto& p : prefixes_of(other)) {
        if (holds(p)) {
          out.push_back(name_of(other));
          break;
        }
      }
    }
    return out;
  };
  bool has_parent = true;
  for (const auto& p : prefixes_of(cidr)) {
    auto h = holders([&](const IpPrefix& o) { return apimachinery::prefix_covers(o, p); });
    if (h.empty() || (h.size() == 1 && h[0] == name)) has_parent = false;
  }
  if (has_parent) return true;
  for (const auto& ip : addresses) {
    const json::object* labels = object_member(object_member(ip, "metadata"), "labels");
    if (string_at(labels, kinds::kIPAddressManagedByLabel) != kinds::kIPAllocatorName) continue;
    auto address = apimachinery::parse_ip(name_of(ip));
    if (!address) continue;
    auto h = holders([&](const IpPrefix& o) { return apimachinery::prefix_contains(o, *address); });
    if (h.size() == 1 && h[0] == name) return false;
  }
  return true;
}

// The cluster IP a Service holds ("" for none: headless, ExternalName, not allocated yet).
std::string cluster_ip_of(const json::object& svc) {
  const json::object* spec = object_member(svc, "spec");
  if (string_at(spec, "type") == "ExternalName") return {};
  const std::string ip = string_at(spec, "clusterIP");
  return ip == "None" ? std::string() : ip;
}

}  // namespace

ServiceCIDRController::ServiceCIDRController(std::shared_ptr<kinds::Scheme> scheme,
                                             std::shared_ptr<registry::ResourceStore> store,
                                             std::shared_ptr<registry::CacherRegistry> cachers,
                                             std::shared_ptr<storage::Storage> storage,
                                             std::shared_ptr<registry::ServiceAllocator> allocator,
                                             std::vector<std::string> default_cidrs)
    : Reconciler(std::move(cachers), scheme->find("networking.k8s.io", "v1", "servicecidrs"),
                 {scheme->find("networking.k8s.io", "v1", "ipaddresses")}, "servicecidr controller"),
      store_(std::move(store)),
      storage_(std::move(storage)),
      allocator_(std::move(allocator)),
      ip_info_(scheme->find("networking.k8s.io", "v1", "ipaddresses")),
      service_info_(scheme->find("", "v1", "services")),
      default_cidrs_(std::move(default_cidrs)) {}

asio::awaitable<void> ServiceCIDRController::ensure_default() {
  json::array cidrs;
  for (const auto& c : default_cidrs_) cidrs.push_back(json::value(c));
  json::object body{{"apiVersion", "networking.k8s.io/v1"},
                    {"kind", "ServiceCIDR"},
                    {"metadata", json::object{{"name", kinds::kDefaultServiceCIDRName}}},
                    {"spec", json::object{{"cidrs", std::move(cidrs)}}}};
  auto r = co_await store_->ensure(*info_, std::move(body));
  if (!r) spdlog::warn("cannot create the default ServiceCIDR: {}", r.error().message);
}

asio::awaitable<void> ServiceCIDRController::reconcile_once() {
  // Looked at again every second: deletions wait out their grace period, and repairs are due
  // every minute.
  waiting_ = true;
  bool ready = true;
  const std::vector<json::object> cidrs = cached_objects(*cachers_, *info_, &ready);
  if (!ready) co_return;

  // The allocator's ranges.
  std::vector<registry::ServiceCidrRange> ranges;
  bool has_default = false;
  for (const auto& c : cidrs) {
    if (name_of(c) == kinds::kDefaultServiceCIDRName) has_default = true;
    const json::object* cond = ready_condition(c);
    const bool usable = !deleting(c) && (cond == nullptr || string_member(*cond, "status") != "False");
    for (const auto& p : prefixes_of(c)) ranges.push_back({p, usable});
  }
  allocator_->set_service_cidrs(std::move(ranges));
  if (!has_default) co_await ensure_default();

  std::vector<json::object> addresses;
  bool addresses_ready = true;
  for (const auto& c : cidrs) {
    if (!deleting(c)) {
      if (!has_finalizer(c)) co_await write_finalizers(c, true);
      co_await write_ready(c, true);
      continue;
    }
    if (!has_finalizer(c)) continue;
    if (addresses.empty() && addresses_ready) {
      addresses = cached_objects(*cachers_, *ip_info_, &addresses_ready);
      if (!addresses_ready) co_return;
    }
    if (!can_delete(c, cidrs, addresses)) {
      co_await write_ready(c, false);
      continue;
    }
    auto since = base::parse_rfc3339(string_at(object_member(c, "metadata"), "deletionTimestamp"));
    if (since && std::chrono::system_clock::now() - *since < kDeletionGrace) continue;
    co_await write_finalizers(c, false);
  }

  if (std::chrono::steady_clock::now() >= next_repair_) {
    next_repair_ = std::chrono::steady_clock::now() + kRepairPeriod;
    co_await repair();
  }
}

asio::awaitable<void> ServiceCIDRController::write_ready(const json::object& cidr, bool ready) {
  const std::string status = ready ? "True" : "False";
  const std::string reason = ready ? "" : "Terminating";
  const std::string_view message = ready ? kReadyMessage : kTerminatingMessage;
  if (const json::object* cond = ready_condition(cidr);
      cond != nullptr && string_member(*cond, "status") == status &&
      string_member(*cond, "reason") == reason && string_member(*cond, "message") == message) {
    co_return;
  }
  json::object updated = cidr;
  json::object& st = updated["status"].is_object() ? updated["status"].get_object()
                                                   : updated["status"].emplace_object();
  json::array conditions;
  if (const json::value* old = st.if_contains("conditions"); old != nullptr && old->is_array()) {
    for (const auto& c : old->get_array()) {
      if (const json::object* o = c.if_object(); o != nullptr && string_member(*o, "type") != "Ready") {
        conditions.push_back(c);
      }
    }
  }
  // A condition's reason is required by its schema: an empty one is what kube stores when the
  // controller gives none.
  conditions.push_back(json::object{{"type", "Ready"},
                                    {"status", status},
                                    {"lastTransitionTime", base::now_rfc3339()},
                                    {"reason", reason},
                                    {"message", message}});
  st["conditions"] = std::move(conditions);
  registry::WriteQuery query;
  query.subresource = "status";
  query.field_manager = "service-cidrs-controller";
  std::string scope;
  auto r = co_await store_->update(*info_, std::move(scope), name_of(cidr), std::move(updated),
                                   std::move(query));
  if (!r && r.error().code != Errc::conflict && r.error().code != Errc::not_found) {
    spdlog::warn("cannot write the Ready condition of ServiceCIDR {}: {}", name_of(cidr),
                 r.error().message);
  }
}

asio::awaitable<void> ServiceCIDRController::write_finalizers(const json::object& cidr, bool keep) {
  json::object updated = cidr;
  json::object& meta = updated["metadata"].get_object();
  json::array finalizers;
  if (const json::value* f = meta.if_contains("finalizers"); f != nullptr && f->is_array()) {
    for (const auto& v : f->get_array()) {
      if (!(v.is_string() && v.get_string() == kinds::kServiceCIDRFinalizer)) finalizers.push_back(v);
    }
  }
  if (keep) finalizers.push_back(json::value(kinds::kServiceCIDRFinalizer));
  meta["finalizers"] = std::move(finalizers);
  registry::WriteQuery query;
  query.field_manager = "service-cidrs-controller";
  std::string scope;
  auto r = co_await store_->update(*info_, std::move(scope), name_of(cidr), std::move(updated),
                                   std::move(query));
  if (!r && r.error().code != Errc::conflict && r.error().code != Errc::not_found) {
    spdlog::warn("cannot write the finalizers of ServiceCIDR {}: {}", name_of(cidr),
                 r.error().message);
  }
}

asio::awaitable<void> ServiceCIDRController::repair() {
  bool ready = true;
  const std::vector<json::object> services = cached_objects(*cachers_, *service_info_, &ready);
  const std::vector<json::object> addresses = cached_objects(*cachers_, *ip_info_, &ready);
  if (!ready) {
    next_repair_ = {};  // as soon as the caches have listed
    co_return;
  }
  std::map<std::string, const json::object*> by_address;
  for (const auto& ip : addresses) by_address[name_of(ip)] = &ip;
  std::map<std::string, std::string> held;  // address -> "<ns>/<name>"
  for (const auto& svc : services) {
    const std::string ip = cluster_ip_of(svc);
    if (ip.empty()) continue;
    const std::string ns = string_at(object_member(svc, "metadata"), "namespace");
    const std::string name = name_of(svc);
    held[ip] = ns + "/" + name;
    if (by_address.count(ip)) continue;
    // A cluster IP without its IPAddress (one kept by an earlier kwatch, or deleted by hand).
    registry::WriteQuery query;
    query.field_manager = "kube-apiserver";
    auto r = co_await store_->create(*ip_info_, "",
                                     registry::ServiceAllocator::ip_address_object(ip, ns, name),
                                     std::move(query));
    if (!r && r.error().code != Errc::already_exists) {
      spdlog::warn("cannot create the IPAddress of service {}/{}: {}", ns, name, r.error().message);
    }
  }
  const auto now = std::chrono::system_clock::now();
  for (const auto& ip : addresses) {
    const json::object* meta = object_member(ip, "metadata");
    const json::object* labels = object_member(meta, "labels");
    if (string_at(labels, kinds::kIPAddressManagedByLabel) != kinds::kIPAllocatorName) {
      continue;
    }
    const json::value* ref = apimachinery::find_field(ip, "spec.parentRef");
    const json::object* parent_ref = ref != nullptr ? ref->if_object() : nullptr;
    const std::string parent = string_at(parent_ref, "namespace") + "/" + string_at(parent_ref, "name");
    auto it = held.find(name_of(ip));
    if (it != held.end() && it->second == parent) continue;
    auto created = base::parse_rfc3339(string_at(meta, "creationTimestamp"));
    if (!created || now - *created < kOrphanAge) continue;
    registry::DeleteQuery del;
    del.uid = string_at(meta, "uid");
    std::string scope;
    auto r = co_await store_->remove(*ip_info_, std::move(scope), name_of(ip), std::move(del));
    if (!r && r.error().code != Errc::not_found && r.error().code != Errc::conflict) {
      spdlog::warn("cannot delete the orphaned IPAddress {}: {}", name_of(ip), r.error().message);
    }
  }
  // Cluster IPs kept as keys by kwatch before ServiceCIDRs: their Services have IPAddresses now.
  storage::ListOptions options;
  options.prefix = allocator_->legacy_ip_prefix();
  auto legacy = co_await storage_->list(options);
  if (!legacy) co_return;
  for (const auto& kv : legacy->kvs) {
    const std::string ip = kv.key.substr(options.prefix.size());
    if (held.count(ip) && !by_address.count(ip)) {
      // Its IPAddress was only just created above; the key goes at the next repair.
      next_repair_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      continue;
    }
    co_await storage_->delete_if(kv.key, kv.mod_revision);
  }
}

}  // namespace kwatch::controllers
