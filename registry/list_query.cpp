#include "registry/list_query.hpp"

#include "kinds/scheme.hpp"

#include <charconv>
#include <set>

namespace kwatch::registry {

using kinds::ResourceInfo;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using apimachinery::api_error;
using apimachinery::decode_continue;
using apimachinery::escape_field_value;
using apimachinery::parse_field_selector;
using apimachinery::parse_label_selector;

namespace {

ApiError bad_request(std::string message) { return api_error(Errc::bad_request, std::move(message)); }

ApiResult<std::int64_t> non_negative(std::string_view name, const std::string& text) {
  if (text.empty()) return std::int64_t{0};
  std::int64_t out = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || p != text.data() + text.size() || out < 0) {
    return bad_request("invalid value for " + std::string(name) + ": " + text);
  }
  return out;
}

// strconv.ParseBool's spellings, as kube-apiserver accepts them.
ApiResult<bool> parse_bool(std::string_view name, const std::string& text) {
  static const std::set<std::string, std::less<>> kTrue{"1", "t", "T", "TRUE", "true", "True"};
  static const std::set<std::string, std::less<>> kFalse{"0", "f", "F", "FALSE", "false", "False", ""};
  if (kTrue.count(text)) return true;
  if (kFalse.count(text)) return false;
  return bad_request("invalid value for " + std::string(name) + ": " + text);
}

// Selectors and the resource version, common to lists and watches.
ApiResult<CompiledListQuery> compile_common(const ResourceInfo& info, const ListQuery& query,
                                            std::string_view name) {
  CompiledListQuery out;
  auto labels = parse_label_selector(query.label_selector);
  if (!labels) return labels.error();
  out.labels = std::move(*labels);
  std::string field_text = query.field_selector;
  if (!name.empty()) {
    if (!field_text.empty()) field_text += ",";
    field_text += "metadata.name=" + escape_field_value(name);
  }
  auto fields = parse_field_selector(field_text);
  if (!fields) return fields.error();
  for (const auto& field : fields->fields()) {
    if (!info.is_selectable(field)) return bad_request("field label not supported: " + field);
  }
  out.fields = std::move(*fields);
  if (!query.resource_version.empty()) {
    auto rv = parse_resource_version(query.resource_version);
    if (!rv) return bad_request("invalid resource version: " + query.resource_version);
    out.resource_version = *rv;
  }
  if (query.resource_version_match == "NotOlderThan") {
    out.match = ResourceVersionMatch::not_older_than;
  } else if (query.resource_version_match == "Exact") {
    out.match = ResourceVersionMatch::exact;
  } else if (!query.resource_version_match.empty()) {
    return bad_request("unsupported resourceVersionMatch: " + query.resource_version_match);
  }
  return out;
}

}  // namespace

std::optional<std::int64_t> parse_resource_version(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

ApiResult<CompiledListQuery> compile_list_query(const ResourceInfo& info, const ListQuery& query) {
  auto out = compile_common(info, query, {});
  if (!out) return out;
  if (out->match != ResourceVersionMatch::unset && !out->resource_version) {
    return bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided");
  }
  auto limit = non_negative("limit", query.limit);
  if (!limit) return limit.error();
  out->limit = *limit;
  if (!query.continue_token.empty()) {
    if (out->resource_version && *out->resource_version != 0) {
      return bad_request("specifying resource version is not allowed when using continue");
    }
    auto token = decode_continue(query.continue_token);
    if (!token) return token.error();
    out->continue_token = std::move(*token);
  }
  return out;
}

ApiResult<CompiledListQuery> compile_watch_query(const ResourceInfo& info, const ListQuery& query,
                                                 std::string_view name) {
  auto out = compile_common(info, query, name);
  if (!out) return out;
  auto send_initial = parse_bool("sendInitialEvents", query.send_initial_events);
  if (!send_initial) return send_initial.error();
  out->send_initial_events = *send_initial;
  if (out->match != ResourceVersionMatch::unset &&
      (out->match != ResourceVersionMatch::not_older_than || !out->send_initial_events)) {
    return bad_request("resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                       "provided");
  }
  if (out->send_initial_events && out->match != ResourceVersionMatch::not_older_than) {
    return bad_request("sendInitialEvents is forbidden for watch unless resourceVersionMatch is "
                       "set to NotOlderThan");
  }
  // Any value but a false one turns bookmarks on, as client-go sends "true".
  out->allow_bookmarks = !query.allow_watch_bookmarks.empty() &&
                         query.allow_watch_bookmarks != "false" &&
                         query.allow_watch_bookmarks != "0";
  if (!query.timeout_seconds.empty()) {
    auto timeout = non_negative("timeoutSeconds", query.timeout_seconds);
    if (!timeout) return timeout.error();
    // Beyond ~68 years a deadline would overflow the clock; nobody can tell the difference.
    if (*timeout > 0) out->timeout_seconds = std::min<std::int64_t>(*timeout, std::int64_t{1} << 31);
  }
  return out;
}

ApiError too_large_resource_version(std::int64_t resource_version, std::int64_t current) {
  ApiError e(Errc::timeout,
             "Too large resource version: " + std::to_string(resource_version) +
                 ", current: " + std::to_string(current),
             {{"ResourceVersionTooLarge", "Too large resource version", ""}});
  e.retry_after_seconds = 1;
  return e;
}

}  // namespace kwatch::registry
