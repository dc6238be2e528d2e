#include "controllers/namespace_controller.hpp"

#include "apimachinery/json_path.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "base/timestamps.hpp"
#include "registry/cacher_registry.hpp"
#include "storage/storage.hpp"
#include "apimachinery/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/json/array.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <set>
#include <string>

namespace kwatch::controllers {

using registry::CacherRegistry;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// The finalizer a namespace carries in spec.finalizers until its contents are gone.
constexpr std::string_view kNamespaceFinalizer = "kubernetes";

using apimachinery::string_at;

bool has_namespace_finalizer(const json::object& ns) {
  const json::object* spec = apimachinery::object_member(ns, "spec");
  const json::value* f = spec != nullptr ? spec->if_contains("finalizers") : nullptr;
  if (f == nullptr || !f->is_array()) return false;
  for (const auto& v : f->get_array()) {
    if (v.is_string() && v.get_string() == kNamespaceFinalizer) return true;
  }
  return false;
}

std::string group_resource(const kinds::ResourceInfo& info) {
  return info.group.empty() ? info.resource : info.resource + "." + info.group;
}

json::object condition(std::string_view type, bool status, std::string_view reason,
                       std::string message) {
  return json::object{{"type", type},
                      {"status", status ? "True" : "False"},
                      {"lastTransitionTime", base::now_rfc3339()},
                      {"reason", reason},
                      {"message", std::move(message)}};
}

// Conditions equal but for their transition times.
bool same_conditions(const json::value* current, const json::array& next) {
  if (current == nullptr || !current->is_array() || current->get_array().size() != next.size()) {
    return false;
  }
  for (std::size_t i = 0; i < next.size(); ++i) {
    const json::object* a = current->get_array()[i].if_object();
    const json::object& b = next[i].get_object();
    if (a == nullptr) return false;
    for (const char* field : {"type", "status", "reason", "message"}) {
      if (string_at(a, field) != string_at(&b, field)) return false;
    }
  }
  return true;
}

}  // namespace

NamespaceController::NamespaceController(std::shared_ptr<kinds::Scheme> scheme,
                                         std::shared_ptr<registry::ResourceStore> store,
                                         std::shared_ptr<CacherRegistry> cachers,
                                         std::shared_ptr<storage::Storage> storage)
    : Reconciler(std::move(cachers), scheme->find("", "v1", "namespaces"),
                 {scheme->find("", "v1", "serviceaccounts")}, "namespace controller"),
      scheme_(std::move(scheme)),
      store_(std::move(store)),
      storage_(std::move(storage)),
      service_accounts_(scheme_->find("", "v1", "serviceaccounts")) {}

asio::awaitable<void> NamespaceController::reconcile_once() {
  auto cacher = cachers_->find(*info_);
  if (!cacher) co_return;
  auto list = cacher->list(info_->key_prefix(), "", 0, nullptr);
  for (const auto& object : list.objects) {
    if (object->json.find("\"deletionTimestamp\"") == std::string::npos) {
      const std::string name(object->name);  // named: not converted in an awaited call
      co_await ensure_default_service_account(name);
      continue;
    }
    auto parsed = apimachinery::parse_json(object->json);
    if (!parsed || !parsed->is_object()) continue;
    json::object ns = std::move(parsed->get_object());
    if (!has_namespace_finalizer(ns)) continue;  // finalized: the finalizer write deleted it
    const std::string name(object->name);
    if (co_await empty_namespace(std::move(ns))) {
      co_await finalize(name);
    } else {
      waiting_ = true;  // objects held by finalizers (or a pod's grace period) go later
    }
  }
}

asio::awaitable<void> NamespaceController::ensure_default_service_account(const std::string& ns) {
  auto cacher = cachers_->find(*service_accounts_);
  if (!cacher || !cacher->ready()) {
    waiting_ = true;  // look again when the cache can answer
    co_return;
  }
  if (cacher->get(service_accounts_->key(ns, "default"))) co_return;
  json::object account{{"apiVersion", "v1"},
                       {"kind", "ServiceAccount"},
                       {"metadata", json::object{{"name", "default"}}}};
  registry::WriteQuery query;
  std::string namespace_name = ns;
  auto r = co_await store_->create(*service_accounts_, std::move(namespace_name), std::move(account),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::already_exists &&
      r.error().code != base::Errc::forbidden && r.error().code != base::Errc::not_found) {
    spdlog::warn("cannot create the default ServiceAccount of namespace {}: {}", ns,
                 r.error().message);
    waiting_ = true;
  }
}

asio::awaitable<bool> NamespaceController::empty_namespace(json::object ns) {
  const std::string name = apimachinery::object_member(ns, "metadata") != nullptr
                               ? string_at(apimachinery::object_member(ns, "metadata"), "name")
                               : std::string();
  std::map<std::string, std::size_t> remaining;   // group-resource -> objects left
  std::map<std::string, std::size_t> finalizers;  // finalizer -> objects it holds
  bool failed = false;
  std::set<std::string> prefixes;  // the versions of a resource share their objects
  for (const auto& info : scheme_->resources()) {
    if (!info->namespaced || !prefixes.insert(info->key_prefix()).second) continue;
    storage::ListOptions options;
    options.prefix = info->namespace_prefix(name);
    auto page = co_await storage_->list(options);
    if (!page) {
      failed = true;
      continue;
    }
    for (const auto& kv : page->kvs) {
      auto obj = registry::ResourceStore::decode(kv);
      if (!obj) {
        co_await storage_->delete_if(kv.key, kv.mod_revision);  // unreadable: nothing to wait for
        continue;
      }
      registry::DeleteQuery query;
      query.propagation = registry::Propagation::background;
      std::string ns_name = name;
      std::string object_name = string_at(apimachinery::object_member(*obj, "metadata"), "name");
      auto r = co_await store_->remove(*info, std::move(ns_name), std::move(object_name),
                                       std::move(query));
      if (!r) {
        if (r.error().code == base::Errc::not_found) continue;
        failed = true;
        ++remaining[group_resource(*info)];
        continue;
      }
      const json::object* meta = apimachinery::object_member(*r, "metadata");
      if (meta == nullptr || !meta->contains("deletionTimestamp")) continue;  // gone
      ++remaining[group_resource(*info)];
      const json::value* f = meta->if_contains("finalizers");
      if (f != nullptr && f->is_array()) {
        for (const auto& v : f->get_array()) {
          if (v.is_string()) ++finalizers[std::string(v.get_string())];
        }
      }
    }
  }
  // The namespace's conditions, as kube's namespace controller words them.
  json::array conditions;
  conditions.push_back(condition("NamespaceDeletionDiscoveryFailure", false, "ResourcesDiscovered",
                                 "All resources successfully discovered"));
  conditions.push_back(condition("NamespaceDeletionGroupVersionParsingFailure", false,
                                 "ParsedGroupVersions", "All legacy kube types successfully parsed"));
  conditions.push_back(condition("NamespaceDeletionContentFailure", failed,
                                 failed ? "ContentDeletionFailed" : "ContentDeleted",
                                 failed ? "Failed to delete all resource types, will retry"
                                        : "All content successfully deleted, may be waiting on "
                                          "finalization"));
  std::string left;
  for (const auto& [resource, count] : remaining) {
    if (!left.empty()) left += ", ";
    left += resource + " has " + std::to_string(count) + " resource instances";
  }
  conditions.push_back(left.empty()
                           ? condition("NamespaceContentRemaining", false, "ContentRemoved",
                                       "All content successfully removed")
                           : condition("NamespaceContentRemaining", true, "SomeResourcesRemain",
                                       "Some resources are remaining: " + left));
  std::string held;
  for (const auto& [finalizer, count] : finalizers) {
    if (!held.empty()) held += ", ";
    held += finalizer + " in " + std::to_string(count) + " resource instances";
  }
  conditions.push_back(
      held.empty() ? condition("NamespaceFinalizersRemaining", false, "ContentHasNoFinalizers",
                               "All content-preserving finalizers finished")
                   : condition("NamespaceFinalizersRemaining", true, "SomeFinalizersRemain",
                               "Some content in the namespace has finalizers remaining: " + held));
  const json::object* status = apimachinery::object_member(ns, "status");
  if (!same_conditions(status != nullptr ? status->if_contains("conditions") : nullptr,
                       conditions)) {
    co_await write_conditions(name, std::move(conditions));
  }
  co_return remaining.empty() && !failed;
}

asio::awaitable<void> NamespaceController::write_conditions(const std::string& name,
                                                            json::array conditions) {
  // Named arguments: GCC 12 destroys temporaries in a co_await's call twice.
  std::string cluster_scope;
  std::string any_version;
  auto current = co_await store_->get(*info_, std::move(cluster_scope), name, std::move(any_version));
  if (!current) co_return;
  json::value& status = (*current)["status"];
  if (!status.is_object()) status = json::object();
  status.get_object()["conditions"] = std::move(conditions);
  registry::WriteQuery query;
  query.subresource = "status";
  std::string ns;
  auto r = co_await store_->update(*info_, std::move(ns), name, std::move(*current),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::conflict &&
      r.error().code != base::Errc::not_found) {
    spdlog::warn("cannot update the conditions of namespace {}: {}", name, r.error().message);
  }
}

asio::awaitable<void> NamespaceController::finalize(const std::string& name) {
  std::string cluster_scope;
  std::string any_version;
  auto current = co_await store_->get(*info_, std::move(cluster_scope), name, std::move(any_version));
  if (!current) co_return;
  json::value& spec = (*current)["spec"];
  if (!spec.is_object()) co_return;
  json::value* finalizers = spec.get_object().if_contains("finalizers");
  if (finalizers == nullptr || !finalizers->is_array()) co_return;
  json::array kept;
  for (const auto& f : finalizers->get_array()) {
    if (!(f.is_string() && f.get_string() == kNamespaceFinalizer)) kept.push_back(f);
  }
  *finalizers = std::move(kept);
  // Through the finalize subresource: with nothing else holding it, the namespace goes.
  registry::WriteQuery query;
  query.subresource = "finalize";
  std::string ns;
  auto r = co_await store_->update(*info_, std::move(ns), name, std::move(*current),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::conflict &&
      r.error().code != base::Errc::not_found) {
    spdlog::warn("cannot finalize namespace {}: {}", name, r.error().message);
  }
}

}  // namespace kwatch::controllers
