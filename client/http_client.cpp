#include "client/http_client.hpp"

#include "base/gzip.hpp"
#include "base/base64.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/json/parse.hpp>

#include <atomic>
#include <mutex>
#include <optional>

namespace kwatch::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace ssl = asio::ssl;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
using Clock = std::chrono::steady_clock;

std::string ApiError::describe() const {
  switch (kind) {
    case Kind::transport: return "transport: " + message;
    case Kind::timeout: return "timeout: " + message;
    case Kind::decode: return "decode: " + message;
    case Kind::status:
      return std::to_string(http_status) + (reason.empty() ? "" : " " + reason) + ": " + message;
  }
  return message;
}

namespace {

ApiError failure(ApiError::Kind kind, std::string message) {
  ApiError e;
  e.kind = kind;
  e.message = std::move(message);
  return e;
}

ApiError from_code(const boost::system::error_code& ec, std::string_view what) {
  const bool timeout = ec == beast::error::timeout;
  return failure(timeout ? ApiError::Kind::timeout : ApiError::Kind::transport,
                 std::string(what) + ": " + ec.message());
}

// The error of a non-2xx answer: its Status when it has one (kube always sends one).
ApiError status_error(unsigned status, std::string_view body, std::string_view retry_after) {
  ApiError e;
  e.kind = ApiError::Kind::status;
  e.http_status = status;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    const auto& o = v.get_object();
    if (auto* r = o.if_contains("reason"); r && r->is_string()) e.reason = r->get_string();
    if (auto* m = o.if_contains("message"); m && m->is_string()) e.message = m->get_string();
  }
  if (e.message.empty()) e.message = std::string(body.substr(0, 200));
  if (!retry_after.empty()) {
    int seconds = 0;
    for (char c : retry_after) {
      if (c < '0' || c > '9') break;
      seconds = seconds * 10 + (c - '0');
    }
    e.retry_after_seconds = seconds;
  }
  return e;
}

struct Endpoint {
  bool tls = false;
  std::string host;  // without brackets
  std::string port;
};

boost::system::result<Endpoint, std::string> parse_server(const std::string& url) {
  Endpoint e;
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    e.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return "server \"" + url + "\" is not an http(s):// URL";
  }
  rest = rest.substr(0, rest.find('/'));
  if (rest.starts_with("[")) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return "server \"" + url + "\": unclosed [";
    e.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (rest.starts_with(":")) e.port = std::string(rest.substr(1));
  } else {
    const auto colon = rest.rfind(':');
    e.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) e.port = std::string(rest.substr(colon + 1));
  }
  if (e.host.empty()) return "server \"" + url + "\" has no host";
  if (e.port.empty()) e.port = e.tls ? "443" : "80";
  return e;
}

bool is_ip(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

// One HTTP/1.1 connection, plain or TLS.
struct Connection {
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;

  beast::tcp_stream& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  // `f` applied to whichever stream this is (`f` returns the same type for both).
  template <class F>
  auto on_stream(F f) {
    return secure ? f(*secure) : f(*plain);
  }
};

struct HttpClient::Impl {
  asio::any_io_executor executor;
  Endpoint endpoint;
  std::optional<ssl::context> tls;
  std::string verify_name;  // the name the certificate must carry
  Options options;
  std::string authorization;
  // The pool is shared by requests made from any thread of the client's io_context.
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Connection>> idle;
  std::atomic<std::size_t> opened{0};

  asio::awaitable<ApiResult<std::unique_ptr<Connection>>> connect(Clock::time_point deadline);
  asio::awaitable<ApiResult<std::unique_ptr<Connection>>> take(Clock::time_point deadline, bool& reused) {
    {
      std::lock_guard lock(pool_mutex);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        reused = true;
        co_return c;
      }
    }
    reused = false;
    co_return co_await connect(deadline);
  }
  void give_back(std::unique_ptr<Connection> c) {
    std::lock_guard lock(pool_mutex);
    if (idle.size() < options.max_idle_connections) idle.push_back(std::move(c));
  }
  http::request<http::string_body> make_request(http::verb verb, const std::string& target,
                                                std::string body, const std::string& content_type) const;
};

asio::awaitable<ApiResult<std::unique_ptr<Connection>>> HttpClient::Impl::connect(
    Clock::time_point deadline) {
  auto c = std::make_unique<Connection>();
  tcp::resolver resolver(executor);
  auto [rec, results] = co_await resolver.async_resolve(endpoint.host, endpoint.port, use_tuple);
  if (rec) co_return from_code(rec, "resolving " + endpoint.host);
  if (tls) {
    c->secure.emplace(executor, *tls);
  } else {
    c->plain.emplace(executor);
  }
  beast::tcp_stream& tcp_layer = c->lowest();
  tcp_layer.expires_at(deadline);
  auto [cec, ep] = co_await tcp_layer.async_connect(results, use_tuple);
  if (cec) co_return from_code(cec, "connecting to " + endpoint.host + ":" + endpoint.port);
  tcp_layer.socket().set_option(tcp::no_delay(true));
  if (tls) {
    if (!verify_name.empty() && !is_ip(verify_name)) {
      SSL_set_tlsext_host_name(c->secure->native_handle(), verify_name.c_str());
    }
    if (!verify_name.empty()) c->secure->set_verify_callback(ssl::host_name_verification(verify_name));
    auto [hec] = co_await c->secure->async_handshake(ssl::stream_base::client, use_tuple);
    if (hec) co_return from_code(hec, "TLS handshake with " + endpoint.host);
  }
  ++opened;
  co_return c;
}

http::request<http::string_body> HttpClient::Impl::make_request(http::verb verb,
                                                                const std::string& target,
                                                                std::string body,
                                                                const std::string& content_type) const {
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, endpoint.host + ":" + endpoint.port);
  req.set(http::field::user_agent, options.user_agent);
  req.set(http::field::accept, "application/json");
  if (!authorization.empty()) req.set(http::field::authorization, authorization);
  if (!body.empty()) {
    req.set(http::field::content_type, content_type);
    req.body() = std::move(body);
  }
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

boost::system::result<std::shared_ptr<HttpClient>, std::string> HttpClient::create(
    asio::any_io_executor executor, ClientConfig config, Options options) {
  auto endpoint = parse_server(config.server);
  if (!endpoint) return endpoint.error();
  std::shared_ptr<HttpClient> client(new HttpClient());
  auto impl = std::make_shared<Impl>();
  impl->executor = std::move(executor);
  impl->endpoint = *endpoint;
  impl->options = std::move(options);
  if (!config.token.empty()) {
    impl->authorization = "Bearer " + config.token;
  } else if (!config.username.empty()) {
    impl->authorization = "Basic " + base::base64_encode(config.username + ":" + config.password);
  }
  if (endpoint->tls) {
    impl->tls.emplace(ssl::context::tls_client);
    auto& ctx = *impl->tls;
    boost::system::error_code ec;
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                    ec);
    if (config.insecure_skip_tls_verify) {
      ctx.set_verify_mode(ssl::verify_none);
    } else {
      ctx.set_verify_mode(ssl::verify_peer);
      if (!config.ca_pem.empty()) {
        ctx.add_certificate_authority(asio::buffer(config.ca_pem), ec);
        if (ec) return "the certificate authority cannot be used: " + ec.message();
      } else {
        ctx.set_default_verify_paths(ec);
      }
      impl->verify_name = config.tls_server_name.empty() ? endpoint->host : config.tls_server_name;
    }
    if (!config.client_cert_pem.empty()) {
      ctx.use_certificate_chain(asio::buffer(config.client_cert_pem), ec);
      if (ec) return "the client certificate cannot be used: " + ec.message();
      ctx.use_private_key(asio::buffer(config.client_key_pem), ssl::context::pem, ec);
      if (ec) return "the client key cannot be used: " + ec.message();
    }
  }
  client->config_ = std::move(config);
  client->impl_ = std::move(impl);
  return client;
}

HttpClient::~HttpClient() = default;

std::size_t HttpClient::connections_opened() const { return impl_->opened; }

namespace {

// Sends `req` and reads the answer: whole, or only its head (a watch's events are read raw).
template <class Stream>
asio::awaitable<boost::system::error_code> send_request(Stream& stream, beast::flat_buffer& buffer,
                                                        http::request<http::string_body>& req,
                                                        http::response_parser<http::string_body>& parser,
                                                        bool whole) {
  auto [wec, wn] = co_await http::async_write(stream, req, use_tuple);
  if (wec) co_return wec;
  if (!whole) {
    auto [hec, hn] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
    co_return hec;
  }
  auto [rec, rn] = co_await http::async_read(stream, buffer, parser, use_tuple);
  co_return rec;
}

template <class S>
asio::awaitable<boost::system::error_code> read_rest(S& stream, beast::flat_buffer& buffer,
                                                     http::response_parser<http::string_body>& parser) {
  auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
  co_return ec;
}

}  // namespace

asio::awaitable<ApiResult<HttpResponse>> HttpClient::request(std::string method, std::string target,
                                                             std::string body,
                                                             std::string content_type) {
  auto impl = impl_;
  const auto deadline = Clock::now() + impl->options.request_timeout;
  const http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) co_return failure(ApiError::Kind::transport, "unknown method " + method);
  // A kept connection the server closed meanwhile fails at once: one more try on a new one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = false;
    auto taken = co_await impl->take(deadline, reused);
    if (!taken) co_return taken.error();
    std::unique_ptr<Connection> c = std::move(*taken);
    auto req = impl->make_request(verb, target, body, content_type);
    // As client-go: large answers (lists) may come compressed.
    req.set(http::field::accept_encoding, "gzip");
    http::response_parser<http::string_body> parser;
    parser.body_limit(impl->options.max_response_bytes);
    c->lowest().expires_at(deadline);
    const boost::system::error_code ec = co_await c->on_stream(
        [&](auto& stream) { return send_request(stream, c->buffer, req, parser, true); });
    if (ec) {
      if (reused && !parser.got_some() && ec != beast::error::timeout) continue;
      co_return from_code(ec, method + " " + target);
    }
    auto& res = parser.get();
    HttpResponse out;
    out.status = res.result_int();
    out.content_type = std::string(res[http::field::content_type]);
    out.body = std::move(res.body());
    const std::string_view encoding = res[http::field::content_encoding];
    if (beast::iequals(encoding, "gzip")) {
      std::string inflated;
      const std::string why = base::gunzip(out.body, impl->options.max_response_bytes, inflated);
      if (!why.empty()) co_return failure(ApiError::Kind::decode, method + " " + target + ": " + why);
      out.body = std::move(inflated);
    } else if (!encoding.empty() && !beast::iequals(encoding, "identity")) {
      co_return failure(ApiError::Kind::decode,
                        method + " " + target + ": an answer in an unknown encoding \"" +
                            std::string(encoding) + "\"");
    }
    const bool keep = res.keep_alive();
    const std::string retry_after(res[http::field::retry_after]);
    if (keep) {
      c->lowest().expires_never();
      impl->give_back(std::move(c));
    }
    if (out.status < 200 || out.status >= 300) co_return status_error(out.status, out.body, retry_after);
    co_return out;
  }
  co_return failure(ApiError::Kind::transport, method + " " + target + ": the connection closed");
}

asio::awaitable<ApiResult<json::object>> HttpClient::get(std::string target, json::storage_ptr sp) {
  auto r = co_await request("GET", std::move(target));
  if (!r) co_return r.error();
  boost::system::error_code ec;
  json::value v = json::parse(r->body, ec, std::move(sp));
  if (ec || !v.is_object()) {
    co_return failure(ApiError::Kind::decode, "the answer is not a JSON object: " + r->body.substr(0, 200));
  }
  // Constructed from the value's object: it keeps the storage it was parsed into.
  co_return json::object(std::move(v.get_object()));
}

// ---- Forwarding ----

struct ForwardedResponse::Stream {
  std::unique_ptr<Connection> connection;
  http::response_parser<http::buffer_body> parser;
  std::array<char, 64 * 1024> piece;
};

ForwardedResponse::~ForwardedResponse() = default;

void ForwardedResponse::close() {
  if (!stream_ || !stream_->connection) return;
  boost::system::error_code ignored;
  stream_->connection->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_->connection->lowest().socket().close(ignored);
}

namespace {

template <class S>
asio::awaitable<boost::system::error_code> write_forwarded(S& stream,
                                                           http::request<http::string_body>& req) {
  auto [ec, n] = co_await http::async_write(stream, req, use_tuple);
  co_return ec;
}

template <class S>
asio::awaitable<boost::system::error_code> read_forwarded_head(
    S& stream, beast::flat_buffer& buffer, http::response_parser<http::buffer_body>& parser) {
  auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, use_tuple);
  co_return ec;
}

template <class S>
asio::awaitable<boost::system::error_code> read_forwarded_some(
    S& stream, beast::flat_buffer& buffer, http::response_parser<http::buffer_body>& parser) {
  auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, use_tuple);
  co_return ec;
}

}  // namespace

asio::awaitable<ApiResult<std::optional<std::string>>> ForwardedResponse::next() {
  Stream& s = *stream_;
  if (s.parser.is_done()) co_return std::optional<std::string>();
  auto& body = s.parser.get().body();
  body.data = s.piece.data();
  body.size = s.piece.size();
  const boost::system::error_code ec = co_await s.connection->on_stream([&](auto& stream) {
    return read_forwarded_some(stream, s.connection->buffer, s.parser);
  });
  if (ec && ec != http::error::need_buffer) co_return from_code(ec, "reading the answer");
  const std::size_t got = s.piece.size() - body.size;
  co_return std::optional<std::string>(std::string(s.piece.data(), got));
}

asio::awaitable<ApiResult<std::unique_ptr<ForwardedResponse>>> HttpClient::forward(
    ForwardedRequest request) {
  auto impl = impl_;
  const auto deadline = Clock::now() + impl->options.request_timeout;
  auto connected = co_await impl->connect(deadline);
  if (!connected) co_return connected.error();
  std::unique_ptr<Connection> c = std::move(*connected);
  http::request<http::string_body> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  for (const auto& [name, value] : request.headers) req.insert(name, value);
  req.set(http::field::host, impl->endpoint.host + ":" + impl->endpoint.port);
  if (!request.body.empty() || req.method() == http::verb::post ||
      req.method() == http::verb::put || req.method() == http::verb::patch) {
    req.body() = std::move(request.body);
    req.prepare_payload();
  }
  req.keep_alive(false);
  const std::string what = request.method + " " + request.target;
  c->lowest().expires_at(deadline);
  boost::system::error_code ec =
      co_await c->on_stream([&](auto& stream) { return write_forwarded(stream, req); });
  if (ec) co_return from_code(ec, what);
  std::unique_ptr<ForwardedResponse> out(new ForwardedResponse());
  out->stream_ = std::make_unique<ForwardedResponse::Stream>();
  auto& parser = out->stream_->parser;
  parser.body_limit(boost::none);  // streamed, never held
  ec = co_await c->on_stream(
      [&](auto& stream) { return read_forwarded_head(stream, c->buffer, parser); });
  if (ec) co_return from_code(ec, what);
  out->status = parser.get().result_int();
  for (const auto& field : parser.get()) {
    out->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  c->lowest().expires_never();  // a watch may be quiet for long: either side ends it
  out->stream_->connection = std::move(c);
  co_return out;
}

// ---- Forwarded WebSockets ----

struct ForwardedSocket::Stream {
  std::unique_ptr<Connection> connection;
  std::optional<websocket::stream<beast::tcp_stream&>> ws_plain;
  std::optional<websocket::stream<beast::ssl_stream<beast::tcp_stream>&>> ws_secure;
  beast::flat_buffer message;
};

ForwardedSocket::~ForwardedSocket() = default;

void ForwardedSocket::close() {
  if (!stream_ || !stream_->connection) return;
  boost::system::error_code ignored;
  stream_->connection->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_->connection->lowest().socket().close(ignored);
}

namespace {

// The handshake with `headers` set on the upgrade request; the answer's head (and a refusal's
// body) kept whatever its status.
template <class WebSocket>
asio::awaitable<boost::system::error_code> forward_handshake(
    WebSocket& ws, const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& host, const std::string& target, websocket::response_type& response) {
  ws.set_option(websocket::stream_base::decorator([&headers](websocket::request_type& upgrade) {
    for (const auto& [name, value] : headers) upgrade.insert(name, value);
  }));
  auto [ec] = co_await ws.async_handshake(response, host, target, use_tuple);
  co_return ec;
}

template <class WebSocket>
asio::awaitable<ApiResult<std::optional<ForwardedSocket::Message>>> read_forwarded_message(
    WebSocket& ws, beast::flat_buffer& buffer) {
  buffer.clear();
  auto [ec, n] = co_await ws.async_read(buffer, use_tuple);
  if (ec == websocket::error::closed) co_return std::optional<ForwardedSocket::Message>();
  if (ec) co_return from_code(ec, "reading a WebSocket message");
  ForwardedSocket::Message m;
  m.binary = ws.got_binary();
  m.data.assign(static_cast<const char*>(buffer.data().data()), buffer.size());
  co_return std::optional<ForwardedSocket::Message>(std::move(m));
}

}  // namespace

namespace {

template <class WebSocket>
asio::awaitable<ApiResult<bool>> write_forwarded_message(WebSocket& ws,
                                                         ForwardedSocket::Message message) {
  ws.binary(message.binary);
  auto [ec, n] = co_await ws.async_write(asio::buffer(message.data), use_tuple);
  if (ec) co_return from_code(ec, "writing a WebSocket message");
  co_return true;
}

}  // namespace

asio::awaitable<ApiResult<bool>> ForwardedSocket::send(Message message) {
  Stream& s = *stream_;
  if (!s.connection) co_return failure(ApiError::Kind::transport, "the WebSocket is closed");
  if (s.ws_secure) co_return co_await write_forwarded_message(*s.ws_secure, std::move(message));
  co_return co_await write_forwarded_message(*s.ws_plain, std::move(message));
}

asio::awaitable<ApiResult<std::optional<ForwardedSocket::Message>>> ForwardedSocket::next() {
  Stream& s = *stream_;
  if (s.ws_secure) co_return co_await read_forwarded_message(*s.ws_secure, s.message);
  co_return co_await read_forwarded_message(*s.ws_plain, s.message);
}

asio::awaitable<ApiResult<std::unique_ptr<ForwardedSocket>>> HttpClient::forward_websocket(
    ForwardedRequest request) {
  auto impl = impl_;
  const auto deadline = Clock::now() + impl->options.request_timeout;
  auto connected = co_await impl->connect(deadline);
  if (!connected) co_return connected.error();
  std::unique_ptr<ForwardedSocket> out(new ForwardedSocket());
  out->stream_ = std::make_unique<ForwardedSocket::Stream>();
  auto& s = *out->stream_;
  s.connection = std::move(*connected);
  Connection& conn = *s.connection;
  conn.lowest().expires_at(deadline);
  const std::string host = impl->endpoint.host + ":" + impl->endpoint.port;
  websocket::response_type response;
  boost::system::error_code ec;
  if (conn.secure) {
    s.ws_secure.emplace(*conn.secure);
    s.ws_secure->read_message_max(impl->options.max_response_bytes);
    ec = co_await forward_handshake(*s.ws_secure, request.headers, host, request.target, response);
  } else {
    s.ws_plain.emplace(*conn.plain);
    s.ws_plain->read_message_max(impl->options.max_response_bytes);
    ec = co_await forward_handshake(*s.ws_plain, request.headers, host, request.target, response);
  }
  out->status = response.result_int();
  for (const auto& field : response) {
    out->headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  if (ec && (out->status == 0 || out->status == 101)) {
    co_return from_code(ec, "GET " + request.target + " (WebSocket)");
  }
  if (out->status != 101) {
    out->body = response.body();
    out->close();
    co_return out;
  }
  conn.lowest().expires_never();  // a watch may be quiet for long: either side ends it
  co_return out;
}

// ---- Watches ----

struct WatchConnection::Stream {
  std::unique_ptr<Connection> connection;
  bool chunked = true;
  // Over WebSocket: the stream on the connection's, and the message being read.
  std::optional<websocket::stream<beast::tcp_stream&>> ws_plain;
  std::optional<websocket::stream<beast::ssl_stream<beast::tcp_stream>&>> ws_secure;
  beast::flat_buffer message;
};

namespace {

template <class S>
asio::awaitable<std::pair<boost::system::error_code, std::size_t>> read_some(S& stream,
                                                                             beast::flat_buffer& buffer) {
  auto [ec, n] = co_await stream.async_read_some(buffer.prepare(64 * 1024), use_tuple);
  buffer.commit(n);
  co_return std::pair{ec, n};
}

}  // namespace

namespace {

// The WebSocket handshake with the request's headers (credentials, agent); a refusal is the
// server's Status, as over plain HTTP.
template <class WebSocket>
asio::awaitable<ApiResult<void>> handshake(WebSocket& ws, const http::request<http::string_body>& req,
                                           const std::string& target) {
  ws.set_option(websocket::stream_base::decorator([&req](websocket::request_type& upgrade) {
    for (auto field : {http::field::authorization, http::field::user_agent, http::field::accept}) {
      if (req.count(field)) upgrade.set(field, req[field]);
    }
  }));
  websocket::response_type response;
  const std::string host(req[http::field::host]);
  auto [ec] = co_await ws.async_handshake(response, host, target, use_tuple);
  if (!ec) co_return ApiResult<void>{};
  if (response.result_int() != 0 && response.result_int() != 101) {
    co_return status_error(response.result_int(), response.body(),
                           std::string(response[http::field::retry_after]));
  }
  co_return from_code(ec, "GET " + target);
}

template <class WebSocket>
asio::awaitable<std::pair<boost::system::error_code, std::size_t>> read_message(
    WebSocket& ws, beast::flat_buffer& buffer) {
  auto [ec, n] = co_await ws.async_read(buffer, use_tuple);
  co_return std::make_pair(ec, n);
}

}  // namespace

asio::awaitable<ApiResult<std::unique_ptr<WatchConnection>>> HttpClient::watch(
    std::string target, WatchTransport transport) {
  auto impl = impl_;
  const auto deadline = Clock::now() + impl->options.request_timeout;
  auto connected = co_await impl->connect(deadline);
  if (!connected) co_return connected.error();
  std::unique_ptr<Connection> c = std::move(*connected);
  if (transport == WatchTransport::websocket) {
    auto req = impl->make_request(http::verb::get, target, "", "");
    std::unique_ptr<WatchConnection> w(new WatchConnection());
    w->stream_ = std::make_unique<WatchConnection::Stream>();
    auto& s = *w->stream_;
    s.connection = std::move(c);
    Connection& conn = *s.connection;
    conn.lowest().expires_at(deadline);
    ApiResult<void> shaken;
    if (conn.secure) {
      s.ws_secure.emplace(*conn.secure);
      shaken = co_await handshake(*s.ws_secure, req, target);
    } else {
      s.ws_plain.emplace(*conn.plain);
      shaken = co_await handshake(*s.ws_plain, req, target);
    }
    if (!shaken) co_return shaken.error();
    conn.lowest().expires_never();  // a watch may be quiet for long: the server ends it
    // The server's pings are answered by Beast; its own are not needed on a client.
    co_return w;
  }
  auto req = impl->make_request(http::verb::get, target, "", "");
  http::response_parser<http::string_body> parser;
  parser.body_limit(1u << 20);  // the body of a refusal; a 200's events are read raw
  c->lowest().expires_at(deadline);
  const boost::system::error_code ec = co_await c->on_stream(
      [&](auto& stream) { return send_request(stream, c->buffer, req, parser, false); });
  if (ec) co_return from_code(ec, "GET " + target);
  const unsigned status = parser.get().result_int();
  if (status != 200) {
    co_await c->on_stream([&](auto& stream) { return read_rest(stream, c->buffer, parser); });
    const std::string retry_after(parser.get()[http::field::retry_after]);
    co_return status_error(status, parser.get().body(), retry_after);
  }
  std::unique_ptr<WatchConnection> w(new WatchConnection());
  w->stream_ = std::make_unique<WatchConnection::Stream>();
  w->stream_->chunked = parser.chunked();
  c->lowest().expires_never();  // a watch may be quiet for long: the server ends it
  w->stream_->connection = std::move(c);
  co_return w;
}

WatchConnection::~WatchConnection() = default;

void WatchConnection::close() {
  if (!stream_ || !stream_->connection) return;
  boost::system::error_code ignored;
  stream_->connection->lowest().socket().close(ignored);
}

asio::awaitable<ApiResult<std::vector<WatchEvent>>> WatchConnection::next(json::storage_ptr sp) {
  std::vector<WatchEvent> out;
  if (ended_) co_return out;
  if (stream_->ws_plain || stream_->ws_secure) {
    // One event per message; a close frame is the server's clean end.
    auto& buffer = stream_->message;
    buffer.clear();
    std::pair<boost::system::error_code, std::size_t> got;
    if (stream_->ws_secure) {
      got = co_await read_message(*stream_->ws_secure, buffer);
    } else {
      got = co_await read_message(*stream_->ws_plain, buffer);
    }
    // A close frame from the server is its end of the stream, even when the TLS teardown after
    // it is cut short (a server may close TCP without TLS's close_notify).
    const auto reason = stream_->ws_secure ? stream_->ws_secure->reason() : stream_->ws_plain->reason();
    if (got.first == websocket::error::closed ||
        (got.first && (reason.code == websocket::close_code::normal ||
                       reason.code == websocket::close_code::going_away))) {
      ended_ = true;
      co_return out;
    }
    if (got.first && reason.code != websocket::close_code::none) {
      co_return failure(ApiError::Kind::transport,
                        "watch stream: the server closed it with code " +
                            std::to_string(static_cast<unsigned>(reason.code)) + " " +
                            std::string(reason.reason.c_str()));
    }
    if (got.first) co_return failure(ApiError::Kind::transport, "watch stream: " + got.first.message());
    const std::string_view text(static_cast<const char*>(buffer.data().data()), buffer.size());
    auto event = decode_event(text, sp);
    if (!event) co_return failure(ApiError::Kind::decode, event.error());
    out.push_back(std::move(*event));
    co_return out;
  }
  Connection& c = *stream_->connection;
  for (;;) {
    // What is buffered first (the head's read may have brought events with it).
    if (c.buffer.size() > 0) {
      const std::string_view raw(static_cast<const char*>(c.buffer.data().data()), c.buffer.size());
      DecodeResult decoded;
      if (stream_->chunked) {
        body_.clear();
        decoded = chunks_.feed(raw, body_);
        if (decoded) decoded = events_.feed(body_, out, sp);
      } else {
        decoded = events_.feed(raw, out, sp);
      }
      c.buffer.consume(c.buffer.size());
      if (!decoded) co_return failure(ApiError::Kind::decode, decoded.error());
      if (!out.empty()) co_return out;
      if (stream_->chunked && chunks_.done()) {
        ended_ = true;
        co_return out;
      }
    }
    const std::pair<boost::system::error_code, std::size_t> got =
        co_await c.on_stream([&](auto& stream) { return read_some(stream, c.buffer); });
    if (got.first && c.buffer.size() == 0) {
      const bool eof = got.first == http::error::end_of_stream || got.first == asio::error::eof ||
                       got.first == ssl::error::stream_truncated;
      if (eof && !stream_->chunked && events_.pending() == 0) {
        ended_ = true;
        co_return out;
      }
      std::string why = stream_->chunked ? chunks_.truncation() : "the connection closed";
      if (!eof) why = got.first.message();
      co_return failure(ApiError::Kind::transport, "watch stream: " + why);
    }
  }
}

}  // namespace kwatch::client
