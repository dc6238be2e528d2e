// Structural equality of JSON values, with the rule for numbers as a parameter: JSON patch's
// `test` (json_patch.hpp), strategic merge patch's keys and set members, and the structural
// schema's set and map-key uniqueness each compare numbers their own way and everything else
// alike; and the equality of built-in objects as Go decodes them (null members left out), for
// the generation and a Service's strategy.
//
// Header-only (the comparison is inlined where it is hot); pure, safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <limits>

namespace kwatch::apimachinery {

namespace detail {

// json_equal_with's walk; `kNullMembersAbsent`: an object's member that is null counts as one
// left out.
template <bool kNullMembersAbsent, class NumbersEqual>
bool json_equal_walk(const boost::json::value& a, const boost::json::value& b,
                     const NumbersEqual& numbers_equal, std::size_t max_depth, std::size_t depth) {
  if (depth > max_depth) return false;
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case boost::json::kind::object: {
      const auto& oa = a.get_object();
      const auto& ob = b.get_object();
      if (!kNullMembersAbsent && oa.size() != ob.size()) return false;
      for (const auto& member : oa) {
        auto it = ob.find(member.key());
        if (it == ob.end()) {
          if (kNullMembersAbsent && member.value().is_null()) continue;
          return false;
        }
        if (!json_equal_walk<kNullMembersAbsent>(member.value(), it->value(), numbers_equal,
                                                 max_depth, depth + 1)) {
          return false;
        }
      }
      if (kNullMembersAbsent) {
        for (const auto& member : ob) {
          if (!member.value().is_null() && !oa.contains(member.key())) return false;
        }
      }
      return true;
    }
    case boost::json::kind::array: {
      const auto& aa = a.get_array();
      const auto& ab = b.get_array();
      if (aa.size() != ab.size()) return false;
      for (std::size_t i = 0; i < aa.size(); ++i) {
        if (!json_equal_walk<kNullMembersAbsent>(aa[i], ab[i], numbers_equal, max_depth,
                                                 depth + 1)) {
          return false;
        }
      }
      return true;
    }
    default:
      return a == b;
  }
}

}  // namespace detail

// Objects are equal with the same members whatever their order, arrays element by element,
// strings, booleans and null by value; two numbers are equal when `numbers_equal(a, b)` says so
// (called with two numbers only); a number never equals a non-number. Values nested deeper than
// `max_depth` levels are unequal (a bound on the recursion for values that were not parsed under
// a depth limit).
template <class NumbersEqual>
bool json_equal_with(const boost::json::value& a, const boost::json::value& b,
                     const NumbersEqual& numbers_equal,
                     std::size_t max_depth = std::numeric_limits<std::size_t>::max(),
                     std::size_t depth = 0) {
  return detail::json_equal_walk<false>(a, b, numbers_equal, max_depth, depth);
}

// Equal as Go's typed objects are once decoded: as json_equal_with with numbers by value, and
// an object's member that is null the same as one left out (`"rules": null` and no `rules` are
// both a nil slice). Unequal past `max_depth` levels.
inline bool json_equal_as_decoded(const boost::json::value& a, const boost::json::value& b,
                                  std::size_t max_depth = 64) {
  return detail::json_equal_walk<true>(
      a, b, [](const boost::json::value& x, const boost::json::value& y) { return x == y; },
      max_depth, 0);
}

}  // namespace kwatch::apimachinery
