// The storage contract (storage/storage.hpp), written once and run on every implementation: the
// embedded store, the encrypting decorator over it (every key under an encrypted prefix, so each
// value and previous state goes through the transformer both ways), and etcd v3 through a real
// etcd on a loopback port (skipped when etcd is not installed). Revisions are compared with each
// other, never with numbers, since the backends start counting at different points.
#include "storage/encrypting_storage.hpp"
#include "storage/encryption_config.hpp"
#include "storage/etcd_storage.hpp"
#include "storage/memory_storage.hpp"
#include "test/storage/etcd_process.hpp"
#include "test/storage/stream_helpers.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::storage {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using base::Errc;

// ASSERT_* returns from the function, which a coroutine cannot do.
#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

// One AES-GCM key for every key under "/": 32 bytes of "k", base64.
constexpr const char* kEverythingEncrypted =
    "apiVersion: apiserver.config.k8s.io/v1\n"
    "kind: EncryptionConfiguration\n"
    "resources:\n"
    "- resources:\n"
    "  - secrets\n"
    "  providers:\n"
    "  - aesgcm:\n"
    "      keys:\n"
    "      - name: contract\n"
    "        secret: a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s=\n";

using test::collect;
using test::next_within;

class StorageContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& backend = GetParam();
    if (backend == "etcd") {
      if (!test::EtcdCluster::available()) GTEST_SKIP() << "etcd/etcdctl not on PATH";
      cluster_ = test::EtcdCluster::start(1);
      ASSERT_TRUE(cluster_) << "etcd did not start";
      EtcdStorage::Options options;
      options.endpoints = cluster_->endpoints();
      auto opened = EtcdStorage::open(std::move(options), ioc_.get_executor());
      ASSERT_TRUE(opened) << opened.error().message();
      storage_ = *opened;
      return;
    }
    auto memory = MemoryStorage::open({});
    ASSERT_TRUE(memory);
    storage_ = std::shared_ptr<Storage>(std::move(*memory));
    if (backend == "encrypting") {
      auto config = parse_encryption_config(kEverythingEncrypted);
      ASSERT_TRUE(config) << config.error();
      auto transformer = ValueTransformer::make(config->rules.at(0).providers);
      ASSERT_TRUE(transformer);
      std::vector<EncryptionScope> scopes{{"/", std::move(*transformer)}};
      storage_ = std::make_shared<EncryptingStorage>(std::move(storage_), std::move(scopes));
    }
  }

  // Runs `task` until it finishes or 30 s pass.
  void run(asio::awaitable<void> task) {
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(ioc_, std::move(task), [&](std::exception_ptr e) {
      error = e;
      done = true;
      ioc_.stop();
    });
    ioc_.run_for(30s);
    ioc_.restart();
    ASSERT_TRUE(done) << "the test did not finish within 30 s";
    if (error) std::rethrow_exception(error);
  }

  asio::io_context ioc_;
  std::unique_ptr<test::EtcdCluster> cluster_;
  std::shared_ptr<Storage> storage_;
};

TEST_P(StorageContract, CreateGetGuardedWritesAndDeletes) {
  run([&]() -> asio::awaitable<void> {
    Storage& s = *storage_;
    auto created = co_await s.create("/pods/a", "1");
    CO_ASSERT(created);
    EXPECT_EQ(created->value, "1");
    EXPECT_EQ(created->version, 1);
    EXPECT_EQ(created->create_revision, created->mod_revision);
    EXPECT_EQ((co_await s.create("/pods/a", "x")).error(), Errc::already_exists);
    auto got = co_await s.get("/pods/a");
    CO_ASSERT(got);
    EXPECT_EQ(got->value, "1");
    EXPECT_EQ(got->mod_revision, created->mod_revision);
    EXPECT_EQ((co_await s.get("/pods/none")).error(), Errc::not_found);

    // guaranteed_update: the next state from the current one, one revision later.
    auto updated = co_await s.guaranteed_update(
        "/pods/a", [](const KeyValue* now) -> Storage::UpdateResult {
          return now ? now->value + "+" : "fresh";
        });
    CO_ASSERT(updated);
    EXPECT_EQ(updated->value, "1+");
    EXPECT_EQ(updated->version, 2);
    EXPECT_EQ(updated->create_revision, created->mod_revision);
    EXPECT_EQ(updated->mod_revision, created->mod_revision + 1);
    // The same bytes again write nothing.
    auto same = co_await s.guaranteed_update(
        "/pods/a", [](const KeyValue* now) -> Storage::UpdateResult { return now->value; });
    CO_ASSERT(same);
    EXPECT_EQ(same->mod_revision, updated->mod_revision);
    // Starting from a stale suggestion, it reads again and applies once to the current state.
    KeyValue stale_state;
    stale_state.key = "/pods/a";
    stale_state.value = "1";
    stale_state.mod_revision = created->mod_revision;
    int calls = 0;
    auto retried = co_await s.guaranteed_update(
        "/pods/a",
        [&](const KeyValue* now) -> Storage::UpdateResult {
          ++calls;
          return now->value + "!";
        },
        stale_state);
    CO_ASSERT(retried);
    EXPECT_EQ(retried->value, "1+!");
    EXPECT_EQ(calls, 2);

    // A stale guard fails and says what is there now.
    auto lost = co_await s.put_if("/pods/a", created->mod_revision, "lost");
    CO_ASSERT(lost);
    EXPECT_FALSE(lost->succeeded);
    EXPECT_EQ(lost->kv.value, "1+!");
    EXPECT_EQ(lost->kv.mod_revision, retried->mod_revision);
    auto stale_delete = co_await s.delete_if("/pods/a", created->mod_revision);
    CO_ASSERT(stale_delete);
    EXPECT_FALSE(stale_delete->succeeded);
    EXPECT_EQ(stale_delete->kv.value, "1+!");

    auto deleted = co_await s.delete_if("/pods/a", retried->mod_revision);
    CO_ASSERT(deleted);
    EXPECT_TRUE(deleted->succeeded);
    EXPECT_EQ(deleted->kv.value, "1+!");
    EXPECT_EQ(deleted->revision, retried->mod_revision + 1);
    EXPECT_EQ((co_await s.get("/pods/a")).error(), Errc::not_found);
    auto absent = co_await s.delete_if("/pods/a");
    CO_ASSERT(absent);
    EXPECT_FALSE(absent->succeeded);

    // An unconditional delete of a present key returns what it deleted.
    CO_ASSERT(co_await s.create("/pods/b", "2"));
    auto any = co_await s.delete_if("/pods/b");
    CO_ASSERT(any);
    EXPECT_TRUE(any->succeeded);
    EXPECT_EQ(any->kv.value, "2");
    auto current = co_await s.current_revision();
    CO_ASSERT(current);
    EXPECT_EQ(*current, any->revision);
  }());
}

TEST_P(StorageContract, ListsAtPastRevisionsInPagesWithCounts) {
  run([&]() -> asio::awaitable<void> {
    Storage& s = *storage_;
    auto a = co_await s.create("/pods/a", "a1");
    CO_ASSERT(co_await s.create("/pods/b", "b1"));
    auto c = co_await s.create("/pods/c", "c1");
    CO_ASSERT(co_await s.create("/pods0", "outside"));  // shares the text, not the prefix
    CO_ASSERT(a && c);
    const std::int64_t before = c->mod_revision;
    CO_ASSERT(co_await s.put_if("/pods/a", a->mod_revision, "a2"));
    CO_ASSERT(co_await s.delete_if("/pods/b"));

    ListOptions now;
    now.prefix = "/pods/";
    auto current = co_await s.list(now);
    CO_ASSERT(current && current->kvs.size() == 2);
    EXPECT_EQ(current->kvs[0].value, "a2");
    EXPECT_EQ(current->kvs[1].key, "/pods/c");
    EXPECT_EQ(current->count, 2);
    EXPECT_FALSE(current->more);
    EXPECT_EQ(current->revision, *(co_await s.current_revision()));
    EXPECT_EQ(*(co_await s.count("/pods/")), 2);

    ListOptions past = now;
    past.revision = before;
    auto old = co_await s.list(past);
    CO_ASSERT(old && old->kvs.size() == 3);
    EXPECT_EQ(old->kvs[0].value, "a1");
    EXPECT_EQ(old->kvs[1].key, "/pods/b");
    EXPECT_EQ(old->revision, before);
    auto old_a = co_await s.get("/pods/a", before);
    CO_ASSERT(old_a);
    EXPECT_EQ(old_a->value, "a1");

    // Pages of one: `more` until the last, each starting after the previous key.
    ListOptions page = past;
    page.limit = 1;
    std::vector<std::string> keys;
    for (int i = 0; i < 5; ++i) {
      auto p = co_await s.list(page);
      CO_ASSERT(p && p->kvs.size() == 1);
      keys.push_back(p->kvs[0].key);
      EXPECT_EQ(p->count, 3 - i);  // from the page's first key on
      if (!p->more) break;
      page.start_key = p->kvs[0].key + '\0';
    }
    EXPECT_EQ(keys, (std::vector<std::string>{"/pods/a", "/pods/b", "/pods/c"}));

    ListOptions count_only = now;
    count_only.count_only = true;
    auto counted = co_await s.list(count_only);
    CO_ASSERT(counted);
    EXPECT_TRUE(counted->kvs.empty());
    EXPECT_EQ(counted->count, 2);
    ListOptions future = now;
    future.revision = current->revision + 100;
    EXPECT_EQ((co_await s.list(future)).error(), Errc::bad_request);
  }());
}

TEST_P(StorageContract, WatchesReplayHistoryWithPreviousStatesThenGoLive) {
  run([&]() -> asio::awaitable<void> {
    Storage& s = *storage_;
    auto a = co_await s.create("/pods/a", "1");
    CO_ASSERT(a);
    auto a2 = co_await s.put_if("/pods/a", a->mod_revision, "2");
    CO_ASSERT(co_await s.create("/nodes/x", "elsewhere"));
    auto gone = co_await s.delete_if("/pods/a");
    CO_ASSERT(a2 && gone);

    auto stream = co_await s.watch("/pods/", a->mod_revision, PrevKv::include);
    CO_ASSERT(stream);
    auto events = co_await collect(**stream, 3);
    CO_ASSERT(events && events->size() == 3);
    const auto& e = *events;
    EXPECT_EQ(e[0].type, EventType::put);
    EXPECT_EQ(e[0].kv.value, "1");
    EXPECT_FALSE(e[0].prev_kv);
    EXPECT_EQ(e[1].kv.value, "2");
    CO_ASSERT(e[1].prev_kv);
    EXPECT_EQ(e[1].prev_kv->value, "1");
    EXPECT_EQ(e[2].type, EventType::del);
    EXPECT_EQ(e[2].kv.key, "/pods/a");
    EXPECT_EQ(e[2].revision(), gone->revision);
    CO_ASSERT(e[2].prev_kv);
    EXPECT_EQ(e[2].prev_kv->value, "2");

    // Live from here, and nothing from other prefixes.
    CO_ASSERT(co_await s.create("/nodes/y", "elsewhere"));
    auto b = co_await s.create("/pods/b", "live");
    CO_ASSERT(b);
    auto live = co_await collect(**stream, 1);
    CO_ASSERT(live);
    EXPECT_EQ((*live)[0].kv.key, "/pods/b");
    EXPECT_EQ((*live)[0].revision(), b->mod_revision);

    // Previous states not asked for: the same history (whether they come anyway is the
    // backend's choice; the embedded store keeps them, they cost it nothing).
    auto bare = co_await s.watch("/pods/", a->mod_revision, PrevKv::omit);
    CO_ASSERT(bare);
    auto plain = co_await collect(**bare, 4);
    CO_ASSERT(plain && plain->size() == 4);
    EXPECT_EQ((*plain)[0].kv.value, "1");
    EXPECT_EQ((*plain)[1].kv.value, "2");
    EXPECT_EQ((*plain)[2].type, EventType::del);
    EXPECT_EQ((*plain)[3].kv.key, "/pods/b");
  }());
}

TEST_P(StorageContract, RequestedProgressIsAnEmptyBatchAtLeastAsNewAsTheLastWrite) {
  run([&]() -> asio::awaitable<void> {
    auto stream = co_await storage_->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    auto other = co_await storage_->create("/nodes/x", "1");
    CO_ASSERT(other);
    (*stream)->request_progress();
    auto batch = co_await next_within(**stream, 5s);
    CO_ASSERT(batch);
    EXPECT_TRUE(batch->events.empty());
    EXPECT_GE(batch->revision, other->mod_revision);
  }());
}

TEST_P(StorageContract, AnAbandonedNextLosesNoEvent) {
  run([&]() -> asio::awaitable<void> {
    auto stream = co_await storage_->watch("/pods/", 0, PrevKv::include);
    CO_ASSERT(stream);
    asio::steady_timer t(co_await asio::this_coro::executor, 50ms);
    auto r = co_await ((*stream)->next() || t.async_wait(asio::use_awaitable));
    EXPECT_EQ(r.index(), 1u);
    auto created = co_await storage_->create("/pods/a", "1");
    CO_ASSERT(created);
    auto events = co_await collect(**stream, 1);
    CO_ASSERT(events);
    EXPECT_EQ((*events)[0].revision(), created->mod_revision);
  }());
}

TEST_P(StorageContract, CompactionMakesOlderReadsAndWatchesGone) {
  run([&]() -> asio::awaitable<void> {
    Storage& s = *storage_;
    auto a = co_await s.create("/pods/a", "1");
    CO_ASSERT(a);
    auto a2 = co_await s.put_if("/pods/a", a->mod_revision, "2");
    CO_ASSERT(a2);
    auto a3 = co_await s.put_if("/pods/a", a2->kv.mod_revision, "3");
    CO_ASSERT(a3);
    CO_ASSERT(co_await s.compact(a3->kv.mod_revision));
    EXPECT_EQ((co_await s.get("/pods/a", a->mod_revision)).error(), Errc::gone);
    ListOptions old;
    old.prefix = "/pods/";
    old.revision = a2->kv.mod_revision;
    EXPECT_EQ((co_await s.list(old)).error(), Errc::gone);
    auto at = co_await s.get("/pods/a", a3->kv.mod_revision);
    CO_ASSERT(at);
    EXPECT_EQ(at->value, "3");
    EXPECT_EQ((co_await s.compact(a2->kv.mod_revision)).error(), Errc::gone);

    // A watch from before the compaction: refused, or its first next() is `gone`, for good.
    auto stream = co_await s.watch("/pods/", a->mod_revision, PrevKv::include);
    if (stream) {
      auto batch = co_await next_within(**stream, 5s);
      CO_ASSERT(!batch);
      EXPECT_EQ(batch.error(), Errc::gone);
      EXPECT_EQ((co_await (*stream)->next()).error(), Errc::gone);
    } else {
      EXPECT_EQ(stream.error(), Errc::gone);
    }
  }());
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageContract,
                         ::testing::Values("memory", "encrypting", "etcd"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace kwatch::storage
