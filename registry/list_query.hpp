// The parameters of a list or watch request, parsed and checked in one place: the watch-cache
// path (server/) and the storage path (ResourceStore::list) both take the compiled form, so a
// rule (selectors, resourceVersion and resourceVersionMatch, continue, sendInitialEvents, "too
// large resource version") is written once and answered the same way by either.
// Pure functions; the compiled query is a value type.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/continue_token.hpp"
#include "apimachinery/field_selector.hpp"
#include "apimachinery/label_selector.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace kwatch::kinds {
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {

// The request's parameters as sent (absent parameters are empty strings).
struct ListQuery {
  std::string label_selector;
  std::string field_selector;
  std::string limit;
  std::string continue_token;
  std::string resource_version;        // "", "0" or a revision
  std::string resource_version_match;  // "", "NotOlderThan" or "Exact"
  // Watches only.
  std::string send_initial_events;
  std::string allow_watch_bookmarks;
  std::string timeout_seconds;
};

enum class ResourceVersionMatch { unset, not_older_than, exact };

struct CompiledListQuery {
  apimachinery::LabelSelector labels;
  apimachinery::FieldSelector fields;
  std::int64_t limit = 0;  // 0: no limit
  std::optional<apimachinery::ContinueToken> continue_token;
  // nullopt: unset (a consistent read); 0: "0" (any version); else at least / exactly this one.
  std::optional<std::int64_t> resource_version;
  ResourceVersionMatch match = ResourceVersionMatch::unset;
  // Watches only.
  bool send_initial_events = false;
  bool allow_bookmarks = false;
  std::optional<std::int64_t> timeout_seconds;  // clamped to 2^31

  bool has_selector() const { return !labels.empty() || !fields.empty(); }
};

// A resourceVersion as a revision: digits only, no sign; nullopt otherwise.
std::optional<std::int64_t> parse_resource_version(std::string_view text);

// Checks a list's parameters as kube-apiserver does (400 BadRequest with its messages). Field
// selectors may only name `info`'s selectable fields.
apimachinery::ApiResult<CompiledListQuery> compile_list_query(const kinds::ResourceInfo& info,
                                                              const ListQuery& query);
// The same for a watch, whose rules differ: resourceVersionMatch only with sendInitialEvents,
// no continue or limit. `name` (a watch of one object) adds metadata.name to the selector.
apimachinery::ApiResult<CompiledListQuery> compile_watch_query(const kinds::ResourceInfo& info,
                                                               const ListQuery& query,
                                                               std::string_view name = {});

// 504 Timeout with kube's ResourceVersionTooLarge cause and Retry-After 1: the version asked for
// is ahead of what storage or the cache has.
apimachinery::ApiError too_large_resource_version(std::int64_t resource_version,
                                                  std::int64_t current);

}  // namespace kwatch::registry
