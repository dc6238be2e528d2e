// The server's view of one HTTP exchange, independent of Beast so that routing and verbs can be
// unit-tested without sockets. Value types.
#pragma once

#include "auth/credentials.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::apimachinery {
struct ApiError;
}

namespace kwatch::watch {
class WatchSession;
struct CachedObject;
}

namespace kwatch::kinds {
struct ResourceInfo;
}

namespace kwatch::server {

struct AdmittedUser;  // server/api_handler.hpp

struct ApiRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string content_type;
  std::string accept;
  std::string body;
  std::string user_agent;
  auth::Credentials credentials;
  auth::Impersonation impersonation;
  // The headers kwatch does not read itself (Accept-Encoding, Kubectl-Command, tracing, ...),
  // as sent: the aggregator's proxy passes them on, as kube's does every header but the
  // credentials its filters consumed and the connection's own.
  std::vector<std::pair<std::string, std::string>> other_headers;
  bool websocket = false;  // the client asked to upgrade to WebSocket
  std::string websocket_protocol;  // with it: its Sec-WebSocket-Protocol header, as sent
  std::string remote_address;  // the client's IP; filled only when the handler audits
  // Who the request acts as, decided from its head before its body was read
  // (ApiHandler::admit_head); null: the handler decides when it serves the request.
  std::shared_ptr<AdmittedUser> admitted;  // serve() moves the users out
  // admit_head refused it and its body was not read: it can only be answered with a refusal.
  bool body_withheld = false;
  // Where a watch this request starts will stream from (the delivery threads' strand for this
  // connection); empty: the calling coroutine's executor.
  boost::asio::any_io_executor watch_executor;
};

struct ApiResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  // A failure answered with its Status as the body: the error itself, for the audit record
  // (which takes its reason and message from here, never from the rendered body).
  std::shared_ptr<const apimachinery::ApiError> error;
  std::map<std::string, std::string> headers;  // extra headers, e.g. Retry-After
  // Sent as one `Warning: 299 - "<text>"` header each, as kube-apiserver warns clients.
  std::vector<std::string> warnings;
  // Annotations for the request's audit event (key, value), from the admission plugins.
  std::vector<std::pair<std::string, std::string>> audit_annotations;
  // A watch: `body` holds event lines to send first (possibly none), then the session's frames
  // follow until it ends. Sent as chunked JSON lines or, on an upgraded connection, one
  // WebSocket text message per event.
  bool streaming = false;
  // Written from the server's low-priority threads (its priority level is marked so): the
  // connection moves there, and stays until a request of another priority comes. (Beside
  // `streaming`: a watch holds its response for its whole stream, padding included.)
  bool low_cpu_priority = false;
  std::shared_ptr<watch::WatchSession> watch;
  // The revision a successful write produced (0: none): its fan-out is charged to the writer.
  std::int64_t written_revision = 0;
  // Held until the response (a watch: its whole stream) is done, e.g. a per-user watch slot.
  std::shared_ptr<void> lease;
  // A list served from the watch cache: `body`, then the items' cached JSON separated by commas,
  // then `tail`. The items are written from the cache's own buffers, never copied.
  std::vector<std::shared_ptr<const watch::CachedObject>> items;
  std::string tail;
  // A watch whose objects are rendered differently from the cache's JSON (a Table for kubectl):
  // called on the streaming strand for each ADDED/MODIFIED/DELETED object, and for each
  // BOOKMARK's when `convert_bookmarks`.
  std::function<std::shared_ptr<const watch::CachedObject>(
      const std::shared_ptr<const watch::CachedObject>&)>
      convert;
  bool convert_bookmarks = false;
  // A watch streamed in kube's protobuf form (length-prefixed WatchEvents) of this resource's
  // kind and version; null: JSON lines. Each object's message is made once and shared.
  std::shared_ptr<const kinds::ResourceInfo> protobuf_watch;
  // A watch streamed in kube's CBOR form (`application/cbor-seq`: one self-described item per
  // event) of this resource's objects; null: not CBOR. Each object's CBOR is made once and shared.
  std::shared_ptr<const kinds::ResourceInfo> cbor_watch;
  // Held until the response has been sent (a watch: until its stream ends), then released: the
  // audit log's ResponseComplete stage of a long-running request.
  std::shared_ptr<void> on_sent;
  // A streamed body of another server's (an aggregated API's answer, a watch included): after
  // `body`, each piece as it comes, sent as chunks; `status`, `content_type` and `headers` make
  // the head. With `streaming`. One pointer: a watch's response is held for its whole stream.
  struct BodySource {
    // The next piece; nullopt at the end.
    std::function<boost::asio::awaitable<std::optional<std::string>>()> next;
    // Ends the source early (its client hung up): called from another coroutine than the one
    // reading it, while a read may be pending (it closes a connection).
    std::function<void()> cancel;
    // Over an upgraded connection each piece is one WebSocket message: whether the one `next`
    // returned last is binary (set by `next`).
    bool binary = false;
    // Over an upgraded connection: where the client's own messages go (binary, data); false
    // once they cannot go on. Null: they are read and dropped (a watch's client has nothing
    // to say).
    std::function<boost::asio::awaitable<bool>(bool, std::string)> send;
  };
  std::shared_ptr<BodySource> body_source;
};

}  // namespace kwatch::server
