// Helpers shared by the fuzz targets: input splitting, JSON parsing as the server does it, and
// property checks that abort (so libFuzzer records the input as a crash) with a readable reason.
#pragma once

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// True when `v` holds a number that is not finite. Boost.JSON 1.81 parses an overflowing
// number such as 1e999 to infinity (and serializes it as `Infinity`, which is not JSON); the
// server refuses such bodies (storage/stored_json.hpp), so the fuzzers skip them too.
inline bool has_non_finite(const boost::json::value& root) {
  std::vector<const boost::json::value*> todo{&root};
  while (!todo.empty()) {
    const auto* v = todo.back();
    todo.pop_back();
    if (v->is_double() && !std::isfinite(v->get_double())) return true;
    if (v->is_array()) {
      for (const auto& e : v->get_array()) todo.push_back(&e);
    } else if (v->is_object()) {
      for (const auto& m : v->get_object()) todo.push_back(&m.value());
    }
  }
  return false;
}

// Parses like a request body (kMaxJsonDepth = 100 levels, strict UTF-8, finite numbers);
// nullopt if the server would refuse the text.
inline std::optional<boost::json::value> parse_document(std::string_view text) {
  boost::json::parse_options opts;
  opts.max_depth = 100;
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec, {}, opts);
  if (ec || has_non_finite(v)) return std::nullopt;
  return v;
}

// Boost.JSON 1.81 parses some numbers a few units in the last place off, so the shortest text
// of a double does not always parse back to it (findings json_body/double-roundtrip-*). Unless
// KWATCH_FUZZ_EXACT_NUMBERS=1 (set by `scripts/fuzz.sh --replay`), doubles within a relative
// 1e-14 (about 45 ULP) count as equal, so the fuzzers keep looking for other faults.
inline bool exact_numbers() {
  static const bool exact = [] {
    const char* e = std::getenv("KWATCH_FUZZ_EXACT_NUMBERS");
    return e && std::string_view(e) == "1";
  }();
  return exact;
}

// Structural equality as boost::json::value's operator==, with the number tolerance above.
// Iterative: patch results can nest deeper than the stack allows for recursion.
inline bool same_json(const boost::json::value& a, const boost::json::value& b) {
  std::vector<std::pair<const boost::json::value*, const boost::json::value*>> todo{{&a, &b}};
  while (!todo.empty()) {
    auto [x, y] = todo.back();
    todo.pop_back();
    if (x->is_double() && y->is_double()) {
      const double p = x->get_double(), q = y->get_double();
      if (p != q &&
          (exact_numbers() || std::fabs(p - q) > 1e-14 * std::max(std::fabs(p), std::fabs(q)))) {
        return false;
      }
    } else if (x->is_array() && y->is_array()) {
      const auto &l = x->get_array(), &r = y->get_array();
      if (l.size() != r.size()) return false;
      for (std::size_t i = 0; i < l.size(); ++i) todo.emplace_back(&l[i], &r[i]);
    } else if (x->is_object() && y->is_object()) {
      const auto &l = x->get_object(), &r = y->get_object();
      if (l.size() != r.size()) return false;
      for (const auto& m : l) {
        const auto* other = r.if_contains(m.key());
        if (!other) return false;
        todo.emplace_back(&m.value(), other);
      }
    } else if (x->is_array() || x->is_object() || y->is_array() || y->is_object()) {
      return false;
    } else if (*x != *y) {
      return false;
    }
  }
  return true;
}

// A result the server would send or store must serialize and parse back to the same value.
// Patches can nest deeper than their inputs, so the re-parse allows any depth.
inline void check_serializes(const boost::json::value& v) {
  const std::string text = boost::json::serialize(v);
  boost::json::parse_options opts;
  opts.max_depth = static_cast<std::size_t>(-1);
  boost::system::error_code ec;
  auto back = boost::json::parse(text, ec, {}, opts);
  if (ec) fail("result does not re-parse as JSON", text.substr(0, 4096));
  if (!same_json(back, v)) fail("result changes through serialize + parse", text.substr(0, 4096));
}

}  // namespace kwatch::fuzz
