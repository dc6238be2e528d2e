// HttpClient::forward_websocket against a WebSocket server on loopback: the handshake's answer
// (the subprotocol the server picked), messages relayed whole with their type, and a message
// over the client's max_response_bytes refused instead of held.
#include "client/http_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

namespace kwatch::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using asio::ip::tcp;

// Accepts one WebSocket, answering subprotocol `protocol`, then sends `messages` (text, then
// one binary) and closes.
asio::awaitable<void> serve(tcp::acceptor& acceptor, std::string protocol,
                            std::vector<std::string> messages) {
  auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return;
  websocket::stream<beast::tcp_stream> ws(std::move(socket));
  ws.set_option(websocket::stream_base::decorator([protocol](websocket::response_type& res) {
    res.set(beast::http::field::sec_websocket_protocol, protocol);
  }));
  auto [aec] = co_await ws.async_accept(asio::as_tuple(asio::use_awaitable));
  if (aec) co_return;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    ws.binary(i + 1 == messages.size());
    auto [wec, n] =
        co_await ws.async_write(asio::buffer(messages[i]), asio::as_tuple(asio::use_awaitable));
    if (wec) co_return;
  }
  co_await ws.async_close(websocket::close_code::normal, asio::as_tuple(asio::use_awaitable));
}

struct Relayed {
  unsigned status = 0;
  std::string protocol;
  std::vector<ForwardedSocket::Message> messages;
  std::string error;
};

Relayed relay(std::vector<std::string> messages, std::size_t max_bytes) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  asio::co_spawn(ioc, serve(acceptor, "base64.binary.k8s.io", std::move(messages)),
                 asio::detached);
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  HttpClient::Options options;
  options.max_response_bytes = max_bytes;
  auto made = HttpClient::create(ioc.get_executor(), config, options);
  Relayed out;
  if (!made) {
    out.error = made.error();
    return out;
  }
  std::shared_ptr<HttpClient> client = *made;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        ForwardedRequest request;
        request.method = "GET";
        request.target = "/apis/g/v1/things?watch=1";
        request.headers.emplace_back("Sec-WebSocket-Protocol", "base64.binary.k8s.io");
        auto socket = co_await client->forward_websocket(std::move(request));
        if (!socket) {
          out.error = socket.error().describe();
          co_return;
        }
        out.status = (*socket)->status;
        for (const auto& [name, value] : (*socket)->headers) {
          if (name == "Sec-WebSocket-Protocol") out.protocol = value;
        }
        for (;;) {
          auto m = co_await (*socket)->next();
          if (!m) {
            out.error = m.error().describe();
            break;
          }
          if (!*m) break;
          out.messages.push_back(std::move(**m));
        }
      },
      asio::detached);
  ioc.run();
  return out;
}

TEST(ForwardedSocket, MessagesComeWholeWithTheirTypeAndTheServersSubprotocol) {
  Relayed r = relay({"{\"type\":\"ADDED\"}", std::string("\x00\x01", 2)}, 1 << 20);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.status, 101u);
  EXPECT_EQ(r.protocol, "base64.binary.k8s.io");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_FALSE(r.messages[0].binary);
  EXPECT_EQ(r.messages[0].data, "{\"type\":\"ADDED\"}");
  EXPECT_TRUE(r.messages[1].binary);
  EXPECT_EQ(r.messages[1].data.size(), 2u);
}

TEST(ForwardedSocket, AMessageOverTheLimitIsAnErrorNotHeld) {
  Relayed r = relay({"small", std::string(64 * 1024, 'x')}, 16 * 1024);
  ASSERT_EQ(r.messages.size(), 1u) << "the small one came";
  EXPECT_FALSE(r.error.empty()) << "the large one is refused";
}

// Accepts one WebSocket and echoes each message back with its type, prefixed, until closed.
asio::awaitable<void> echo(tcp::acceptor& acceptor) {
  auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return;
  websocket::stream<beast::tcp_stream> ws(std::move(socket));
  auto [aec] = co_await ws.async_accept(asio::as_tuple(asio::use_awaitable));
  if (aec) co_return;
  for (;;) {
    beast::flat_buffer buffer;
    auto [rec, n] = co_await ws.async_read(buffer, asio::as_tuple(asio::use_awaitable));
    if (rec) co_return;
    std::string reply = "echo:" + beast::buffers_to_string(buffer.data());
    ws.binary(ws.got_binary());
    auto [wec, m] =
        co_await ws.async_write(asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
    if (wec) co_return;
  }
}

// The client's side of a relay: messages sent while a next() waits reach the server with
// their type (the server's answers prove it), one after another.
TEST(ForwardedSocket, SentMessagesReachTheServerWhileAReadWaits) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  asio::co_spawn(ioc, echo(acceptor), asio::detached);
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  auto made = HttpClient::create(ioc.get_executor(), config);
  ASSERT_TRUE(made) << made.error();
  std::shared_ptr<HttpClient> client = *made;
  std::vector<ForwardedSocket::Message> answers;
  std::string error;
  std::shared_ptr<ForwardedSocket> socket;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        ForwardedRequest request;
        request.method = "GET";
        request.target = "/apis/g/v1/consoles/a";
        auto opened = co_await client->forward_websocket(std::move(request));
        if (!opened) {
          error = opened.error().describe();
          co_return;
        }
        socket = std::move(*opened);
        // The sender runs beside the reader, as the server's relay does. (The executor named
        // first: GCC 12 mishandles a co_await among a call's arguments.)
        const auto executor = co_await asio::this_coro::executor;
        asio::co_spawn(
            executor,
            [socket]() -> asio::awaitable<void> {
              ForwardedSocket::Message text{false, "hello"};
              auto sent = co_await socket->send(std::move(text));
              if (!sent) co_return;
              ForwardedSocket::Message bytes{true, std::string("\x00\x02", 2)};
              co_await socket->send(std::move(bytes));
            },
            asio::detached);
        while (answers.size() < 2) {
          auto m = co_await socket->next();
          if (!m || !*m) {
            error = m ? "closed" : m.error().describe();
            break;
          }
          answers.push_back(std::move(**m));
        }
        socket->close();
      },
      asio::detached);
  ioc.run();
  EXPECT_TRUE(error.empty()) << error;
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_FALSE(answers[0].binary);
  EXPECT_EQ(answers[0].data, "echo:hello");
  EXPECT_TRUE(answers[1].binary);
  EXPECT_EQ(answers[1].data, std::string("echo:\x00\x02", 7));
}

}  // namespace
}  // namespace kwatch::client
