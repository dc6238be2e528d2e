#include "server/tls_stream.hpp"

#include "server/tls_certificates.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace kwatch::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using boost::system::error_code;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
using ClientStream = asio::ssl::stream<tcp::socket>;

const ServingCertificate& certificate() {
  static const ServingCertificate cert = [] {
    const fs::path dir = fs::temp_directory_path() / ("kwatch-tls-stream-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto c = ensure_self_signed_certificate(dir.string(), {"127.0.0.1"});
    if (!c) throw std::runtime_error(c.error());
    return *c;
  }();
  return cert;
}

class TlsStreamTest : public ::testing::Test {
 protected:
  TlsStreamTest() {
    const auto& c = certificate();
    server_ctx.use_certificate_chain_file(c.cert_file);
    server_ctx.use_private_key_file(c.key_file, asio::ssl::context::pem);
    // No session tickets: the first record after the handshake is the application's.
    SSL_CTX_set_num_tickets(server_ctx.native_handle(), 0);
    client_ctx.set_verify_mode(asio::ssl::verify_none);
  }

  asio::awaitable<TlsStream> accept_tls() {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    co_return TlsStream(beast::tcp_stream(std::move(socket)), server_ctx.native_handle());
  }

  // Accepts one connection, completes the handshake and reads once: the read's outcome.
  asio::awaitable<error_code> accept_and_read_once() {
    TlsStream stream = co_await accept_tls();
    EXPECT_FALSE(co_await stream.handshake());
    std::array<char, 100> buf;
    const auto in = asio::buffer(buf);
    auto [ec, n] = co_await stream.async_read_some(in, use_tuple);
    co_return ec;
  }

  asio::awaitable<ClientStream> connect_tls() {
    ClientStream client(ioc, client_ctx);
    const tcp::endpoint target = acceptor.local_endpoint();
    co_await client.next_layer().async_connect(target, asio::use_awaitable);
    const auto role = asio::ssl::stream_base::client;
    co_await client.async_handshake(role, asio::use_awaitable);
    co_return client;
  }

  // Runs both sides with a deadline; each must finish.
  template <class Server, class Client>
  void run(Server server, Client client) {
    bool server_done = false;
    bool client_done = false;
    asio::co_spawn(ioc, std::move(server), [&](std::exception_ptr e) {
      server_done = true;
      if (e) ADD_FAILURE() << "server side threw";
    });
    asio::co_spawn(ioc, std::move(client), [&](std::exception_ptr e) {
      client_done = true;
      if (e) ADD_FAILURE() << "client side threw";
    });
    ioc.run_for(std::chrono::seconds(20));
    EXPECT_TRUE(server_done);
    EXPECT_TRUE(client_done);
  }

  asio::io_context ioc;
  asio::ssl::context server_ctx{asio::ssl::context::tls_server};
  asio::ssl::context client_ctx{asio::ssl::context::tls_client};
  tcp::acceptor acceptor{ioc, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
};

TEST_F(TlsStreamTest, EchoesSmallAndOneMebibytePayloadsAndSeesThePeersCloseAsEof) {
  error_code server_end;
  std::size_t echoed = 0;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    const error_code hec = co_await stream.handshake();
    EXPECT_FALSE(hec) << hec.message();
    if (hec) co_return;
    std::vector<char> buf(10000);
    for (;;) {
      const auto in = asio::buffer(buf);
      auto [ec, n] = co_await stream.async_read_some(in, use_tuple);
      if (ec) {
        server_end = ec;
        break;
      }
      const auto out = asio::buffer(buf.data(), n);
      auto [wec, wn] = co_await asio::async_write(stream, out, use_tuple);
      EXPECT_FALSE(wec);
      echoed += wn;
    }
    stream.send_close_notify();
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    const std::string hello = "hello";
    const auto hello_out = asio::buffer(hello);
    co_await asio::async_write(c, hello_out, asio::use_awaitable);
    std::string got(5, '\0');
    const auto got_in = asio::buffer(got);
    co_await asio::async_read(c, got_in, asio::use_awaitable);
    EXPECT_EQ(got, "hello");

    std::vector<unsigned char> big(1 << 20);
    std::mt19937 rng(7);
    for (auto& b : big) b = static_cast<unsigned char>(rng());
    std::vector<unsigned char> back(big.size());
    // Written and read concurrently: the echo is bounded by the socket buffers otherwise.
    auto writer = [&c, &big]() -> asio::awaitable<void> {
      const auto big_out = asio::buffer(big);
      co_await asio::async_write(c, big_out, asio::use_awaitable);
    };
    bool written = false;
    asio::co_spawn(co_await asio::this_coro::executor, writer(),
                   [&written](std::exception_ptr) { written = true; });
    const auto back_in = asio::buffer(back);
    co_await asio::async_read(c, back_in, asio::use_awaitable);
    EXPECT_TRUE(written);
    EXPECT_TRUE(big == back);
    // close_notify; the server answers with its own.
    auto [sec] = co_await c.async_shutdown(use_tuple);
    EXPECT_TRUE(!sec || sec == asio::error::eof || sec == asio::ssl::error::stream_truncated)
        << sec.message();
  };
  run(server(), client());
  EXPECT_EQ(server_end, asio::error::eof) << server_end.message();
  EXPECT_EQ(echoed, 5u + (1u << 20));
}

// A WebSocket watch over TLS: a read waits (for the client's frames) while writes complete.
// A completed write releases the idle buffers; the pending read's must stay, or what the peer
// sends next (its close frame, say) lands in freed memory (a crash seen with a Beast client).
TEST_F(TlsStreamTest, AReadPendingWhileWritesCompleteGetsWhatThePeerSendsNext) {
  std::string received;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    const error_code hec = co_await stream.handshake();
    EXPECT_FALSE(hec) << hec.message();
    if (hec) co_return;
    auto executor = co_await asio::this_coro::executor;
    bool read_done = false;
    std::array<char, 64> buf{};
    asio::co_spawn(
        executor,
        [&]() -> asio::awaitable<void> {
          const auto in = asio::buffer(buf);
          auto [ec, n] = co_await stream.async_read_some(in, use_tuple);
          EXPECT_FALSE(ec) << ec.message();
          received.assign(buf.data(), n);
          read_done = true;
        },
        asio::detached);
    // Writes complete while the read waits; the client answers the last one.
    for (int i = 0; i < 3; ++i) {
      const std::string event = "event " + std::to_string(i) + "\n";
      const auto out = asio::buffer(event);
      auto [wec, wn] = co_await asio::async_write(stream, out, use_tuple);
      EXPECT_FALSE(wec) << wec.message();
    }
    asio::steady_timer wait(executor);
    for (int i = 0; i < 1000 && !read_done; ++i) {
      wait.expires_after(std::chrono::milliseconds(5));
      co_await wait.async_wait(use_tuple);
    }
    EXPECT_TRUE(read_done);
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    std::string got(24, '\0');
    const auto got_in = asio::buffer(got);
    co_await asio::async_read(c, got_in, asio::use_awaitable);
    EXPECT_EQ(got, "event 0\nevent 1\nevent 2\n");
    const std::string reply = "close frame";
    const auto reply_out = asio::buffer(reply);
    co_await asio::async_write(c, reply_out, asio::use_awaitable);
  };
  run(server(), client());
  EXPECT_EQ(received, "close frame");
}

TEST_F(TlsStreamTest, AGatheredWriteOfManySmallBuffersIsOneRecord) {
  std::vector<std::string> pieces;
  for (int i = 0; i < 300; ++i) pieces.push_back("piece-" + std::to_string(1000 + i) + ";");
  std::size_t plain = 0;
  for (const auto& p : pieces) plain += p.size();
  std::size_t reported = 0;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    const error_code hec = co_await stream.handshake();
    EXPECT_FALSE(hec);
    std::vector<asio::const_buffer> buffers;
    for (const auto& p : pieces) buffers.push_back(asio::buffer(p));
    auto [ec, n] = co_await stream.async_write_some(buffers, use_tuple);
    EXPECT_FALSE(ec);
    reported = n;
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    // The raw bytes: one TLS 1.3 application-data record holding all the plaintext.
    std::array<unsigned char, 5> header{};
    const auto header_in = asio::buffer(header);
    co_await asio::async_read(c.next_layer(), header_in, asio::use_awaitable);
    EXPECT_EQ(header[0], 23);  // application_data
    const std::size_t length = (std::size_t{header[3]} << 8) | header[4];
    EXPECT_EQ(length, plain + 1 + 16);  // inner content type + GCM tag
  };
  run(server(), client());
  EXPECT_EQ(reported, plain);
}

TEST_F(TlsStreamTest, GarbageInsteadOfAHandshakeIsAnErrorNotACrash) {
  error_code handshake;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    handshake = co_await stream.handshake();
  };
  auto client = [&]() -> asio::awaitable<void> {
    tcp::socket s(ioc);
    const tcp::endpoint target = acceptor.local_endpoint();
    co_await s.async_connect(target, asio::use_awaitable);
    std::string junk("\x16\x03\x01\x00\x20", 5);
    junk += std::string(64, '\x7f');
    const auto junk_out = asio::buffer(junk);
    co_await asio::async_write(s, junk_out, asio::use_awaitable);
    std::array<char, 256> sink;
    for (;;) {
      const auto sink_in = asio::buffer(sink);
      auto [ec, n] = co_await s.async_read_some(sink_in, use_tuple);
      if (ec) break;
    }
  };
  run(server(), client());
  EXPECT_TRUE(handshake);
  EXPECT_NE(handshake, asio::error::eof);
}

TEST_F(TlsStreamTest, GarbageAfterTheHandshakeIsAReadError) {
  error_code read;
  auto server = [&]() -> asio::awaitable<void> { read = co_await accept_and_read_once(); };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    const std::string junk("\x17\x03\x03\x00\x10zzzzzzzzzzzzzzzz", 21);
    const auto junk_out = asio::buffer(junk);
    co_await asio::async_write(c.next_layer(), junk_out, asio::use_awaitable);
    std::array<char, 256> sink;
    const auto sink_in = asio::buffer(sink);
    co_await c.next_layer().async_read_some(sink_in, use_tuple);  // the alert, or the close
  };
  run(server(), client());
  EXPECT_TRUE(read);
  EXPECT_EQ(read.category(), asio::error::get_ssl_category()) << read.message();
}

TEST_F(TlsStreamTest, ATcpCloseWithoutCloseNotifyIsEof) {
  error_code read;
  auto server = [&]() -> asio::awaitable<void> { read = co_await accept_and_read_once(); };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    c.next_layer().close();
  };
  run(server(), client());
  EXPECT_EQ(read, asio::error::eof) << read.message();
}

TEST_F(TlsStreamTest, AnIdleReadEndsAtTheTcpStreamsDeadline) {
  error_code read;
  bool server_finished = false;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    EXPECT_FALSE(co_await stream.handshake());
    stream.next_layer().expires_after(std::chrono::milliseconds(100));
    std::array<char, 100> buf;
    const auto in = asio::buffer(buf);
    auto [ec, n] = co_await stream.async_read_some(in, use_tuple);
    read = ec;
    server_finished = true;
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    // Silent until the server gives up and closes.
    std::array<char, 16> sink;
    const auto sink_in = asio::buffer(sink);
    auto [ec, n] = co_await c.next_layer().async_read_some(sink_in, use_tuple);
    EXPECT_TRUE(ec);
  };
  run(server(), client());
  EXPECT_TRUE(server_finished);
  EXPECT_EQ(read, beast::error::timeout) << read.message();
}

// HTTP/2's reader waits for input before it takes a buffer: while it waits the stream holds no
// input buffer; input OpenSSL already has ends the wait at once; the peer's close ends it too.
TEST_F(TlsStreamTest, AWaitForInputHoldsNoBufferAndEndsWhenInputComes) {
  bool waiting = false;
  bool checked = false;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    EXPECT_FALSE(co_await stream.handshake());
    // "hello" read in part: the rest is buffered, so the wait ends without the socket.
    std::array<char, 2> part;
    co_await asio::async_read(stream, asio::buffer(part), asio::use_awaitable);
    auto [buffered] = co_await stream.async_wait_readable(use_tuple);
    EXPECT_FALSE(buffered) << buffered.message();
    std::array<char, 3> rest;
    co_await asio::async_read(stream, asio::buffer(rest), asio::use_awaitable);
    EXPECT_EQ(std::string(rest.data(), 3), "llo");
    // Nothing buffered: the wait holds nothing and ends when "world" comes.
    bool woken = false;
    stream.async_wait_readable([&](error_code ec) {
      EXPECT_FALSE(ec) << ec.message();
      woken = true;
    });
    EXPECT_EQ(stream.input_buffer_capacity(), 0u);
    waiting = true;
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 2000 && !woken; ++i) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(use_tuple);
    }
    EXPECT_TRUE(woken);
    std::array<char, 5> next;
    co_await asio::async_read(stream, asio::buffer(next), asio::use_awaitable);
    EXPECT_EQ(std::string(next.data(), 5), "world");
    // The peer closes: the wait ends and the read that follows sees the end.
    auto [closed] = co_await stream.async_wait_readable(use_tuple);
    EXPECT_FALSE(closed) << closed.message();
    std::array<char, 8> after;
    auto [end, n] = co_await stream.async_read_some(asio::buffer(after), use_tuple);
    EXPECT_EQ(end, asio::error::eof) << end.message();
    checked = true;
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    const std::string hello = "hello";
    co_await asio::async_write(c, asio::buffer(hello), asio::use_awaitable);
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 2000 && !waiting; ++i) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(use_tuple);
    }
    const std::string world = "world";
    co_await asio::async_write(c, asio::buffer(world), asio::use_awaitable);
    auto [sec] = co_await c.async_shutdown(use_tuple);
    c.next_layer().close();
  };
  run(server(), client());
  EXPECT_TRUE(checked);
}

TEST_F(TlsStreamTest, AHandlerIsNeverInvokedInsideTheInitiatingCall) {
  bool checked = false;
  auto server = [&]() -> asio::awaitable<void> {
    TlsStream stream = co_await accept_tls();
    EXPECT_FALSE(co_await stream.handshake());
    // An empty write completes at once, and still not inline.
    bool called = false;
    std::vector<asio::const_buffer> none;
    stream.async_write_some(none, [&called](error_code, std::size_t) { called = true; });
    EXPECT_FALSE(called);
    // Two records arrive together: the second read is served from what OpenSSL already has.
    std::array<char, 5> first;
    const auto first_in = asio::buffer(first);
    co_await asio::async_read(stream, first_in, asio::use_awaitable);
    bool called2 = false;
    std::array<char, 5> second;
    stream.async_read_some(asio::buffer(second), [&called2](error_code, std::size_t) { called2 = true; });
    EXPECT_FALSE(called2);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
    co_await t.async_wait(asio::use_awaitable);
    EXPECT_TRUE(called);
    EXPECT_TRUE(called2);
    EXPECT_EQ(std::string(second.data(), 5), "world");
    checked = true;
  };
  auto client = [&]() -> asio::awaitable<void> {
    ClientStream c = co_await connect_tls();
    const std::string both = "helloworld";
    const auto out = asio::buffer(both);
    co_await asio::async_write(c, out, asio::use_awaitable);
    std::array<char, 16> sink;
    const auto sink_in = asio::buffer(sink);
    co_await c.async_read_some(sink_in, use_tuple);  // until the server closes
  };
  run(server(), client());
  EXPECT_TRUE(checked);
}

}  // namespace
}  // namespace kwatch::server
