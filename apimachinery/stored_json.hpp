// The JSON text objects are stored as, and the rules it obeys.
//
// Whatever kwatch commits it must be able to read back and serve, so one set of rules holds for
// every object it writes, parses from a request, or reads from storage:
// - objects and arrays nest at most kMaxJsonDepth levels (the top-level object is level 1);
// - strings and member names are valid UTF-8;
// - numbers are finite (`1e999` overflows a double, and `Infinity` is not JSON);
// - the text of one object is at most kMaxObjectBytes (the request body limit).
// Readers parse with `parse_json`; writers ask `json_problem` before they serialize a value that
// did not come straight from `parse_json` (patch results, protobuf decodes).
//
// Pure functions; safe from any thread.
#pragma once

#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::apimachinery {

inline constexpr std::size_t kMaxJsonDepth = 100;
inline constexpr std::size_t kMaxObjectBytes = 3u << 20;

// Parses `text` under the rules above. On failure returns nullopt and, if asked, says why in
// `problem` (e.g. "syntax error at byte 17", "data.x: number out of range"). Problem texts never
// echo raw input bytes that are not valid UTF-8. The value is allocated from `sp` (an arena such
// as a request's monotonic_resource, or the default heap).
std::optional<boost::json::value> parse_json(std::string_view text,
                                             std::string* problem = nullptr,
                                             boost::json::storage_ptr sp = {});

// A rule a value breaks, and where.
struct JsonProblem {
  std::string path;  // kube's field path notation, `spec.containers[0].name`; "" for the root
  std::string what;  // e.g. "number out of range"
  std::string message() const { return path.empty() ? what : path + ": " + what; }
};

// The first rule `value` breaks; nullopt when it breaks none. Checks depth, UTF-8 and numbers,
// not size (the caller has the serialized text for that). Paths never hold invalid UTF-8.
std::optional<JsonProblem> json_problem(const boost::json::value& value);

// The depth of `value` as counted above (a scalar is 0, `{}` is 1), counting no deeper than
// `limit` + 1: enough to tell whether it exceeds `limit` without walking deeper.
std::size_t json_depth(const boost::json::value& value, std::size_t limit = kMaxJsonDepth);

// The text of member `key` of the object `object_text` (JSON as kwatch writes it: no escapes in
// member names), found without parsing the members' values; nullopt when the text is not such an
// object or has no such member. For reading one part of a cached object cheaply; a caller that
// gets nullopt from a text it did not write parses it instead.
std::optional<std::string_view> member_text(std::string_view object_text, std::string_view key);

bool is_valid_utf8(std::string_view text);
// `text` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD: safe
// to embed in a message.
std::string to_valid_utf8(std::string_view text);

}  // namespace kwatch::apimachinery
