// Reading an object's metadata fields, as every part of the client does (keys, versions,
// namespaces, list metadata): `metadata.<field>` as a string, "" when it is absent or not one.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace kwatch::client {

inline std::string metadata_string(const boost::json::object& object, std::string_view field) {
  const boost::json::value* meta = object.if_contains("metadata");
  const boost::json::value* v =
      meta != nullptr && meta->is_object() ? meta->get_object().if_contains(field) : nullptr;
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

}  // namespace kwatch::client
