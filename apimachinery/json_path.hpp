// Field paths into JSON objects, as kinds name them: selectable fields ("spec.nodeName"), printer
// columns and scale paths (".spec.replicas", "{.spec.replicas}"). Only member steps: no array
// indexes, filters or wildcards. Pure functions; safe from any thread.
#pragma once

#include "apimachinery/json_members.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string_view>

namespace kwatch::apimachinery {

// The value at `path`, or nullptr when a step is missing or not an object.
const boost::json::value* find_field(const boost::json::object& obj, std::string_view path);

// Sets the value at `path`, creating (or replacing non-object values with) objects on the way.
void set_field(boost::json::object& obj, std::string_view path, boost::json::value value);

// The condition of `type` in `status.conditions` (`conditions` made an array and the condition
// added as {type} when absent), its status set to `value`; its lastTransitionTime becomes `now`
// when the status changes or it has none (kube's SetStatusCondition). Returns the condition and
// whether its status changed, for the caller's reason, message and other fields.
struct ConditionSet {
  boost::json::object& condition;
  bool changed;
};
ConditionSet set_condition(boost::json::object& status, std::string_view type,
                           std::string_view value, std::string_view now);

// Whether two objects are equal apart from one member of their metadata (`resourceVersion`,
// `managedFields`): whether a write changed anything else.
bool equal_but_metadata_member(const boost::json::object& a, const boost::json::object& b,
                               std::string_view member);

}  // namespace kwatch::apimachinery
