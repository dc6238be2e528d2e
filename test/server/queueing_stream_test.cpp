#include "server/queueing_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket.hpp>
#include <gtest/gtest.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>
#include <thread>

namespace kwatch::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

TEST(QueueingStream, TextFrameHeadersUseTheShortestLength) {
  std::array<unsigned char, 10> h{};
  EXPECT_EQ(text_frame_header(0, h), 2u);
  EXPECT_EQ(h[0], 0x81);
  EXPECT_EQ(h[1], 0);
  EXPECT_EQ(text_frame_header(125, h), 2u);
  EXPECT_EQ(h[1], 125);
  EXPECT_EQ(text_frame_header(126, h), 4u);
  EXPECT_EQ(h[1], 126);
  EXPECT_EQ(h[2], 0);
  EXPECT_EQ(h[3], 126);
  EXPECT_EQ(text_frame_header(65535, h), 4u);
  EXPECT_EQ(h[2], 0xff);
  EXPECT_EQ(h[3], 0xff);
  EXPECT_EQ(text_frame_header(65536, h), 10u);
  EXPECT_EQ(h[1], 127);
  EXPECT_EQ((std::vector<int>(h.begin() + 2, h.end())), (std::vector<int>{0, 0, 0, 0, 0, 1, 0, 0}));
}

// A Beast client reads kwatch's frames, batched in one write each round, with Beast's own
// answers (the handshake, pongs, the close) falling between them, never inside one.
TEST(QueueingStream, DataFramesAndBeastsControlFramesShareOneOrderedStream) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::vector<std::size_t> sizes = {0, 1, 125, 126, 65535, 65536, 200000};
  std::vector<std::string> sent;
  for (std::size_t i = 0; i < sizes.size(); ++i) sent.emplace_back(sizes[i], char('a' + i));
  std::vector<std::string> received;
  std::vector<std::string> pongs;
  bool server_done = false;

  using Server = websocket::stream<QueueingStream<beast::tcp_stream>>;
  auto server = [&]() -> asio::awaitable<void> {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    auto ws = std::make_shared<Server>(beast::tcp_stream(std::move(socket)));
    ws->next_layer().keep_alive_while_writing(ws);
    auto [aec] = co_await ws->async_accept(use_tuple);
    EXPECT_FALSE(aec) << aec.message();
    // Reading answers the client's pings (Beast writes the pongs through the queue).
    asio::co_spawn(
        ioc,
        [ws]() -> asio::awaitable<void> {
          beast::flat_buffer buf;
          for (;;) {
            auto [ec, n] = co_await ws->async_read(buf, use_tuple);
            if (ec) break;
            buf.consume(buf.size());
          }
          ws->next_layer().stop();  // closed: the writer ends
        },
        asio::detached);
    // Two rounds of frames, each in one batch; the client pings during the first, and the
    // second waits for that ping, so that its pong is queued between the two.
    asio::steady_timer ping_seen(ioc, std::chrono::seconds(10));
    bool seen = false;
    ws->control_callback([&](websocket::frame_type kind, beast::string_view) {
      if (kind != websocket::frame_type::ping) return;
      seen = true;
      ping_seen.cancel();
    });
    for (int round = 0; round < 2; ++round) {
      if (round == 1 && !seen) co_await ping_seen.async_wait(use_tuple);
      if (round == 1) {
        EXPECT_TRUE(seen);
      }
      std::vector<std::array<unsigned char, 10>> headers(sent.size());
      std::uint64_t ticket = 0;
      for (std::size_t i = 0; i < sent.size(); ++i) {
        const std::size_t n = text_frame_header(sent[i].size(), headers[i]);
        ws->next_layer().queue(asio::buffer(headers[i].data(), n));
        ticket = ws->next_layer().queue(asio::buffer(sent[i]));
      }
      auto [ec, n] = co_await ws->next_layer().async_wait_sent(ticket, 0, use_tuple);
      EXPECT_FALSE(ec) << ec.message();
    }
    server_done = true;
  };

  auto client = [&]() -> asio::awaitable<void> {
    websocket::stream<beast::tcp_stream> ws(ioc);
    co_await beast::get_lowest_layer(ws).async_connect(acceptor.local_endpoint(),
                                                       asio::use_awaitable);
    co_await ws.async_handshake("127.0.0.1", "/", asio::use_awaitable);
    ws.control_callback([&](websocket::frame_type kind, beast::string_view payload) {
      if (kind == websocket::frame_type::pong) pongs.emplace_back(payload);
    });
    beast::flat_buffer buf;
    for (std::size_t i = 0; i < 2 * sent.size(); ++i) {
      if (i == 3) {
        const std::string text = "p" + std::to_string(i);
        const websocket::ping_data payload(text.c_str());
        co_await ws.async_ping(payload, asio::use_awaitable);
      }
      co_await ws.async_read(buf, asio::use_awaitable);
      EXPECT_TRUE(ws.got_text());
      received.push_back(beast::buffers_to_string(buf.data()));
      buf.consume(buf.size());
    }
    // Pongs arrive while reading: read until the server's close answers ours.
    co_await ws.async_close(websocket::close_code::normal, asio::use_awaitable);
  };

  std::exception_ptr failure;
  auto keep = [&](std::exception_ptr e) {
    if (e && !failure) failure = e;
  };
  asio::co_spawn(ioc, server(), keep);
  asio::co_spawn(ioc, client(), keep);
  ioc.run_for(std::chrono::seconds(20));
  if (failure) std::rethrow_exception(failure);
  EXPECT_TRUE(server_done);
  ASSERT_EQ(received.size(), 2 * sent.size());
  for (std::size_t i = 0; i < received.size(); ++i) {
    EXPECT_EQ(received[i], sent[i % sent.size()]) << i;
  }
  EXPECT_EQ(pongs, (std::vector<std::string>{"p3"}));
}

// A QueueingStream on the server side of a loopback connection, and the client's socket.
struct Connected {
  explicit Connected(asio::io_context& ioc)
      : acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), client(ioc) {
    client.connect(acceptor.local_endpoint());
    out = std::make_shared<QueueingStream<beast::tcp_stream>>(
        beast::tcp_stream(acceptor.accept()));
    out->keep_alive_while_writing(out);
  }
  tcp::acceptor acceptor;
  tcp::socket client;
  std::shared_ptr<QueueingStream<beast::tcp_stream>> out;
};

// Waiting is what sends: everything queued before a wait leaves in one write, in order; a wait
// for bytes already sent completes at once (never inside the call); after stop() a wait fails
// and nothing more is sent.
TEST(QueueingStream, AWaitSendsWhatIsQueuedInOneWriteAndStopEndsIt) {
  asio::io_context ioc;
  Connected c(ioc);
  tcp::socket& client = c.client;
  auto& out = c.out;
  std::vector<std::string> steps;
  bool in_call = false;
  out->queue(asio::buffer("one ", 4));
  const std::uint64_t t2 = out->queue(asio::buffer("two ", 4));
  out->async_wait_sent(t2, 8, [&](boost::system::error_code ec, std::size_t n) {
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(n, 8u);
    steps.push_back("sent two");
    in_call = true;
    out->async_wait_sent(t2, 1, [&](boost::system::error_code ec2, std::size_t) {
      EXPECT_FALSE(in_call);
      EXPECT_FALSE(ec2);
      steps.push_back("again");
      const std::uint64_t t3 = out->queue(asio::buffer("three", 5));
      out->stop();
      out->async_wait_sent(t3, 5, [&](boost::system::error_code ec3, std::size_t n3) {
        EXPECT_EQ(ec3, asio::error::operation_aborted);
        EXPECT_EQ(n3, 0u);
        steps.push_back("stopped");
        beast::error_code ignored;
        out->next_layer().socket().shutdown(tcp::socket::shutdown_send, ignored);
      });
    });
    in_call = false;
  });
  EXPECT_TRUE(steps.empty());  // nothing completes inside the initiating call
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_EQ(steps, (std::vector<std::string>{"sent two", "again", "stopped"}));
  std::string received;
  boost::system::error_code ec;
  for (;;) {
    char buf[64];
    const std::size_t n = client.read_some(asio::buffer(buf), ec);
    if (ec) break;
    received.append(buf, n);
  }
  EXPECT_EQ(received, "one two ");
}

// flush_now: what the socket takes at once is sent without waiting; what it cannot take (more
// than its buffers hold while the client is not reading) leaves in a write, in order.
TEST(QueueingStream, FlushNowSendsAtOnceOrLeavesTheRestToAWrite) {
  asio::io_context ioc;
  Connected c(ioc);
  tcp::socket& client = c.client;
  auto& out = c.out;
  out->queue(asio::buffer("small", 5));
  EXPECT_TRUE(out->flush_now());
  std::string got(5, '\0');
  asio::read(client, asio::buffer(got));
  EXPECT_EQ(got, "small");

  const std::string big(32 * 1024 * 1024, 'b');  // more than loopback buffers hold
  out->queue(asio::buffer("head", 4));
  const std::uint64_t ticket = out->queue(asio::buffer(big));
  EXPECT_FALSE(out->flush_now());
  EXPECT_TRUE(out->writing_since().has_value());
  bool sent = false;
  out->async_wait_sent(ticket, 0, [&](boost::system::error_code ec, std::size_t) {
    EXPECT_FALSE(ec) << ec.message();
    sent = true;
  });
  std::string received;
  std::thread reader([&] {
    std::vector<char> buf(1 << 20);
    boost::system::error_code ec;
    while (received.size() < 4 + big.size()) {
      const std::size_t n = client.read_some(asio::buffer(buf), ec);
      if (ec) break;
      received.append(buf.data(), n);
    }
  });
  ioc.run_for(std::chrono::seconds(20));
  reader.join();
  EXPECT_TRUE(sent);
  ASSERT_EQ(received.size(), 4 + big.size());
  EXPECT_EQ(received.substr(0, 4), "head");
  EXPECT_EQ(received.find_first_not_of('b', 4), std::string::npos);
}

}  // namespace
}  // namespace kwatch::server
