// Helpers shared by the fuzz targets: input splitting, JSON parsing as the server does it, and
// property checks that abort (so libFuzzer records the input as a crash) with a readable reason.
#pragma once

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "apimachinery/stored_json.hpp"

namespace kwatch::fuzz {

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A property the code under test must keep was broken: report and abort.
[[noreturn]] inline void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "\n==kwatch-fuzz== property violated: %s\n%.*s\n", what,
               static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  std::abort();
}

// Two documents in one input: the bytes before the first NUL and those after it. JSON text
// cannot contain a raw NUL, so the separator is never part of a valid document.
inline std::optional<std::pair<std::string_view, std::string_view>> split_documents(
    std::string_view in) {
  auto pos = in.find('\0');
  if (pos == std::string_view::npos) return std::nullopt;
  return std::pair{in.substr(0, pos), in.substr(pos + 1)};
}

// Parses like a request body (apimachinery::parse_json: depth, UTF-8, finite numbers, correctly
// rounded doubles); nullopt if the server would refuse the text.
inline std::optional<boost::json::value> parse_document(std::string_view text) {
  return apimachinery::parse_json(text);
}

// A result the server would store (one that breaks no stored-JSON rule; the server refuses the
// others before serializing them) must serialize to text that the server's parser reads back
// as exactly the same value. Results that break a rule are still serialized, to exercise it.
inline void check_serializes(const boost::json::value& v) {
  const std::string text = boost::json::serialize(v);
  if (apimachinery::json_problem(v)) return;
  std::string problem;
  auto back = apimachinery::parse_json(text, &problem);
  if (!back) fail("result does not parse back", problem + "\n" + text.substr(0, 4096));
  if (*back != v) fail("result changes through serialize + parse", text.substr(0, 4096));
}

}  // namespace kwatch::fuzz
