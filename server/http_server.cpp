#include "server/http_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <array>

namespace kwatch::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

struct HttpServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& ioc, std::shared_ptr<ApiHandler> h, HttpLimits l)
      : ioc(ioc), acceptor(asio::make_strand(ioc)), handler(std::move(h)), limits(l) {}

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve_connection(beast::tcp_stream stream);

  asio::io_context& ioc;
  tcp::acceptor acceptor;
  std::shared_ptr<ApiHandler> handler;
  HttpLimits limits;
};

namespace {

void log_task_failure(std::exception_ptr e, const char* what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{} failed: {}", what, ex.what());
  }
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

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  auto self = shared_from_this();
  for (;;) {
    // Each connection gets a strand of its own: its reads, writes and timers never race.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      spdlog::warn("accept failed: {}", ec.message());
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    asio::co_spawn(executor, serve_connection(beast::tcp_stream(std::move(socket))),
                   [](std::exception_ptr e) { log_task_failure(e, "connection"); });
  }
}

asio::awaitable<void> HttpServer::Impl::serve_connection(beast::tcp_stream stream) {
  auto self = shared_from_this();
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(limits.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    stream.expires_after(limits.read_timeout);
    auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_tuple);
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      break;
    }
    if (ec) {
      const bool too_big = ec == http::error::body_limit || ec == http::error::header_limit;
      auto res = too_big ? simple_error(413, "RequestEntityTooLarge", "request entity too large")
                         : simple_error(400, "BadRequest", "malformed HTTP request");
      stream.expires_after(limits.write_timeout);
      co_await http::async_write(stream, res, use_tuple);
      // Let the client finish sending and read the answer: closing with unread input would
      // reset the connection before it sees the Status. Bounded in bytes and time.
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      std::array<char, 16384> sink;
      std::size_t drained = 0;
      stream.expires_after(std::chrono::seconds(5));
      while (drained < 4 * limits.max_body_bytes) {
        auto [rec, got] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
        if (rec) break;
        drained += got;
      }
      co_return;
    }
    const auto start = std::chrono::steady_clock::now();
    auto& req = parser.get();
    ApiRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.content_type = std::string(req[http::field::content_type]);
    request.accept = std::string(req[http::field::accept]);
    request.user_agent = std::string(req[http::field::user_agent]);
    request.body = std::move(req.body());
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();

    ApiResponse response = co_await handler->handle(request);

    http::response<http::string_body> res{static_cast<http::status>(response.status), version};
    res.set(http::field::server, "kwatch");
    res.set(http::field::content_type, response.content_type);
    res.set(http::field::cache_control, "no-cache, private");
    for (const auto& [name, value] : response.headers) res.set(name, value);
    if (request.method != "HEAD") res.body() = std::move(response.body);
    res.keep_alive(keep_alive);
    res.prepare_payload();
    stream.expires_after(limits.write_timeout);
    auto [wec, wn] = co_await http::async_write(stream, res, use_tuple);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("{} {} {} {:.3f}ms", request.method, request.target, response.status, ms);
    if (wec || !keep_alive) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

HttpServer::HttpServer(asio::io_context& ioc, std::shared_ptr<ApiHandler> handler,
                       HttpLimits limits)
    : impl_(std::make_shared<Impl>(ioc, std::move(handler), limits)) {}

HttpServer::~HttpServer() = default;

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

unsigned short HttpServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

}  // namespace kwatch::server
