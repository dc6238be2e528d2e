#include "controllers/crd_controller.hpp"

#include "kinds/custom_resource_definition.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "schema/structural_schema.hpp"
#include "base/timestamps.hpp"
#include "registry/cacher_registry.hpp"
#include "storage/storage.hpp"
#include "apimachinery/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <set>

namespace kwatch::controllers {

using registry::CacherRegistry;
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::string_view kCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io";

std::string name_of(const json::object& obj) {
  const json::value* meta = obj.if_contains("metadata");
  const json::value* name = meta != nullptr && meta->is_object()
                                ? meta->get_object().if_contains("name")
                                : nullptr;
  return name != nullptr && name->is_string() ? std::string(name->get_string()) : std::string();
}

bool being_deleted(const json::object& obj) {
  const json::value* meta = obj.if_contains("metadata");
  return meta != nullptr && meta->is_object() && meta->get_object().contains("deletionTimestamp");
}

// Each version's openAPIV3Schema, for the OpenAPI v3 documents kubectl explain reads.
void publish_schemas(const json::object& crd, std::vector<kinds::ResourceInfo>& infos) {
  const json::value* versions = crd.at("spec").as_object().if_contains("versions");
  if (versions == nullptr || !versions->is_array()) return;
  for (auto& info : infos) {
    for (const auto& v : versions->get_array()) {
      const json::object* version = v.if_object();
      if (version == nullptr || version->if_contains("name") == nullptr ||
          *version->if_contains("name") != json::value(info.version)) {
        continue;
      }
      const json::value* schema = version->if_contains("schema");
      const json::value* open_api = schema != nullptr && schema->is_object()
                                        ? schema->get_object().if_contains("openAPIV3Schema")
                                        : nullptr;
      if (open_api != nullptr) info.openapi_schema = std::make_shared<const json::value>(*open_api);
    }
  }
}

}  // namespace

CrdController::CrdController(std::shared_ptr<kinds::Scheme> scheme,
                             std::shared_ptr<registry::ResourceStore> store,
                             std::shared_ptr<CacherRegistry> cachers,
                             std::shared_ptr<storage::Storage> storage, std::string storage_prefix,
                             kinds::ConverterFactory converters)
    : Reconciler(std::move(cachers),
                 scheme->find("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                 "CRD controller"),
      scheme_(std::move(scheme)),
      store_(std::move(store)),
      storage_(std::move(storage)),
      storage_prefix_(std::move(storage_prefix)),
      converters_(std::move(converters)),
      crd_info_(info_) {}

asio::awaitable<void> CrdController::reconcile_once() {
  auto cacher = cachers_->find(*crd_info_);
  if (!cacher) co_return;
  auto list = cacher->list(crd_info_->key_prefix(), "", 0, nullptr);
  std::set<std::string> present;
  for (const auto& object : list.objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (!parsed || !parsed->is_object()) continue;
    json::object crd = std::move(parsed->get_object());
    present.insert(name_of(crd));
    if (being_deleted(crd)) {
      co_await finalize(std::move(crd));
    } else {
      co_await serve(std::move(crd));
    }
  }
  std::erase_if(applied_, [&](const auto& entry) { return !present.contains(entry.first); });
  std::erase_if(patterns_, [&](const auto& entry) { return !present.contains(entry.first); });
  for (const auto& owner : scheme_->owners()) {
    if (present.count(owner)) continue;
    // The definition is gone: so are its endpoints and its cache.
    for (const auto& info : scheme_->resources()) {
      if (info->owner == owner) cachers_->remove(*info);
    }
    scheme_->set_owned(owner, {});
    applied_.erase(owner);
    spdlog::info("custom resources of {} are no longer served", owner);
  }
}

asio::awaitable<void> CrdController::serve(json::object crd) {
  const std::string name = name_of(crd);
  const json::value* spec = crd.if_contains("spec");
  const std::string spec_text = spec != nullptr ? json::serialize(*spec) : std::string();
  json::object desired;
  if (applied_[name] != spec_text) {
    // The patterns the previous spec compiled are used again where they are unchanged, so the
    // old resources (freed when the last request holding them ends) and the new ones share them. A stored
    // definition is served under the limits it was accepted with (writes get the budget).
    auto patterns = schema::PatternCache::for_stored();
    if (auto it = patterns_.find(name); it != patterns_.end()) patterns->offer(*it->second);
    auto infos = kinds::custom_resources(crd, storage_prefix_, patterns, /*stored=*/true);
    patterns->forget_offered();
    if (!infos) {
      spdlog::warn("CustomResourceDefinition {} cannot be served: {}", name, infos.error().message);
      co_return;
    }
    if (auto conflict = kinds::names_conflict(crd, *scheme_)) {
      json::object rejected = kinds::rejected_names_status(
          crd, conflict->first, conflict->second, base::now_rfc3339());
      co_await write_status(std::move(rejected));
      co_return;
    }
    register_resources(crd, std::move(*infos), false);
    applied_[name] = spec_text;
    patterns_[name] = std::move(patterns);
    spdlog::info("serving custom resources of {}", name);
  }
  desired = kinds::accepted_status(crd, base::now_rfc3339());
  co_await write_status(std::move(desired));
}

void CrdController::register_resources(const json::object& crd,
                                       std::vector<kinds::ResourceInfo> infos,
                                       bool terminating) {
  publish_schemas(crd, infos);
  auto flag = std::make_shared<std::atomic<bool>>(terminating);
  // One converter for every version of the definition (made again when its spec changes).
  std::shared_ptr<const kinds::VersionConverter> converter;
  if (!infos.empty() && infos.front().conversion_webhook && converters_) {
    converter = converters_(*infos.front().conversion_webhook);
  }
  for (auto& info : infos) {
    info.terminating = flag;
    info.converter = converter;
  }
  std::vector<kinds::ResourceInfo> copies = infos;
  scheme_->set_owned(name_of(crd), std::move(infos));
  for (const auto& info : copies) cachers_->ensure(info);
}

void CrdController::serve_terminating(const json::object& crd) {
  const std::string name = name_of(crd);
  const json::value* spec = crd.if_contains("spec");
  // Tried once per process: the stored spec of a definition being deleted does not change.
  applied_[name] = spec != nullptr ? json::serialize(*spec) : std::string();
  // Never established, never served: nothing for clients to reach.
  if (!kinds::has_true_condition(crd, "Established")) return;
  auto infos =
      kinds::custom_resources(crd, storage_prefix_, schema::PatternCache::for_stored(),
                              /*stored=*/true);
  if (!infos) {
    spdlog::warn("CustomResourceDefinition {} is being deleted and cannot be served: {}", name,
                 infos.error().message);
    return;
  }
  if (kinds::names_conflict(crd, *scheme_)) return;
  register_resources(crd, std::move(*infos), true);
  spdlog::info("serving custom resources of {} until they are deleted", name);
}

asio::awaitable<void> CrdController::write_status(json::object desired) {
  const std::string name = name_of(desired);
  // Only when it differs from what is stored: a replica that finds the work done writes nothing.
  // Named arguments: GCC 12 destroys temporaries in a co_await's call twice.
  std::string cluster_scope;
  std::string any_version;
  auto current = co_await store_->get(*crd_info_, std::move(cluster_scope), name,
                                      std::move(any_version));
  if (!current) co_return;
  const json::value* now_status = current->if_contains("status");
  const json::value* want_status = desired.if_contains("status");
  if (now_status != nullptr && want_status != nullptr && *now_status == *want_status) co_return;
  registry::WriteQuery query;
  query.subresource = "status";
  std::string ns;
  auto r = co_await store_->update(*crd_info_, std::move(ns), name, std::move(desired),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::conflict) {
    spdlog::warn("cannot update the status of CustomResourceDefinition {}: {}", name,
                 r.error().message);
  }
}

asio::awaitable<void> CrdController::finalize(json::object crd) {
  const std::string name = name_of(crd);
  // A definition this process never served (it was being deleted when the process started, on a
  // restart or on a replica that starts meanwhile) is served again as terminating, as kube's CRD
  // handler serves it: clients can read its objects and release their finalizers, creates are
  // refused, and it is never established again.
  if (!applied_.contains(name)) serve_terminating(crd);
  // No new objects while the old ones are deleted. Held across the waits below: a spec update
  // meanwhile frees the description the scheme replaced only when this is done with it.
  std::shared_ptr<const kinds::ResourceInfo> served;
  for (const auto& info : scheme_->resources()) {
    if (info->owner != name) continue;
    if (info->terminating) info->terminating->store(true);
    served = info;
  }
  json::object terminating = crd;
  kinds::set_terminating(terminating, base::now_rfc3339());
  co_await write_status(std::move(terminating));
  // Every object of the definition, whichever version it was written through, lives under one
  // prefix; when its resources are not served the stored spec says which (a definition whose
  // spec no longer validates still had objects).
  if (served == nullptr) {
    if (auto stored = kinds::custom_resource_storage(crd, storage_prefix_)) {
      served = std::make_shared<const kinds::ResourceInfo>(std::move(*stored));
    }
  }
  // They are deleted as a client would delete them: an object with finalizers is only marked,
  // and the definition waits until its finalizers are gone.
  if (served != nullptr) {
    storage::ListOptions options;
    options.prefix = served->key_prefix();
    auto page = co_await storage_->list(options);
    if (!page) co_return;  // storage trouble: the next event tries again
    for (const auto& kv : page->kvs) {
      auto obj = registry::ResourceStore::decode(kv);
      if (!obj) {
        co_await storage_->delete_if(kv.key, kv.mod_revision);  // unreadable: nothing to wait for
        continue;
      }
      const json::value* meta = obj->if_contains("metadata");
      auto field = [&](std::string_view f) {
        const json::value* v = meta != nullptr && meta->is_object() ? meta->get_object().if_contains(f)
                                                                    : nullptr;
        return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
      };
      registry::DeleteQuery query;
      co_await store_->remove(*served, field("namespace"), field("name"), std::move(query));
    }
    // The finalizer goes only when storage holds none: objects held by their finalizers, ones
    // whose delete failed, and ones a replica that had not yet seen the deletion let a client
    // create are waited for (kube's finalizer lists again until the list is empty).
    storage::ListOptions count;
    count.prefix = served->key_prefix();
    count.count_only = true;
    auto left = co_await storage_->list(count);
    if (!left) co_return;
    if (left->count > 0) {
      waiting_ = true;
      co_return;
    }
  }
  // Then the finalizer goes, and with it the definition.
  // Named arguments: GCC 12 destroys temporaries in a co_await's call twice.
  std::string cluster_scope;
  std::string any_version;
  auto current = co_await store_->get(*crd_info_, std::move(cluster_scope), name,
                                      std::move(any_version));
  if (!current) co_return;
  json::object updated = std::move(*current);
  json::value& meta = updated["metadata"];
  if (!meta.is_object()) co_return;
  json::value* finalizers = meta.get_object().if_contains("finalizers");
  if (finalizers == nullptr || !finalizers->is_array()) co_return;
  json::array kept;
  for (const auto& f : finalizers->get_array()) {
    if (!(f.is_string() && f.get_string() == kCleanupFinalizer)) kept.push_back(f);
  }
  if (kept.size() == finalizers->get_array().size()) co_return;
  *finalizers = std::move(kept);
  registry::WriteQuery query;
  std::string ns;
  auto r = co_await store_->update(*crd_info_, std::move(ns), name, std::move(updated),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::conflict && r.error().code != base::Errc::not_found) {
    spdlog::warn("cannot remove the cleanup finalizer of {}: {}", name, r.error().message);
  }
}

}  // namespace kwatch::controllers
