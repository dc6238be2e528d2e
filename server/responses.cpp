#include "server/responses.hpp"

#include "schema/protobuf_decoder.hpp"
#include "apimachinery/cbor.hpp"

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

// Each of `body`'s watch events (JSON lines, e.g. the ERROR a stale version starts with) to
// `fn(type, object)`; false when one does not parse or `fn` says false.
template <class Fn>
bool for_each_watch_event(std::string_view body, Fn&& fn) {
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
    if (!fn(std::string_view(type->get_string()), object->get_object())) return false;
  }
  return true;
}

// What an object that has no protobuf form keeps, so that it is not tried again.
const std::shared_ptr<const std::string>& no_protobuf() {
  static const auto none = std::make_shared<const std::string>();
  return none;
}

// A list served from the cache: its frame (head and tail, no items) names the kind and carries
// the ListMeta; the items are the cached objects' own messages.
// A cached list's frame (its head and tail, no items), when it names its apiVersion and a kind
// `<Kind>List` (`item_kind`: `<Kind>`).
std::optional<json::object> list_frame(const ApiResponse& response, std::string& api_version,
                                       std::string& kind, std::string& item_kind) {
  auto frame = parse_object(response.body + response.tail);
  if (!frame) return std::nullopt;
  const json::value* v = frame->if_contains("apiVersion");
  const json::value* k = frame->if_contains("kind");
  if (v == nullptr || k == nullptr || !v->is_string() || !k->is_string()) return std::nullopt;
  kind = k->get_string();
  if (kind.size() <= 4 || !kind.ends_with("List")) return std::nullopt;
  api_version = v->get_string();
  item_kind = kind.substr(0, kind.size() - 4);
  return frame;
}

bool cached_list_as_protobuf(ApiResponse& response) {
  std::string api_version, kind, item_kind;
  auto frame = list_frame(response, api_version, kind, item_kind);
  if (!frame) return false;
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
    auto m = protobuf_message(item, api_version, item_kind);
    if (!m) return false;
    messages.emplace_back(*m);
    held.push_back(std::move(m));
  }
  const json::value* metadata = frame->if_contains("metadata");
  response.body = schema::encode_protobuf_list(
      api_version, kind, metadata && metadata->is_object() ? &metadata->get_object() : nullptr,
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
  const bool read = for_each_watch_event(body, [&](std::string_view type, const json::object& o) {
    const json::value* kind = o.if_contains("kind");
    const bool status = kind != nullptr && kind->is_string() && kind->get_string() == "Status";
    auto message = status ? schema::encode_protobuf_status_message(o)
                          : schema::encode_protobuf_message(o, api_version, info.kind);
    if (!message) return false;
    out += schema::protobuf_watch_event_head(type, status ? "v1" : api_version,
                                             status ? "Status" : std::string_view(info.kind),
                                             message->size());
    out += *message;
    out += schema::kWatchEventSuffix;
    return true;
  });
  if (!read) return false;
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

namespace {

const std::shared_ptr<const std::string>& no_cbor() {
  static const auto none = std::make_shared<const std::string>();
  return none;
}

// `obj` in CBOR (no tag), its []byte fields as byte strings when it is of a built-in kind.
std::optional<std::string> object_cbor(const json::object& obj, std::string_view api_version,
                                       std::string_view kind) {
  apimachinery::CborByteStrings bytes;
  schema::collect_byte_strings(api_version, kind, obj, bytes);
  std::string out;
  if (!apimachinery::append_cbor(out, obj, &bytes)) return std::nullopt;
  return out;
}

std::optional<std::string> document_cbor(const json::value& v) {
  std::string out(apimachinery::kCborSelfDescribed);
  apimachinery::CborByteStrings bytes;
  const json::object* obj = v.if_object();
  auto name = [&](std::string_view key) -> std::string_view {
    const json::value* m = obj != nullptr ? obj->if_contains(key) : nullptr;
    return m != nullptr && m->is_string() ? std::string_view(m->get_string()) : std::string_view();
  };
  const std::string_view api_version = name("apiVersion");
  const std::string_view kind = name("kind");
  const json::value* items = obj != nullptr ? obj->if_contains("items") : nullptr;
  if (items != nullptr && items->is_array() && kind.size() > 4 && kind.ends_with("List")) {
    for (const auto& item : items->get_array()) {
      if (item.is_object()) {
        schema::collect_byte_strings(api_version, kind.substr(0, kind.size() - 4),
                                     item.get_object(), bytes);
      }
    }
  } else if (obj != nullptr) {
    schema::collect_byte_strings(api_version, kind, *obj, bytes);
  }
  if (!apimachinery::append_cbor(out, v, &bytes)) return std::nullopt;
  return out;
}

// A list served from the cache in CBOR: the frame's members (head and tail, no items) in kube's
// order, `items` written from each object's kept CBOR.
bool cached_list_as_cbor(ApiResponse& response) {
  std::string api_version, kind, item_kind;
  auto frame = list_frame(response, api_version, kind, item_kind);
  if (!frame) return false;
  std::vector<std::shared_ptr<const std::string>> held;
  held.reserve(response.items.size());
  for (const auto& item : response.items) {
    auto m = cbor_message(item, api_version, item_kind);
    if (!m) return false;
    held.push_back(std::move(m));
  }
  // The frame's entries in their encoded keys' order (apimachinery/cbor.hpp), `items` among them.
  if (!frame->contains("items")) frame->emplace("items", json::array());
  std::vector<const json::key_value_pair*> entries;
  for (const auto& kv : *frame) entries.push_back(&kv);
  std::sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
    return apimachinery::cbor_key_less(a->key(), b->key());
  });
  std::string out(apimachinery::kCborSelfDescribed);
  apimachinery::append_cbor_head(out, 5, entries.size());
  for (const auto* kv : entries) {
    const std::string_view key = kv->key();
    apimachinery::append_cbor_head(out, 2, key.size());
    out += key;
    if (key == "items") {
      apimachinery::append_cbor_head(out, 4, held.size());
      for (const auto& m : held) out += *m;
    } else if (!apimachinery::append_cbor(out, kv->value())) {
      return false;
    }
  }
  response.body = std::move(out);
  response.items.clear();
  response.tail.clear();
  return true;
}

}  // namespace

std::shared_ptr<const std::string> cbor_message(const watch::ObjectPtr& object,
                                                std::string_view api_version,
                                                std::string_view kind) {
  auto done = object->cbor.load(std::memory_order_acquire);
  if (!done) {
    std::optional<std::string> bytes;
    if (auto parsed = parse_object(object->json)) bytes = object_cbor(*parsed, api_version, kind);
    done = bytes ? std::make_shared<const std::string>(std::move(*bytes)) : no_cbor();
    // Readers on several threads may race to make it: each gets a correct one, one is kept.
    object->cbor.store(done, std::memory_order_release);
  }
  return done == no_cbor() ? nullptr : done;
}

std::string cbor_watch_event_head(std::string_view type) {
  std::string out(apimachinery::kCborSelfDescribed);
  apimachinery::append_cbor_head(out, 5, 2);
  // "type" (4 bytes) sorts before "object" (6).
  apimachinery::append_cbor_head(out, 2, 4);
  out += "type";
  apimachinery::append_cbor_head(out, 2, type.size());
  out += type;
  apimachinery::append_cbor_head(out, 2, 6);
  out += "object";
  out += apimachinery::kCborSelfDescribed;
  return out;
}

bool as_cbor_watch_events(std::string& body, const kinds::ResourceInfo& info) {
  std::string out;
  const std::string api_version = info.api_version();
  const bool read = for_each_watch_event(body, [&](std::string_view type, const json::object& o) {
    auto cbor = object_cbor(o, api_version, info.kind);
    if (!cbor) return false;
    out += cbor_watch_event_head(type);
    out += *cbor;
    return true;
  });
  if (!read) return false;
  body = std::move(out);
  return true;
}

bool as_cbor(ApiResponse& response) {
  if (response.streaming || response.body_source ||
      response.content_type.rfind("application/json", 0) != 0) {
    return false;
  }
  if (!response.items.empty()) {
    if (!cached_list_as_cbor(response)) return false;
  } else {
    json::parse_options options;
    options.max_depth = apimachinery::kMaxJsonDepth + 2;
    boost::system::error_code ec;
    auto parsed = json::parse(response.body + response.tail, ec, {}, options);
    if (ec) return false;
    auto bytes = document_cbor(parsed);
    if (!bytes) return false;
    response.body = std::move(*bytes);
    response.tail.clear();
  }
  response.content_type = std::string(apimachinery::kCborMediaType);
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
