// Server-side printing: the meta.k8s.io/v1 Table that `kubectl get` asks for (Accept: as=Table),
// with the columns kubectl users know for each built-in kind. Pure functions.
#pragma once

#include "kinds/scheme.hpp"
#include "base/timestamps.hpp"

#include <boost/json/object.hpp>

#include <chrono>
#include <optional>
#include <string_view>

namespace kwatch::server {

// TableOptions.includeObject: what each row carries besides its cells: nothing, the object's
// metadata (PartialObjectMetadata, the default) or the whole object (`kubectl get --sort-by`).
enum class IncludeObject { none, metadata, object };

// "None", "Metadata", "Object"; "" is the default (Metadata); nullopt for anything else.
std::optional<IncludeObject> parse_include_object(std::string_view text);

// `object_or_list` is either one object or a `<Kind>List`; `now` makes ages testable.
boost::json::object to_table(const kinds::ResourceInfo& info,
                             const boost::json::object& object_or_list,
                             std::chrono::system_clock::time_point now, IncludeObject include);

// "5s", "3m", "2d", ... as kubectl prints ages.
using base::human_duration;

}  // namespace kwatch::server
