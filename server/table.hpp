// Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for (Accept: as=Table),
// with the columns kubectl users know for each built-in kind. Pure functions.
#pragma once

#include "registry/scheme.hpp"
#include "registry/timestamps.hpp"

#include <boost/json/object.hpp>

#include <chrono>

namespace kwatch::server {

// `object_or_list` is either one object or a `<Kind>List`; `now` makes ages testable.
boost::json::object to_table(const registry::ResourceInfo& info,
                             const boost::json::object& object_or_list,
                             std::chrono::system_clock::time_point now);

// "5s", "3m", "2d", ... as kubectl prints ages.
using registry::human_duration;

}  // namespace kwatch::server
