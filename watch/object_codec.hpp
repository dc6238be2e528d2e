// Turning stored bytes into cached objects: parse once, stamp the resource version, extract what
// selectors need, serialize once. Pure functions; thread-safe.
#pragma once

#include "base/errc.hpp"
#include "storage/storage.hpp"
#include "watch/watch_types.hpp"

#include <boost/json/fwd.hpp>

#include <functional>

namespace kwatch::watch {

// Fills the selectable fields of an object (metadata.name and metadata.namespace need not be
// included: `CachedObject::field` answers them). Supplied by the layer that knows the resource's schema.
using FieldsFn = std::function<Attributes(const boost::json::object& object)>;

// `bytes` is a stored object; the result carries `resource_version` in its JSON.
base::Result<ObjectPtr> decode_object(std::string key, std::string_view bytes,
                                         std::int64_t resource_version, const FieldsFn& fields);

// A synthetic object holding only `json` (bookmarks and error Status objects).
ObjectPtr raw_object(std::string_view json, std::int64_t resource_version = 0);

// `{"kind":K,"apiVersion":V,"metadata":{"resourceVersion":"N"}}` (and the initial-events-end
// annotation when asked).
ObjectPtr bookmark_object(std::string_view kind, std::string_view api_version, std::int64_t rv,
                          bool initial_events_end);

}  // namespace kwatch::watch
