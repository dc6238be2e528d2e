// ResourceStore's updates: update, patch (JSON, merge, strategic merge), server-side apply and
// pods/binding, all through one guarded write around the pure update pipeline (update_object).

#include "registry/resource_store.hpp"
#include "kinds/subresources.hpp"

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

asio::awaitable<ApiResult<json::object>> ResourceStore::write_update(
    const ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
    std::function<ApiResult<json::object>(const json::object& current)> mutate) {
  if (!services_ || !info.allocates_service_addresses || !query.subresource.empty()) {
    co_return co_await guarded_update(info, std::move(ns), std::move(name), std::move(query),
                                      std::move(mutate));
  }
  // A Service's cluster IP and node ports are worked out (kept, checked, allocated) from the
  // state the update starts from, before the guarded write, which then carries them.
  auto current = co_await storage_->get(info.key(ns, name));
  if (!current) co_return from_storage(info, name, current.error());
  auto existing = co_await converted_served_form(info, decode(*current));
  if (!existing) co_return existing.error();
  auto planned = mutate(*existing);
  if (!planned) co_return planned.error();
  auto reserved = co_await services_->allocate(*planned, ns, name, &*existing, query.dry_run);
  if (!reserved) co_return with_context(info, name, reserved.error());
  auto shared_planned = std::make_shared<json::object>(std::move(*planned));
  MutateFn carrying = [mutate, shared_planned](const json::object& state) -> ApiResult<json::object> {
    auto next = mutate(state);
    if (next) carry_service_allocations(*next, *shared_planned);
    return next;
  };
  auto r = co_await guarded_update(info, ns, name, query, std::move(carrying));
  if (!r || query.dry_run) {
    co_await services_->release(std::move(*reserved));
  } else {
    co_await services_->release_unused(*existing, &*r, ns, name);
  }
  co_return r;
}

asio::awaitable<ApiResult<json::object>> update_object(const ResourceInfo& info,
                                                       const std::string& ns,
                                                       const std::string& name,
                                                       const json::object& existing,
                                                       std::int64_t revision, json::object next,
                                                       WriteQuery& query,
                                                       const Admission& admission) {
  json::object& obj = next;
  // The request: its kind, its metadata, the version it was read at, its name and namespace.
  if (auto t = check_type(info, obj); !t) co_return t.error();
  auto meta_r = ensure_metadata(obj);
  if (!meta_r) co_return meta_r.error();
  json::object& meta = **meta_r;
  const json::object& old_meta = *metadata_of(existing);
  // Optimistic concurrency: a resourceVersion in the new object must be the current one.
  const std::string rv = string_field(&meta, "resourceVersion");
  if (!rv.empty() && rv != std::to_string(revision)) {
    co_return conflict(info, name, kModified);
  }
  const std::string body_name = string_field(&meta, "name");
  if (!body_name.empty() && body_name != name) {
    co_return bad_request("the name of the object (" + body_name +
                          ") does not match the name on the URL (" + name + ")");
  }
  if (info.namespaced) {
    const std::string body_ns = string_field(&meta, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      co_return bad_request(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
  }
  // Server-managed metadata survives every update.
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "generation",
                            "deletionTimestamp", "deletionGracePeriodSeconds"}) {
    if (auto it = old_meta.find(field); it != old_meta.end()) {
      meta[field] = it->value();
    } else {
      meta.erase(field);
    }
  }
  // What the kind's subresources own, then status (KindHooks::keep_owned_fields).
  if (info.hooks.keep_owned_fields) {
    info.hooks.keep_owned_fields(obj, existing, query.subresource);
  }
  // The status subresource and the main resource each own their half of the object (a
  // binding, which sets the node and the PodScheduled condition, writes both).
  if (info.has_status && query.subresource != "binding") {
    const kinds::Subresource* sub =
        query.subresource.empty() ? nullptr : kinds::find_subresource(info, query.subresource);
    const bool status_write = sub != nullptr && sub->writes_status;
    json::object base = status_write ? existing : obj;
    const json::object& from = status_write ? obj : existing;
    if (auto it = from.find("status"); it != from.end()) {
      base["status"] = it->value();
    } else {
      base.erase("status");
    }
    if (status_write) {
      base["metadata"] = obj["metadata"];
    }
    obj = std::move(base);
  }
  // Decoding and defaults, then mutating admission.
  if (auto e = decode_and_default(info, obj, query, /*create=*/false)) co_return std::move(*e);
  const std::string object_ns = info.namespaced ? ns : std::string();
  // A write through /scale is one of the object, known to admission as the subresource's.
  const std::string& admitted_subresource =
      query.tracked_subresource.empty() ? query.subresource : query.tracked_subresource;
  const AdmissionAttributes attributes{info,          object_ns,     name,
                                       admitted_subresource, AdmissionOperation::update,
                                       query.dry_run, query.user.get(), &existing,
                                       query.warnings.get(), query.audit_annotations.get(),
                                       query.requested_field_manager,
                                       query.requested_field_validation};
  if (admission.may_change(attributes)) {
    const json::object before = obj;
    if (auto e = co_await admission.mutate(attributes, &obj)) co_return std::move(*e);
    if (auto e = settle_admitted(info, before, obj, query, /*create=*/false)) co_return std::move(*e);
  } else if (admission.mutates(attributes)) {
    if (auto e = co_await admission.mutate(attributes, &obj)) co_return std::move(*e);
  }
  // The kind's own preparation, the generation.
  if (info.hooks.prepare_for_update && query.subresource != "status") {
    info.hooks.prepare_for_update(obj, existing);
  }
  json::object& final_meta = obj["metadata"].get_object();
  if (desired_state_changed(info, existing, obj)) {
    const json::value* g = old_meta.if_contains("generation");
    std::int64_t gen = g != nullptr && g->is_int64() ? g->get_int64() : 0;
    final_meta["generation"] = gen + 1;
  }
  // Validation: the kind's rules (a binding is no update of the pod's spec by its users: only
  // the rules of any pod apply) and finalizers, then validating admission.
  const json::object* old_for_rules = query.subresource == "binding" ? nullptr : &existing;
  if (auto e = check_written(info, name, obj, old_for_rules, query.warnings.get(),
                             query.subresource)) {
    co_return std::move(*e);
  }
  if (auto causes = added_finalizers(obj, existing); !causes.empty()) {
    co_return invalid(info, name, std::move(causes));
  }
  if (admission.validates(attributes)) {
    if (auto e = co_await admission.validate(attributes, &obj)) co_return std::move(*e);
  }
  // Last, the managers of the fields this update set (server-side apply tracks its own).
  if (!query.applied) track_update(&existing, obj, query.field_manager, manager_scope(info, query));
  co_return next;
}

asio::awaitable<ApiResult<json::object>> ResourceStore::guarded_update(
    const ResourceInfo& info, std::string ns, std::string name, WriteQuery query,
    MutateFn mutate) {
  std::optional<ApiError> failure;
  std::optional<json::object> written;  // what the last attempt made (or kept)
  bool finalized = false;  // the update removed the last finalizer of an object being deleted
  // An attempt that is retried (the state it started from was stale) warns only once.
  const std::size_t warnings_before = query.warnings ? query.warnings->size() : 0;
  // The objects of this write (the state it starts from, the one it makes) come from one arena,
  // released with the last of them (the response).
  json::storage_ptr arena = json::make_shared_resource<json::monotonic_resource>(8192);
  const std::string key = info.key(ns, name);
  // The watch cache's copy of the object saves a read; storage is told only its revision.
  std::optional<json::object> cached;
  std::optional<KeyValue> suggested;
  if (auto hit = state_cache_ ? state_cache_->lookup(info, key) : std::nullopt) {
    auto v = apimachinery::parse_json(*hit->json, nullptr, arena);
    if (v && v->is_object()) {
      cached = std::move(v->get_object());
      suggested.emplace();
      suggested->key = key;
      suggested->mod_revision = hit->mod_revision;
    }
  }
  using UpdateResult = storage::Storage::UpdateResult;
  auto try_update = [&](const KeyValue* current) -> asio::awaitable<UpdateResult> {
    failure.reset();
    written.reset();
    finalized = false;
    if (query.warnings) query.warnings->resize(warnings_before);
    if (current == nullptr) {
      failure = not_found(info, name);
      co_return UpdateResult(Errc::not_found);
    }
    auto existing = [&]() -> ApiResult<json::object> {
      if (cached && current->value.empty() && current->read_error.empty()) {
        json::object suggestion = std::move(*cached);  // tried once
        cached.reset();
        return served_form(info, std::move(suggestion));
      }
      return served_form(info, decode(*current, arena));
    }();
    if (info.converted_by_webhook()) existing = co_await webhook_served(info, std::move(existing));
    if (!existing) {
      failure = existing.error();
      co_return UpdateResult(Errc::internal);
    }
    auto next = mutate(*existing);
    if (!next) {
      failure = next.error();
      co_return UpdateResult(next.error().code);
    }
    json::object changed = std::move(*next);
    auto made = co_await update_object(info, ns, name, *existing, current->mod_revision,
                                       std::move(changed), query, *admission_);
    if (!made) {
      failure = made.error();
      co_return UpdateResult(failure->code);
    }
    json::object& obj = *made;
    finalized = deletion_complete(info, obj);
    // A dry run stops before the write (even of stale bytes, which an unchanged value would
    // not prevent) with a code no storage returns.
    if (!query.dry_run && equal_but_metadata_member(obj, *existing, "resourceVersion")) {
      written = std::move(*existing);
      co_return UpdateResult(std::optional<std::string>());
    }
    ApiResult<std::string> text = api_error(Errc::internal, "");
    if (info.converted_by_webhook()) {
      text = co_await converted_storable(info, name, obj);
    } else {
      text = storable(info, name, obj);
    }
    if (!text) {
      failure = text.error();
      co_return UpdateResult(text.error().code);
    }
    written = std::move(obj);
    if (query.dry_run) {
      (*written)["metadata"].get_object()["resourceVersion"] =
          std::to_string(current->mod_revision);
      co_return UpdateResult(kDryRunDone);
    }
    co_return UpdateResult(std::optional<std::string>(std::move(*text)));
  };
  // A named std::function: GCC 12 destroys a converted temporary in a co_await twice.
  storage::Storage::AsyncUpdateFn update_fn = try_update;
  auto r = co_await storage_->guaranteed_update(key, std::move(update_fn), std::move(suggested));
  if (!r && r.error() == kDryRunDone && written) co_return std::move(*written);
  if (!r) {
    if (failure) co_return *failure;
    co_return from_storage(info, name, r.error());
  }
  if (query.dry_run && written) co_return std::move(*written);
  if (query.written_revision) *query.written_revision = r->mod_revision;
  if (finalized) {
    // Nothing holds the object any more: the deletion it waited for happens now.
    auto d = co_await storage_->delete_if(key, r->mod_revision);
    if (!d) co_return from_storage(info, name, d.error());
  }
  // The answer is what was written (or kept), unless the stored form is another one.
  if (info.converted_by_webhook()) co_return co_await converted_served_form(info, decode(*r));
  if (!written || stored_differently(info)) co_return served_form(info, decode(*r));
  (*written)["metadata"].get_object()["resourceVersion"] = std::to_string(r->mod_revision);
  co_return std::move(*written);
}

asio::awaitable<ApiResult<json::object>> ResourceStore::update(const ResourceInfo& info,
                                                               std::string ns, std::string name,
                                                               json::object body,
                                                               WriteQuery query) {
  auto shared_body = std::make_shared<json::object>(std::move(body));
  MutateFn mutate = [shared_body](const json::object& current) -> ApiResult<json::object> {
    return json::object(*shared_body, current.storage());  // in the write's arena
  };
  co_return co_await write_update(info, std::move(ns), std::move(name), query, std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::patch(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              PatchType type, json::value patch,
                                                              WriteQuery query) {
  if (type != PatchType::json && !patch.is_object()) {
    co_return bad_request("patch body must be a JSON object");
  }
  if (type == PatchType::apply) {
    co_return co_await apply(info, std::move(ns), std::move(name), std::move(patch.get_object()),
                             std::move(query), nullptr);
  }
  if (type == PatchType::json && !patch.is_array()) {
    co_return bad_request("json patch must be a JSON array of operations");
  }
  if (type == PatchType::strategic_merge && info.origin == KindOrigin::custom) {
    // kube-apiserver serves custom resources without strategic merge patch.
    co_return api_error(Errc::unsupported_media_type,
                        "the body of the request was in an unknown format - accepted media types "
                        "include: application/json-patch+json, application/merge-patch+json, "
                        "application/apply-patch+yaml");
  }
  auto shared_patch = std::make_shared<json::value>(std::move(patch));
  MutateFn mutate = [shared_patch, type, &info](const json::object& current) {
    return apply_patch(info, type, current, *shared_patch);
  };
  co_return co_await write_update(info, std::move(ns), std::move(name), query, std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::bind(const ResourceInfo& info,
                                                             std::string ns, std::string name,
                                                             json::object binding,
                                                             WriteQuery query) {
  const json::object* meta = metadata_of(binding);
  const std::string binding_name = string_field(meta, "name");
  if (!binding_name.empty() && binding_name != name) {
    co_return bad_request("name in URL does not match name in Binding object");
  }
  const json::object* target = object_member(binding, "target");
  const std::string kind(string_member(target, "kind"));
  const std::string node(string_member(target, "name"));
  std::vector<Cause> causes;
  if (!kind.empty() && kind != "Node") {
    causes.push_back({"FieldValueNotSupported",
                      "Unsupported value: " + go_quoted(kind) + ": supported values: \"Node\"",
                      "target.kind"});
  }
  if (node.empty()) causes.push_back({"FieldValueRequired", "Required value", "target.name"});
  if (!causes.empty()) co_return invalid_error("", "Binding", name, std::move(causes));
  json::object annotations;
  if (meta != nullptr) {
    if (const json::object* a = object_member(*meta, "annotations")) annotations = *a;
  }
  const std::string uid = string_field(meta, "uid");
  auto refused = [name](std::string why) {
    ApiError e(Errc::conflict,
               "Operation cannot be fulfilled on pods/binding " + go_quoted(name) + ": " + why);
    e.name = name;
    e.kind = "pods/binding";
    return e;
  };
  MutateFn mutate = [=](const json::object& current) -> ApiResult<json::object> {
    json::object pod = current;
    json::object& pod_meta = pod["metadata"].as_object();
    if (!uid.empty() && uid != string_field(&pod_meta, "uid")) {
      return refused("Precondition failed: UID in precondition: " + uid +
                     ", UID in object meta: " + string_field(&pod_meta, "uid"));
    }
    if (pod_meta.contains("deletionTimestamp")) {
      return refused("pod " + name + " is being deleted, cannot be assigned to a host");
    }
    json::value& spec = pod["spec"];
    if (!spec.is_object()) spec = json::object();
    const std::string assigned(string_member(&spec.get_object(), "nodeName"));
    if (!assigned.empty()) {
      return refused("pod " + name + " is already assigned to node " + go_quoted(assigned));
    }
    spec.get_object()["nodeName"] = node;
    if (!annotations.empty()) {
      json::value& a = pod_meta["annotations"];
      if (!a.is_object()) a = json::object();
      for (const auto& [k, v] : annotations) a.get_object()[k] = v;
    }
    // The PodScheduled condition turns True (its transition time when it changes).
    json::value& status = pod["status"];
    if (!status.is_object()) status = json::object();
    auto [scheduled, changed] =
        set_condition(status.get_object(), "PodScheduled", "True", base::now_rfc3339());
    if (changed) {
      scheduled.erase("reason");
      scheduled.erase("message");
    }
    scheduled["lastProbeTime"] = nullptr;
    return pod;
  };
  query.subresource = "binding";
  co_return co_await write_update(info, std::move(ns), std::move(name), std::move(query),
                                  std::move(mutate));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::apply(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              json::object config,
                                                              WriteQuery query, bool* created) {
  if (created != nullptr) *created = false;
  auto meta_r = ensure_metadata(config);
  if (!meta_r) co_return meta_r.error();
  const std::string body_name = string_field(*meta_r, "name");
  if (!body_name.empty() && body_name != name) {
    co_return bad_request("the name of the object (" + body_name +
                          ") does not match the name on the URL (" + name + ")");
  }
  (**meta_r)["name"] = name;
  query.applied = true;
  auto shared_config = std::make_shared<const json::object>(std::move(config));
  MutateFn mutate = [shared_config, query, &info](const json::object& current) {
    return apply_configuration(info, &current, *shared_config, query);
  };
  for (int attempt = 0;; ++attempt) {
    auto updated = co_await write_update(info, ns, name, query, mutate);
    if (updated || updated.error().code != Errc::not_found || !query.subresource.empty() ||
        attempt == 3) {
      co_return updated;
    }
    // Absent: the object is made from the configuration alone.
    auto made = apply_configuration(info, nullptr, *shared_config, query);
    if (!made) co_return made.error();
    auto r = co_await create(info, ns, std::move(*made), query);
    if (r || r.error().code != Errc::already_exists) {
      if (r && created != nullptr) *created = true;
      co_return r;
    }
    // Created by someone else meanwhile: apply to theirs.
  }
}

ApiResult<json::object> apply_patch(const ResourceInfo& info, PatchType type,
                                    const json::object& current, const json::value& patch) {
  json::value patched;
  switch (type) {
    case PatchType::merge:
      patched = apply_merge_patch(current, patch);
      break;
    case PatchType::json: {
      auto r = apply_json_patch(json::value(current), patch);
      if (!r) return r.error();
      patched = std::move(*r);
      break;
    }
    case PatchType::apply:
      return bad_request("an apply patch needs its field manager: ResourceStore::apply");
    case PatchType::strategic_merge: {
      const PatchSchema& schema =
          info.patch_schema ? *info.patch_schema : builtin_patch_schema(info.group, info.kind);
      auto r = apply_strategic_merge_patch(current, patch, schema);
      if (!r) return r.error();
      // kube decodes the merged map into the kind's Go type: a value of the wrong shape is its
      // 422 naming the patch (as Go's %+v prints it), before any validation.
      if (info.schema) {
        if (auto wrong = info.schema->go_conversion_error(*r)) {
          const std::string shown = apimachinery::go_quote(schema::go_print(patch));
          return ApiError(Errc::invalid, " \"\" is invalid: patch: Invalid value: " + shown + ": " + *wrong,
                          {{"FieldValueInvalid", "Invalid value: " + shown + ": " + *wrong, "patch"}});
        }
      }
      patched = std::move(*r);
      break;
    }
  }
  if (!patched.is_object()) return bad_request("patched object is not a JSON object");
  return std::move(patched.get_object());
}

ApiResult<json::object> apply_configuration(const ResourceInfo& info, const json::object* current,
                                            const json::object& config, const WriteQuery& query) {
  return apply_configuration(current, config, query.field_manager, query.force,
                             manager_scope(info, query));
}

}  // namespace kwatch::registry
