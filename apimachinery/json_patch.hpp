// JSON patch (RFC 6902), as applied for `application/json-patch+json`.
//
// Error mapping follows kube-apiserver's PATCH handler:
// - a body that is not an array of objects: Errc::bad_request with the decoder's text
//   ("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
// - more than kMaxJsonPatchOperations operations: Errc::too_large (413, as kube answers);
// - a document that grows past apimachinery::kMaxObjectBytes: Errc::too_large, as soon as the
//   operation that makes it so is applied, not after the whole patch;
// - any operation that cannot be applied (unknown op, missing or malformed path, missing target,
//   failed test, index out of range): Errc::invalid (422) and no causes, as kube-apiserver
//   answers, with kube's message "the server rejected our request due to an error in our
//   request" followed by ": " and the reason (kube stops after its fixed text, which leaves a
//   user guessing); the reason alone also goes to `failure_detail` if given.
//   Bounds kube applies or that keep a patch's work linear are failures of this kind too: copies
//   adding up to more than kMaxJsonPatchCopyBytes (checked before the copy is made), a value
//   nested deeper than apimachinery::kMaxJsonDepth, more than kMaxJsonPatchWork elements visited or
//   shifted in all (e.g. ten thousand inserts at the front of a huge array).
//
// Paths follow RFC 6901: `~1` is '/', `~0` is '~', "" is the whole document, "-" appends to an
// array in `add` (and as the target of move/copy); indices are decimal without leading zeros.
// Pure function; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <string>

namespace kwatch::apimachinery {

inline constexpr std::size_t kMaxJsonPatchOperations = 10000;
inline constexpr std::size_t kMaxJsonPatchCopyBytes = 3u << 20;  // kube's JSONPatchMaxCopyBytes
inline constexpr std::size_t kMaxJsonPatchWork = 1u << 26;

ApiResult<boost::json::value> apply_json_patch(boost::json::value doc,
                                               const boost::json::value& patch,
                                               std::string* failure_detail = nullptr);

// Deep equality with RFC 6902 `test` rules: numbers compare by value (1 == 1.0), object member
// order is irrelevant.
bool json_equal(const boost::json::value& a, const boost::json::value& b);

}  // namespace kwatch::apimachinery
