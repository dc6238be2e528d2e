// Field paths into JSON objects, as kinds name them: selectable fields ("spec.nodeName"), printer
// columns and scale paths (".spec.replicas", "{.spec.replicas}"). Only member steps: no array
// indexes, filters or wildcards. Pure functions; safe from any thread.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string_view>

namespace kwatch::registry {

// The value at `path`, or nullptr when a step is missing or not an object.
const boost::json::value* find_field(const boost::json::object& obj, std::string_view path);

// Sets the value at `path`, creating (or replacing non-object values with) objects on the way.
void set_field(boost::json::object& obj, std::string_view path, boost::json::value value);

}  // namespace kwatch::registry
