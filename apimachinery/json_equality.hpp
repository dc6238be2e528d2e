// Structural equality of JSON values, with the rule for numbers as a parameter: JSON patch's
// `test` (json_patch.hpp), strategic merge patch's keys and set members, and the structural
// schema's set and map-key uniqueness each compare numbers their own way and everything else
// alike.
//
// Header-only (the comparison is inlined where it is hot); pure, safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <cstddef>
#include <limits>

namespace kwatch::apimachinery {

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
  if (depth > max_depth) return false;
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case boost::json::kind::object: {
      const auto& oa = a.get_object();
      const auto& ob = b.get_object();
      if (oa.size() != ob.size()) return false;
      for (const auto& member : oa) {
        auto it = ob.find(member.key());
        if (it == ob.end() ||
            !json_equal_with(member.value(), it->value(), numbers_equal, max_depth, depth + 1)) {
          return false;
        }
      }
      return true;
    }
    case boost::json::kind::array: {
      const auto& aa = a.get_array();
      const auto& ab = b.get_array();
      if (aa.size() != ab.size()) return false;
      for (std::size_t i = 0; i < aa.size(); ++i) {
        if (!json_equal_with(aa[i], ab[i], numbers_equal, max_depth, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a == b;
  }
}

}  // namespace kwatch::apimachinery
