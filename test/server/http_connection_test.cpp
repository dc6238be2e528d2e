// One connection's life over Beast's test stream: requests split into single bytes, responses
// written a few bytes at a time, and a failure injected into each read and write in turn. Every
// connection must end (no hang), leave nothing registered, and answer whole what it answers.
#include "server/http_server_impl.hpp"

#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"

#include <boost/beast/_experimental/test/stream.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace kwatch::server {

// Beast's test stream: no deadlines (the test decides when it ends), closing is the only way to
// cancel, and nothing moves to another executor.
template <>
struct StreamOps<beast::test::stream> {
  using Stream = beast::test::stream;
  static void expires_after(Stream&, std::chrono::steady_clock::duration) {}
  static void expires_never(Stream&) {}
  static void cancel(Stream& s) { s.close(); }
  static void close(Stream& s) { s.close(); }
  static void shutdown_send(Stream& s) { s.close(); }
  static std::string remote_address(Stream&) { return "127.0.0.1"; }
  static std::shared_ptr<const auth::ClientCertificate> client_certificate(Stream&) {
    return nullptr;
  }
  static std::optional<Stream> hand_over(Stream&, const asio::any_io_executor&) {
    return std::nullopt;
  }
  static std::size_t send_now(Stream&, const std::vector<asio::const_buffer>&) { return 0; }
  static Stream& raw(Stream& s) { return s; }
};

namespace {

using TestStream = beast::test::stream;

const std::string kConfigMap =
    R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}})";
const std::string kCreate =
    "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\n"
    "Host: kwatch\r\nContent-Type: application/json\r\nContent-Length: " +
    std::to_string(kConfigMap.size()) + "\r\n\r\n" + kConfigMap;
const std::string kGetClose =
    "GET /api/v1/namespaces/default/configmaps/c HTTP/1.1\r\nHost: kwatch\r\n"
    "Connection: close\r\n\r\n";

class HttpConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    auto scheme = kinds::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(std::move(*storage), scheme);
    handler_ = std::make_shared<ApiHandler>(scheme, store_, std::make_shared<Metrics>(),
                                            "127.0.0.1:0");
    using Ensured = apimachinery::ApiResult<void>;
    auto ok = test::run_to_end<Ensured>(ioc_, [this]() -> asio::awaitable<Ensured> {
      std::string ns = "default";
      co_return co_await store_->ensure_namespace(std::move(ns));
    });
    ASSERT_TRUE(ok);
    impl_ = std::make_shared<HttpServer::Impl>(ioc_, handler_, HttpLimits{}, nullptr);
  }

  // Serves `input` on a connection whose stream `server` is, with `client` its peer, to the
  // connection's end; what the client received.
  std::string serve(TestStream server, TestStream& client, const std::string& input) {
    server.append(input);
    client.close();  // the client has sent everything: the server reads EOF after it
    bool done = false;
    asio::co_spawn(ioc_, impl_->serve_connection(std::move(server), nullptr),
                   [&](std::exception_ptr e) {
                     done = true;
                     if (e) std::rethrow_exception(e);
                   });
    EXPECT_TRUE(test::eventually(ioc_, [&] { return done; })) << "the connection did not end";
    // Nothing of it stays registered.
    EXPECT_TRUE(impl_->connections.empty());
    EXPECT_EQ(impl_->streams.load(), 0u);
    return std::string(client.str());
  }

  // The responses in `answer`, in order, as status codes; a response cut short (its head or its
  // body incomplete) is 0.
  static std::vector<unsigned> statuses(const std::string& answer) {
    std::vector<unsigned> out;
    std::string_view rest = answer;
    while (!rest.empty()) {
      http::response_parser<http::string_body> parser;
      parser.eager(true);
      beast::error_code ec;
      const std::size_t used = parser.put(asio::buffer(rest.data(), rest.size()), ec);
      if (ec || !parser.is_done()) {
        out.push_back(0);
        break;
      }
      out.push_back(parser.get().result_int());
      rest.remove_prefix(used);
    }
    return out;
  }

  asio::io_context ioc_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<ApiHandler> handler_;
  std::shared_ptr<HttpServer::Impl> impl_;
};

// kube's warning budget: 4 KiB of Warning headers; once a warning would pass it, every warning
// is cut to 256 characters, and those that still do not fit are left out.
TEST(Warnings, PastTheBudgetEveryWarningIsCutShort) {
  namespace http = boost::beast::http;
  auto values = [](const std::vector<std::string>& warnings) {
    http::response<http::string_body> res;
    add_warnings(res, warnings);
    std::vector<std::string> out;
    for (const auto& field : res) out.emplace_back(field.value());
    return out;
  };
  EXPECT_EQ(values({"short", "with \"quotes\""}),
            (std::vector<std::string>{"299 - \"short\"", "299 - \"with \\\"quotes\\\"\""}));
  // A 5,000-character warning after a short one: both kept, the long one cut to 256.
  const auto cut = values({"first", std::string(5000, 'x')});
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0], "299 - \"first\"");
  EXPECT_EQ(cut[1], "299 - \"" + std::string(256, 'x') + "\"");
  // Many long warnings: cut, and only as many as fit in 4 KiB (each 264 bytes: 15 of them,
  // the sixteenth starting past the budget).
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back(std::to_string(i) + std::string(1000, 'y'));
  const auto bounded = values(many);
  EXPECT_EQ(bounded.size(), 16u);
  for (const auto& v : bounded) EXPECT_EQ(v.size(), 264u);
}

TEST_F(HttpConnectionTest, TwoRequestsOnOneConnectionAreAnsweredInOrder) {
  TestStream server(ioc_);
  TestStream client(ioc_);
  server.connect(client);
  const std::string answer = serve(std::move(server), client, kCreate + kGetClose);
  EXPECT_EQ(statuses(answer), (std::vector<unsigned>{201, 200})) << answer;
  EXPECT_NE(answer.find(R"("data":{"a":"1"})"), std::string::npos);
}

// A request that arrives one byte per read, and responses the peer takes seven bytes per write.
TEST_F(HttpConnectionTest, RequestsInSingleBytesAndResponsesInPiecesAreWhole) {
  TestStream server(ioc_);
  TestStream client(ioc_);
  server.connect(client);
  server.read_size(1);
  server.write_size(7);
  const std::string answer = serve(std::move(server), client, kCreate + kGetClose);
  EXPECT_EQ(statuses(answer), (std::vector<unsigned>{201, 200})) << answer;
}

// What Beast cannot parse is refused in kube's words: 400 for a malformed head, 413 past the
// body limit; the connection then ends after reading what the client still sends.
TEST_F(HttpConnectionTest, MalformedAndOversizedRequestsAreRefused) {
  {
    TestStream server(ioc_);
    TestStream client(ioc_);
    server.connect(client);
    const std::string answer = serve(std::move(server), client, "NOT HTTP AT ALL\r\n\r\n");
    EXPECT_EQ(statuses(answer), std::vector<unsigned>{400}) << answer;
  }
  {
    TestStream server(ioc_);
    TestStream client(ioc_);
    server.connect(client);
    const std::string big = "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\n"
                            "Host: kwatch\r\nContent-Length: 4000000\r\n\r\n{";
    const std::string answer = serve(std::move(server), client, big);
    EXPECT_EQ(statuses(answer), std::vector<unsigned>{413}) << answer;
  }
}

// The n-th read or write fails, for every n until none does: the connection ends each time,
// the answers before the failure are whole, and none comes after it.
TEST_F(HttpConnectionTest, AFailureInAnyReadOrWriteEndsTheConnectionCleanly) {
  int n = 0;
  for (; n < 300; ++n) {
    beast::test::fail_count fails(static_cast<std::size_t>(n));
    TestStream server(ioc_, fails);
    TestStream client(ioc_);
    server.connect(client);
    server.read_size(16);
    server.write_size(64);
    const std::string answer = serve(std::move(server), client, kCreate + kGetClose);
    const auto got = statuses(answer);
    ASSERT_LE(got.size(), 2u) << answer;
    // The create: made now (201) or by an earlier round that failed later (409).
    if (!got.empty() && got[0] != 0) {
      EXPECT_TRUE(got[0] == 201 || got[0] == 409) << n << ": " << answer;
    }
    if (got.size() == 2 && got[1] == 200) break;  // no failure reached: all answered
    // After a failure nothing more is answered: only the last response may be cut short.
    for (std::size_t i = 0; i + 1 < got.size(); ++i) EXPECT_NE(got[i], 0u) << n;
  }
  EXPECT_LT(n, 300) << "some read or write always failed";
  EXPECT_GT(n, 20) << "the exchange took fewer reads and writes than it should";
}

}  // namespace
}  // namespace kwatch::server
