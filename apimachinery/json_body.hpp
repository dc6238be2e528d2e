// Request bodies in JSON: objects to create or update, patches, DeleteOptions.
//
// A body is parsed under the rules of stored JSON (apimachinery/stored_json.hpp: depth, UTF-8,
// finite numbers), so nothing a client sends can become an object the server cannot read back.
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

// The body as a JSON value; 400 BadRequest ("couldn't get version/kind; json parse error: ...",
// as kube-apiserver words it) when it is empty or breaks a rule. The value is allocated from `sp`.
ApiResult<boost::json::value> parse_json_body(std::string_view body,
                                              boost::json::storage_ptr sp = {});

// What Go's JSON scanner (and so kube-apiserver) says of the first syntax error in `text`:
// "invalid character 'b' looking for beginning of object key string", "unexpected end of JSON
// input", ...; "" when the text is syntactically valid JSON.
std::string go_json_syntax_error(std::string_view text);

// The start of a body as kube's decode errors quote it: up to `max` bytes, as text when the body
// starts with `{` and in hex otherwise, " ..." when cut; "<empty>" for none. Valid UTF-8.
std::string summarize_body(std::string_view body, std::size_t max = 30);

// The members a JSON body names twice in one object, as field paths in kube's notation
// (`metadata.name`, `spec.containers[0].image`), in the order they appear. The parsed value keeps
// the last of them, as kube's decoder does; fieldValidation decides whether that is an error.
// A body that does not parse has none (parse_json_body reports it).
std::vector<std::string> duplicate_fields(std::string_view body);
// The same for a body already parsed into `parsed`: without walking the body's names when it
// repeats none.
std::vector<std::string> duplicate_fields(std::string_view body,
                                         const boost::json::object& parsed);

}  // namespace kwatch::apimachinery
