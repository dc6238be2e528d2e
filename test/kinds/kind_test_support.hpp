// Helpers of the kind suites: objects from text, merge-patched variants of a valid object, and
// causes as one line each, the form the tables pin.
#pragma once

#include "apimachinery/merge_patch.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds::testing {

inline boost::json::object parse(std::string_view text) {
  return boost::json::parse(text).as_object();
}

// `base` with the merge patch `patch` applied (arrays replace, null removes).
inline boost::json::object patched(const boost::json::object& base, std::string_view patch) {
  return apimachinery::apply_merge_patch(base, boost::json::parse(patch)).as_object();
}

// Each cause as "<type> <field>: <message>".
inline std::vector<std::string> texts(const std::vector<apimachinery::Cause>& causes) {
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.type + " " + c.field + ": " + c.message);
  return out;
}

}  // namespace kwatch::kinds::testing
