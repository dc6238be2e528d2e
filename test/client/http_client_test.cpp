// The client's transport against a real kwatch-apiserver over HTTPS (its generated CA, a bearer
// token from a token file, RBAC on): requests, Status errors, keep-alive, TLS verification and
// watches, including a stream the server ends, and a reflector mirroring a namespace.
#include "client/http_client.hpp"
#include "client/informer.hpp"
#include "client/reflector.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/detached.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <future>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace kwatch::client {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace json = boost::json;

unsigned short free_port() {
  asio::io_context ioc;
  asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One kwatch-apiserver for the whole suite.
class Server {
 public:
  Server() {
    dir_ = fs::temp_directory_path() / ("kwatch-client-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tokens.csv") << "admin-token,admin,1,system:masters\nnobody-token,nobody,2\n";
    port_ = free_port();
    const std::string log = (dir_ / "server.log").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      const std::string port = "--secure-port=" + std::to_string(port_);
      const std::string certs = "--cert-dir=" + (dir_ / "certs").string();
      const std::string tokens = "--token-auth-file=" + (dir_ / "tokens.csv").string();
      ::execl(KWATCH_APISERVER_PATH, KWATCH_APISERVER_PATH, "--bind-address=127.0.0.1",
              port.c_str(), certs.c_str(), tokens.c_str(), "--shutdown-delay-duration=0s",
              // Secrets keep a window of 10 events: a watcher 10 writes behind must re-list.
              "--watch-cache-sizes=secrets#10",
              static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (read_all(log).find("serving on https://") != std::string::npos &&
          fs::exists(dir_ / "certs" / "ca.crt")) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    fs::remove_all(dir_);
  }

  ClientConfig config(const std::string& token = "admin-token") const {
    ClientConfig c;
    c.server = "https://127.0.0.1:" + std::to_string(port_);
    c.ca_pem = read_all(dir_ / "certs" / "ca.crt");
    c.token = token;
    return c;
  }

 private:
  fs::path dir_;
  unsigned short port_ = 0;
  pid_t pid_ = -1;
};

Server* server = nullptr;

class HttpClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server = new Server(); }
  static void TearDownTestSuite() {
    delete server;
    server = nullptr;
  }

  std::shared_ptr<HttpClient> client(ClientConfig config) {
    auto c = HttpClient::create(ioc_.get_executor(), std::move(config));
    EXPECT_TRUE(c) << (c ? "" : c.error());
    return c ? *c : nullptr;
  }

  template <class F>
  void run(F f) {
    bool done = false;
    asio::co_spawn(ioc_, f(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    ioc_.run_for(std::chrono::seconds(30));
    ioc_.restart();
    ASSERT_TRUE(done) << "did not finish within the deadline";
  }

  // Waits until the server is ready (its bootstrap policy loaded).
  void SetUp() override {
    auto c = client(server->config());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool ready = false;
    while (!ready && std::chrono::steady_clock::now() < deadline) {
      run([&]() -> asio::awaitable<void> {
        auto r = co_await c->request("GET", "/readyz");
        ready = r.has_value();
      });
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(ready);
  }

  asio::io_context ioc_;
};

TEST_F(HttpClientTest, RequestsOverOneKeptConnectionAndStatusErrors) {
  auto c = client(server->config());
  run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 3; ++i) {
      auto api = co_await c->get("/api");
      EXPECT_TRUE(api) << api.error().describe();
      if (api) {
        EXPECT_EQ(api->at("kind"), "APIVersions");
      }
    }
    EXPECT_EQ(c->connections_opened(), 1u) << "keep-alive: one connection for three requests";
    auto missing = co_await c->get("/api/v1/namespaces/default/configmaps/absent");
    if (missing) {
      ADD_FAILURE() << "expected an error: missing";
      co_return;
    }
    EXPECT_TRUE(missing.error().is(404));
    EXPECT_EQ(missing.error().reason, "NotFound");
    EXPECT_NE(missing.error().message.find("absent"), std::string::npos);
  });
}

TEST_F(HttpClientTest, CredentialsAndVerificationAreTheKubeconfigs) {
  run([&]() -> asio::awaitable<void> {
    auto nobody = client(server->config("nobody-token"));
    auto denied = co_await nobody->get("/api/v1/namespaces/default/secrets");
    if (denied) {
      ADD_FAILURE() << "expected an error: denied";
      co_return;
    }
    EXPECT_TRUE(denied.error().is(403)) << denied.error().describe();
    EXPECT_EQ(denied.error().reason, "Forbidden");

    auto bad = client(server->config("not-a-token"));
    auto unauthorized = co_await bad->get("/api");
    if (unauthorized) {
      ADD_FAILURE() << "expected an error: unauthorized";
      co_return;
    }
    EXPECT_TRUE(unauthorized.error().is(401)) << unauthorized.error().describe();

    ClientConfig wrong_ca = server->config();
    wrong_ca.ca_pem.clear();  // the system's roots do not know kwatch's CA
    auto unverified = client(wrong_ca);
    auto refused = co_await unverified->get("/api");
    if (refused) {
      ADD_FAILURE() << "expected an error: refused";
      co_return;
    }
    EXPECT_EQ(refused.error().kind, ApiError::Kind::transport) << refused.error().describe();

    wrong_ca.insecure_skip_tls_verify = true;
    auto insecure = client(wrong_ca);
    auto ok = co_await insecure->get("/api");
    EXPECT_TRUE(ok) << (ok ? "" : ok.error().describe());

    ClientConfig other_name = server->config();
    other_name.tls_server_name = "not-this-server.example";
    auto mismatched = client(other_name);
    auto wrong_host = co_await mismatched->get("/api");
    EXPECT_FALSE(wrong_host) << "the certificate does not name not-this-server.example";
  });
}

// Over both transports (chunked and WebSocket, here over TLS): events in order, then the
// server's clean end at timeoutSeconds.
TEST_F(HttpClientTest, AWatchStreamsEventsAndEndsCleanly) {
  auto c = client(server->config());
  run([&]() -> asio::awaitable<void> {
    const std::string cms = "/api/v1/namespaces/default/configmaps";
    for (const auto transport : {WatchTransport::chunked, WatchTransport::websocket}) {
      const std::string prefix = transport == WatchTransport::chunked ? "w" : "ws";
      auto list = co_await c->get(cms);
      if (!(list)) {
        ADD_FAILURE() << "expected: list";
        co_return;
      }
      const std::string rv(list->at("metadata").at("resourceVersion").as_string());
      auto w = co_await c->watch(cms + "?watch=1&timeoutSeconds=2&resourceVersion=" + rv, transport);
      if (!(w)) {
        ADD_FAILURE() << "expected: w " << prefix << " " << w.error().describe();
        co_return;
      }
      for (int i = 0; i < 3; ++i) {
        auto created = co_await c->request(
            "POST", cms,
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + prefix +
                std::to_string(i) + R"("}})");
        EXPECT_TRUE(created) << created.error().describe();
      }
      std::vector<std::string> names;
      while (names.size() < 3) {
        auto events = co_await (*w)->next();
        if (!(events)) {
          ADD_FAILURE() << "expected: events " << prefix << " " << events.error().describe();
          co_return;
        }
        if ((*w)->ended()) {
          ADD_FAILURE() << "expected an error: (*w)->ended() " << prefix;
          co_return;
        }
        for (auto& e : *events) {
          EXPECT_EQ(e.type, EventType::added);
          names.emplace_back(e.object.at("metadata").at("name").as_string());
        }
      }
      EXPECT_EQ(names, (std::vector<std::string>{prefix + "0", prefix + "1", prefix + "2"}));
      // timeoutSeconds=2: the server ends the stream (last chunk, or a close frame).
      for (;;) {
        auto events = co_await (*w)->next();
        if (!(events)) {
          ADD_FAILURE() << "expected: events " << prefix << " " << events.error().describe();
          co_return;
        }
        if ((*w)->ended()) break;
      }
    }
  });
}

TEST_F(HttpClientTest, ARefusedWatchIsAnError) {
  auto c = client(server->config());
  auto nobody = client(server->config("nobody-token"));
  run([&]() -> asio::awaitable<void> {
    for (const auto transport : {WatchTransport::chunked, WatchTransport::websocket}) {
      auto bad = co_await c->watch(
          "/api/v1/namespaces/default/configmaps?watch=1&labelSelector=a%3D%3D%3Db", transport);
      if (bad) {
        ADD_FAILURE() << "expected an error: bad";
        co_return;
      }
      EXPECT_TRUE(bad.error().is(400)) << bad.error().describe();
      auto forbidden = co_await nobody->watch("/api/v1/secrets?watch=1", transport);
      if (forbidden) {
        ADD_FAILURE() << "expected an error: forbidden";
        co_return;
      }
      EXPECT_TRUE(forbidden.error().is(403)) << forbidden.error().describe();
    }
  });
}

// The reflector's mirror equals the server after mixed writes, with watches that end every
// second or two (each resumed from the last version, none re-listing) and a paged first list.
TEST_F(HttpClientTest, AReflectorMirrorsTheServerThroughResumedWatches) {
  auto c = client(server->config());
  auto store = std::make_shared<Store>();
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/mirror/configmaps";
  options.page_size = 7;
  options.min_watch_timeout = std::chrono::seconds(1);
  std::map<std::string, int> seen;  // event type -> count, from the handler
  auto reflector = std::make_shared<Reflector>(
      c, store, options, [&](EventType type, const Store::Object&, const Store::Object&) {
        ++seen[std::to_string(static_cast<int>(type))];
      });
  bool finished = false;
  run([&]() -> asio::awaitable<void> {
    auto ns = co_await c->request("POST", "/api/v1/namespaces",
                                  R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mirror"}})");
    EXPECT_TRUE(ns) << ns.error().describe();
    const std::string cms = "/api/v1/namespaces/mirror/configmaps";
    for (int i = 0; i < 20; ++i) {  // some before the reflector starts: its (paged) list
      auto r = co_await c->request(
          "POST", cms, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pre-)" + std::to_string(i) + R"("}})");
      EXPECT_TRUE(r) << r.error().describe();
    }
    asio::co_spawn(co_await asio::this_coro::executor, reflector->run(),
                   [&](std::exception_ptr e) {
                     finished = true;
                     if (e) std::rethrow_exception(e);
                   });
    std::mt19937 rng(7);
    asio::steady_timer timer(co_await asio::this_coro::executor);
    for (int i = 0; i < 300; ++i) {
      const std::string name = "cm-" + std::to_string(rng() % 40);
      const int op = static_cast<int>(rng() % 3);
      if (op == 2) {
        (void)co_await c->request("DELETE", cms + "/" + name);  // may be absent: 404 is fine
      } else {
        const std::string body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                                 R"("},"data":{"i":")" + std::to_string(i) + R"("}})";
        auto put = co_await c->request("PUT", cms + "/" + name, body);
        if (!put && put.error().is(404)) (void)co_await c->request("POST", cms, body);
      }
      if (i % 30 == 0) {  // spread the writes over a few watch lifetimes
        timer.expires_after(std::chrono::milliseconds(200));
        co_await timer.async_wait(asio::use_awaitable);
      }
    }
    // Wait (with a deadline) for the mirror to equal the server, version for version.
    std::map<std::string, std::string> truth, mirror;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto list = co_await c->get(cms);
      if (!list) break;
      truth.clear();
      for (auto& item : list->at("items").as_array()) {
        const auto& meta = item.at("metadata").as_object();
        truth["mirror/" + std::string(meta.at("name").as_string())] = meta.at("resourceVersion").as_string().c_str();
      }
      mirror.clear();
      for (const auto& o : store->list()) {
        mirror[Store::key_of(*o)] = o->at("metadata").at("resourceVersion").as_string().c_str();
      }
      if (mirror == truth) break;
      timer.expires_after(std::chrono::milliseconds(50));
      co_await timer.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(mirror, truth);
    EXPECT_TRUE(reflector->has_synced());
    reflector->stop();
    while (!finished) {
      timer.expires_after(std::chrono::milliseconds(10));
      co_await timer.async_wait(asio::use_awaitable);
    }
  });
  EXPECT_TRUE(finished) << "run() returns after stop()";
  EXPECT_EQ(reflector->counters().lists.load(), 1u) << "no re-list: every watch resumed";
  EXPECT_GT(reflector->counters().watches.load(), 2u) << "the short watches were renewed";
  EXPECT_GE(seen["0"], 20) << "the listed objects (and those created since) came as ADDED";
  EXPECT_GT(seen["1"] + seen["2"], 100) << "updates and deletions came as MODIFIED and DELETED";
}

// A reflector whose thread is held while 31 writes go by (more than the secrets' window of 10):
// kwatch keeps its stream (the events wait in the socket and the watcher's queue), so it
// catches up without a re-list, reporting the deletion it missed exactly once.
TEST_F(HttpClientTest, AReflectorHeldBackCatchesUpWithoutARelist) {
  asio::io_context reflector_ioc;
  auto rc = HttpClient::create(reflector_ioc.get_executor(), server->config());
  ASSERT_TRUE(rc);
  auto store = std::make_shared<Store>();
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/default/secrets";
  std::atomic<int> deleted{0};
  auto reflector = std::make_shared<Reflector>(
      *rc, store, options, [&](EventType type, const Store::Object&, const Store::Object&) {
        if (type == EventType::deleted) ++deleted;
      });
  auto c = client(server->config());
  const std::string secrets = "/api/v1/namespaces/default/secrets";
  auto write = [&](std::string method, std::string target, std::string body) {
    run([&]() -> asio::awaitable<void> {
      auto r = co_await c->request(method, target, body);
      EXPECT_TRUE(r) << method << " " << target << ": " << (r ? "" : r.error().describe());
    });
  };
  auto secret = [](const std::string& name, int i) {
    return R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":")" + name +
           R"("},"stringData":{"i":")" + std::to_string(i) + R"("}})";
  };
  write("POST", secrets, secret("doomed", 0));
  write("POST", secrets, secret("kept", 0));
  bool finished = false;
  asio::co_spawn(reflector_ioc, reflector->run(), [&](std::exception_ptr) { finished = true; });
  std::thread runner([&] { reflector_ioc.run(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (store->size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(store->size(), 2u);
  // The reflector's thread is held while 30 writes go by, so its watch falls behind.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  asio::post(reflector_ioc, [released] { released.wait(); });
  write("DELETE", secrets + "/doomed", "");
  for (int i = 1; i <= 30; ++i) write("PUT", secrets + "/kept", secret("kept", i));
  release.set_value();
  std::string truth;
  run([&]() -> asio::awaitable<void> {
    auto got = co_await c->get(secrets + "/kept");
    if (got) truth = got->at("metadata").at("resourceVersion").as_string().c_str();
  });
  auto mirrored = [&] {
    auto kept = store->get("default/kept");
    return store->size() == 1 && kept &&
           kept->at("metadata").at("resourceVersion").as_string() == truth;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!mirrored() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(mirrored()) << store->size() << " objects";
  EXPECT_EQ(deleted.load(), 1) << "the object deleted while it was behind is reported once";
  EXPECT_EQ(reflector->counters().lists.load(), 1u) << "no re-list";
  reflector->stop();
  runner.join();
  EXPECT_TRUE(finished);
}

// An informer with a fast handler and a slow one (20 ms a change, a queue of 5): the fast one
// gets every write in order while the slow one is still far behind; the slow one's backlog is
// visible, and once it catches up its view equals the server's.
TEST_F(HttpClientTest, AnInformersSlowHandlerDoesNotHoldUpTheOthers) {
  asio::io_context informer_ioc;
  auto ic = HttpClient::create(informer_ioc.get_executor(), server->config());
  ASSERT_TRUE(ic);
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/inform/configmaps";
  // The namespace's kube-root-ca.crt (published in every namespace) is not this test's.
  options.field_selector = "metadata.name!=kube-root-ca.crt";
  Informer informer(*ic, options);
  std::mutex m;
  std::vector<std::int64_t> fast_rvs;
  std::map<std::string, std::string> slow_view;
  auto rv_of = [](const Store::Object& o) {
    return std::string(o->at("metadata").at("resourceVersion").as_string());
  };
  const auto fast = informer.add_handler(
      [&](EventType type, const Store::Object& o, const Store::Object&) {
        std::lock_guard lock(m);
        if (type != EventType::deleted) fast_rvs.push_back(std::stoll(rv_of(o)));
      });
  const auto slow = informer.add_handler(
      [&](EventType type, const Store::Object& o, const Store::Object&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::lock_guard lock(m);
        if (type == EventType::deleted) {
          slow_view.erase(Store::key_of(*o));
        } else {
          slow_view[Store::key_of(*o)] = rv_of(o);
        }
      },
      5);
  auto c = client(server->config());
  std::vector<std::int64_t> acked;
  run([&]() -> asio::awaitable<void> {
    auto ns = co_await c->request("POST", "/api/v1/namespaces",
                                  R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"inform"}})");
    EXPECT_TRUE(ns);
  });
  asio::co_spawn(informer_ioc, informer.run(), asio::detached);
  std::thread runner([&] { informer_ioc.run(); });
  ASSERT_TRUE(informer.wait_for_cache_sync(std::chrono::seconds(10)));
  const std::string cms = "/api/v1/namespaces/inform/configmaps";
  run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < 60; ++i) {
      const std::string name = "c-" + std::to_string(i % 20);
      const std::string body = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
                               R"("},"data":{"i":")" + std::to_string(i) + R"("}})";
      // No co_await inside a conditional expression: GCC 12 miscompiles that in coroutines.
      std::string method = i < 20 ? "POST" : "PUT";
      std::string target = i < 20 ? cms : cms + "/" + name;
      auto r = co_await c->request(std::move(method), std::move(target), body);
      if (r) acked.push_back(std::stoll(std::string(json::parse(r->body).at("metadata").at("resourceVersion").as_string())));
    }
  });
  ASSERT_EQ(acked.size(), 60u);
  auto fast_done = [&] {
    std::lock_guard lock(m);
    return fast_rvs.size() >= 60;
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!fast_done() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lock(m);
    EXPECT_EQ(fast_rvs, acked) << "the fast handler: every write, in order, once";
  }
  const auto slow_stats = informer.stats(slow);
  EXPECT_LT(slow_stats.delivered, 60u) << "the slow handler was still behind when the fast one was done";
  EXPECT_GT(informer.stats(slow).max_backlog, 4u);
  EXPECT_GT(informer.stats(slow).overflows, 0u);
  EXPECT_EQ(informer.stats(fast).overflows, 0u);
  // Then the slow one catches up to the server's state.
  std::map<std::string, std::string> truth;
  run([&]() -> asio::awaitable<void> {
    auto list = co_await c->get(cms + "?fieldSelector=metadata.name!%3Dkube-root-ca.crt");
    if (!list) co_return;
    for (auto& item : list->at("items").as_array()) {
      const auto& meta = item.at("metadata").as_object();
      truth["inform/" + std::string(meta.at("name").as_string())] = meta.at("resourceVersion").as_string().c_str();
    }
  });
  auto slow_done = [&] {
    std::lock_guard lock(m);
    return slow_view == truth;
  };
  const auto until2 = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!slow_done() && std::chrono::steady_clock::now() < until2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(slow_done());
  EXPECT_EQ(informer.store()->size(), 20u);
  informer.stop();
  runner.join();
}

}  // namespace
}  // namespace kwatch::client
