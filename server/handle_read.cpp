// GET of a resource: a watch, a list or one object, from the watch cache when it may answer
// (registry/cached_reads.hpp), else from storage; cached objects written from the cache's own
// buffers, or rendered as a Table or another served version.
#include "server/api_handler.hpp"

#include "apimachinery/stored_json.hpp"
#include "registry/cached_reads.hpp"
#include "registry/cacher_registry.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/partial_metadata.hpp"
#include "server/table.hpp"
#include "watch/cacher.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <random>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using kinds::ResourceInfo;

namespace {

// A watch asked of a server that is shutting down: to be asked again, of another replica.
ApiError shutting_down() {
  ApiError e(Errc::too_many_requests, "the server is shutting down, please try again later");
  e.retry_after_seconds = 1;
  return e;
}

std::string escape_json(std::string_view s) { return json::serialize(json::string(s)); }

// `{"kind":"<K>List",...,"items":[` and `]}`: the frame around a list of cached objects;
// `head` (from the list's kind through `"metadata":`) when it is another list's.
std::pair<std::string, std::string> list_frame(const ResourceInfo& info, const watch::CacheList& list,
                                               const std::string& continue_token,
                                               std::string head = {}) {
  if (head.empty()) {
    head = R"({"kind":)" + escape_json(info.list_kind()) + R"(,"apiVersion":)" +
           escape_json(info.api_version()) + R"(,"metadata":)";
  }
  head += R"({"resourceVersion":")" + std::to_string(list.resource_version) + '"';
  if (!continue_token.empty()) {
    head += R"(,"continue":)" + escape_json(continue_token);
    if (list.remaining > 0) head += R"(,"remainingItemCount":)" + std::to_string(list.remaining);
  }
  head += R"(},"items":[)";
  return {std::move(head), "]}\n"};
}

// The whole list as one string (for conversions that need to parse it).
std::string render_list(const std::string& head, const watch::CacheList& list,
                        const std::string& tail) {
  std::size_t size = head.size() + tail.size();
  for (const auto& o : list.objects) size += o->json.size() + 1;
  std::string out;
  out.reserve(size);
  out += head;
  bool first = true;
  for (const auto& o : list.objects) {
    if (!first) out.push_back(',');
    first = false;
    out += o->json;
  }
  out += tail;
  return out;
}

// A cached JSON object or list as kubectl's Table.
std::string table_of(const ResourceInfo& info, std::string_view json_text, IncludeObject include,
                     std::string_view meta_version) {
  boost::system::error_code ec;
  // A list nests its items two levels below its top.
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  auto parsed = json::parse(json_text, ec, {}, options);
  if (ec || !parsed.is_object()) return std::string(json_text);
  json::object table =
      to_table(info, parsed.get_object(), std::chrono::system_clock::now(), include);
  table["apiVersion"] = "meta.k8s.io/" + std::string(meta_version);
  return json::serialize(table);
}

// A custom resource's cached object (its storage version) as the watched version: conversion
// strategy None rewrites apiVersion only.
std::function<watch::ObjectPtr(const watch::ObjectPtr&)> version_converter(const ResourceInfo& info) {
  return [api_version = info.api_version(),
          to_served = info.hooks.to_served](const watch::ObjectPtr& object) -> watch::ObjectPtr {
    json::parse_options options;
    options.max_depth = apimachinery::kMaxJsonDepth;
    boost::system::error_code ec;
    auto parsed = json::parse(object->json, ec, {}, options);
    if (ec || !parsed.is_object()) return object;
    if (to_served) to_served(parsed.get_object());
    parsed.get_object()["apiVersion"] = api_version;
    return object->with_json(json::serialize(parsed));
  };
}

// Each watched object as a one-row Table, as kube-apiserver streams them to `kubectl get -w`:
// column definitions with the first event only, so that kubectl prints its header once.
// The stream outlives the request: it holds the description it prints with.
std::function<watch::ObjectPtr(const watch::ObjectPtr&)> table_converter(
    std::shared_ptr<const ResourceInfo> held, IncludeObject include, std::string_view version) {
  auto first = std::make_shared<bool>(true);
  return [held = std::move(held), first, include,
          api_version = "meta.k8s.io/" + std::string(version)](const watch::ObjectPtr& object)
             -> watch::ObjectPtr {
    const ResourceInfo& info = *held;
    json::parse_options options;
    options.max_depth = apimachinery::kMaxJsonDepth;
    boost::system::error_code ec;
    auto parsed = json::parse(object->json, ec, {}, options);
    if (ec || !parsed.is_object()) return object;
    if (info.hooks.to_served) info.hooks.to_served(parsed.get_object());
    json::object table =
        to_table(info, parsed.get_object(), std::chrono::system_clock::now(), include);
    table["apiVersion"] = api_version;
    if (!*first) table["columnDefinitions"] = json::array();
    *first = false;
    watch::CachedObject::Parts parts;
    parts.key = object->key;
    parts.resource_version = object->resource_version;
    const std::string text = json::serialize(table);
    parts.json = text;
    return watch::CachedObject::make(parts);
  };
}


}  // namespace

// GET: a watch, a list or one object, from the cache when it may answer
// (registry/cached_reads.hpp), else from storage.
asio::awaitable<ApiResponse> ApiHandler::serve_read(const Url& url, Route& route) {
  const ResourceInfo& info = *route.info;
  const bool named = !route.name.empty();
  if (!named) {
    const bool watch = route.watch_prefix || truthy(url.param("watch"));
    if (watch) {
      route.verb = "watch";
      co_return co_await serve_watch(url, route);
    }
    route.verb = "list";
    auto q = registry::compile_list_query(info, list_query(url));
    if (!q) co_return error_response(q.error());
    if (cachers_) {
      auto cached = co_await registry::list_from_cache(*cachers_, info, route.ns, *q);
      if (cached && *cached) co_return list_page(route, std::move(**cached));
      if (cached) co_return error_response(cached->error());
    }
    auto listed = co_await store_->list(info, route.ns, std::move(*q));
    co_return render(route, std::move(listed), 200);
  }
  if (route.watch_prefix || truthy(url.param("watch"))) {
    route.verb = "watch";
    co_return co_await serve_watch(url, route);
  }
  route.verb = "get";
  if (cachers_) {
    std::optional<std::string> rv = url.param("resourceVersion");
    auto cached = co_await registry::get_from_cache(*cachers_, info, route.ns, route.name,
                                                    std::move(rv));
    if (cached && *cached) co_return object_page(route, **cached);
    if (cached) co_return error_response(cached->error());
  }
  std::string rv = url.param("resourceVersion").value_or("");
  auto got = co_await store_->get(info, route.ns, route.name, std::move(rv));
  co_return render(route, std::move(got), 200);
}

asio::awaitable<ApiResponse> ApiHandler::serve_watch(const Url& url, const Route& route) {
  const ResourceInfo& info = *route.info;
  if (refusing_watches_ || !cachers_) {
    co_return error_response(refusing_watches_ ? shutting_down()
                                               : ApiError(Errc::bad_request,
                                                          "watch is not supported for " +
                                                              info.resource));
  }
  // Without timeoutSeconds a watch lasts between one and two --min-request-timeout, so that
  // watchers started together do not all come back together.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double factor = 1.0 + std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto default_lifetime = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      watch_options_.min_request_timeout * factor);
  auto session = co_await registry::watch_cache(*cachers_, info, route.ns, route.name,
                                                list_query(url), default_lifetime);
  if (!session) {
    if (refusing_watches_) co_return error_response(shutting_down());
    if (session.error().code != Errc::gone) co_return error_response(session.error());
    // Accepted, then one ERROR event: what client-go's reflector expects for a stale version.
    ApiResponse r;
    r.streaming = true;
    r.body = status_line(session.error());
    co_return r;
  }
  ApiResponse r;
  r.streaming = true;
  r.watch = std::move(*session);
  switch (route.form.transform) {
    case Transform::table:
      r.convert = table_converter(route.info, route.table_include, route.form.meta_version);
      break;
    case Transform::partial_object_metadata:
      // Every event, bookmarks included (client-go's metadata watch decodes each object as
      // PartialObjectMetadata); the metadata is the same in every served version.
      r.convert = [version = route.form.meta_version](const watch::ObjectPtr& object) {
        return partial_object_metadata(object, version);
      };
      r.convert_bookmarks = true;
      break;
    case Transform::none:
    case Transform::partial_object_metadata_list:
      // A list's form cannot be an event's: kube-apiserver sends the objects as they are.
      if (registry::serves_other_version(info)) r.convert = version_converter(info);
      break;
  }
  co_return r;
}

ApiResponse ApiHandler::list_page(const Route& route, watch::CacheList&& list) {
  const ResourceInfo& info = *route.info;
  std::string token;
  if (list.more && !list.objects.empty()) {
    token = apimachinery::encode_continue(
        list.resource_version,
        std::string(list.objects.back()->key.substr(info.key_prefix().size())) + '\0');
  }
  ApiResponse r;
  switch (route.form.transform) {
    case Transform::table: {
      auto [head, tail] = list_frame(info, list, token);
      r.body = table_of(info, render_list(head, list, tail), route.table_include,
                        route.form.meta_version);
      return r;
    }
    case Transform::partial_object_metadata:
      return error_response(partial_metadata_mismatch(info, true));
    case Transform::partial_object_metadata_list: {
      // Each item's metadata-only rendering, shared with every other reader and watcher.
      auto [head, tail] = list_frame(info, list, token,
                                     partial_object_metadata_list_head(route.form.meta_version));
      for (auto& o : list.objects) o = partial_object_metadata(o, route.form.meta_version);
      r.body = std::move(head);
      r.items = std::move(list.objects);
      r.tail = std::move(tail);
      return r;
    }
    case Transform::none: break;
  }
  auto [head, tail] = list_frame(info, list, token);
  r.body = std::move(head);
  r.items = std::move(list.objects);
  r.tail = std::move(tail);
  return r;
}

ApiResponse ApiHandler::object_page(const Route& route, const watch::ObjectPtr& object) {
  ApiResponse r;
  switch (route.form.transform) {
    case Transform::table:
      r.body = table_of(*route.info, object->json, route.table_include, route.form.meta_version);
      return r;
    case Transform::partial_object_metadata:
      r.body = std::string(partial_object_metadata(object, route.form.meta_version)->json) + "\n";
      return r;
    case Transform::partial_object_metadata_list:
      return error_response(partial_metadata_mismatch(*route.info, false));
    case Transform::none: break;
  }
  r.body = std::string(object->json) + "\n";
  return r;
}

}  // namespace kwatch::server
