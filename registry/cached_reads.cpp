#include "registry/cached_reads.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "registry/selector_predicate.hpp"

namespace kwatch::registry {

using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using kinds::ResourceInfo;

namespace {

ApiError not_ready() {
  ApiError e(Errc::too_many_requests, "storage is (re)initializing");
  e.retry_after_seconds = 1;
  return e;
}

// Why a read at `rv` could not wait for the cache: 504 when it stayed behind, else 429.
ApiError freshness_error(boost::system::error_code ec, std::int64_t rv,
                         const watch::Cacher& cacher) {
  if (ec == Errc::timeout) return too_large_resource_version(rv, cacher.resource_version());
  return not_ready();
}

// The selectors of a compiled query as a watch-cache predicate; null when there are none.
std::shared_ptr<const watch::Predicate> predicate_of(const CompiledListQuery& q) {
  if (!q.has_selector()) return nullptr;
  return std::make_shared<SelectorPredicate>(q.labels, q.fields);
}

}  // namespace

bool serves_other_version(const ResourceInfo& info) {
  if (info.hooks.to_served) return true;  // served over another kind's objects
  if (info.converted_by_webhook()) return false;  // its own cache holds its version
  return info.origin == kinds::KindOrigin::custom && !info.storage_version.empty() &&
         info.storage_version != info.version;
}

boost::asio::awaitable<CacheAnswer<watch::CacheList>> list_from_cache(
    const CacherRegistry& cachers, const ResourceInfo& info, std::string ns,
    const CompiledListQuery& q) {
  std::shared_ptr<watch::Cacher> cacher = cachers.find(info);
  if (cacher == nullptr || serves_other_version(info)) co_return std::nullopt;
  if (!cacher->ready()) {
    if (q.has_selector()) co_return not_ready();
    co_return std::nullopt;  // storage serves simple lists meanwhile
  }
  const std::string prefix = info.namespace_prefix(ns);
  // Pages after the first come from the first page's snapshot while it is kept; those, and
  // exact reads, from storage at their revision otherwise.
  if (q.continue_token && q.continue_token->rv > 0) {
    auto predicate = predicate_of(q);
    auto page = cacher->list_snapshot(q.continue_token->rv, prefix,
                                      info.key_prefix() + q.continue_token->start_key_relative,
                                      static_cast<std::size_t>(q.limit), predicate.get());
    if (page) co_return std::move(*page);
  }
  if (q.continue_token || q.match == ResourceVersionMatch::exact) co_return std::nullopt;
  if (!q.resource_version) {
    // Consistent read: only if the cache catches up with storage; else storage serves it.
    auto fresh = co_await cacher->wait_until_consistent();
    if (!fresh) co_return std::nullopt;
  } else if (*q.resource_version > 0) {
    auto fresh = co_await cacher->wait_until_fresh(*q.resource_version);
    if (!fresh) co_return freshness_error(fresh.error(), *q.resource_version, *cacher);
    // Progress that may run ahead of events cannot prove the cache has every event up to rv:
    // storage, which is at least as new, answers.
    if (!cacher->progress_ordered()) co_return std::nullopt;
  }
  auto predicate = predicate_of(q);
  auto list = cacher->list(prefix, "", static_cast<std::size_t>(q.limit), predicate.get());
  if (list.more && !list.objects.empty()) cacher->keep_list_snapshot(prefix, list.resource_version);
  co_return std::move(list);
}

boost::asio::awaitable<CacheAnswer<watch::ObjectPtr>> get_from_cache(
    const CacherRegistry& cachers, const ResourceInfo& info, std::string ns, std::string name,
    std::optional<std::string> resource_version) {
  // An unset version is a consistent read, and a malformed one storage's to refuse: neither
  // looks for the cache.
  if (!resource_version || resource_version->empty()) co_return std::nullopt;
  auto rv = parse_resource_version(*resource_version);
  if (!rv) co_return std::nullopt;
  std::shared_ptr<watch::Cacher> cacher = cachers.find(info);
  if (cacher == nullptr || serves_other_version(info) || !cacher->ready()) {
    co_return std::nullopt;
  }
  if (*rv > 0 && !cacher->progress_ordered()) co_return std::nullopt;
  if (*rv > 0) {
    auto fresh = co_await cacher->wait_until_fresh(*rv);
    if (!fresh) co_return freshness_error(fresh.error(), *rv, *cacher);
  }
  auto object = cacher->get(info.key(ns, name));
  if (!object) co_return not_found_error(info, name);
  co_return std::move(object);
}

boost::asio::awaitable<ApiResult<std::unique_ptr<watch::WatchSession>>> watch_cache(
    const CacherRegistry& cachers, const ResourceInfo& info, std::string ns, std::string name,
    ListQuery query, std::chrono::steady_clock::duration default_lifetime) {
  std::shared_ptr<watch::Cacher> cacher = cachers.find(info);
  if (cacher == nullptr) {
    co_return ApiError(Errc::bad_request, "watch is not supported for " + info.resource);
  }
  auto q = compile_watch_query(info, query, name);
  if (!q) co_return q.error();
  const std::chrono::steady_clock::duration lifetime =
      q->timeout_seconds ? std::chrono::seconds(*q->timeout_seconds) : default_lifetime;
  const std::int64_t rv = q->resource_version.value_or(0);
  watch::WatchRequest wr;
  wr.prefix = info.namespace_prefix(ns);
  wr.predicate = predicate_of(*q);
  wr.resource_version = q->resource_version;
  wr.send_initial_events = q->send_initial_events;
  wr.allow_bookmarks = q->allow_bookmarks;
  wr.deadline = std::chrono::steady_clock::now() + lifetime;
  auto session = co_await cacher->watch(std::move(wr));
  if (session) co_return std::move(*session);
  const auto ec = session.error();
  if (ec == Errc::too_many_requests) co_return not_ready();
  if (ec == Errc::timeout) co_return too_large_resource_version(rv, cacher->resource_version());
  if (ec == Errc::gone) {
    co_return ApiError(Errc::gone, "too old resource version: " + std::to_string(rv) + " (" +
                                       std::to_string(cacher->window_start()) + ")");
  }
  co_return ApiError(Errc::internal, ec.message());
}

}  // namespace kwatch::registry
