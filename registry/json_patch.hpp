// JSON patch (RFC 6902), as applied for `application/json-patch+json`.
//
// Error mapping follows kube-apiserver's PATCH handler:
// - a body that is not an array of objects: Errc::bad_request with the decoder's text
//   ("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
// - more than kMaxJsonPatchOperations operations: Errc::bad_request (kube answers 413
//   "Request entity too large: ..."; kwatch has no code for it);
// - any operation that cannot be applied (unknown op, missing or malformed path, missing target,
//   failed test, index out of range): Errc::invalid with the fixed message
//   "the server rejected our request due to an error in our request" and no causes, exactly as
//   kube-apiserver answers; the library's own explanation goes to `failure_detail` if given.
//
// Paths follow RFC 6901: `~1` is '/', `~0` is '~', "" is the whole document, "-" appends to an
// array in `add` (and as the target of move/copy); indices are decimal without leading zeros.
// Pure function; safe from any thread.
#pragma once

#include "registry/api_error.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <string>

namespace kwatch::registry {

inline constexpr std::size_t kMaxJsonPatchOperations = 10000;

ApiResult<boost::json::value> apply_json_patch(boost::json::value doc,
                                               const boost::json::value& patch,
                                               std::string* failure_detail = nullptr);

// Deep equality with RFC 6902 `test` rules: numbers compare by value (1 == 1.0), object member
// order is irrelevant.
bool json_equal(const boost::json::value& a, const boost::json::value& b);

}  // namespace kwatch::registry
