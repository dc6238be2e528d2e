// The client's transport: HTTP/1.1 over TCP or TLS to one API server, on Asio coroutines.
// Requests carry the kubeconfig's credentials (client certificate, bearer token); the server is
// verified against the kubeconfig's CA (or the system's), unless insecure-skip-tls-verify says
// not to. Idle connections are kept for the next request (keep-alive) up to a small limit; every
// request has a deadline. A response that is not 2xx comes back as an `ApiError` read from its
// `Status` body (code, reason, message, Retry-After), as client-go's StatusError. A watch keeps
// its connection for itself and yields events as they arrive.
//
// Thread-safety: request() and get() may be called from any coroutine on the client's
// io_context, concurrently (the idle connections are shared under a lock; a connection is used
// by one request at a time); watch() likewise, each watch on its own connection. The executor
// given to create() is where new connections live: an io_context's executor (or a strand of it).
#pragma once

#include "client/kubeconfig.hpp"
#include "client/watch_stream.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/system/result.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace kwatch::client {

// Why a request failed. `transport` and `timeout` never reached an answer; `status` is the
// server's answer (a Status when it sent one); `decode` is an answer that could not be read.
struct ApiError {
  enum class Kind { transport, timeout, status, decode };
  Kind kind = Kind::transport;
  unsigned http_status = 0;  // for `status`
  std::string reason;        // Status.reason ("NotFound", "Expired", ...)
  std::string message;
  int retry_after_seconds = 0;  // Retry-After, when the server sent one

  bool is(unsigned code) const { return kind == Kind::status && http_status == code; }
  std::string describe() const;
};

template <class T>
using ApiResult = boost::system::result<T, ApiError>;

struct HttpResponse {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

class WatchConnection;
class ForwardedResponse;
class ForwardedSocket;

// A request a proxy passes on (HttpClient::forward): method, target, headers and body as given.
struct ForwardedRequest {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// How a watch's events travel: a chunked HTTP body (one JSON event per line), or WebSocket
// messages (one event each), as kube-apiserver serves both.
enum class WatchTransport { chunked, websocket };

class HttpClient {
 public:
  struct Options {
    std::chrono::milliseconds request_timeout{30'000};
    std::size_t max_idle_connections = 4;
    std::string user_agent = "kwatch-client";
    // The largest answer read (after decompression); a larger one fails the request.
    std::size_t max_response_bytes = 256u << 20;
  };

  // Errors: a server URL or TLS material that cannot be used.
  static boost::system::result<std::shared_ptr<HttpClient>, std::string> create(
      boost::asio::any_io_executor executor, ClientConfig config, Options options);
  static boost::system::result<std::shared_ptr<HttpClient>, std::string> create(
      boost::asio::any_io_executor executor, ClientConfig config) {
    return create(std::move(executor), std::move(config), Options{});
  }
  ~HttpClient();

  // Any request; non-2xx answers are errors.
  boost::asio::awaitable<ApiResult<HttpResponse>> request(std::string method, std::string target,
                                                           std::string body = "",
                                                           std::string content_type = "application/json");
  // GET and parse: the JSON object of a 2xx answer, allocated from `sp` (the heap unless given).
  boost::asio::awaitable<ApiResult<boost::json::object>> get(std::string target,
                                                             boost::json::storage_ptr sp = {});
  // Starts a watch (`target` carries watch=1 and its parameters); the answer's head is read
  // here (the WebSocket handshake, over WebSocket), so a refused watch (410, 403, 429...) is an
  // error at once.
  boost::asio::awaitable<ApiResult<std::unique_ptr<WatchConnection>>> watch(
      std::string target, WatchTransport transport = WatchTransport::chunked);

  // Passes a request on as a proxy does, on a connection of its own: the request's own headers
  // (the client adds only Host, and its certificate to the TLS handshake), the answer's head
  // whatever its status, then its body piece by piece as it arrives (ForwardedResponse::next),
  // so that a watch streams through. The deadline covers the connection and the head.
  boost::asio::awaitable<ApiResult<std::unique_ptr<ForwardedResponse>>> forward(
      ForwardedRequest request);
  // The same for a WebSocket upgrade (a GET): the handshake with the request's headers
  // (Sec-WebSocket-Protocol among them), its answer (101, or a refusal with its body), then the
  // server's messages whole as they arrive. The deadline covers the connection and handshake.
  boost::asio::awaitable<ApiResult<std::unique_ptr<ForwardedSocket>>> forward_websocket(
      ForwardedRequest request);

  const ClientConfig& config() const { return config_; }
  // Connections opened so far (for tests of keep-alive).
  std::size_t connections_opened() const;

 private:
  struct Impl;
  HttpClient() = default;
  ClientConfig config_;
  std::shared_ptr<Impl> impl_;
  friend class WatchConnection;
};

// One watch stream. `next` yields the events that have arrived (waiting for at least one);
// when the server ends the stream cleanly it returns an empty batch and `ended()` is true;
// a broken or malformed stream is an error. The events' objects are allocated from `sp` (the
// heap unless given: a caller that is done with a batch before the next can hand a scratch
// arena here and reset it between batches). Not for use after the client is gone.
class WatchConnection {
 public:
  ~WatchConnection();
  boost::asio::awaitable<ApiResult<std::vector<WatchEvent>>> next(boost::json::storage_ptr sp = {});
  bool ended() const { return ended_; }
  // Closes the connection; a pending next() completes with an error.
  void close();

 private:
  friend class HttpClient;
  struct Stream;
  WatchConnection() = default;
  std::unique_ptr<Stream> stream_;
  ChunkedDecoder chunks_;
  EventDecoder events_;
  std::string body_;
  bool ended_ = false;
};

// A WebSocket passed on (HttpClient::forward_websocket): the handshake's answer, then the
// server's messages. Not for use after the client is gone.
class ForwardedSocket {
 public:
  struct Message {
    bool binary = false;
    std::string data;
  };
  ~ForwardedSocket();
  unsigned status = 0;  // 101: upgraded; otherwise the refusal's status, with `body`
  std::vector<std::pair<std::string, std::string>> headers;  // the answer's head
  std::string body;
  // The next whole message; nullopt once the server has closed the socket.
  boost::asio::awaitable<ApiResult<std::optional<Message>>> next();
  // Sends one message to the server. At most one send at a time; it may run while a next()
  // waits, both from the same strand (a WebSocket allows one read and one write at once).
  boost::asio::awaitable<ApiResult<bool>> send(Message message);
  // Closes the connection; a pending next() completes with an error.
  void close();

 private:
  friend class HttpClient;
  struct Stream;
  ForwardedSocket() = default;
  std::unique_ptr<Stream> stream_;
};

// The answer to a forwarded request: its head, then its body (chunked framing removed) piece by
// piece. Not for use after the client is gone.
class ForwardedResponse {
 public:
  ~ForwardedResponse();
  unsigned status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, framing ones included
  // The next piece of the body as it arrives; nullopt once the body is complete. A connection
  // lost before that is an error.
  boost::asio::awaitable<ApiResult<std::optional<std::string>>> next();
  // Closes the connection; a pending next() completes with an error.
  void close();

 private:
  friend class HttpClient;
  struct Stream;
  ForwardedResponse() = default;
  std::unique_ptr<Stream> stream_;
};

}  // namespace kwatch::client
