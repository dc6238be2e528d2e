#include "registry/resource_store.hpp"

#include "registry/namespace_lifecycle.hpp"
#include "registry/dynamic_resource_rules.hpp"
#include "registry/service_allocator.hpp"
#include "registry/store_rules.hpp"

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

ApiError not_found_error(const ResourceInfo& info, const std::string& name) {
  return detailed(info, Errc::not_found, name,
                  qualified_resource(info) + " \"" + name + "\" not found");
}

ResourceStore::ResourceStore(std::shared_ptr<storage::Storage> storage,
                             std::shared_ptr<Scheme> scheme,
                             std::shared_ptr<const StateCache> state_cache)
    : storage_(std::move(storage)),
      scheme_(std::move(scheme)),
      state_cache_(std::move(state_cache)),
      admission_(std::make_shared<Admission>()) {
  admission_->add(std::make_shared<NamespaceLifecycle>(storage_, scheme_));
  admission_->add(std::make_shared<DynamicResourceRules>(storage_, scheme_));
}

ApiResult<json::object> ResourceStore::decode(const KeyValue& kv, json::storage_ptr sp) {
  if (!kv.read_error.empty()) return unreadable(kv, kv.read_error);  // e.g. failed to decrypt
  std::string problem;
  auto v = apimachinery::parse_json(kv.value, &problem, std::move(sp));
  if (!v) return unreadable(kv, problem);
  if (!v->is_object()) return unreadable(kv, "not a JSON object");
  json::object& obj = v->get_object();
  auto meta = ensure_metadata(obj);
  if (!meta) return unreadable(kv, "metadata is not an object");
  (**meta)["resourceVersion"] = std::to_string(kv.mod_revision);
  return std::move(obj);
}

asio::awaitable<ApiResult<json::object>> ResourceStore::get(const ResourceInfo& info,
                                                            std::string ns, std::string name,
                                                            std::string resource_version) {
  std::int64_t revision = 0;
  if (!resource_version.empty() && resource_version != "0") {
    auto rv = parse_resource_version(resource_version);
    if (!rv) co_return bad_request("invalid resource version: " + resource_version);
    auto current = co_await storage_->current_revision();
    if (!current) co_return from_storage(info, name, current.error());
    if (*rv > *current) co_return too_large_resource_version(*rv, *current);
  }
  auto r = co_await storage_->get(info.key(ns, name), revision);
  if (!r) co_return from_storage(info, name, r.error());
  if (info.converted_by_webhook()) co_return co_await converted_served_form(info, decode(*r));
  co_return served_form(info, decode(*r));
}

asio::awaitable<ApiResult<json::object>> ResourceStore::list(const ResourceInfo& info,
                                                             std::string ns,
                                                             CompiledListQuery query) {
  const LabelSelector* labels = &query.labels;
  const FieldSelector* fields = &query.fields;
  const std::string prefix = info.namespace_prefix(ns);
  storage::ListOptions options;
  options.prefix = prefix;
  std::int64_t revision = 0;
  if (query.continue_token) {
    options.start_key = list_start_key(info, ns, *query.continue_token);
    if (options.start_key.compare(0, prefix.size(), prefix) != 0) {
      co_return bad_request("continue key is not valid: the key does not belong to this list");
    }
    revision = query.continue_token->rv;
  } else if (query.resource_version && *query.resource_version != 0) {
    auto current = co_await storage_->current_revision();
    if (!current) co_return from_storage(info, "", current.error());
    if (*query.resource_version > *current) {
      co_return too_large_resource_version(*query.resource_version, *current);
    }
    if (query.match == ResourceVersionMatch::exact) revision = *query.resource_version;
  }

  const bool filtered = !labels->empty() || !fields->empty();
  json::array items;
  std::string last_key;
  bool more = false;
  std::int64_t remaining = 0;
  std::int64_t read_revision = revision;
  for (;;) {
    options.revision = read_revision;
    options.limit = query.limit > 0 ? query.limit - static_cast<std::int64_t>(items.size()) : 0;
    if (query.limit > 0 && filtered) options.limit = std::max<std::int64_t>(options.limit, 256);
    auto page = co_await storage_->list(options);
    if (!page) {
      if (page.error() == Errc::gone && query.continue_token) {
        co_return api_error(Errc::gone,
                            "The provided continue parameter is too old to display a consistent "
                            "list result. You can start a new list without the continue "
                            "parameter.");
      }
      if (page.error() == Errc::gone) {
        co_return api_error(Errc::gone, "too old resource version: " +
                                            std::to_string(read_revision));
      }
      co_return from_storage(info, "", page.error());
    }
    read_revision = page->revision;
    std::vector<ApiResult<json::object>> decoded;
    decoded.reserve(page->kvs.size());
    for (const auto& kv : page->kvs) decoded.push_back(served_form(info, decode(kv)));
    if (info.converted_by_webhook()) {
      // The page's objects in one conversion, as kube converts a list.
      std::vector<json::object> readable;
      for (auto& obj : decoded) {
        if (obj) readable.push_back(std::move(*obj));
      }
      auto converted = co_await convert_listed(info, std::move(readable));
      if (!converted) co_return converted.error();
      std::size_t next = 0;
      for (auto& obj : decoded) {
        if (obj) *obj = std::move((*converted)[next++]);
      }
    }
    std::size_t consumed = 0;
    for (std::size_t i = 0; i < page->kvs.size(); ++i) {
      const KeyValue& kv = page->kvs[i];
      ApiResult<json::object>& obj = decoded[i];
      ++consumed;
      last_key = kv.key;
      if (!obj) {
        // One unreadable object must not hide all the others from every client that lists.
        spdlog::warn("list {}: skipping {}: {}", info.resource, apimachinery::to_valid_utf8(kv.key),
                     obj.error().message);
        continue;
      }
      if (filtered) {
        const json::object* meta = metadata_of(*obj);
        const json::value* lbl = meta != nullptr ? meta->if_contains("labels") : nullptr;
        if (!labels->matches(lbl != nullptr ? lbl->if_object() : nullptr)) continue;
        const json::object& o = *obj;
        bool ok = fields->matches([&](std::string_view field) -> std::optional<std::string> {
          return info.field_value(o, field);
        });
        if (!ok) continue;
      }
      items.push_back(std::move(*obj));
      if (query.limit > 0 && static_cast<std::int64_t>(items.size()) >= query.limit) break;
    }
    const bool page_left_keys = consumed < page->kvs.size() || page->more;
    if (query.limit > 0 && static_cast<std::int64_t>(items.size()) >= query.limit) {
      more = page_left_keys;
      remaining = page->count - static_cast<std::int64_t>(consumed);
      break;
    }
    if (!page->more) break;
    options.start_key = last_key + '\0';
  }

  json::object list;
  list["kind"] = info.list_kind();
  list["apiVersion"] = info.api_version();
  json::object meta;
  meta["resourceVersion"] = std::to_string(read_revision);
  if (more) {
    meta["continue"] =
        encode_continue(read_revision, last_key.substr(info.key_prefix().size()) + '\0');
    if (!filtered) meta["remainingItemCount"] = remaining;
  }
  list["metadata"] = std::move(meta);
  list["items"] = std::move(items);
  co_return list;
}

asio::awaitable<ApiResult<json::object>> create_object(const ResourceInfo& info,
                                                       const std::string& ns, json::object body,
                                                       WriteQuery& query,
                                                       const Admission& admission) {
  if (auto t = check_type(info, body); !t) co_return t.error();
  auto meta_r = ensure_metadata(body);
  if (!meta_r) co_return meta_r.error();
  json::object& meta = **meta_r;
  if (!string_field(&meta, "resourceVersion").empty()) {
    co_return bad_request("resourceVersion should not be set on objects to be created");
  }
  const std::string object_ns = info.namespaced ? ns : std::string();
  if (info.namespaced) {
    const std::string body_ns = string_field(&meta, "namespace");
    if (!body_ns.empty() && body_ns != ns) {
      co_return bad_request(
          "the namespace of the provided object does not match the namespace sent on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  std::string name = string_field(&meta, "name");
  const std::string generate_name = string_field(&meta, "generateName");
  const bool generated = name.empty() && !generate_name.empty();
  if (generated) {
    // Kubernetes keeps generated names within 63 characters: trim the prefix, not the suffix.
    name = generate_name.substr(0, std::min<std::size_t>(generate_name.size(), 58)) +
           random_suffix(5);
    meta["name"] = name;
  }
  meta["uid"] = base::new_uuid();
  meta["creationTimestamp"] = base::now_rfc3339();
  if (info.generation != GenerationRule::none &&
      info.generation != GenerationRule::spec_on_update) {
    meta["generation"] = 1;
  }
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  if (auto e = decode_and_default(info, body, query, /*create=*/true)) co_return std::move(*e);
  // Admission knows a generated name as "" (it is the server's, not the request's).
  const std::string admitted_name = generated ? std::string() : name;
  const AdmissionAttributes attributes{info,           object_ns,     admitted_name,
                                       query.subresource, AdmissionOperation::create,
                                       query.dry_run,  query.user.get(), nullptr,
                                       query.warnings.get(), query.audit_annotations.get(),
                                       query.requested_field_manager,
                                       query.requested_field_validation};
  if (admission.may_change(attributes)) {
    const json::object before = body;
    if (auto e = co_await admission.mutate(attributes, &body)) co_return std::move(*e);
    if (auto e = settle_admitted(info, before, body, query, /*create=*/true)) co_return std::move(*e);
    // A plugin may have named the object (kube's create takes the name it is given then).
    if (const std::string admitted = string_field(metadata_of(body), "name"); !admitted.empty()) {
      name = admitted;
    }
  } else if (admission.mutates(attributes)) {
    if (auto e = co_await admission.mutate(attributes, &body)) co_return std::move(*e);
  }
  if (auto e = check_written(info, name.empty() ? generate_name : name, body, nullptr,
                             query.warnings.get())) {
    co_return std::move(*e);
  }
  if (admission.validates(attributes)) {
    if (auto e = co_await admission.validate(attributes, &body)) co_return std::move(*e);
  }
  if (!query.applied) track_update(nullptr, body, query.field_manager, manager_scope(info, query));
  co_return body;
}

asio::awaitable<ApiResult<json::object>> ResourceStore::create(const ResourceInfo& info,
                                                               std::string ns, json::object body,
                                                               WriteQuery query) {
  if (info.terminating && info.terminating->load()) {
    co_return api_error(Errc::method_not_allowed,
                        "create not allowed while custom resource definition is terminating");
  }
  auto made = co_await create_object(info, ns, std::move(body), query, *admission_);
  if (!made) co_return made.error();
  body = std::move(*made);
  const std::string name = string_field(metadata_of(body), "name");
  std::optional<ServiceReservation> reserved;
  if (services_ && info.allocates_service_addresses) {
    auto r = co_await services_->allocate(body, ns, name, nullptr, query.dry_run);
    if (!r) co_return with_context(info, name, r.error());
    reserved = std::move(*r);
  }
  ApiResult<std::string> text = api_error(Errc::internal, "");
  if (info.converted_by_webhook()) {
    text = co_await converted_storable(info, name, body);
  } else {
    text = storable(info, name, body);
  }
  if (!text) {
    if (reserved) co_await services_->release(std::move(*reserved));
    co_return text.error();
  }
  if (query.dry_run) {
    // A dry run shows what would be allocated and keeps none of it.
    if (reserved) co_await services_->release(std::move(*reserved));
    auto existing = co_await storage_->get(info.key(ns, name));
    if (existing) co_return already_exists(info, name);
    co_return body;
  }
  auto r = co_await storage_->create(info.key(ns, name), std::move(*text));
  if (!r && reserved) co_await services_->release(std::move(*reserved));
  if (!r) co_return from_storage(info, name, r.error());
  if (query.written_revision) *query.written_revision = r->mod_revision;
  // What a webhook-converted object reads back as (kube answers with what it decodes).
  if (info.converted_by_webhook()) co_return co_await converted_served_form(info, decode(*r));
  body["metadata"].get_object()["resourceVersion"] = std::to_string(r->mod_revision);
  co_return body;
}

namespace {

// The string form of the scale's label selector: as the object holds it (custom resources), or
// of a label selector (apps/v1 workloads) or label map (ReplicationController), as
// labels.Selector.String() writes it.
std::string scale_selector(const ScaleSubresource& s, const json::object& obj) {
  if (s.label_selector_path.empty()) return {};
  const json::value* sel = find_field(obj, s.label_selector_path);
  if (sel == nullptr) return {};
  switch (s.selector_form) {
    case ScaleSelector::text:
      return sel->is_string() ? std::string(sel->get_string()) : std::string();
    case ScaleSelector::label_selector: {
      if (!sel->is_object()) return {};
      auto parsed = label_selector_from_json(sel->get_object());
      return parsed ? parsed->to_string() : std::string();
    }
    case ScaleSelector::label_map:
      return sel->is_object() ? label_selector_from_map(sel->get_object()).to_string()
                              : std::string();
  }
  return {};
}

// The autoscaling/v1 Scale of `obj`, as kube-apiserver builds it for a workload or a custom
// resource.
json::object scale_of(const ResourceInfo& info, const json::object& obj) {
  const ScaleSubresource& s = *info.scale;
  const json::object* meta = metadata_of(obj);
  json::object scale_meta;
  for (const char* f : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta != nullptr && meta->contains(f)) scale_meta[f] = meta->at(f);
  }
  // autoscaling/v1 omits zero replicas from the spec and an empty selector from the status.
  json::object spec;
  if (const json::value* r = find_field(obj, s.spec_replicas_path);
      r != nullptr && r->is_int64() && r->get_int64() != 0) {
    spec["replicas"] = *r;
  }
  json::object status{{"replicas", 0}};
  if (const json::value* r = find_field(obj, s.status_replicas_path); r != nullptr && r->is_int64()) {
    status["replicas"] = *r;
  }
  if (std::string selector = scale_selector(s, obj); !selector.empty()) {
    status["selector"] = std::move(selector);
  }
  return json::object{{"kind", "Scale"},
                      {"apiVersion", "autoscaling/v1"},
                      {"metadata", std::move(scale_meta)},
                      {"spec", std::move(spec)},
                      {"status", std::move(status)}};
}

}  // namespace

asio::awaitable<ApiResult<json::object>> ResourceStore::scale(const ResourceInfo& info,
                                                              std::string ns, std::string name,
                                                              ScaleFn mutate, WriteQuery query) {
  if (!info.scale) co_return not_found(info, name);
  if (!mutate) {
    std::string any_version;  // named: GCC 12 destroys a converted temporary twice
    auto obj = co_await get(info, ns, name, std::move(any_version));
    if (!obj) co_return obj.error();
    co_return scale_of(info, *obj);
  }
  auto shared = std::make_shared<ScaleFn>(std::move(mutate));
  MutateFn update = [shared, &info, name](const json::object& current) -> ApiResult<json::object> {
    auto next = (*shared)(scale_of(info, current));
    if (!next) return next.error();
    const json::value* replicas = next->contains("spec") && next->at("spec").is_object()
                                      ? next->at("spec").get_object().if_contains("replicas")
                                      : nullptr;
    if (replicas == nullptr || !replicas->is_int64() || replicas->get_int64() < 0) {
      return invalid(info, name, {{"FieldValueInvalid",
                                   "Invalid value: " + (replicas ? json::serialize(*replicas)
                                                                 : std::string("null")) +
                                       ": must be greater than or equal to 0",
                                   "spec.replicas"}});
    }
    json::object obj = current;
    set_field(obj, info.scale->spec_replicas_path, *replicas);
    // The Scale's resourceVersion is the object's: a stale one is a conflict.
    const json::object* scale_meta = metadata_of(*next);
    const std::string rv = string_field(scale_meta, "resourceVersion");
    json::object& meta = obj["metadata"].get_object();
    if (!rv.empty()) meta["resourceVersion"] = rv;
    return obj;
  };
  query.tracked_subresource = "scale";
  query.subresource.clear();
  auto r = co_await write_update(info, std::move(ns), std::move(name), query, std::move(update));
  if (!r) co_return r.error();
  co_return scale_of(info, *r);
}

asio::awaitable<ApiResult<void>> ResourceStore::ping(std::chrono::milliseconds timeout) {
  auto executor = co_await asio::this_coro::executor;
  // The signal and the timer outlive this frame: the timer's handler may run after it returned.
  auto cancel = std::make_shared<asio::cancellation_signal>();
  auto timer = std::make_shared<asio::steady_timer>(executor, timeout);
  timer->async_wait([cancel, timer](boost::system::error_code ec) {
    if (!ec) cancel->emit(asio::cancellation_type::terminal);
  });
  auto r = co_await asio::co_spawn(
      executor, storage_->current_revision(),
      asio::bind_cancellation_slot(cancel->slot(), asio::use_awaitable));
  timer->cancel();
  if (!r && r.error() == asio::error::operation_aborted) {
    co_return ApiError(Errc::unavailable,
                       "storage: no answer within " + std::to_string(timeout.count()) + " ms");
  }
  if (!r) co_return ApiError(Errc::unavailable, "storage: " + r.error().message());
  co_return ApiResult<void>{};
}

asio::awaitable<ApiResult<void>> ResourceStore::ensure_namespace(std::string name) {
  auto info = scheme_->find("", "v1", "namespaces");
  json::object body{{"apiVersion", "v1"}, {"kind", "Namespace"},
                    {"metadata", json::object{{"name", name}}}};
  co_return co_await ensure(*info, std::move(body));
}

asio::awaitable<ApiResult<void>> ResourceStore::ensure(const ResourceInfo& info, json::object body) {
  // Named arguments: GCC 12 mis-destroys a braced temporary passed to a coroutine.
  WriteQuery query;
  std::string ns = info.namespaced ? string_field(metadata_of(body), "namespace") : std::string();
  // Looked up before and after: a create of what exists may fail on something else before the
  // name (a Service's cluster IP is already allocated, to the Service itself), also when another
  // replica created it between the lookup and the create.
  const std::string name = string_field(metadata_of(body), "name");
  auto exists = [&]() -> asio::awaitable<bool> {
    std::string get_ns = ns, get_name = name, any_version;
    co_return (co_await get(info, std::move(get_ns), std::move(get_name), std::move(any_version)))
        .has_value();
  };
  if (co_await exists()) co_return ApiResult<void>{};
  std::string create_ns = ns;
  auto r = co_await create(info, std::move(create_ns), std::move(body), std::move(query));
  if (r || r.error().code == Errc::already_exists) co_return ApiResult<void>{};
  const bool created_elsewhere = co_await exists();
  if (!created_elsewhere) co_return r.error();
  co_return ApiResult<void>{};
}

}  // namespace kwatch::registry
