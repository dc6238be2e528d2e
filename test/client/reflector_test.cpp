// The Reflector against a scripted server: the 410 path (the first watch answers with an ERROR
// event, 410 Expired, so the reflector re-lists, reports the object that vanished meanwhile as
// DELETED once, and watches again from the new list's resourceVersion), and streaming lists
// (served: the initial events up to the bookmark are the state and the same stream goes on;
// refused: a list instead).
#include "client/reflector.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace kwatch::client {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string cm(const std::string& name, int rv) {
  return R"({"kind":"ConfigMap","metadata":{"namespace":"x","name":")" + name +
         R"(","resourceVersion":")" + std::to_string(rv) + R"("}})";
}

// Answers lists and watches of /api/v1/namespaces/x/configmaps from a script; records targets.
struct ScriptedServer {
  explicit ScriptedServer(asio::io_context& ioc) : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}) {}

  asio::awaitable<void> serve() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(acceptor.get_executor(), connection(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> connection(tcp::socket socket) {
    std::string buffer;
    for (;;) {
      auto [ec, n] = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "\r\n\r\n",
                                                     asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      const std::string head = buffer.substr(0, n);
      buffer.erase(0, n);
      const std::string target = head.substr(4, head.find(' ', 4) - 4);
      targets.push_back(target);
      std::string response;
      bool keep_open = false;
      if (target.find("sendInitialEvents=true") != std::string::npos) {
        ++streams;
        if (!streaming) {
          const std::string body =
              R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"sendInitialEvents is forbidden","reason":"Invalid","code":422})";
          response = "HTTP/1.1 422 Unprocessable Entity\r\nContent-Type: application/json\r\n"
                     "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        } else {
          response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                     chunk(R"({"type":"ADDED","object":)" + cm("a", 3) + "}\n" +
                           R"({"type":"ADDED","object":)" + cm("b", 4) + "}\n") +
                     chunk(R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"5","annotations":{"k8s.io/initial-events-end":"true"}}}})"
                           "\n") +
                     chunk(R"({"type":"MODIFIED","object":)" + cm("b", 6) + "}\n");
          keep_open = true;
        }
      } else if (target.find("watch=1") == std::string::npos) {
        ++lists;
        const std::string body =
            lists == 1 ? R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"5"},"items":[)" +
                             cm("a", 3) + "," + cm("b", 4) + "]}"
                       : R"({"kind":"ConfigMapList","metadata":{"resourceVersion":"8"},"items":[)" +
                             cm("a", 7) + "]}";
        response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body;
      } else {
        ++watches;
        response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        if (watches == 1) {
          response += chunk(R"x({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 5 (6)","reason":"Expired","code":410}})x"
                            "\n") +
                      "0\r\n\r\n";
        } else {
          response += chunk(R"({"type":"ADDED","object":)" + cm("c", 9) + "}\n");
          keep_open = true;
        }
      }
      auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(response), asio::as_tuple(asio::use_awaitable));
      if (wec) co_return;
      if (keep_open) {
        // Holds the stream open until the client goes.
        co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), "never",
                                        asio::as_tuple(asio::use_awaitable));
        co_return;
      }
      if (target.find("watch=1") != std::string::npos) co_return;  // the stream ended
    }
  }

  tcp::acceptor acceptor;
  std::vector<std::string> targets;
  bool streaming = false;  // serves streaming lists; else refuses them with 422
  int streams = 0;
  int lists = 0;
  int watches = 0;
};

// Runs the io_context until `done` or 10 s, then stops the reflector.
void run_until(asio::io_context& ioc, ScriptedServer& server, Reflector& reflector,
               const std::function<bool()>& done) {
  asio::steady_timer poll(ioc);
  std::function<void()> check;
  check = [&] {
    if (done()) {
      reflector.stop();
      server.acceptor.close();
      ioc.stop();  // a scripted watch stays open: nothing more to wait for
      return;
    }
    poll.expires_after(std::chrono::milliseconds(10));
    poll.async_wait([&](boost::system::error_code) { check(); });
  };
  check();
  ioc.run_for(std::chrono::seconds(10));
}

// A reflector on the scripted server whose handler records "TYPE key resourceVersion".
std::shared_ptr<Reflector> recording(asio::io_context& ioc, ScriptedServer& server,
                                     std::shared_ptr<Store> store, std::vector<std::string>& seen,
                                     bool streaming_list = true) {
  ClientConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(server.acceptor.local_endpoint().port());
  auto client = HttpClient::create(ioc.get_executor(), config);
  EXPECT_TRUE(client);
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/x/configmaps";
  options.initial_backoff = std::chrono::milliseconds(10);
  options.streaming_list = streaming_list;
  return std::make_shared<Reflector>(
      *client, store, options, [&seen](EventType type, const Store::Object& o, const Store::Object&) {
        seen.push_back(std::string(event_type_name(type)) + " " + Store::key_of(*o) + " " +
                       std::string(o->at("metadata").at("resourceVersion").as_string()));
      });
}

TEST(Reflector, A410ErrorEventMakesItRelistAndReportWhatVanished) {
  asio::io_context ioc;
  ScriptedServer server(ioc);
  asio::co_spawn(ioc, server.serve(), asio::detached);
  auto store = std::make_shared<Store>();
  std::vector<std::string> seen;
  auto reflector = recording(ioc, server, store, seen, /*streaming_list=*/false);
  asio::co_spawn(ioc, reflector->run(), asio::detached);
  run_until(ioc, server, *reflector, [&] { return store->get("x/c") != nullptr; });
  EXPECT_EQ(server.lists, 2) << "410 made it list again";
  ASSERT_GE(server.targets.size(), 4u);
  EXPECT_NE(server.targets[1].find("resourceVersion=5"), std::string::npos) << server.targets[1];
  EXPECT_NE(server.targets.back().find("resourceVersion=8"), std::string::npos) << server.targets.back();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED x/a 3", "ADDED x/b 4", "DELETED x/b 4",
                                            "MODIFIED x/a 7", "ADDED x/c 9"}));
  EXPECT_EQ(store->keys(), (std::vector<std::string>{"x/a", "x/c"}));
  EXPECT_EQ(reflector->last_synced_resource_version(), "9");
}

TEST(Reflector, AStreamingListIsTheStateUpToItsBookmarkThenTheSameStreamGoesOn) {
  asio::io_context ioc;
  ScriptedServer server(ioc);
  server.streaming = true;
  asio::co_spawn(ioc, server.serve(), asio::detached);
  auto store = std::make_shared<Store>();
  std::vector<std::string> seen;
  auto reflector = recording(ioc, server, store, seen);
  asio::co_spawn(ioc, reflector->run(), asio::detached);
  run_until(ioc, server, *reflector, [&] { return reflector->last_synced_resource_version() == "6"; });
  EXPECT_EQ(server.streams, 1);
  EXPECT_EQ(server.lists, 0);
  EXPECT_EQ(server.watches, 0);
  ASSERT_EQ(server.targets.size(), 1u);
  EXPECT_NE(server.targets[0].find("resourceVersionMatch=NotOlderThan"), std::string::npos);
  EXPECT_NE(server.targets[0].find("allowWatchBookmarks=true"), std::string::npos);
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED x/a 3", "ADDED x/b 4", "MODIFIED x/b 6"}));
  EXPECT_TRUE(reflector->has_synced());
  EXPECT_EQ(reflector->counters().lists, 1u);
  EXPECT_EQ(reflector->counters().streaming_lists, 1u);
}

TEST(Reflector, AServerThatRefusesStreamingListsIsListedInstead) {
  asio::io_context ioc;
  ScriptedServer server(ioc);
  asio::co_spawn(ioc, server.serve(), asio::detached);
  auto store = std::make_shared<Store>();
  std::vector<std::string> seen;
  auto reflector = recording(ioc, server, store, seen);
  asio::co_spawn(ioc, reflector->run(), asio::detached);
  run_until(ioc, server, *reflector, [&] { return store->get("x/c") != nullptr; });
  EXPECT_EQ(server.streams, 1) << "refused once, not asked again";
  EXPECT_EQ(server.lists, 2);  // the scripted first watch answers 410
  EXPECT_EQ(reflector->counters().failures, 1u) << "the refusal itself is not a failure";
  EXPECT_EQ(store->keys(), (std::vector<std::string>{"x/a", "x/c"}));
}

}  // namespace
}  // namespace kwatch::client
