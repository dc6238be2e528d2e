#include "registry/cached_reads.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace kwatch::registry {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using base::Errc;

// Which reads the cache answers and which it leaves to storage, over the embedded store.
class CachedReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    storage_ = std::move(*storage);
    scheme_ = kinds::Scheme::builtin();
    store_ = std::make_shared<ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<CacherRegistry>(ioc_.get_executor(), storage_, CacherDefaults{});
    configmaps_ = scheme_->find("", "v1", "configmaps");
    run<bool>([&]() -> asio::awaitable<bool> {
      std::string ns = "t";
      EXPECT_TRUE(co_await store_->ensure_namespace(std::move(ns)));
      for (const char* name : {"a", "b", "c"}) {
        auto body = json::parse(std::string(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")") +
                                name + R"(","labels":{"app":"x"}}})")
                        .as_object();
        std::string in = "t";
        WriteQuery query;
        EXPECT_TRUE(co_await store_->create(*configmaps_, std::move(in), std::move(body),
                                            std::move(query)));
      }
      co_return true;
    });
  }

  void TearDown() override {
    cachers_->stop_all();
    turn();
  }

  void turn() { test::turn(ioc_); }

  template <class T>
  T run(std::function<asio::awaitable<T>()> f) {
    return test::run_to_end<T>(ioc_, std::move(f));
  }

  void start_cache() {
    auto cacher = cachers_->ensure(*configmaps_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!cacher->ready() && std::chrono::steady_clock::now() < deadline) turn();
    ASSERT_TRUE(cacher->ready());
  }

  CacheAnswer<watch::CacheList> list(ListQuery query) {
    auto compiled = compile_list_query(*configmaps_, query);
    EXPECT_TRUE(compiled);
    return run<CacheAnswer<watch::CacheList>>(
        [&]() -> asio::awaitable<CacheAnswer<watch::CacheList>> {
          co_return co_await list_from_cache(*cachers_, *configmaps_, "t", *compiled);
        });
  }

  CacheAnswer<watch::ObjectPtr> get(std::optional<std::string> rv) {
    return run<CacheAnswer<watch::ObjectPtr>>(
        [&]() -> asio::awaitable<CacheAnswer<watch::ObjectPtr>> {
          co_return co_await get_from_cache(*cachers_, *configmaps_, "t", "a", rv);
        });
  }

  asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<ResourceStore> store_;
  std::shared_ptr<CacherRegistry> cachers_;
  std::shared_ptr<const kinds::ResourceInfo> configmaps_;
};

TEST_F(CachedReadsTest, WithoutACacheStorageAnswersEveryRead) {
  EXPECT_FALSE(list({}));
  EXPECT_FALSE(get("0"));
}

TEST_F(CachedReadsTest, AConsistentListComesFromTheCacheOnceItCaughtUp) {
  start_cache();
  auto answer = list({});
  ASSERT_TRUE(answer);
  ASSERT_TRUE(*answer);
  EXPECT_EQ((*answer)->objects.size(), 3u);
}

TEST_F(CachedReadsTest, ExactReadsGoToStorage) {
  start_cache();
  ListQuery exact;
  exact.resource_version = "2";
  exact.resource_version_match = "Exact";
  EXPECT_FALSE(list(exact));
}

TEST_F(CachedReadsTest, AVersionTheCacheDoesNotReachIsTooLarge) {
  start_cache();
  ListQuery ahead;
  ahead.resource_version = "100000";
  auto answer = list(ahead);
  ASSERT_TRUE(answer);
  ASSERT_FALSE(*answer);
  EXPECT_EQ(answer->error().code, Errc::timeout);
  EXPECT_EQ(answer->error().retry_after_seconds, 1);
}

TEST_F(CachedReadsTest, AGetComesFromTheCacheOnlyForAVersionItMayServe) {
  start_cache();
  EXPECT_FALSE(get(std::nullopt));  // consistent read: storage
  EXPECT_FALSE(get(""));
  EXPECT_FALSE(get("not-a-version"));  // storage refuses it
  auto cached = get("0");
  ASSERT_TRUE(cached);
  ASSERT_TRUE(*cached);
  EXPECT_NE((**cached)->json.find(R"("name":"a")"), std::string::npos);
}

TEST_F(CachedReadsTest, AnObjectTheCacheLacksIsNotFound) {
  start_cache();
  auto answer = run<CacheAnswer<watch::ObjectPtr>>(
      [&]() -> asio::awaitable<CacheAnswer<watch::ObjectPtr>> {
        co_return co_await get_from_cache(*cachers_, *configmaps_, "t", "nope",
                                          std::optional<std::string>("0"));
      });
  ASSERT_TRUE(answer);
  ASSERT_FALSE(*answer);
  EXPECT_EQ(answer->error().code, Errc::not_found);
}

TEST_F(CachedReadsTest, AWatchNeedsACacheAndAVersionInItsWindow) {
  using Session = apimachinery::ApiResult<std::unique_ptr<watch::WatchSession>>;
  auto watch_at = [&](std::string rv) {
    return run<Session>([&]() -> asio::awaitable<Session> {
      ListQuery query;
      query.resource_version = rv;
      co_return co_await watch_cache(*cachers_, *configmaps_, "t", "", std::move(query),
                                     std::chrono::seconds(30));
    });
  };
  auto uncached = watch_at("0");
  ASSERT_FALSE(uncached);
  EXPECT_EQ(uncached.error().code, Errc::bad_request);
  EXPECT_EQ(uncached.error().message, "watch is not supported for configmaps");

  start_cache();
  EXPECT_TRUE(watch_at("0"));
  // Below the cache's window (it starts where the cache listed, after four writes): 410 in
  // kube's words.
  auto cacher = cachers_->find(*configmaps_);
  ASSERT_GT(cacher->window_start(), 1);
  auto gone = watch_at("1");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, Errc::gone);
  EXPECT_EQ(gone.error().message,
            "too old resource version: 1 (" + std::to_string(cacher->window_start()) + ")");
  ListQuery bad;
  bad.resource_version_match = "Exact";  // only with sendInitialEvents on a watch: 400
  auto refused = run<Session>([&]() -> asio::awaitable<Session> {
    co_return co_await watch_cache(*cachers_, *configmaps_, "t", "", std::move(bad),
                                   std::chrono::seconds(30));
  });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, Errc::bad_request);
}

}  // namespace
}  // namespace kwatch::registry
