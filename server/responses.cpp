#include "server/responses.hpp"

#include "schema/protobuf_decoder.hpp"

#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/yaml_body.hpp"
#include "server/media_type.hpp"
#include "watch/watch_types.hpp"

#include <boost/json/parse.hpp>

#include <memory>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using apimachinery::status_code;
using apimachinery::status_object;

// metadata.resourceVersion of an object as a number (0 when absent or not a number).
// Objects are serialized as they are (a json::value made of one would be a copy).
ApiResponse json_response(unsigned status, const json::object& body) {
  return serialized_response(status, body);
}

ApiResponse error_response(const ApiError& error) {
  ApiResponse r = json_response(status_code(error.code).http, status_object(error));
  r.error = std::make_shared<const ApiError>(error);
  if (error.retry_after_seconds > 0) {
    r.headers["Retry-After"] = std::to_string(error.retry_after_seconds);
  }
  return r;
}

ApiResponse text_response(unsigned status, std::string body, std::string type) {
  ApiResponse r;
  r.status = status;
  r.content_type = std::move(type);
  r.body = std::move(body);
  return r;
}

ApiResponse not_found_path() {
  return error_response({Errc::not_found, "the server could not find the requested resource", {}});
}

ApiResponse method_not_allowed(const std::string& method) {
  (void)method;
  return error_response({Errc::method_not_allowed,
                         "the server does not allow this method on the requested resource",
                         {}});
}

// kube's 406 when no representation the client accepts can be made.
ApiError not_acceptable() {
  return {Errc::not_acceptable, "only the following media types are accepted: " +
                                    std::string(kAcceptedMediaTypes)};
}

namespace {

// The whole text of a JSON answer: its body, a cached list's items and its tail.
std::string whole_text(ApiResponse& response) {
  std::string text = std::move(response.body);
  bool first = true;
  for (const auto& item : response.items) {
    if (!first) text.push_back(',');
    first = false;
    text += item->json;
  }
  text += response.tail;
  response.items.clear();
  response.tail.clear();
  return text;
}

}  // namespace

// A JSON answer (a cached list's items included) as YAML.
void as_yaml(ApiResponse& response) {
  if (response.content_type.rfind("application/json", 0) != 0) return;
  std::string text = whole_text(response);
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  boost::system::error_code ec;
  auto parsed = json::parse(text, ec, {}, options);
  if (ec) {
    response.body = std::move(text);
    return;
  }
  response.body = to_yaml(parsed);
  response.content_type = "application/yaml";
}

bool as_protobuf(ApiResponse& response) {
  if (response.status >= 300 || response.streaming || response.body_source ||
      !response.items.empty() || response.content_type.rfind("application/json", 0) != 0) {
    return false;
  }
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  boost::system::error_code ec;
  auto parsed = json::parse(response.body, ec, {}, options);
  if (ec || !parsed.is_object()) return false;
  auto bytes = schema::encode_protobuf_object(parsed.get_object());
  if (!bytes) return false;
  response.body = std::move(*bytes);
  response.content_type = std::string(schema::kProtobufMediaType);
  return true;
}

void as_indented(ApiResponse& response) {
  if (response.streaming || response.body_source ||
      response.content_type.rfind("application/json", 0) != 0) {
    return;
  }
  // A large list stays compact (and streamed from the cache's buffers): indenting it would
  // copy it whole; so does an answer whose indentation would outgrow it eightfold.
  std::size_t size = response.body.size() + response.tail.size();
  for (const auto& item : response.items) size += item->json.size() + 1;
  if (size > kMaxIndentedBytes) return;
  std::string text = whole_text(response);
  auto indented = indent_json(text, 8 * text.size() + 4096);
  response.body = indented ? std::move(*indented) : std::move(text);
}

std::string status_line(const ApiError& error) {
  return std::string(watch::frame_prefix(watch::EventType::error)) +
         json::serialize(status_object(error)) + std::string(watch::kFrameSuffix);
}

}  // namespace kwatch::server
