// Where a read is answered: from the watch cache when it can answer as storage would, else from
// storage, as kube's cacher delegator decides. The endpoints render what comes back; they never
// decide freshness themselves.
//
// - A list comes from the cache when the cache is ready and has reached what the request asks:
//   a consistent read (no resourceVersion) once the cache has caught up with storage's revision,
//   resourceVersion=N once it holds N (504 ResourceVersionTooLarge when it does not get there,
//   429 while it (re)initialises), "0" at once; later pages from the first page's snapshot while
//   it is kept. Exact reads, pages whose snapshot is gone, custom resources read at another
//   version than the one stored, and simple lists while the cache initialises go to storage.
// - A get comes from the cache only for resourceVersion "0" or N (a get without one is a
//   consistent read: storage answers it).
// - Watches are served only by the cache.
//
// Thread-safety: any executor; each call reads one cacher through the registry.
#pragma once

#include "apimachinery/api_error.hpp"
#include "registry/list_query.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace kwatch::kinds {
struct ResourceInfo;
}

namespace kwatch::registry {

class CacherRegistry;

// A read the cache answered (with its result or the error it decided); nullopt: storage answers.
template <class T>
using CacheAnswer = std::optional<apimachinery::ApiResult<T>>;

// Whether reads of `info` need the stored objects converted (a custom resource served at another
// version than the one stored, or a kind served over another kind's objects): such lists and
// gets come from storage, and watches convert each event. Not a version the definition's webhook
// converts: its own cache holds its objects converted (CacherRegistry).
bool serves_other_version(const kinds::ResourceInfo& info);

// One page of `info`'s objects in `ns` ("" all) for `query`, from the cache.
boost::asio::awaitable<CacheAnswer<watch::CacheList>> list_from_cache(
    const CacherRegistry& cachers, const kinds::ResourceInfo& info, std::string ns,
    const CompiledListQuery& query);

// The object `ns`/`name` at `resource_version` (the query parameter as sent; nullopt: unset),
// from the cache; 404 when the cache answers that it has none.
boost::asio::awaitable<CacheAnswer<watch::ObjectPtr>> get_from_cache(
    const CacherRegistry& cachers, const kinds::ResourceInfo& info, std::string ns,
    std::string name, std::optional<std::string> resource_version);

// A watch of `info`'s objects in `ns` for `query` (`name`: a watch of one object), for its
// timeoutSeconds or else `default_lifetime`. Errors as a client is told them:
// the query's own, 400 when the resource has no cache, 429 while it initialises, 504
// ResourceVersionTooLarge, 410 Gone ("too old resource version: N (start)"), which the endpoint
// sends as the stream's one ERROR event, as client-go's reflector expects.
boost::asio::awaitable<apimachinery::ApiResult<std::unique_ptr<watch::WatchSession>>> watch_cache(
    const CacherRegistry& cachers, const kinds::ResourceInfo& info, std::string ns,
    std::string name, ListQuery query, std::chrono::steady_clock::duration default_lifetime);

}  // namespace kwatch::registry
