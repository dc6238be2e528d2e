// ResourceStore's deletes: one object (finalizers, grace periods, propagation to dependents) and
// collections.

#include "registry/resource_store.hpp"

#include "registry/store_rules.hpp"

#include "registry/service_allocator.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <chrono>
#include <ctime>
#include <random>

namespace kwatch::registry {

namespace asio = boost::asio;
using namespace detail;  // the store's rules and the names they use (store_rules.hpp)

asio::awaitable<ApiResult<json::object>> ResourceStore::remove(const ResourceInfo& info,
                                                               std::string ns, std::string name,
                                                               DeleteQuery query) {
  // Mutating admission before the object is read, as kube's delete handler runs it (with no
  // object); validating admission on each state the delete decides on.
  const std::string object_ns = info.namespaced ? ns : std::string();
  const std::string no_subresource;
  AdmissionAttributes attributes{info,          object_ns,     name,
                                 no_subresource, AdmissionOperation::remove,
                                 query.dry_run, query.user.get(), nullptr,
                                 query.warnings.get(), query.audit_annotations.get()};
  attributes.delete_query = &query;
  if (admission_->mutates(attributes)) {
    if (auto e = co_await admission_->mutate(attributes, nullptr)) co_return std::move(*e);
  }
  const std::string key = info.key(ns, name);
  for (;;) {
    auto current = co_await storage_->get(key);
    if (!current) co_return from_storage(info, name, current.error());
    auto obj = served_form(info, decode(*current));
    if (info.converted_by_webhook()) obj = co_await webhook_served(info, std::move(obj));
    if (!obj && query.ignore_read_errors) {
      spdlog::warn("deleting {}, which cannot be decoded, as asked "
                   "(ignoreStoreReadErrorWithClusterBreakingPotential)",
                   apimachinery::to_valid_utf8(key));
      if (query.dry_run) co_return success_status(info, name, "");
      auto d = co_await storage_->delete_if(key, current->mod_revision);
      if (!d) co_return from_storage(info, name, d.error());
      if (!d->succeeded) continue;  // changed under us: it may be readable now
      if (query.written_revision) *query.written_revision = d->revision;
      co_return success_status(info, name, "");
    }
    if (!obj) co_return obj.error();
    const std::string uid = string_field(metadata_of(*obj), "uid");
    if (query.uid && *query.uid != uid) {
      co_return conflict(info, name,
                         "Precondition failed: UID in precondition: " + *query.uid +
                             ", UID in object meta: " + uid);
    }
    if (query.resource_version &&
        *query.resource_version != std::to_string(current->mod_revision)) {
      co_return conflict(info, name,
                         "Precondition failed: ResourceVersion in precondition: " +
                             *query.resource_version + ", ResourceVersion in object meta: " +
                             std::to_string(current->mod_revision));
    }
    attributes.old_object = &*obj;
    if (admission_->validates(attributes)) {
      if (auto e = co_await admission_->validate(attributes, nullptr)) co_return std::move(*e);
    }
    DeletionPlan plan = plan_deletion(info, std::move(*obj), query, garbage_collection_,
                                      std::chrono::system_clock::now());
    if (plan.action == DeletionPlan::Action::keep) co_return std::move(plan.object);
    if (plan.action == DeletionPlan::Action::write) {
      // The object stays, marked as being deleted, until what holds it lets go.
      if (query.dry_run) co_return std::move(plan.object);
      auto text = co_await converted_storable(info, name, plan.object);
      if (!text) co_return text.error();
      auto w = co_await storage_->put_if(key, current->mod_revision, std::move(*text));
      if (!w) co_return from_storage(info, name, w.error());
      if (!w->succeeded) continue;  // changed under us: decide again on the new state
      if (query.written_revision) *query.written_revision = w->revision;
      plan.object["metadata"].get_object()["resourceVersion"] = std::to_string(w->revision);
      co_return std::move(plan.object);
    }
    if (!query.dry_run) {
      auto d = co_await storage_->delete_if(key, current->mod_revision);
      if (!d) co_return from_storage(info, name, d.error());
      if (!d->succeeded) {
        if (d->kv.mod_revision == 0) co_return not_found(info, name);
        continue;  // changed under us: check the preconditions against the new state
      }
      if (query.written_revision) *query.written_revision = d->revision;
      plan.object["metadata"].get_object()["resourceVersion"] = std::to_string(d->revision);
      if (services_ && info.allocates_service_addresses) {
        co_await services_->release_unused(plan.object, nullptr, ns, name);
      }
    }
    if (!info.delete_returns_object) co_return success_status(info, name, uid);
    co_return std::move(plan.object);
  }
}

asio::awaitable<ApiResult<json::object>> ResourceStore::remove_collection(const ResourceInfo& info,
                                                                          std::string ns,
                                                                          CompiledListQuery query,
                                                                          DeleteQuery del) {
  query.limit = 0;
  query.continue_token.reset();
  auto listed = co_await list(info, ns, query);
  if (!listed) co_return listed.error();
  // The answer is the list as it was, as kube's deletecollection gives it.
  for (const auto& item : (*listed)["items"].get_array()) {
    const json::object* meta = metadata_of(item.get_object());
    auto r = co_await remove(info, string_field(meta, "namespace"), string_field(meta, "name"),
                             del);
    if (!r && r.error().code != Errc::not_found) co_return r.error();  // gone meanwhile: fine
  }
  (*listed)["metadata"].get_object().erase("continue");
  (*listed)["metadata"].get_object().erase("remainingItemCount");
  co_return std::move(*listed);
}

}  // namespace kwatch::registry
