// The responses the endpoints answer with: JSON objects as they are serialized, a Status for an
// error (with its Retry-After, and the error itself kept for the audit record), text, YAML, and
// the watch stream's ERROR event. Pure functions.
#pragma once

#include "apimachinery/api_error.hpp"
#include "server/http_types.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <cstdint>
#include <string>

namespace kwatch::server {

// `body` serialized, with the trailing newline kube writes.
template <class Json>
ApiResponse serialized_response(unsigned status, const Json& body) {
  ApiResponse r;
  r.status = status;
  r.body = boost::json::serialize(body);
  r.body.push_back('\n');
  return r;
}

// Objects are serialized as they are (a json::value made of one would be a copy).
ApiResponse json_response(unsigned status, const boost::json::object& body);

ApiResponse error_response(const apimachinery::ApiError& error);

ApiResponse text_response(unsigned status, std::string body, std::string type = "text/plain");

ApiResponse not_found_path();

ApiResponse method_not_allowed(const std::string& method);

// kube's 406 when no representation the client accepts can be made.
apimachinery::ApiError not_acceptable();

// A JSON answer in kube's protobuf form (schema/protobuf_decoder.hpp): one object of a built-in
// kind, a list of them (a cached list's items each encoded once, then shared by every reader,
// CachedObject::protobuf), or a Status. false, the answer left as it is, for anything else (a
// stream, a custom resource, a Table).
bool as_protobuf(ApiResponse& response);

// `body`'s watch events (JSON lines, e.g. the ERROR a stale version starts with) as kube's
// protobuf watch frames of `info`'s kind; false, `body` left as it is, when one has no such form.
bool as_protobuf_watch_events(std::string& body, const kinds::ResourceInfo& info);

// The protobuf message of a cached object of kind `kind` in `api_version` (no envelope), made
// by the first reader that asks and then kept with the object; null when it has none.
std::shared_ptr<const std::string> protobuf_message(
    const std::shared_ptr<const watch::CachedObject>& object,
    std::string_view api_version, std::string_view kind);

// A JSON answer in kube's CBOR form (apimachinery/cbor.hpp, `application/cbor`): an object (a
// built-in kind's []byte fields as byte strings), a list (a cached list's items each encoded
// once, then shared by every reader: CachedObject::cbor), a Status, any other JSON document.
// false, the answer left as it is, for a stream or an answer that is not JSON.
bool as_cbor(ApiResponse& response);

// `body`'s watch events (JSON lines, e.g. the ERROR a stale version starts with) as kube's CBOR
// watch events of `info`'s objects (each a self-described item); false, `body` left as it is,
// when one is not JSON.
bool as_cbor_watch_events(std::string& body, const kinds::ResourceInfo& info);

// The CBOR form of a cached object of kind `kind` in `api_version` (no self-described tag),
// made by the first reader that asks and then kept with the object; null when its JSON does not
// parse or a []byte field is not base64.
std::shared_ptr<const std::string> cbor_message(
    const std::shared_ptr<const watch::CachedObject>& object,
    std::string_view api_version, std::string_view kind);

// The start of one CBOR watch event of type `type` (e.g. "ADDED"): the self-described tag, a
// map of two entries, `type` and the `object` key with the object's own self-described tag;
// the object's CBOR follows.
std::string cbor_watch_event_head(std::string_view type);

// A JSON answer (a cached list's items included) as YAML.
void as_yaml(ApiResponse& response);
// A JSON answer indented as kube-apiserver's pretty printer writes it (indent_json), for
// `?pretty=true` and the user agents kube treats as people (curl, Wget, browsers). Watches and
// other servers' streams stay as they are.
// Answers larger than kMaxIndentedBytes, or whose indentation would grow them more than
// eightfold, stay compact.
void as_indented(ApiResponse& response);
inline constexpr std::size_t kMaxIndentedBytes = 16u << 20;

// One ERROR event of a watch stream, carrying `error`'s Status.
std::string status_line(const apimachinery::ApiError& error);

}  // namespace kwatch::server
