// gzip bodies: inflating is exact, bounded and strict (truncated, corrupt, trailing bytes and
// bombs are errors); HttpClient asks for gzip and inflates a gzip answer, and refuses an
// encoding it does not know, against a one-answer scripted server.
#include "base/gzip.hpp"
#include "client/http_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include <random>
#include <string>

namespace kwatch::client {

using base::gunzip;
using base::gzip;
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

TEST(Gzip, RoundTripsAndRefusesTruncatedCorruptTrailingAndOversizedBodies) {
  std::string text;
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) text += "item-" + std::to_string(rng() % 1000) + ",";
  const std::string packed = gzip(text);
  EXPECT_LT(packed.size(), text.size() / 3);
  std::string out;
  EXPECT_EQ(gunzip(packed, 1u << 20, out), "");
  EXPECT_EQ(out, text);

  EXPECT_NE(gunzip(std::string_view(packed).substr(0, packed.size() / 2), 1u << 20, out), "");
  std::string corrupt = packed;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  EXPECT_NE(gunzip(corrupt, 1u << 20, out), "");
  EXPECT_NE(gunzip(packed + "xx", 1u << 20, out), "") << "bytes after the body";
  EXPECT_NE(gunzip("not gzip at all", 1u << 20, out), "");
  // A bomb: 64 MiB of zeros packs into ~64 KiB; a 1 MiB limit stops it early.
  const std::string bomb = gzip(std::string(64u << 20, '\0'), 9);
  const std::string why = gunzip(bomb, 1u << 20, out);
  EXPECT_NE(why.find("larger than"), std::string::npos) << why;
  EXPECT_LE(out.size(), 1u << 20);
}

// Answers one request with `response`; records the request's head.
asio::awaitable<void> answer_once(tcp::acceptor& acceptor, std::string response, std::string& head) {
  auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return;
  std::string buffer;
  auto [rec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n",
                                                  asio::as_tuple(asio::use_awaitable));
  if (rec) co_return;
  head = buffer.substr(0, n);
  co_await asio::async_write(socket, asio::buffer(response), asio::as_tuple(asio::use_awaitable));
}

std::string answer(const std::string& encoding, const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: " + encoding +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// A client of `acceptor`'s address.
std::shared_ptr<HttpClient> client_of(asio::io_context& ioc, const tcp::acceptor& acceptor) {
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  auto client = HttpClient::create(ioc.get_executor(), config);
  EXPECT_TRUE(client);
  return client ? *client : nullptr;
}

TEST(Gzip, TheClientAsksForGzipAndInflatesTheAnswer) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  auto client = client_of(ioc, acceptor);
  ASSERT_TRUE(client);
  std::string big = R"({"kind":"ConfigMapList","items":[)";
  for (int i = 0; i < 2000; ++i) big += std::string(i ? "," : "") + R"({"metadata":{"name":"cm-)" + std::to_string(i) + R"("}})";
  big += "]}";
  std::string head;
  asio::co_spawn(ioc, answer_once(acceptor, answer("gzip", gzip(big)), head), asio::detached);
  bool done = false;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    auto list = co_await client->get("/api/v1/configmaps");
    EXPECT_TRUE(list) << list.error().describe();
    if (list) {
      EXPECT_EQ(list->at("items").as_array().size(), 2000u);
    }
    done = true;
  }, asio::detached);
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(done);
  EXPECT_NE(head.find("Accept-Encoding: gzip"), std::string::npos) << head;
}

TEST(Gzip, AnAnswerInAnUnknownEncodingIsADecodeError) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  auto client = client_of(ioc, acceptor);
  ASSERT_TRUE(client);
  std::string head;
  asio::co_spawn(ioc, answer_once(acceptor, answer("br", "{}"), head), asio::detached);
  bool done = false;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    auto got = co_await client->get("/api/v1/configmaps");
    EXPECT_FALSE(got);
    if (!got) {
      EXPECT_EQ(got.error().kind, ApiError::Kind::decode);
      EXPECT_NE(got.error().message.find("\"br\""), std::string::npos) << got.error().message;
    }
    done = true;
  }, asio::detached);
  ioc.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace kwatch::client
