// meta.k8s.io's metadata-only forms of an answer, as client-go's metadata client asks for them
// (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` for one object and for
// a watch's events, `as=PartialObjectMetadataList` for a list): kind and apiVersion become
// meta.k8s.io's and only the object's metadata is kept. Garbage collectors, namespace and quota
// controllers and controller-runtime's metadata-only watches read whole kinds this way.
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "kinds/scheme.hpp"
#include "server/media_type.hpp"
#include "watch/watch_types.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace kwatch::server {

// {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/<version>","metadata":<its metadata>}
boost::json::object partial_object_metadata(const boost::json::object& object,
                                            std::string_view version);

// The items of `list` each as above, in a PartialObjectMetadataList with the list's metadata
// (resourceVersion, continue, remainingItemCount).
boost::json::object partial_object_metadata_list(const boost::json::object& list,
                                                 std::string_view version);

// The same from a cached object's JSON text. For v1, the rendering every reader and watcher
// shares (CachedObject::metadata_only), made once.
watch::ObjectPtr partial_object_metadata(const watch::ObjectPtr& object, std::string_view version);

// `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/<version>","metadata":` : the
// start of a list's text, its metadata to follow.
std::string partial_object_metadata_list_head(std::string_view version);

// kube's 406 for a form that does not fit the answer: PartialObjectMetadata asked of a list, or
// PartialObjectMetadataList of one object (`is_list`: the answer is a list). The message names
// the answer's type as kube-apiserver's does (`*core.PodList`, `*unstructured.Unstructured`).
apimachinery::ApiError partial_metadata_mismatch(const kinds::ResourceInfo& info, bool is_list);

}  // namespace kwatch::server
