// JSON merge patch (RFC 7386), as applied for `application/merge-patch+json`.
//
// Pure function; safe from any thread.
#pragma once

#include <boost/json/value.hpp>

namespace kwatch::apimachinery {

// MergePatch(target, patch) of RFC 7386 section 2: an object patch merges member by member
// (null removes), anything else replaces the target. Nulls inside values that are added are
// dropped too, as the RFC prescribes. kube-apiserver rejects a patch body that is not a JSON
// object or array with 400 "Invalid JSON Patch" (jsonpatch.ErrBadJSONPatch); that check belongs
// to the caller, which has the raw body.
boost::json::value apply_merge_patch(const boost::json::value& target,
                                     const boost::json::value& patch);

}  // namespace kwatch::apimachinery
