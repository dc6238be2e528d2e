// The inside of HttpServer: one connection's life (requests, responses, then perhaps a watch
// streamed as chunks or WebSocket messages), written once for every kind of stream. Internal to
// server/: http_server.cpp instantiates it for plain TCP and TLS, and the transport's unit tests
// for Beast's test stream, whose injected failures reach every read and write.
#pragma once

#include "base/gzip.hpp"
#include "apimachinery/cbor.hpp"
#include "base/task_failure.hpp"
#include "server/gathered_body.hpp"
#include "server/http_server.hpp"
#include "server/queueing_stream.hpp"
#include "server/response_gzip.hpp"
#include "server/tls_stream.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using base::log_task_failure;
inline constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// What a connection needs of its stream beyond reads and writes. Specialised for
// beast::tcp_stream and TlsStream (http_server.cpp) and, in the tests, for Beast's test stream:
//   expires_after(s, d), expires_never(s): the deadline of the next reads and writes;
//   cancel(s): ends a pending read; close(s): closes the connection now;
//   shutdown_send(s): ends the sending side (TLS: close_notify first);
//   remote_address(s); client_certificate(s): what the TLS handshake learned (or null);
//   hand_over(s, executor): the same connection adopted by `executor` (nullopt: it cannot be);
//   send_now(s, buffers): bytes sent at once without waiting (0: none; the caller writes them);
//   raw(s): what a read that only notices the client hanging up is pending on.
template <class Stream>
struct StreamOps;

template <>
struct StreamOps<beast::tcp_stream> {
  static void expires_after(beast::tcp_stream& s, std::chrono::steady_clock::duration d) {
    s.expires_after(d);
  }
  static void expires_never(beast::tcp_stream& s) { s.expires_never(); }
  static void cancel(beast::tcp_stream& s);
  static void close(beast::tcp_stream& s);
  static void shutdown_send(beast::tcp_stream& s);
  static std::string remote_address(beast::tcp_stream& s);
  static std::shared_ptr<const auth::ClientCertificate> client_certificate(beast::tcp_stream&) {
    return nullptr;
  }
  static std::optional<beast::tcp_stream> hand_over(beast::tcp_stream& s,
                                                    const asio::any_io_executor& executor);
  static std::size_t send_now(beast::tcp_stream& s, const std::vector<asio::const_buffer>& b);
  static tcp::socket& raw(beast::tcp_stream& s) { return s.socket(); }
};

template <>
struct StreamOps<TlsStream> {
  using Tcp = StreamOps<beast::tcp_stream>;
  static void expires_after(TlsStream& s, std::chrono::steady_clock::duration d) {
    s.next_layer().expires_after(d);
  }
  static void expires_never(TlsStream& s) { s.next_layer().expires_never(); }
  static void cancel(TlsStream& s) { Tcp::cancel(s.next_layer()); }
  static void close(TlsStream& s) { Tcp::close(s.next_layer()); }
  static void shutdown_send(TlsStream& s);
  static std::string remote_address(TlsStream& s) { return Tcp::remote_address(s.next_layer()); }
  static std::shared_ptr<const auth::ClientCertificate> client_certificate(TlsStream& s);
  static std::optional<TlsStream> hand_over(TlsStream& s, const asio::any_io_executor& executor);
  // Under TLS nothing is sent at once: the record layer needs its write.
  static std::size_t send_now(TlsStream&, const std::vector<asio::const_buffer>&) { return 0; }
  static tcp::socket& raw(TlsStream& s) { return s.next_layer().socket(); }
};

// `Warning: 299 - "<text>"` headers (RFC 7234 warn-code 299, agent "-"), as kube-apiserver sends
// them and client-go and kubectl print them. The text is made a printable-ASCII quoted string,
// whatever bytes a client's field names held, and bounded as kube bounds them: 4 KiB in all,
// past which every warning is cut to 256 characters (and what still does not fit left out).
void add_warnings(http::response<http::string_body>& res, const std::vector<std::string>& warnings);

// A Status the transport answers with itself (before a request reaches the handler).
http::response<http::string_body> simple_error(unsigned status, std::string_view reason,
                                               std::string_view message);

// The request the handler gets from a parsed head: method, target, media types, credentials
// (with the TLS peer's certificate) and the Impersonate-* headers. The body comes later.
ApiRequest request_of(const http::request<http::string_body>& req,
                      const std::shared_ptr<const auth::ClientCertificate>& peer);

// When the write of a chunked watch stream in flight started (nullopt: none is).
struct WriteClock {
  std::optional<std::chrono::steady_clock::time_point> since;
};

// One deadline per watch connection, checked coarsely, instead of a timer re-armed for every
// write: every quarter of `timeout` it closes the connection if a write has been in flight
// longer than `timeout` (a client that stopped reading). `since` tells when the write in flight
// started; the guard ends once `alive` is gone. Strand: the stream's; `stream` and what `since`
// reads stay valid while `alive` does.
template <class Stream>
asio::awaitable<void> guard_writes(
    Stream& stream, std::weak_ptr<const void> alive,
    std::function<std::optional<std::chrono::steady_clock::time_point>()> since,
    std::chrono::steady_clock::duration timeout) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  for (;;) {
    tick.expires_after(timeout / 4);
    co_await tick.async_wait(use_tuple);
    auto hold = alive.lock();
    if (!hold) co_return;
    const auto started = since();
    if (started && std::chrono::steady_clock::now() - *started > timeout) {
      StreamOps<Stream>::close(stream);
      co_return;
    }
  }
}

// How a watch's frames are written: converted first when it asked for another rendering
// (kubectl's Table), then in kube's protobuf or CBOR form, or as JSON. What a streaming transport keeps
// of the response for the watch's life (not the whole ApiResponse).
struct WatchRendering {
  WatchRendering() = default;
  explicit WatchRendering(const ApiResponse& response)
      : convert(response.convert),
        convert_bookmarks(response.convert_bookmarks),
        protobuf_watch(response.protobuf_watch),
        cbor_watch(response.cbor_watch) {}
  decltype(ApiResponse::convert) convert;
  bool convert_bookmarks = false;
  decltype(ApiResponse::protobuf_watch) protobuf_watch;
  decltype(ApiResponse::cbor_watch) cbor_watch;
};

// Watches that asked for another rendering (kubectl's Table) get each object converted; the
// shared cached objects stay as they are for every other watcher.
void convert_frames(const WatchRendering& rendering, std::vector<watch::WatchFrame>& frames);

// The buffers of a batch of frames: type prefix, the shared object JSON, suffix. No copies.
void append_frames(std::vector<asio::const_buffer>& out,
                   const std::vector<watch::WatchFrame>& frames);
// What a protobuf or CBOR watch (ApiResponse::protobuf_watch, cbor_watch) keeps: its kind's
// apiVersion and kind, and the heads and messages of the batch being written.
struct EncodedBatch {
  bool cbor = false;
  std::string api_version;
  std::string_view kind;  // the ResourceInfo's, which the response holds
  std::string heads;
  std::vector<std::size_t> ends;  // of each frame's head in `heads`
  std::vector<std::shared_ptr<const std::string>> held;
};
// The frames in kube's protobuf watch form: per frame its head (made into `batch.heads`), the
// object's shared message, then the suffix. false when an object has no protobuf form: the
// watch then ends, and the client watches again.
bool append_protobuf_frames(std::vector<asio::const_buffer>& out, EncodedBatch& batch,
                            const std::vector<watch::WatchFrame>& frames);
// The frames as kube's CBOR watch events (`application/cbor-seq`): per frame its head (made
// into `batch.heads`), then the object's shared CBOR. false when an object has none.
bool append_cbor_frames(std::vector<asio::const_buffer>& out, EncodedBatch& batch,
                        const std::vector<watch::WatchFrame>& frames);
// What a watch keeps between batches when it streams protobuf or CBOR (null: a JSON watch).
std::unique_ptr<EncodedBatch> encoded_batch_for(const WatchRendering& rendering);
// One batch of a watch's frames in its form, converted first when it asked for another
// rendering (convert_frames), appended to `out`; false when an object has no protobuf or CBOR
// form (logged: the watch then ends). `pb`: encoded_batch_for's.
bool append_watch_batch(std::vector<asio::const_buffer>& out, const WatchRendering& rendering,
                        EncodedBatch* pb, std::vector<watch::WatchFrame>& frames);

inline constexpr std::size_t kReadChunk = 4096;

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& ioc, std::shared_ptr<ApiHandler> h, HttpLimits l,
       asio::io_context* delivery)
      : ioc(ioc),
        delivery(delivery),
        acceptor(asio::make_strand(ioc)),
        handler(std::move(h)),
        limits(l) {}

  // A connection between requests, for `drain`. Touched only on the connection's strand, except
  // that `drain` posts there.
  struct Waiting {
    asio::any_io_executor strand;
    std::function<void()> close;          // cancels the connection's pending read
    const beast::flat_buffer* buffer = nullptr;  // bytes of the next request read so far
    const http::request_parser<http::string_body>* parser = nullptr;  // while between_requests
    bool between_requests = false;
    // An HTTP/2 connection: what `drain` does instead (GOAWAY; its streams finish).
    std::function<void()> on_drain;
  };
  // drain: read what the client still sends (bounded) before closing, so it sees the answer;
  // close_unread: the same for a refused request whose body was never read, bounded more tightly
  // (the client has not authenticated).
  // move: the answer is to be written from the other threads (ApiResponse::low_cpu_priority);
  // the connection moves there first.
  enum class Next { read, close, drain, close_unread, stream_chunked, stream_websocket, move };
  struct Exchange {
    explicit Exchange(Next n) : next(n) {}
    Next next = Next::close;
    unsigned version = 11;
    bool head_only = false;  // HEAD: the head, no body
    ApiResponse response;
    // An answer written after a move: how, and what the log line names. Apart, since a watch
    // keeps its Exchange for its whole stream.
    struct Moved {
      bool keep_alive = false, gzip_ok = false, body_unread = false;
      std::string method, target;
      std::chrono::steady_clock::time_point start;
    };
    std::unique_ptr<Moved> moved;
    http::request<http::string_body> upgrade;  // the WebSocket upgrade request
    // The delivery strand the watch's session lives on (empty: it streams where it is).
    asio::any_io_executor watch_strand;
    std::shared_ptr<void> connection_slot;  // the connection's place under the caps
  };

  asio::awaitable<void> accept_loop();
  // HTTP/2 (ALPN h2) on a TLS connection: server/http2_connection.cpp.
  asio::awaitable<void> serve_http2(TlsStream stream, std::shared_ptr<void> slot);
  // TLS: the handshake (within the read timeout), then the same HTTP as on plain connections.
  asio::awaitable<void> serve_tls(tcp::socket socket, std::shared_ptr<void> slot,
                                  std::shared_ptr<asio::ssl::context> tls);
  // `slot` (take_slot) is held as long as the connection is open, its watch stream included.
  // `low`: it runs on the low-priority threads; `buffer` holds what was read of the next
  // request and `moved` an answer still to write, when it moved there or back.
  template <class Stream>
  asio::awaitable<void> serve_connection(Stream stream, std::shared_ptr<void> slot,
                                         bool low = false, beast::flat_buffer buffer = {},
                                         std::optional<Exchange> moved = std::nullopt);
  // A place for a connection from `address` under the caps; null when it would pass one.
  std::shared_ptr<void> take_slot(const std::string& address);
  template <class Stream>
  asio::awaitable<Exchange> serve_request(Stream& stream, beast::flat_buffer& buffer,
                                          const std::shared_ptr<const auth::ClientCertificate>& peer,
                                          Waiting& waiting, bool low);
  // Writes an answer that is no watch and logs it: what the connection does next.
  template <class Stream>
  asio::awaitable<Next> answer(Stream& stream, ApiResponse& response, unsigned version,
                               bool keep_alive, bool head_only, bool gzip_ok, bool body_unread,
                               std::string_view method, std::string_view target,
                               std::chrono::steady_clock::time_point start);
  // A request Beast could not parse: 413 past the size limits, else 400; then drain.
  template <class Stream>
  asio::awaitable<Exchange> refuse_malformed(Stream& stream, boost::system::error_code ec);
  template <class Stream>
  asio::awaitable<void> drain_and_close(Stream& stream, bool unauthenticated = false);
  // gzip of what `feed` gives a Deflater, on the compute executor when there is one (a large list
  // takes a while): the connection's coroutine waits, its I/O thread does not.
  asio::awaitable<std::string> gzip_off_thread(std::function<void(base::Deflater&)> feed,
                                              std::size_t expected) {
    auto deflate = [feed = std::move(feed), expected] {
      base::Deflater deflater(expected);
      feed(deflater);
      return deflater.finish();
    };
    if (!compute) co_return deflate();
    co_return co_await asio::co_spawn(
        compute, [deflate]() -> asio::awaitable<std::string> { co_return deflate(); },
        asio::use_awaitable);
  }

  // The head and body of an answer that is no watch and no gathered list: status, server,
  // type, caching, its headers and warnings (HEAD: no body).
  static http::response<http::string_body> answer_head(ApiResponse& response, unsigned version,
                                                       bool head_only);
  // The body compressed when the client takes gzip and it is large enough (a proxied answer
  // that came encoded is passed as it came).
  asio::awaitable<void> gzip_body(http::response<http::string_body>& res, bool gzip_ok);
  // A list gathered from the cache's items (ApiResponse::items, read with GatheredBody): its
  // bytes fed to a Deflater piece by piece (the list is never assembled).
  static void deflate_gathered(const ApiResponse& response, base::Deflater& deflater);
  // A response that is not a watch: whole, or gathered from a list's cached items.
  template <class Stream>
  asio::awaitable<boost::system::error_code> write_response(Stream& stream,
                                                            ApiResponse& response,
                                                            unsigned version, bool keep_alive,
                                                            bool head_only, bool gzip_ok);
  template <class Stream>
  asio::awaitable<boost::system::error_code> write_gathered(Stream& stream,
                                                            const ApiResponse& response,
                                                            unsigned version, bool keep_alive,
                                                            bool head_only, bool gzip_ok);
  template <class Stream>
  asio::awaitable<void> stream_chunked(Stream& stream, ApiResponse response, unsigned version,
                                       bool head_only);
  template <class Stream>
  asio::awaitable<void> stream_source(Stream& stream, ApiResponse& response);
  template <class WebSocket>
  asio::awaitable<void> relay_messages(std::shared_ptr<WebSocket> ws,
                                       ApiResponse::BodySource& source);
  template <class Stream>
  asio::awaitable<void> stream_websocket(Stream stream, http::request<http::string_body> request,
                                         ApiResponse response);
  // Streams a watch from its delivery strand: the connection moves there (see hand_over).
  template <class Stream>
  asio::awaitable<void> stream_watch(Stream stream, Exchange exchange);

  // Registers the connection until the returned handle goes.
  std::shared_ptr<void> track(const std::shared_ptr<Waiting>& waiting);

  asio::io_context& ioc;
  std::atomic<bool> draining{false};
  std::atomic<std::size_t> streams{0};  // watch streams
  boost::asio::any_io_executor compute;  // set_compute
  asio::io_context* low_priority = nullptr;  // set_low_priority
  std::mutex slots_mutex;  // the connection caps' counts
  std::size_t open_slots = 0;
  std::map<std::string, std::size_t, std::less<>> slots_by_address;
  std::atomic<std::uint64_t> refused_connections{0};
  mutable std::mutex connections_mutex;
  std::map<std::uint64_t, std::weak_ptr<Waiting>> connections;
  std::uint64_t next_connection = 0;
  // Where watches stream from; null: the I/O threads themselves.
  asio::io_context* delivery;
  tcp::acceptor acceptor;
  // The TLS context new connections take (null: plain HTTP); replaced by reload_tls.
  std::shared_ptr<asio::ssl::context> tls;
  mutable std::mutex tls_mutex;
  std::shared_ptr<asio::ssl::context> current_tls() const {
    std::lock_guard lock(tls_mutex);
    return tls;
  }
  std::shared_ptr<ApiHandler> handler;
  HttpLimits limits;
};

// The largest WebSocket message a client may send through a relay (Beast's own default).
inline constexpr std::size_t kMaxRelayedClientMessageBytes = 16u << 20;

template <class Stream>
asio::awaitable<HttpServer::Impl::Exchange> HttpServer::Impl::refuse_malformed(
    Stream& stream, boost::system::error_code ec) {
  const bool too_big = ec == http::error::body_limit || ec == http::error::header_limit;
  auto res = too_big ? simple_error(413, "RequestEntityTooLarge", "request entity too large")
                     : simple_error(400, "BadRequest", "malformed HTTP request");
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  co_await http::async_write(stream, res, use_tuple);
  co_return Exchange{Next::drain};
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::drain_and_close(Stream& stream, bool unauthenticated) {
  // Lets the client finish sending and read the answer: closing with unread input would reset
  // the connection before it sees the Status. Bounded in bytes and time (for a client that has
  // not authenticated, to what a small request body takes).
  StreamOps<Stream>::shutdown_send(stream);
  std::vector<char> sink(16384);
  std::size_t drained = 0;
  const std::size_t most = unauthenticated ? 64 * 1024 : 4 * limits.max_body_bytes;
  StreamOps<Stream>::expires_after(stream, unauthenticated ? std::chrono::seconds(1)
                                                                : std::chrono::seconds(5));
  while (drained < most) {
    auto [rec, got] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (rec) break;
    drained += got;
  }
}

template <class Stream>
asio::awaitable<HttpServer::Impl::Exchange> HttpServer::Impl::serve_request(
    Stream& stream, beast::flat_buffer& buffer,
    const std::shared_ptr<const auth::ClientCertificate>& peer, Waiting& waiting, bool low) {
  // Everything parsed for one request lives in this frame and is gone before a watch streams.
  if (draining && buffer.size() == 0) co_return Exchange{Next::close};
  http::request_parser<http::string_body> parser;
  parser.body_limit(limits.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  StreamOps<Stream>::expires_after(stream, limits.read_timeout);
  waiting.parser = &parser;
  waiting.between_requests = true;
  // Room for a typical write's head and body in one read (Beast reads at least 512 bytes, the
  // buffer's spare capacity when larger), as Go's server reads through a 4 KiB buffer.
  if (buffer.capacity() < kReadChunk) buffer.reserve(kReadChunk);
  // The head first: the body is read only for a client that authenticated (ApiHandler::
  // admit_head), so a request not yet authenticated costs at most its head's bytes.
  auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
  waiting.between_requests = false;
  auto read_failed = [&](const boost::system::error_code& e) {
    return e == http::error::end_of_stream || e == beast::error::timeout ||
           e == asio::error::connection_reset || e == asio::error::operation_aborted;
  };
  if (read_failed(ec)) co_return Exchange{Next::close};
  if (ec) co_return co_await refuse_malformed(stream, ec);
  const auto start = std::chrono::steady_clock::now();
  auto& req = parser.get();
  ApiRequest request = request_of(req, peer);
  bool body_unread = false;
  // A body that came whole with its head (most writes: one segment) is parsed from the buffer
  // at once: withholding it would save nothing, and a second read costs an executor hop.
  if (!parser.is_done() && parser.content_length() &&
      *parser.content_length() <= buffer.size()) {
    beast::error_code pec;
    while (!pec && !parser.is_done()) {
      const std::size_t used = parser.put(buffer.data(), pec);
      buffer.consume(used);
      if (used == 0) break;
    }
    if (pec || !parser.is_done()) co_return co_await refuse_malformed(stream, pec);
  }
  if (!parser.is_done()) {
    if (co_await handler->admit_head(request)) {
      auto [bec, bn] = co_await http::async_read(stream, buffer, parser, use_tuple);
      if (read_failed(bec)) co_return Exchange{Next::close};
      if (bec) co_return co_await refuse_malformed(stream, bec);
    } else {
      body_unread = true;  // answered (401/403) without it; the connection then closes
      request.body_withheld = true;
    }
  }
  request.body = std::move(req.body());
  request.websocket = beast::websocket::is_upgrade(req);
  if (request.websocket) {
    request.websocket_protocol = std::string(req[http::field::sec_websocket_protocol]);
  }
  // A request that may start a watch gets its strand on the delivery threads now, so that its
  // stream is written from there (a strand costs an allocation: only for targets that mention
  // watching at all).
  if (delivery != nullptr && req.method() == http::verb::get &&
      req.target().find("watch") != beast::string_view::npos) {
    request.watch_executor = asio::make_strand(*delivery);
  }
  if (handler->auditing()) request.remote_address = StreamOps<Stream>::remote_address(stream);
  const bool keep_alive = req.keep_alive() && !draining && !body_unread;
  const unsigned version = req.version();
  const bool gzip_ok = accepts_gzip(req[http::field::accept_encoding]);

  // The handler owns the request (its body is not copied); method and target are read from the
  // parsed head, which stays.
  const bool head = req.method() == http::verb::head;
  const std::string_view method(req.method_string());
  const std::string_view target(req.target());
  const bool websocket = request.websocket;
  auto watch_executor = request.watch_executor;
  ApiResponse response = co_await handler->handle(std::move(request));

  if (response.streaming && head) {
    // The head a watch would start with, and no body: nothing is registered or streamed.
    response.watch.reset();
    response.body.clear();
    Exchange out{Next::stream_chunked};
    out.version = version;
    out.head_only = true;
    out.response = std::move(response);
    spdlog::info("{} {} {} watch (head only)", method, target, out.response.status);
    co_return out;
  }
  if (response.streaming) {
    spdlog::info("{} {} {} watch", method, target, response.status);
    Exchange out{websocket ? Next::stream_websocket : Next::stream_chunked};
    out.version = version;
    if (websocket) out.upgrade = parser.release();
    out.response = std::move(response);
    out.watch_strand = std::move(watch_executor);
    co_return out;
  }

  if (low_priority != nullptr && response.low_cpu_priority != low) {
    Exchange out{Next::move};
    out.version = version;
    out.head_only = head;
    out.moved = std::make_unique<Exchange::Moved>(
        Exchange::Moved{keep_alive, gzip_ok, body_unread, std::string(method),
                        std::string(target), start});
    out.response = std::move(response);
    co_return out;
  }
  const Next next = co_await answer(stream, response, version, keep_alive, head, gzip_ok,
                                    body_unread, method, target, start);
  co_return Exchange{next};
}

template <class Stream>
asio::awaitable<HttpServer::Impl::Next> HttpServer::Impl::answer(
    Stream& stream, ApiResponse& response, unsigned version, bool keep_alive, bool head_only,
    bool gzip_ok, bool body_unread, std::string_view method, std::string_view target,
    std::chrono::steady_clock::time_point start) {
  const boost::system::error_code wec =
      co_await write_response(stream, response, version, keep_alive, head_only, gzip_ok);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} {} {} {:.3f}ms", method, target, response.status, ms);
  if (body_unread && !wec) co_return Next::close_unread;
  co_return wec || !keep_alive ? Next::close : Next::read;
}

inline http::response<http::string_body> HttpServer::Impl::answer_head(ApiResponse& response,
                                                                       unsigned version,
                                                                       bool head_only) {
  http::response<http::string_body> res{static_cast<http::status>(response.status), version};
  res.set(http::field::server, "kwatch");
  res.set(http::field::content_type, response.content_type);
  res.set(http::field::cache_control, "no-cache, private");
  for (const auto& [name, value] : response.headers) res.set(name, value);
  add_warnings(res, response.warnings);
  if (!head_only) res.body() = std::move(response.body);
  return res;
}

inline asio::awaitable<void> HttpServer::Impl::gzip_body(http::response<http::string_body>& res,
                                                         bool gzip_ok) {
  if (!gzip_ok || res.body().size() < kGzipThreshold ||
      res.find(http::field::content_encoding) != res.end()) {
    co_return;
  }
  // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
  std::function<void(base::Deflater&)> feed = [&body = res.body()](base::Deflater& deflater) {
    deflater.add(body);
  };
  const std::size_t size = res.body().size();
  std::string compressed = co_await gzip_off_thread(std::move(feed), size);
  res.body() = std::move(compressed);
  res.set(http::field::content_encoding, "gzip");
  res.set(http::field::vary, "Accept-Encoding");
}

inline void HttpServer::Impl::deflate_gathered(const ApiResponse& response,
                                               base::Deflater& deflater) {
  GatheredBody body(response);
  while (!body.done()) deflater.add(body.next(std::string_view::npos));  // a whole piece each
}

template <class Stream>
asio::awaitable<boost::system::error_code> HttpServer::Impl::write_response(
    Stream& stream, ApiResponse& response, unsigned version, bool keep_alive, bool head_only,
    bool gzip_ok) {
  if (!response.items.empty() || !response.tail.empty()) {
    co_return co_await write_gathered(stream, response, version, keep_alive, head_only, gzip_ok);
  }
  http::response<http::string_body> res = answer_head(response, version, head_only);
  co_await gzip_body(res, gzip_ok);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  auto [ec, n] = co_await http::async_write(stream, res, use_tuple);
  co_return ec;
}

template <class Stream>
asio::awaitable<boost::system::error_code> HttpServer::Impl::write_gathered(
    Stream& stream, const ApiResponse& response, unsigned version, bool keep_alive,
    bool head_only, bool gzip_ok) {
  const std::size_t length = GatheredBody::length(response);
  http::response<http::empty_body> res{static_cast<http::status>(response.status), version};
  res.set(http::field::server, "kwatch");
  res.set(http::field::content_type, response.content_type);
  res.set(http::field::cache_control, "no-cache, private");
  for (const auto& [name, value] : response.headers) res.set(name, value);
  if (gzip_ok && !head_only && length >= kGzipThreshold) {
    // Compressed piece by piece (the list is never assembled), then sent with its length.
    // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
    std::function<void(base::Deflater&)> feed = [&response](base::Deflater& deflater) {
      deflate_gathered(response, deflater);
    };
    std::string compressed = co_await gzip_off_thread(std::move(feed), length);
    res.set(http::field::content_encoding, "gzip");
    res.set(http::field::vary, "Accept-Encoding");
    res.content_length(compressed.size());
    res.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> head{res};
    StreamOps<Stream>::expires_after(stream, limits.write_timeout);
    auto [hec, hn] = co_await http::async_write_header(stream, head, use_tuple);
    if (hec) co_return hec;
    StreamOps<Stream>::expires_after(stream, limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(compressed), use_tuple);
    co_return ec;
  }
  res.content_length(length);
  res.keep_alive(keep_alive);
  http::response_serializer<http::empty_body> sr{res};
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  auto [hec, hn] = co_await http::async_write_header(stream, sr, use_tuple);
  if (hec || head_only) co_return hec;
  // Copied through one bounded buffer (kWriteSlice): the response never needs a second copy of
  // the whole list.
  GatheredBody body(response);
  std::string slice;
  slice.reserve(kWriteSlice);
  while (!body.done()) {
    slice.clear();
    body.fill(slice, kWriteSlice);
    StreamOps<Stream>::expires_after(stream, limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(slice), use_tuple);
    if (ec) co_return ec;
  }
  co_return boost::system::error_code{};
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::serve_connection(Stream stream, std::shared_ptr<void> slot,
                                                         bool low, beast::flat_buffer buffer,
                                                         std::optional<Exchange> moved) {
  auto self = shared_from_this();
  const std::shared_ptr<const auth::ClientCertificate> peer = StreamOps<Stream>::client_certificate(stream);
  auto waiting = std::make_shared<Waiting>();
  waiting->strand = co_await asio::this_coro::executor;
  waiting->buffer = &buffer;
  waiting->close = [&stream] { StreamOps<Stream>::cancel(stream); };
  const std::shared_ptr<void> tracked = track(waiting);
  // Decided in the loop, acted on after it: GCC 12 mis-destroys locals of a coroutine that
  // co_returns from inside a loop that holds them.
  std::optional<Exchange> watch, move;
  for (;;) {
    Exchange exchange{Next::close};
    if (moved) {
      // The answer that brought the connection here; its seat goes once it is written.
      Exchange& m = *moved;
      const Exchange::Moved& how = *m.moved;
      exchange.next = co_await answer(stream, m.response, m.version, how.keep_alive, m.head_only,
                                      how.gzip_ok, how.body_unread, how.method, how.target,
                                      how.start);
      moved.reset();
    } else {
      exchange = co_await serve_request(stream, buffer, peer, *waiting, low);
    }
    if (exchange.next == Next::read) continue;
    if (exchange.next == Next::move) {
      move.emplace(std::move(exchange));
      break;
    }
    if (exchange.next == Next::drain || exchange.next == Next::close_unread) {
      co_await drain_and_close(stream, exchange.next == Next::close_unread);
      co_return;
    }
    if (exchange.next == Next::stream_chunked || exchange.next == Next::stream_websocket) {
      watch.emplace(std::move(exchange));
    }
    break;
  }
  if (move) {
    // The threads the answer is to be written from take the connection (its socket is adopted
    // by their reactor), with what was read after the request, and serve it from then on.
    const asio::any_io_executor strand = low ? asio::make_strand(ioc)
                                             : asio::make_strand(*low_priority);
    auto handed = StreamOps<Stream>::hand_over(stream, strand);
    if (!handed) co_return;
    asio::co_spawn(strand,
                   serve_connection(std::move(*handed), std::move(slot), !low, std::move(buffer),
                                    std::move(move)),
                   [](std::exception_ptr e) { log_task_failure(e, "connection"); });
    co_return;
  }
  if (!watch) {
    StreamOps<Stream>::shutdown_send(stream);
    co_return;
  }
  buffer = beast::flat_buffer();  // an idle watch keeps as little as possible
  watch->connection_slot = std::move(slot);
  if (watch->watch_strand) {
    // The connection leaves the I/O threads: its events are written from the delivery threads,
    // so requests never queue behind a fan-out.
    auto moved = StreamOps<Stream>::hand_over(stream, watch->watch_strand);
    if (!moved) co_return;
    const asio::any_io_executor strand = watch->watch_strand;
    asio::co_spawn(strand, stream_watch(std::move(*moved), std::move(*watch)),
                   [](std::exception_ptr e) { log_task_failure(e, "watch stream"); });
    co_return;
  }
  co_await stream_watch(std::move(stream), std::move(*watch));
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::stream_watch(Stream stream, Exchange exchange) {
  auto self = shared_from_this();
  ++streams;
  const std::shared_ptr<void> counted(nullptr, [self](void*) { --self->streams; });
  if (exchange.next == Next::stream_websocket) {
    co_await stream_websocket(std::move(stream), std::move(exchange.upgrade),
                              std::move(exchange.response));
  } else {
    co_await stream_chunked(stream, std::move(exchange.response), exchange.version,
                            exchange.head_only);
  }
}

// The pieces of another server's answer as chunks (an aggregated API's watch). A client that
// hangs up ends the upstream request at once, not when the upstream next sends something.
template <class Stream>
asio::awaitable<void> HttpServer::Impl::stream_source(Stream& stream, ApiResponse& response) {
  if (response.body_source->cancel) {
    auto executor = co_await asio::this_coro::executor;
    asio::co_spawn(
        executor,
        [&raw = StreamOps<Stream>::raw(stream),
         cancel = response.body_source->cancel]() -> asio::awaitable<void> {
          std::array<char, 64> discard;
          for (;;) {
            auto [ec, n] = co_await raw.async_read_some(asio::buffer(discard), use_tuple);
            if (ec) break;
          }
          cancel();
        },
        [](std::exception_ptr e) { log_task_failure(e, "proxied stream hang-up reader"); });
  }
  for (;;) {
    std::optional<std::string> piece = co_await response.body_source->next();
    if (!piece) break;
    if (piece->empty()) continue;
    StreamOps<Stream>::expires_after(stream, limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(
        stream, http::make_chunk(asio::const_buffer(piece->data(), piece->size())), use_tuple);
    if (ec) break;
  }
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
  StreamOps<Stream>::shutdown_send(stream);
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::stream_chunked(Stream& stream,
                                                       ApiResponse response, unsigned version,
                                                       bool head_only) {
  // A fixed head: nothing per watch is kept for it.
  static constexpr std::string_view kHead11 =
      "HTTP/1.1 200 OK\r\nServer: kwatch\r\nContent-Type: application/json\r\n"
      "Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  static constexpr std::string_view kHead10 =
      "HTTP/1.0 200 OK\r\nServer: kwatch\r\nContent-Type: application/json\r\n"
      "Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
  std::string_view fixed_head = version == 10 ? kHead10 : kHead11;
  std::string head;  // with the response's own headers (Audit-Id), when it has any
  if (response.body_source) {
    // Another server's answer: its status, type and headers.
    head = (version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(response.status) + " " +
           std::string(http::obsolete_reason(static_cast<http::status>(response.status))) +
           "\r\nServer: kwatch\r\n";
    if (!response.content_type.empty()) head += "Content-Type: " + response.content_type + "\r\n";
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    head += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    fixed_head = head;
  } else if (!response.headers.empty() || response.protobuf_watch || response.cbor_watch) {
    head = fixed_head.substr(0, fixed_head.size() - 2);
    if (response.protobuf_watch || response.cbor_watch) {
      static constexpr std::string_view kJson = "application/json";
      head.replace(head.find(kJson), kJson.size(),
                   response.cbor_watch ? apimachinery::kCborSequenceMediaType
                                       : "application/vnd.kubernetes.protobuf;stream=watch");
    }
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    head += "\r\n";
    fixed_head = head;
  }
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  auto [hec, hn] = co_await asio::async_write(stream, asio::buffer(fixed_head), use_tuple);
  if (hec || head_only) {
    StreamOps<Stream>::shutdown_send(stream);
    co_return;
  }
  // A client that hangs up is noticed at once, not at the next event: one read stays pending
  // on the raw socket (beside the stream's timeouts) and ends the watch when it completes.
  if (response.watch) {
    std::weak_ptr<watch::WatchSession> session = response.watch;
    auto executor = co_await asio::this_coro::executor;
    asio::co_spawn(
        executor,
        [&raw = StreamOps<Stream>::raw(stream), session]() -> asio::awaitable<void> {
          std::array<char, 64> discard;
          for (;;) {
            auto [ec, n] = co_await raw.async_read_some(asio::buffer(discard), use_tuple);
            if (ec) break;
          }
          if (auto s = session.lock()) s->stop();
        },
        [](std::exception_ptr e) { log_task_failure(e, "watch hang-up reader"); });
  }
  std::vector<asio::const_buffer> buffers;
  if (!response.body.empty()) {
    buffers.emplace_back(response.body.data(), response.body.size());
    StreamOps<Stream>::expires_after(stream, limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(buffers), use_tuple);
    if (ec) co_return;
  }
  // Another server's stream in a frame of its own: a watch's frame, kept for each of thousands
  // of watchers, does not carry its locals.
  if (response.body_source) {
    co_await stream_source(stream, response);
    co_return;
  }
  if (response.watch) {
    std::vector<watch::WatchFrame> frames;
    // A protobuf watch's batch (a JSON watch, most of them, keeps only the pointer).
    const WatchRendering rendering(response);
    const std::unique_ptr<EncodedBatch> pb = encoded_batch_for(rendering);
    char chunk_header[24];
    // From here a stalled client is cut off by the write guard, not by per-write deadlines.
    StreamOps<Stream>::expires_never(stream);
    auto clock = std::make_shared<WriteClock>();
    const auto guard_executor = co_await asio::this_coro::executor;
    // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
    std::weak_ptr<const void> alive = clock;
    std::function<std::optional<std::chrono::steady_clock::time_point>()> since =
        [c = clock.get()] { return c->since; };
    asio::co_spawn(guard_executor,
                   guard_writes(stream, std::move(alive),
                                std::move(since), limits.write_timeout),
                   [](std::exception_ptr e) { log_task_failure(e, "watch write guard"); });
    for (;;) {
      auto next = co_await response.watch->next(frames);
      if (!next) break;
      // One chunk per batch, framed by hand: "<size hex>\r\n" <frames> "\r\n".
      buffers.clear();
      buffers.emplace_back();  // the chunk header, filled in below
      if (!append_watch_batch(buffers, rendering, pb.get(), frames)) break;
      const std::size_t size = asio::buffer_size(buffers);
      const int len = std::snprintf(chunk_header, sizeof chunk_header, "%zx\r\n", size);
      buffers.front() = asio::const_buffer(chunk_header, static_cast<std::size_t>(len));
      buffers.emplace_back("\r\n", 2);
      // A client that stops reading is parked by the cacher once its queue fills, and cut off
      // by the write guard if this write stays in flight past the write timeout.
      const std::size_t sent = StreamOps<Stream>::send_now(stream, buffers);
      if (sent < size + static_cast<std::size_t>(len) + 2) {
        beast::buffers_suffix<std::vector<asio::const_buffer>> rest(buffers);
        rest.consume(sent);
        clock->since = std::chrono::steady_clock::now();
        auto [ec, n] = co_await asio::async_write(stream, rest, use_tuple);
        clock->since.reset();
        if (ec) co_return;
      }
    }
  }
  StreamOps<Stream>::expires_after(stream, limits.write_timeout);
  co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
  StreamOps<Stream>::shutdown_send(stream);
}

// Another server's WebSocket messages (an aggregated API's), each sent as it came, text or
// binary. Frames the client sends are read and dropped (reading answers pings and notices a
// close, which ends the other server's socket too).
template <class WebSocket>
asio::awaitable<void> HttpServer::Impl::relay_messages(std::shared_ptr<WebSocket> ws,
                                                       ApiResponse::BodySource& source) {
  auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(
      executor,
      [ws, cancel = source.cancel, send = source.send]() -> asio::awaitable<void> {
        // The client's messages: passed on where the source takes them, else read and dropped;
        // each as large as a relayed answer may be.
        ws->read_message_max(kMaxRelayedClientMessageBytes);
        beast::flat_buffer message;
        for (;;) {
          auto [ec, n] = co_await ws->async_read(message, use_tuple);
          if (ec) break;
          if (send) {
            std::string data = beast::buffers_to_string(message.data());
            const bool binary = ws->got_binary();
            const bool sent = co_await send(binary, std::move(data));
            if (!sent) break;
          }
          message.consume(message.size());
        }
        if (cancel) cancel();
      },
      [](std::exception_ptr e) { log_task_failure(e, "websocket reader"); });
  for (;;) {
    std::optional<std::string> piece = co_await source.next();
    if (!piece) break;
    ws->binary(source.binary);
    auto [ec, n] = co_await ws->async_write(asio::buffer(*piece), use_tuple);
    if (ec) co_return;
  }
  auto closing = beast::websocket::stream_base::timeout::suggested(beast::role_type::server);
  closing.handshake_timeout = std::chrono::seconds(5);
  ws->set_option(closing);
  co_await ws->async_close(beast::websocket::close_code::normal, use_tuple);
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::stream_websocket(Stream stream,
                                                         http::request<http::string_body> request,
                                                         ApiResponse response) {
  namespace websocket = beast::websocket;
  StreamOps<Stream>::expires_never(stream);
  // Beast speaks the protocol (handshake, pings, close); data frames are kwatch's own, queued
  // with Beast's writes in one stream of gather writes (server/queueing_stream.hpp).
  auto ws = std::make_shared<websocket::stream<QueueingStream<Stream>>>(std::move(stream));
  auto executor = co_await asio::this_coro::executor;
  QueueingStream<Stream>& out = ws->next_layer();
  out.keep_alive_while_writing(ws);
  {
    std::weak_ptr<const void> alive = ws;
    std::function<std::optional<std::chrono::steady_clock::time_point>()> since =
        [&out] { return out.writing_since(); };
    asio::co_spawn(executor,
                   guard_writes(ws->next_layer().next_layer(), std::move(alive),
                                std::move(since), limits.write_timeout),
                   [](std::exception_ptr e) { log_task_failure(e, "watch write guard"); });
  }
  // However it ends, the writer stops and the socket closes (a write to a client that stopped
  // reading would otherwise hold the stream forever).
  struct Closer {
    std::shared_ptr<websocket::stream<QueueingStream<Stream>>> ws;
    ~Closer() {
      ws->next_layer().stop();
      StreamOps<Stream>::close(ws->next_layer().next_layer());
    }
  } closer{ws};
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
  ws->set_option(
      websocket::stream_base::decorator([headers = response.headers](websocket::response_type& res) {
        res.set(http::field::server, "kwatch");
        for (const auto& [name, value] : headers) res.set(name, value);
      }));
  auto [aec] = co_await ws->async_accept(request, use_tuple);
  if (aec) co_return;
  ws->text(true);
  if (response.body_source) {
    co_await relay_messages(ws, *response.body_source);
    co_return;
  }
  // Client frames are read and ignored; reading also answers pings and notices a close.
  asio::co_spawn(
      executor,
      [ws, session = std::weak_ptr<watch::WatchSession>(response.watch)]() -> asio::awaitable<void> {
        beast::flat_buffer discard;
        for (;;) {
          auto [ec, n] = co_await ws->async_read(discard, use_tuple);
          if (ec) break;
          discard.consume(discard.size());
        }
        if (auto s = session.lock()) s->stop();
      },
      [](std::exception_ptr e) { log_task_failure(e, "websocket reader"); });
  if (!response.body.empty()) {
    auto [ec, n] = co_await ws->async_write(asio::buffer(response.body), use_tuple);
    if (ec) co_return;
  }
  if (response.watch) {
    const WatchRendering rendering(response);
    std::vector<watch::WatchFrame> frames;
    std::vector<std::array<unsigned char, 10>> headers;
    for (;;) {
      auto next = co_await response.watch->next(frames);
      if (!next) break;
      convert_frames(rendering, frames);
      // One text message per event, all of the batch in one write: header, then the shared
      // prefix, object and suffix (no copies; `frames` holds them until they are sent).
      headers.resize(frames.size());
      std::uint64_t ticket = 0;
      for (std::size_t i = 0; i < frames.size(); ++i) {
        const auto& f = frames[i];
        auto prefix = watch::frame_prefix(f.type);
        const std::size_t size = prefix.size() + f.object->json.size() + watch::kFrameSuffix.size();
        const std::size_t header_size = text_frame_header(size, headers[i]);
        out.queue(asio::buffer(headers[i].data(), header_size));
        out.queue(asio::buffer(prefix));
        out.queue(asio::buffer(f.object->json));
        ticket = out.queue(asio::buffer(watch::kFrameSuffix));
      }
      if (out.flush_now()) continue;  // the client keeps up: nothing to wait for
      auto [ec, n] = co_await out.async_wait_sent(ticket, 0, use_tuple);
      if (ec) co_return;
    }
  }
  response.watch.reset();  // unregisters now, not when the close handshake ends
  // The close handshake waits for the client's close frame, for a few seconds at most: a client
  // that never answers holds neither the connection nor a graceful shutdown for long.
  auto closing = websocket::stream_base::timeout::suggested(beast::role_type::server);
  closing.handshake_timeout = std::chrono::seconds(5);
  ws->set_option(closing);
  co_await ws->async_close(websocket::close_code::normal, use_tuple);
}

}  // namespace kwatch::server
