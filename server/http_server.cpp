#include "server/http_server.hpp"

#include "base/task_failure.hpp"
#include "server/queueing_stream.hpp"
#include "server/response_gzip.hpp"
#include "server/tls_stream.hpp"

#include "watch/cacher.hpp"

#include "base/gzip.hpp"

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
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace kwatch::server {

using base::log_task_failure;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

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
  };
  // drain: read what the client still sends (bounded) before closing, so it sees the answer;
  // close_unread: the same for a refused request whose body was never read, bounded more tightly
  // (the client has not authenticated).
  enum class Next { read, close, drain, close_unread, stream_chunked, stream_websocket };
  struct Exchange {
    explicit Exchange(Next n) : next(n) {}
    Next next = Next::close;
    unsigned version = 11;
    bool head_only = false;  // HEAD of a watch: the head, no body
    ApiResponse response;
    http::request<http::string_body> upgrade;  // the WebSocket upgrade request
    // The delivery strand the watch's session lives on (empty: it streams where it is).
    asio::any_io_executor watch_strand;
    std::shared_ptr<void> connection_slot;  // the connection's place under the caps
  };

  asio::awaitable<void> accept_loop();
  // TLS: the handshake (within the read timeout), then the same HTTP as on plain connections.
  asio::awaitable<void> serve_tls(tcp::socket socket, std::shared_ptr<void> slot);
  // `slot` (take_slot) is held as long as the connection is open, its watch stream included.
  template <class Stream>
  asio::awaitable<void> serve_connection(Stream stream, std::shared_ptr<void> slot);
  // A place for a connection from `address` under the caps; null when it would pass one.
  std::shared_ptr<void> take_slot(const std::string& address);
  template <class Stream>
  asio::awaitable<Exchange> serve_request(Stream& stream, beast::flat_buffer& buffer,
                                          const std::shared_ptr<const auth::ClientCertificate>& peer,
                                          Waiting& waiting);
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

  template <class Stream>
  asio::awaitable<boost::system::error_code> write_gathered(Stream& stream,
                                                            const ApiResponse& response,
                                                            unsigned version, bool keep_alive,
                                                            bool head_only, bool gzip_ok);
  template <class Stream>
  asio::awaitable<void> stream_chunked(Stream& stream, ApiResponse response, unsigned version,
                                       bool head_only);
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
  std::shared_ptr<asio::ssl::context> tls;  // null: plain HTTP
  std::shared_ptr<ApiHandler> handler;
  HttpLimits limits;
};

namespace {

std::shared_ptr<const auth::ClientCertificate> client_certificate_of(beast::tcp_stream&) { return nullptr; }

// The same connection, its socket adopted by `executor` (a strand of the delivery threads'
// io_context, whose reactor then waits on it). Nothing may be pending on `stream`.
std::optional<beast::tcp_stream> hand_over(beast::tcp_stream& stream,
                                           const asio::any_io_executor& executor) {
  boost::system::error_code ec;
  auto& old = stream.socket();
  const auto protocol = old.local_endpoint(ec).protocol();
  if (ec) return std::nullopt;
  const auto fd = old.release(ec);
  if (ec) return std::nullopt;
  tcp::socket socket(executor);
  socket.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return std::nullopt;
  }
  return beast::tcp_stream(std::move(socket));
}

std::optional<TlsStream> hand_over(TlsStream& stream, const asio::any_io_executor& executor) {
  auto next = hand_over(stream.next_layer(), executor);
  if (!next) return std::nullopt;
  return TlsStream(std::move(stream), std::move(*next));
}

// Ends the sending side: TLS first says close_notify (best effort, never waits).
void shutdown_send(beast::tcp_stream& stream) {
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

void shutdown_send(TlsStream& stream) {
  stream.send_close_notify();
  shutdown_send(stream.next_layer());
}

// What the TLS handshake learned about the client's certificate. The handshake accepts any
// certificate (kube-apiserver too: a bad one is a 401 the client can read, not a failed
// handshake); OpenSSL's verification result against the client CA decides here.
std::shared_ptr<const auth::ClientCertificate> client_certificate_of(TlsStream& stream) {
  SSL* ssl = stream.native_handle();
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return nullptr;
  auto out = std::make_shared<auth::ClientCertificate>();
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK) {
    out->error = std::string("x509: ") + X509_verify_cert_error_string(verified);
    return out;
  }
  const X509_NAME* subject = X509_get_subject_name(cert);
  auto entry_text = [](const X509_NAME_ENTRY* entry) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(entry);
    unsigned char* utf8 = nullptr;
    const int len = ASN1_STRING_to_UTF8(&utf8, data);
    std::string text = len > 0 ? std::string(reinterpret_cast<const char*>(utf8), len) : "";
    OPENSSL_free(utf8);
    return text;
  };
  // The last CN, as Go's parser keeps; every O, in order.
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
    out->user = entry_text(X509_NAME_get_entry(subject, i));
  }
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) >= 0;) {
    out->groups.push_back(entry_text(X509_NAME_get_entry(subject, i)));
  }
  return out;
}

// `Warning: 299 - "<text>"` headers (RFC 7234 warn-code 299, agent "-"), as kube-apiserver sends
// them and client-go and kubectl print them. The text is made a printable-ASCII quoted string,
// whatever bytes a client's field names held, and bounded like kube's (4 KiB in all).
void add_warnings(http::response<http::string_body>& res, const std::vector<std::string>& warnings) {
  constexpr std::size_t kMaxTotal = 4096;
  std::size_t total = 0;
  for (const auto& text : warnings) {
    std::string value = "299 - \"";
    for (unsigned char c : text) {
      if (c == '"' || c == '\\') {
        value += '\\';
        value += static_cast<char>(c);
      } else if (c >= 0x20 && c < 0x7f) {
        value += static_cast<char>(c);
      } else {
        value += '?';
      }
    }
    value += '"';
    total += value.size();
    if (total > kMaxTotal) break;
    res.insert(http::field::warning, value);
  }
}

// An Impersonate-Extra-<key> header's key as kube reads it: lowercased, then percent-decoded
// (keys such as `acme.com%2Fproject` hold characters header names cannot).
std::string extra_key(beast::string_view raw) {
  std::string lower;
  for (char c : raw) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string out;
  for (std::size_t i = 0; i < lower.size(); ++i) {
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    if (lower[i] == '%' && i + 2 < lower.size() && hex(lower[i + 1]) >= 0 &&
        hex(lower[i + 2]) >= 0) {
      out += static_cast<char>(hex(lower[i + 1]) * 16 + hex(lower[i + 2]));
      i += 2;
    } else {
      out += lower[i];
    }
  }
  return out;
}

http::response<http::string_body> simple_error(unsigned status, std::string_view reason,
                                               std::string_view message) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = std::string(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")") +
               std::string(message) + R"(","reason":")" + std::string(reason) + R"(","code":)" +
               std::to_string(status) + "}\n";
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

}  // namespace

// Whether an accept failed for want of a resource (file descriptors, memory) that only time,
// not a retry, brings back.
bool out_of_resources(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors ||  // EMFILE
         ec == boost::system::error_code(ENFILE, boost::system::system_category()) ||
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
}

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  auto self = shared_from_this();
  asio::steady_timer pause(acceptor.get_executor());
  std::chrono::milliseconds backoff{0};
  auto last_log = std::chrono::steady_clock::time_point{};
  std::uint64_t failures = 0;
  for (;;) {
    // Each connection gets a strand of its own: its reads, writes and timers never race.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // The pending connection stays queued, so retrying at once would spin: pause, longer
      // each time (up to a second), and log once per interval, not once per attempt.
      ++failures;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_log >= std::chrono::seconds(10)) {
        spdlog::warn("accept failed: {} ({} failures since the last report); pausing accepts",
                     ec.message(), failures);
        last_log = now;
        failures = 0;
      }
      backoff = out_of_resources(ec)
                    ? std::min(std::max(backoff * 2, std::chrono::milliseconds(10)),
                               std::chrono::milliseconds(1000))
                    : std::chrono::milliseconds(1);
      pause.expires_after(backoff);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    std::shared_ptr<void> slot;
    if (limits.max_connections > 0 || limits.max_connections_per_address > 0) {
      auto peer = socket.remote_endpoint(ec);
      slot = ec ? nullptr : take_slot(peer.address().to_string());
      if (!slot) {
        // Over a cap: closed before a byte is read or a handshake begins.
        if (refused_connections.fetch_add(1) % 1000 == 0) {
          spdlog::warn("a connection was refused: over --max-connections or "
                       "--max-connections-per-ip ({} refused so far)",
                       refused_connections.load());
        }
        socket.close(ec);
        continue;
      }
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    if (tls) {
      asio::co_spawn(executor, serve_tls(std::move(socket), std::move(slot)),
                     [](std::exception_ptr e) { log_task_failure(e, "connection"); });
    } else {
      asio::co_spawn(executor,
                     serve_connection(beast::tcp_stream(std::move(socket)), std::move(slot)),
                     [](std::exception_ptr e) { log_task_failure(e, "connection"); });
    }
  }
}

std::shared_ptr<void> HttpServer::Impl::take_slot(const std::string& address) {
  std::lock_guard lock(slots_mutex);
  auto& from_address = slots_by_address[address];
  if ((limits.max_connections > 0 && open_slots >= limits.max_connections) ||
      (limits.max_connections_per_address > 0 &&
       from_address >= limits.max_connections_per_address)) {
    if (from_address == 0) slots_by_address.erase(address);
    return nullptr;
  }
  ++open_slots;
  ++from_address;
  // Not null (its truth says the slot was granted); the deleter gives the place back.
  return std::shared_ptr<void>(static_cast<void*>(this), [self = shared_from_this(),
                                                          address](void*) {
    std::lock_guard lock(self->slots_mutex);
    --self->open_slots;
    auto it = self->slots_by_address.find(address);
    if (it != self->slots_by_address.end() && --it->second == 0) self->slots_by_address.erase(it);
  });
}

asio::awaitable<void> HttpServer::Impl::serve_tls(tcp::socket socket, std::shared_ptr<void> slot) {
  auto self = shared_from_this();
  beast::tcp_stream tcp_stream(std::move(socket));
  // A client that connects and says nothing, or garbage, or never finishes its handshake, is
  // dropped at the handshake deadline.
  tcp_stream.expires_after(std::min(limits.read_timeout, limits.handshake_timeout));
  // Plain HTTP where TLS was expected gets the answer Go's servers (and so kube-apiserver) give,
  // instead of a failed handshake the user cannot read.
  {
    char first = 0;
    auto [pec, n] = co_await tcp_stream.socket().async_receive(
        asio::buffer(&first, 1), tcp::socket::message_peek, use_tuple);
    if (pec || n == 0) co_return;
    if (first >= 'A' && first <= 'Z') {
      static constexpr std::string_view kAnswer =
          "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
      co_await asio::async_write(tcp_stream.socket(), asio::buffer(kAnswer), use_tuple);
      beast::error_code ignored;
      tcp_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
  }
  TlsStream stream(std::move(tcp_stream), tls->native_handle());
  const boost::system::error_code ec = co_await stream.handshake();
  if (ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
    co_return;
  }
  co_await serve_connection(std::move(stream), std::move(slot));
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::drain_and_close(Stream& stream, bool unauthenticated) {
  // Lets the client finish sending and read the answer: closing with unread input would reset
  // the connection before it sees the Status. Bounded in bytes and time (for a client that has
  // not authenticated, to what a small request body takes).
  shutdown_send(stream);
  std::vector<char> sink(16384);
  std::size_t drained = 0;
  const std::size_t most = unauthenticated ? 64 * 1024 : 4 * limits.max_body_bytes;
  beast::get_lowest_layer(stream).expires_after(unauthenticated ? std::chrono::seconds(1)
                                                                : std::chrono::seconds(5));
  while (drained < most) {
    auto [rec, got] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (rec) break;
    drained += got;
  }
}

constexpr std::size_t kReadChunk = 4096;

template <class Stream>
asio::awaitable<HttpServer::Impl::Exchange> HttpServer::Impl::serve_request(
    Stream& stream, beast::flat_buffer& buffer,
    const std::shared_ptr<const auth::ClientCertificate>& peer, Waiting& waiting) {
  // Everything parsed for one request lives in this frame and is gone before a watch streams.
  if (draining && buffer.size() == 0) co_return Exchange{Next::close};
  http::request_parser<http::string_body> parser;
  parser.body_limit(limits.max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  beast::get_lowest_layer(stream).expires_after(limits.read_timeout);
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
  auto refuse_malformed = [&](const boost::system::error_code& e) {
    const bool too_big = e == http::error::body_limit || e == http::error::header_limit;
    return too_big ? simple_error(413, "RequestEntityTooLarge", "request entity too large")
                   : simple_error(400, "BadRequest", "malformed HTTP request");
  };
  if (ec) {
    auto res = refuse_malformed(ec);
    beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
    co_await http::async_write(stream, res, use_tuple);
    co_return Exchange{Next::drain};
  }
  const auto start = std::chrono::steady_clock::now();
  auto& req = parser.get();
  ApiRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.content_type = std::string(req[http::field::content_type]);
  request.accept = std::string(req[http::field::accept]);
  request.user_agent = std::string(req[http::field::user_agent]);
  request.credentials.authorization = std::string(req[http::field::authorization]);
  request.credentials.client_certificate = peer;
  for (const auto& field : req) {
    const auto name = field.name_string();
    if (beast::iequals(name, "Impersonate-User")) {
      request.impersonation.user = std::string(field.value());
    } else if (beast::iequals(name, "Impersonate-Group")) {
      request.impersonation.groups.emplace_back(field.value());
    } else if (beast::iequals(name, "Impersonate-Uid")) {
      request.impersonation.uid = std::string(field.value());
    } else if (constexpr std::string_view kExtra = "Impersonate-Extra-";
               name.size() > kExtra.size() && beast::iequals(name.substr(0, kExtra.size()), kExtra)) {
      request.impersonation.extra.emplace_back(extra_key(name.substr(kExtra.size())),
                                             std::string(field.value()));
    }
  }
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
    if (pec || !parser.is_done()) {
      auto res = refuse_malformed(pec);
      beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
      co_await http::async_write(stream, res, use_tuple);
      co_return Exchange{Next::drain};
    }
  }
  if (!parser.is_done()) {
    if (co_await handler->admit_head(request)) {
      auto [bec, bn] = co_await http::async_read(stream, buffer, parser, use_tuple);
      if (read_failed(bec)) co_return Exchange{Next::close};
      if (bec) {
        auto res = refuse_malformed(bec);
        beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
        co_await http::async_write(stream, res, use_tuple);
        co_return Exchange{Next::drain};
      }
    } else {
      body_unread = true;  // answered (401/403) without it; the connection then closes
      request.body_withheld = true;
    }
  }
  request.body = std::move(req.body());
  request.websocket = beast::websocket::is_upgrade(req);
  // A request that may start a watch gets its strand on the delivery threads now, so that the
  // session's channel and deadline are created there (a strand costs an allocation: only for
  // targets that mention watching at all).
  if (delivery != nullptr && req.method() == http::verb::get &&
      req.target().find("watch") != beast::string_view::npos) {
    request.watch_executor = asio::make_strand(*delivery);
  }
  if (handler->auditing()) {
    beast::error_code pec;
    auto peer = beast::get_lowest_layer(stream).socket().remote_endpoint(pec);
    if (!pec) request.remote_address = peer.address().to_string();
  }
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

  boost::system::error_code wec;
  if (!response.items.empty() || !response.tail.empty()) {
    wec = co_await write_gathered(stream, response, version, keep_alive, head,
                                  gzip_ok);
  } else {
    http::response<http::string_body> res{static_cast<http::status>(response.status), version};
    res.set(http::field::server, "kwatch");
    res.set(http::field::content_type, response.content_type);
    res.set(http::field::cache_control, "no-cache, private");
    for (const auto& [name, value] : response.headers) res.set(name, value);
    add_warnings(res, response.warnings);
    if (!head) res.body() = std::move(response.body);
    if (gzip_ok && res.body().size() >= kGzipThreshold) {
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
    res.keep_alive(keep_alive);
    res.prepare_payload();
    beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
    auto [ec2, wn] = co_await http::async_write(stream, res, use_tuple);
    wec = ec2;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} {} {} {:.3f}ms", method, target, response.status, ms);
  if (body_unread && !wec) co_return Exchange{Next::close_unread};
  co_return Exchange{wec || !keep_alive ? Next::close : Next::read};
}

template <class Stream>
asio::awaitable<boost::system::error_code> HttpServer::Impl::write_gathered(
    Stream& stream, const ApiResponse& response, unsigned version, bool keep_alive,
    bool head_only, bool gzip_ok) {
  std::size_t length = response.body.size() + response.tail.size();
  for (const auto& item : response.items) length += item->json.size() + 1;
  if (!response.items.empty()) --length;  // n items, n - 1 commas
  http::response<http::empty_body> res{static_cast<http::status>(response.status), version};
  res.set(http::field::server, "kwatch");
  res.set(http::field::content_type, response.content_type);
  res.set(http::field::cache_control, "no-cache, private");
  for (const auto& [name, value] : response.headers) res.set(name, value);
  if (gzip_ok && !head_only && length >= kGzipThreshold) {
    // Compressed piece by piece (the list is never assembled), then sent with its length.
    // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
    std::function<void(base::Deflater&)> feed = [&response](base::Deflater& deflater) {
      deflater.add(response.body);
      for (std::size_t i = 0; i < response.items.size(); ++i) {
        if (i > 0) deflater.add(",");
        deflater.add(response.items[i]->json);
      }
      deflater.add(response.tail);
    };
    std::string compressed = co_await gzip_off_thread(std::move(feed), length);
    res.set(http::field::content_encoding, "gzip");
    res.set(http::field::vary, "Accept-Encoding");
    res.content_length(compressed.size());
    res.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> head{res};
    beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
    auto [hec, hn] = co_await http::async_write_header(stream, head, use_tuple);
    if (hec) co_return hec;
    beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, asio::buffer(compressed), use_tuple);
    co_return ec;
  }
  res.content_length(length);
  res.keep_alive(keep_alive);
  http::response_serializer<http::empty_body> sr{res};
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  auto [hec, hn] = co_await http::async_write_header(stream, sr, use_tuple);
  if (hec || head_only) co_return hec;
  // Copied through one bounded buffer: large writes are far cheaper than gathering thousands of
  // small item buffers, and the response never needs a second copy of the whole list.
  constexpr std::size_t kSlice = 256 * 1024;
  std::string slice;
  slice.reserve(kSlice + 64 * 1024);
  slice += response.body;
  for (std::size_t i = 0; i < response.items.size(); ++i) {
    if (i > 0) slice.push_back(',');
    slice += response.items[i]->json;
    if (slice.size() >= kSlice) {
      beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer(slice), use_tuple);
      if (ec) co_return ec;
      slice.clear();
    }
  }
  slice += response.tail;
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  auto [ec, n] = co_await asio::async_write(stream, asio::buffer(slice), use_tuple);
  co_return ec;
}

std::shared_ptr<void> HttpServer::Impl::track(const std::shared_ptr<Waiting>& waiting) {
  std::lock_guard lock(connections_mutex);
  const std::uint64_t id = next_connection++;
  connections.emplace(id, waiting);
  return std::shared_ptr<void>(nullptr, [self = shared_from_this(), id](void*) {
    std::lock_guard lock(self->connections_mutex);
    self->connections.erase(id);
  });
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::serve_connection(Stream stream, std::shared_ptr<void> slot) {
  auto self = shared_from_this();
  beast::flat_buffer buffer;
  const std::shared_ptr<const auth::ClientCertificate> peer = client_certificate_of(stream);
  auto waiting = std::make_shared<Waiting>();
  waiting->strand = co_await asio::this_coro::executor;
  waiting->buffer = &buffer;
  waiting->close = [&stream] {
    boost::system::error_code ignored;
    beast::get_lowest_layer(stream).socket().cancel(ignored);
  };
  const std::shared_ptr<void> tracked = track(waiting);
  // Decided in the loop, acted on after it: GCC 12 mis-destroys locals of a coroutine that
  // co_returns from inside a loop that holds them.
  std::optional<Exchange> watch;
  for (;;) {
    Exchange exchange = co_await serve_request(stream, buffer, peer, *waiting);
    if (exchange.next == Next::read) continue;
    if (exchange.next == Next::drain || exchange.next == Next::close_unread) {
      co_await drain_and_close(stream, exchange.next == Next::close_unread);
      co_return;
    }
    if (exchange.next == Next::stream_chunked || exchange.next == Next::stream_websocket) {
      watch.emplace(std::move(exchange));
    }
    break;
  }
  if (!watch) {
    shutdown_send(stream);
    co_return;
  }
  buffer = beast::flat_buffer();  // an idle watch keeps as little as possible
  watch->connection_slot = std::move(slot);
  if (watch->watch_strand) {
    // The connection leaves the I/O threads: its events are written from the delivery threads,
    // so requests never queue behind a fan-out.
    auto moved = hand_over(stream, watch->watch_strand);
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

namespace {

// Plain TCP: sends what the socket takes at once, with one non-blocking gather send, and answers
// how many bytes went; the caller waits for the rest with an asynchronous write. A watcher that
// keeps up then costs no write operation, no trip of its completion through the scheduler and
// no resumption per batch. Under TLS nothing is sent here (the record layer needs its write).
std::size_t send_now(beast::tcp_stream& stream, const std::vector<asio::const_buffer>& buffers) {
  auto& socket = stream.socket();
  boost::system::error_code ec;
  if (!socket.non_blocking()) socket.non_blocking(true, ec);
  if (ec) return 0;
  const std::size_t n = socket.write_some(buffers, ec);
  return ec ? 0 : n;
}

std::size_t send_now(TlsStream&, const std::vector<asio::const_buffer>&) { return 0; }

// When the write of a chunked watch stream in flight started (nullopt: none is).
struct WriteClock {
  std::optional<std::chrono::steady_clock::time_point> since;
};

// One deadline per watch connection, checked coarsely, instead of a timer re-armed for every
// write: every quarter of `timeout` it closes the socket if a write has been in flight longer
// than `timeout` (a client that stopped reading). `since` tells when the write in flight
// started; the guard ends once `alive` is gone. Strand: the stream's; `socket` and what `since`
// reads stay valid while `alive` does.
asio::awaitable<void> guard_writes(
    tcp::socket& socket, std::weak_ptr<const void> alive,
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
      boost::system::error_code ignored;
      socket.close(ignored);
      co_return;
    }
  }
}

// Watches that asked for another rendering (kubectl's Table) get each object converted; the
// shared cached objects stay as they are for every other watcher.
void convert_frames(const ApiResponse& response, std::vector<watch::WatchFrame>& frames) {
  if (!response.convert) return;
  for (auto& f : frames) {
    if (f.type == watch::EventType::bookmark || f.type == watch::EventType::error) continue;
    f.object = response.convert(f.object);
  }
}

// The buffers of a batch of frames: type prefix, the shared object JSON, suffix. No copies.
void append_frames(std::vector<asio::const_buffer>& out,
                   const std::vector<watch::WatchFrame>& frames) {
  for (const auto& f : frames) {
    auto prefix = watch::frame_prefix(f.type);
    out.emplace_back(prefix.data(), prefix.size());
    out.emplace_back(f.object->json.data(), f.object->json.size());
    out.emplace_back(watch::kFrameSuffix.data(), watch::kFrameSuffix.size());
  }
}

}  // namespace

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
  if (!response.headers.empty()) {
    head = fixed_head.substr(0, fixed_head.size() - 2);
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    head += "\r\n";
    fixed_head = head;
  }
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  auto [hec, hn] = co_await asio::async_write(stream, asio::buffer(fixed_head), use_tuple);
  if (hec || head_only) {
    shutdown_send(stream);
    co_return;
  }
  // A client that hangs up is noticed at once, not at the next event: one read stays pending
  // on the raw socket (beside the stream's timeouts) and ends the watch when it completes.
  if (response.watch) {
    std::weak_ptr<watch::WatchSession> session = response.watch;
    auto executor = co_await asio::this_coro::executor;
    asio::co_spawn(
        executor,
        [&socket = beast::get_lowest_layer(stream).socket(), session]() -> asio::awaitable<void> {
          std::array<char, 64> discard;
          for (;;) {
            auto [ec, n] = co_await socket.async_read_some(asio::buffer(discard), use_tuple);
            if (ec) break;
          }
          if (auto s = session.lock()) s->stop();
        },
        [](std::exception_ptr e) { log_task_failure(e, "watch hang-up reader"); });
  }
  std::vector<asio::const_buffer> buffers;
  if (!response.body.empty()) {
    buffers.emplace_back(response.body.data(), response.body.size());
    beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
    auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(buffers), use_tuple);
    if (ec) co_return;
  }
  if (response.watch) {
    std::vector<watch::WatchFrame> frames;
    char chunk_header[24];
    // From here a stalled client is cut off by the write guard, not by per-write deadlines.
    beast::get_lowest_layer(stream).expires_never();
    auto clock = std::make_shared<WriteClock>();
    const auto guard_executor = co_await asio::this_coro::executor;
    // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
    std::weak_ptr<const void> alive = clock;
    std::function<std::optional<std::chrono::steady_clock::time_point>()> since =
        [c = clock.get()] { return c->since; };
    asio::co_spawn(guard_executor,
                   guard_writes(beast::get_lowest_layer(stream).socket(), std::move(alive),
                                std::move(since), limits.write_timeout),
                   [](std::exception_ptr e) { log_task_failure(e, "watch write guard"); });
    for (;;) {
      auto next = co_await response.watch->next(frames);
      if (!next) break;
      convert_frames(response, frames);
      // One chunk per batch, framed by hand: "<size hex>\r\n" <frames> "\r\n".
      buffers.clear();
      buffers.emplace_back();  // the chunk header, filled in below
      append_frames(buffers, frames);
      const std::size_t size = asio::buffer_size(buffers);
      const int len = std::snprintf(chunk_header, sizeof chunk_header, "%zx\r\n", size);
      buffers.front() = asio::const_buffer(chunk_header, static_cast<std::size_t>(len));
      buffers.emplace_back("\r\n", 2);
      // A client that stops reading is parked by the cacher once its queue fills, and cut off
      // by the write guard if this write stays in flight past the write timeout.
      const std::size_t sent = send_now(stream, buffers);
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
  beast::get_lowest_layer(stream).expires_after(limits.write_timeout);
  co_await asio::async_write(stream, http::make_chunk_last(), use_tuple);
  shutdown_send(stream);
}

template <class Stream>
asio::awaitable<void> HttpServer::Impl::stream_websocket(Stream stream,
                                                         http::request<http::string_body> request,
                                                         ApiResponse response) {
  namespace websocket = beast::websocket;
  beast::get_lowest_layer(stream).expires_never();
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
                   guard_writes(beast::get_lowest_layer(*ws).socket(), std::move(alive),
                                std::move(since), limits.write_timeout),
                   [](std::exception_ptr e) { log_task_failure(e, "watch write guard"); });
  }
  // However it ends, the writer stops and the socket closes (a write to a client that stopped
  // reading would otherwise hold the stream forever).
  struct Closer {
    std::shared_ptr<websocket::stream<QueueingStream<Stream>>> ws;
    ~Closer() {
      ws->next_layer().stop();
      boost::system::error_code ignored;
      beast::get_lowest_layer(*ws).socket().close(ignored);
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
    std::vector<watch::WatchFrame> frames;
    std::vector<std::array<unsigned char, 10>> headers;
    for (;;) {
      auto next = co_await response.watch->next(frames);
      if (!next) break;
      convert_frames(response, frames);
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

HttpServer::HttpServer(asio::io_context& ioc, std::shared_ptr<ApiHandler> handler,
                       HttpLimits limits, asio::io_context* delivery)
    : impl_(std::make_shared<Impl>(ioc, std::move(handler), limits, delivery)) {}

HttpServer::~HttpServer() = default;

namespace {

// ALPN: HTTP/1.1 whatever else a client offers (kubectl and Go clients offer h2 first); a client
// that offers only other protocols gets no ALPN answer and may still speak HTTP/1.1.
int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                  unsigned int inlen, void*) {
  static constexpr unsigned char kHttp11[] = {'h', 't', 't', 'p', '/', '1', '.', '1'};
  for (unsigned int i = 0; i < inlen;) {
    const unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == sizeof kHttp11 && std::memcmp(in + i + 1, kHttp11, len) == 0) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

std::string HttpServer::enable_tls(const std::string& cert_file, const std::string& key_file,
                                   const std::string& client_ca_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  // TLS 1.2 and 1.3 only, as kube-apiserver's default minimum.
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                   ec);
  if (ec) return "TLS options: " + ec.message();
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return "cannot use the certificate in " + cert_file + ": " + ec.message();
  ctx->use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return "cannot use the private key in " + key_file + " with the certificate in " + cert_file +
           ": " + ec.message();
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return "the private key in " + key_file + " does not match the certificate in " + cert_file;
  }
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), select_http11, nullptr);
  if (!client_ca_file.empty()) {
    ctx->load_verify_file(client_ca_file, ec);
    if (ec) return "cannot load the client CA in " + client_ca_file + ": " + ec.message();
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(client_ca_file.c_str());
    if (names == nullptr) return "no CA certificate in " + client_ca_file;
    SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    // Ask for a certificate, never fail the handshake over it; the result is checked per
    // connection (see client_certificate_of) with the client-auth purpose (extended key usage).
    SSL_CTX_set_verify(ctx->native_handle(), SSL_VERIFY_PEER,
                       [](int, X509_STORE_CTX*) { return 1; });
    X509_VERIFY_PARAM_set_purpose(SSL_CTX_get0_param(ctx->native_handle()),
                                  X509_PURPOSE_SSL_CLIENT);
    // Resumed sessions keep their verified certificate; OpenSSL refuses to resume without this.
    static constexpr unsigned char kSessionContext[] = {'k', 'w', 'a', 't', 'c', 'h'};
    SSL_CTX_set_session_id_context(ctx->native_handle(), kSessionContext, sizeof kSessionContext);
  }
  impl_->tls = std::move(ctx);
  return "";
}

boost::system::error_code HttpServer::listen(const std::string& address, unsigned short port) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return ec;
  tcp::endpoint endpoint(addr, port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (ec) return ec;
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return ec;
  impl_->acceptor.bind(endpoint, ec);
  if (ec) return ec;
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  return ec;
}

void HttpServer::set_compute(asio::any_io_executor executor) { impl_->compute = std::move(executor); }

void HttpServer::start() {
  asio::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(),
                 [](std::exception_ptr e) { log_task_failure(e, "accept loop"); });
}

void HttpServer::stop() {
  asio::post(impl_->acceptor.get_executor(), [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

void HttpServer::drain() {
  impl_->draining = true;
  std::vector<std::shared_ptr<Impl::Waiting>> all;
  {
    std::lock_guard lock(impl_->connections_mutex);
    for (auto& [id, weak] : impl_->connections) {
      if (auto w = weak.lock()) all.push_back(std::move(w));
    }
  }
  for (auto& w : all) {
    // On the connection's strand: only one waiting for a request with nothing of it read yet
    // (the parser may have consumed a start line already).
    asio::post(w->strand, [w] {
      if (w->between_requests && w->buffer->size() == 0 && !w->parser->got_some()) w->close();
    });
  }
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->connections_mutex);
  return impl_->connections.size() + impl_->streams.load();
}

unsigned short HttpServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

}  // namespace kwatch::server
