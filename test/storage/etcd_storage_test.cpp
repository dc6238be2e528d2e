#include "storage/etcd_storage.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "test/storage/etcd_process.hpp"
#include "test/storage/stream_helpers.hpp"

namespace kwatch::storage {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using test::EtcdCluster;

// ASSERT_* returns from the function, which a coroutine cannot do.
#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

constexpr auto kDeadline = 30s;

// Runs `task` on `ioc` until it finishes or the deadline passes.
void run(asio::io_context& ioc, asio::awaitable<void> task) {
  bool done = false;
  std::exception_ptr error;
  asio::co_spawn(ioc, std::move(task), [&](std::exception_ptr e) {
    error = e;
    done = true;
    ioc.stop();
  });
  ioc.run_for(kDeadline);
  ioc.restart();
  ASSERT_TRUE(done) << "task did not finish before the deadline";
  if (error) std::rethrow_exception(error);
}

using test::collect;
using test::next_within;

class EtcdStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::available()) GTEST_SKIP() << "etcd/etcdctl not on PATH";
    cluster_ = EtcdCluster::start(1);
    ASSERT_TRUE(cluster_) << "etcd did not start";
  }

  std::shared_ptr<EtcdStorage> open(EtcdStorage::Options options = {}) {
    if (options.endpoints.empty()) options.endpoints = cluster_->endpoints();
    auto s = EtcdStorage::open(std::move(options), ioc_.get_executor());
    EXPECT_TRUE(s) << (s ? "" : s.error().message());
    return s ? *s : nullptr;
  }

  asio::io_context ioc_;
  std::unique_ptr<EtcdCluster> cluster_;
};

TEST_F(EtcdStorageTest, KeysWrittenByOtherClientsAppearInReadsAndWatches) {
  auto storage = open();
  ASSERT_TRUE(storage);
  run(ioc_, [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    EXPECT_EQ(cluster_->etcdctl("put /pods/ext from-etcdctl >/dev/null"), 0);
    auto raw = co_await storage->put_raw("/pods/raw", "from-put");
    CO_ASSERT(raw);
    auto ext = co_await storage->get("/pods/ext");
    CO_ASSERT(ext);
    EXPECT_EQ(ext->value, "from-etcdctl");
    auto events = co_await collect(**stream, 2);
    CO_ASSERT(events);
    EXPECT_EQ((*events)[0].kv.key, "/pods/ext");
    EXPECT_EQ((*events)[1].kv.key, "/pods/raw");
    EXPECT_EQ((*events)[1].revision(), *raw);
  }());
}

TEST_F(EtcdStorageTest, OperationsReportUnavailableWithinTheDeadlineWhenEtcdIsDown) {
  EtcdStorage::Options options;
  options.request_timeout = 1000ms;
  options.watch_retry_timeout = 1000ms;
  auto storage = open(options);
  ASSERT_TRUE(storage);
  run(ioc_, [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    CO_ASSERT(co_await storage->create("/pods/a", "1"));
    CO_ASSERT(co_await collect(**stream, 1));

    cluster_->kill(0);
    auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
    EXPECT_EQ((co_await storage->get("/pods/a")).error(), Errc::unavailable);
    EXPECT_EQ((co_await storage->create("/pods/b", "2")).error(), Errc::unavailable);
    EXPECT_EQ((co_await storage->current_revision()).error(), Errc::unavailable);
    EXPECT_LT(elapsed(), 4s);
    start = std::chrono::steady_clock::now();
    auto batch = co_await next_within(**stream, 10s);
    EXPECT_EQ(batch.error(), Errc::unavailable);
    EXPECT_LT(elapsed(), 4s);
    start = std::chrono::steady_clock::now();
    EXPECT_EQ((co_await storage->watch("/pods/", 0, PrevKv::include)).error(), Errc::unavailable);
    EXPECT_LT(elapsed(), 4s);
  }());

  // A fresh client cannot connect either, and says so within the dial timeout.
  EtcdStorage::Options dead;
  dead.endpoints = cluster_->endpoints();
  dead.dial_timeout = 500ms;
  const auto start = std::chrono::steady_clock::now();
  auto s = EtcdStorage::open(dead, ioc_.get_executor());
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), Errc::unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(EtcdStorageOptions, MalformedEndpointsAreBadRequests) {
  asio::io_context ioc;
  EtcdStorage::Options none;
  EXPECT_EQ(EtcdStorage::open(none, ioc.get_executor()).error(), Errc::bad_request);
  EtcdStorage::Options mixed;
  mixed.endpoints = {"http://127.0.0.1:1", "https://127.0.0.1:2"};
  EXPECT_EQ(EtcdStorage::open(mixed, ioc.get_executor()).error(), Errc::bad_request);
  EtcdStorage::Options scheme;
  scheme.endpoints = {"unix://sock"};
  EXPECT_EQ(EtcdStorage::open(scheme, ioc.get_executor()).error(), Errc::bad_request);
}

// Writes until one succeeds. A write in flight when a member dies may fail: at once when its
// connection breaks, or at the request deadline when the dead member was the leader and etcd lost
// the forwarded proposal. A failed attempt may still have been applied, hence the read-back.
asio::awaitable<Result<KeyValue>> create_eventually(EtcdStorage& storage, std::string key,
                                                    std::string value) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  bool failed_before = false;
  for (;;) {
    auto r = co_await storage.create(key, value);
    if (!r && r.error() == Errc::already_exists && failed_before) {
      auto current = co_await storage.get(key);
      if (current && current->value == value) co_return current;
    }
    if (r || r.error() != Errc::unavailable || std::chrono::steady_clock::now() > until) {
      co_return r;
    }
    failed_before = true;
  }
}

// A client of every member of `cluster`, calls balanced by `balancing`.
std::shared_ptr<EtcdStorage> open_on(const EtcdCluster& cluster, asio::io_context& ioc,
                                     const std::string& balancing,
                                     std::chrono::milliseconds request_timeout) {
  EtcdStorage::Options options;
  options.endpoints = cluster.endpoints();
  options.load_balancing = balancing;
  options.request_timeout = request_timeout;
  auto opened = EtcdStorage::open(options, ioc.get_executor());
  return opened ? *opened : nullptr;
}

void survive_member_loss(const std::string& balancing) {
  if (std::getenv("KWATCH_TEST_DEBUG")) spdlog::set_level(spdlog::level::debug);
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd/etcdctl not on PATH";
  auto cluster = EtcdCluster::start(3);
  ASSERT_TRUE(cluster);
  asio::io_context ioc;
  // 2 s bounds a write whose proposal died with the leader.
  auto storage = open_on(*cluster, ioc, balancing, 2s);
  ASSERT_TRUE(storage);
  run(ioc, [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    auto before = co_await storage->create("/pods/before", "1");
    CO_ASSERT(before);
    CO_ASSERT(co_await collect(**stream, 1));

    // pick_first talks to member 0 only: killing it forces every call and the watch over.
    cluster->kill(0);
    const auto start = std::chrono::steady_clock::now();
    auto after = co_await create_eventually(*storage, "/pods/after", "2");
    if (!after) ADD_FAILURE() << after.error().message();
    CO_ASSERT(after);
    auto read = co_await storage->get("/pods/before");
    CO_ASSERT(read);
    EXPECT_EQ(read->value, "1");
    auto events = co_await collect(**stream, 1, 10s);
    CO_ASSERT(events);
    EXPECT_EQ((*events)[0].kv.key, "/pods/after");
    EXPECT_EQ((*events)[0].revision(), after->mod_revision);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);

    // New watches work too.
    auto again = co_await storage->watch("/pods/", after->mod_revision, PrevKv::include);
    CO_ASSERT(again);
    auto replay = co_await collect(**again, 1);
    CO_ASSERT(replay);
    EXPECT_EQ((*replay)[0].kv.key, "/pods/after");
  }());
}

TEST(EtcdStorageCluster, ReadsWritesAndWatchesContinueWhenTheUsedMemberDies) {
  survive_member_loss("pick_first");
}

TEST(EtcdStorageCluster, RoundRobinRoutesAroundADeadMember) { survive_member_loss("round_robin"); }

// A member that hangs (SIGSTOP: its connections stay open, nothing is answered) swallows the
// guarded writes round-robin sends it, as a follower does whose leader died with the proposal.
// Each is sent again to another member after a third of the deadline instead of failing at the
// deadline, and applies once.
TEST(EtcdStorageCluster, AGuardedWriteSwallowedByAHungMemberIsSentAgainAndAppliesOnce) {
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd/etcdctl not on PATH";
  auto cluster = EtcdCluster::start(3);
  ASSERT_TRUE(cluster);
  asio::io_context ioc;
  // With a 3 s deadline a copy is sent again after 1 s without an answer.
  auto storage = open_on(*cluster, ioc, "round_robin", 3s);
  ASSERT_TRUE(storage);
  run(ioc, [&]() -> asio::awaitable<void> {
    std::vector<std::int64_t> created;
    for (int i = 0; i < 6; ++i) {
      auto r = co_await storage->create("/pods/p" + std::to_string(i), "v0");
      CO_ASSERT(r);
      created.push_back(r->mod_revision);
    }
    cluster->pause(2);
    // Round robin hands every third call to the hung member.
    std::vector<std::int64_t> written;
    for (int i = 0; i < 6; ++i) {
      const std::string key = "/pods/p" + std::to_string(i);
      auto r = co_await storage->put_if(key, created[i], "v1");
      if (!r) ADD_FAILURE() << key << ": " << r.error().message();
      CO_ASSERT(r);
      EXPECT_TRUE(r->succeeded) << key;
      written.push_back(r->kv.mod_revision);
    }
    // Reads are not sent again early (a large list may take long): back to three members.
    cluster->resume(2);
    for (int i = 0; i < 6; ++i) {
      const std::string key = "/pods/p" + std::to_string(i);
      auto now = co_await storage->get(key);
      CO_ASSERT(now);
      EXPECT_EQ(now->value, "v1");
      EXPECT_EQ(now->version, 2) << key << " was written once";
      EXPECT_EQ(now->mod_revision, written[i]) << key;
    }
  }());
  cluster->resume(2);
}

// A CA, a member certificate for 127.0.0.1 and a client certificate, made with openssl in `dir`.
bool make_certificates(const std::string& dir) {
  const std::string script =
      "cd '" + dir +
      "' && "
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kwatch-test-ca "
      "-keyout ca.key -out ca.crt && "
      "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout server.key -out server.csr && "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
      "-extfile ext -out server.crt && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=kwatch -keyout client.key -out client.csr && "
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
      "-extfile ext -out client.crt";
  return std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
}

TEST(EtcdStorageTls, TalksToAnHttpsMemberWithClientCertificates) {
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd/etcdctl not on PATH";
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl";
  std::string dir = (std::filesystem::temp_directory_path() / "kwatch-tls-XXXXXX").string();
  ASSERT_TRUE(::mkdtemp(dir.data()));
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  ASSERT_TRUE(make_certificates(dir));
  test::EtcdTls member{dir + "/ca.crt", dir + "/server.crt", dir + "/server.key"};
  auto cluster = EtcdCluster::start(1, &member);
  ASSERT_TRUE(cluster);

  asio::io_context ioc;
  EtcdStorage::Options options;
  options.endpoints = cluster->endpoints();
  ASSERT_TRUE(options.endpoints[0].starts_with("https://"));
  options.ca_file = dir + "/ca.crt";
  options.cert_file = dir + "/client.crt";
  options.key_file = dir + "/client.key";
  auto opened = EtcdStorage::open(options, ioc.get_executor());
  ASSERT_TRUE(opened);
  auto storage = *opened;
  run(ioc, [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    auto created = co_await storage->create("/pods/a", "secret");
    CO_ASSERT(created);
    auto events = co_await collect(**stream, 1);
    CO_ASSERT(events);
    EXPECT_EQ((*events)[0].kv.value, "secret");
  }());

  // Without a client certificate the member refuses us.
  EtcdStorage::Options anonymous = options;
  anonymous.cert_file.clear();
  anonymous.key_file.clear();
  anonymous.dial_timeout = 1s;
  auto refused = EtcdStorage::open(anonymous, ioc.get_executor());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), Errc::unavailable);
}

}  // namespace
}  // namespace kwatch::storage
