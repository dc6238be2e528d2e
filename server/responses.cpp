#include "server/responses.hpp"

#include "schema/protobuf_decoder.hpp"

#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/yaml_body.hpp"
#include "kinds/scheme.hpp"
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

namespace {

std::optional<json::object> parse_object(std::string_view text) {
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  boost::system::error_code ec;
  auto parsed = json::parse(text, ec, {}, options);
  if (ec || !parsed.is_object()) return std::nullopt;
  return std::move(parsed.get_object());
}

// What an object that has no protobuf form keeps, so that it is not tried again.
const std::shared_ptr<const std::string>& no_protobuf() {
  static const auto none = std::make_shared<const std::string>();
  return none;
}

// A list served from the cache: its frame (head and tail, no items) names the kind and carries
// the ListMeta; the items are the cached objects' own messages.
bool cached_list_as_protobuf(ApiResponse& response) {
  auto frame = parse_object(response.body + response.tail);
  if (!frame) return false;
  const json::value* v = frame->if_contains("apiVersion");
  const json::value* k = frame->if_contains("kind");
  if (v == nullptr || k == nullptr || !v->is_string() || !k->is_string()) return false;
  const std::string_view kind = k->get_string();
  if (kind.size() <= 4 || !kind.ends_with("List")) return false;
  const std::string_view item_kind = kind.substr(0, kind.size() - 4);
  if (response.items.empty()) {
    // Whether its kind has a protobuf form at all (a custom resource's has none).
    auto bytes = schema::encode_protobuf_object(*frame);
    if (!bytes) return false;
    response.body = std::move(*bytes);
    response.tail.clear();
    return true;
  }
  std::vector<std::shared_ptr<const std::string>> held;
  std::vector<std::string_view> messages;
  held.reserve(response.items.size());
  messages.reserve(response.items.size());
  for (const auto& item : response.items) {
    auto m = protobuf_message(item, v->get_string(), item_kind);
    if (!m) return false;
    messages.emplace_back(*m);
    held.push_back(std::move(m));
  }
  const json::value* metadata = frame->if_contains("metadata");
  response.body = schema::encode_protobuf_list(
      v->get_string(), kind, metadata && metadata->is_object() ? &metadata->get_object() : nullptr,
      messages);
  response.items.clear();
  response.tail.clear();
  return true;
}

}  // namespace

std::shared_ptr<const std::string> protobuf_message(const watch::ObjectPtr& object,
                                                    std::string_view api_version,
                                                    std::string_view kind) {
  auto done = object->protobuf.load(std::memory_order_acquire);
  if (!done) {
    std::optional<std::string> bytes;
    if (auto parsed = parse_object(object->json)) {
      bytes = schema::encode_protobuf_message(*parsed, api_version, kind);
    }
    done = bytes ? std::make_shared<const std::string>(std::move(*bytes)) : no_protobuf();
    // Readers on several threads may race to make it: each gets a correct one, one is kept.
    object->protobuf.store(done, std::memory_order_release);
  }
  return done == no_protobuf() ? nullptr : done;
}

bool as_protobuf_watch_events(std::string& body, const kinds::ResourceInfo& info) {
  std::string out;
  const std::string api_version = info.api_version();
  std::string_view rest = body;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (line.empty()) continue;
    auto event = parse_object(line);
    if (!event) return false;
    const json::value* type = event->if_contains("type");
    const json::value* object = event->if_contains("object");
    if (type == nullptr || !type->is_string() || object == nullptr || !object->is_object()) {
      return false;
    }
    const json::object& o = object->get_object();
    const json::value* kind = o.if_contains("kind");
    const bool status = kind != nullptr && kind->is_string() && kind->get_string() == "Status";
    auto message = status ? schema::encode_protobuf_status_message(o)
                          : schema::encode_protobuf_message(o, api_version, info.kind);
    if (!message) return false;
    out += schema::protobuf_watch_event_head(type->get_string(), status ? "v1" : api_version,
                                             status ? "Status" : std::string_view(info.kind),
                                             message->size());
    out += *message;
    out += schema::kWatchEventSuffix;
  }
  body = std::move(out);
  return true;
}

bool as_protobuf(ApiResponse& response) {
  if (response.streaming || response.body_source ||
      response.content_type.rfind("application/json", 0) != 0) {
    return false;
  }
  if (!response.items.empty() || !response.tail.empty()) {
    if (!cached_list_as_protobuf(response)) return false;
  } else {
    auto parsed = parse_object(response.body);
    if (!parsed) return false;
    const json::value* kind = parsed->if_contains("kind");
    auto bytes = kind != nullptr && kind->is_string() && kind->get_string() == "Status"
                     ? schema::encode_protobuf_status(*parsed)
                     : response.status < 300 ? schema::encode_protobuf_object(*parsed)
                                             : std::nullopt;
    if (!bytes) return false;
    response.body = std::move(*bytes);
  }
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
