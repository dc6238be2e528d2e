// Request bodies in YAML: server-side apply's `application/apply-patch+yaml`.
//
// The YAML that storage/yaml_subset.hpp reads (block and flow collections, plain and quoted
// scalars; JSON documents as they are), with plain scalars resolved as kube's YAML decoder
// resolves them (YAML 1.1): `null`/`~`/empty, booleans (`true`, `yes`, `on`, `y` and their
// negations, in the three capitalisations), integers (decimal, `0x` hex, leading-zero octal,
// `0b` binary, `_` separators), floats; everything else, and every quoted scalar, is a string.
// The result keeps the rules of JSON bodies (apimachinery/stored_json.hpp: depth, UTF-8, numbers).
// Pure function; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/value.hpp>

#include <string_view>

namespace kwatch::apimachinery {

// The body as a JSON value; 400 BadRequest "error decoding YAML: line N: ..." when it is not
// YAML kwatch reads.
ApiResult<boost::json::value> parse_yaml_body(std::string_view body);

}  // namespace kwatch::apimachinery
