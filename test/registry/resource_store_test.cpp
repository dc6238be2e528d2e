#include "registry/resource_store.hpp"

#include "kinds/scheme.hpp"
#include "registry/service_allocator.hpp"
#include "storage/memory_storage.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace kwatch::registry {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// The embedded store answering each call on a later turn of the io_context, as a networked
// store does: coroutines that share it interleave between their reads and writes.
class YieldingStorage final : public storage::Storage {
 public:
  explicit YieldingStorage(std::shared_ptr<storage::Storage> inner) : inner_(std::move(inner)) {}

  asio::awaitable<base::Result<storage::KeyValue>> get(std::string k, std::int64_t r) override {
    co_await yield();
    co_return co_await inner_->get(std::move(k), r);
  }
  asio::awaitable<base::Result<storage::ListResult>> list(storage::ListOptions o) override {
    co_await yield();
    co_return co_await inner_->list(std::move(o));
  }
  asio::awaitable<base::Result<storage::TxnResult>> put_if(std::string k, std::int64_t e,
                                                           std::string v) override {
    co_await yield();
    co_return co_await inner_->put_if(std::move(k), e, std::move(v));
  }
  asio::awaitable<base::Result<storage::TxnResult>> delete_if(std::string k,
                                                              std::int64_t e) override {
    co_await yield();
    co_return co_await inner_->delete_if(std::move(k), e);
  }
  asio::awaitable<base::Result<std::int64_t>> current_revision() override {
    co_await yield();
    co_return co_await inner_->current_revision();
  }
  asio::awaitable<base::Result<void>> compact(std::int64_t r) override {
    co_await yield();
    co_return co_await inner_->compact(r);
  }
  asio::awaitable<base::Result<std::unique_ptr<storage::WatchStream>>> watch(
      std::string prefix, std::int64_t start, storage::PrevKv prev_kv) override {
    co_await yield();
    co_return co_await inner_->watch(std::move(prefix), start, prev_kv);
  }

 private:
  static asio::awaitable<void> yield() {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  std::shared_ptr<storage::Storage> inner_;
};

// Replicas over one store: each with its own ResourceStore and Service allocator.
class ResourceStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto memory = storage::MemoryStorage::open({});
    ASSERT_TRUE(memory);
    storage_ = std::make_shared<YieldingStorage>(std::move(*memory));
    scheme_ = kinds::Scheme::builtin();
    asio::co_spawn(
        ioc_,
        [this]() -> asio::awaitable<void> {
          std::string ns = "default";
          EXPECT_TRUE(co_await replica()->ensure_namespace(std::move(ns)));
        },
        asio::detached);
    run_all();
  }

  std::shared_ptr<ResourceStore> replica() {
    auto store = std::make_shared<ResourceStore>(storage_, scheme_);
    auto ranges = parse_node_port_range("30000-32767", *parse_service_cidr("10.0.0.0/24"));
    store->set_service_allocator(
        std::make_shared<ServiceAllocator>(storage_, "/registry", *ranges));
    return store;
  }

  // Runs every coroutine spawned on the io_context to its end.
  void run_all() {
    ioc_.restart();
    ioc_.run();
  }

  asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
};

json::object kubernetes_service() {
  return json::object{
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", json::object{{"name", "kubernetes"}, {"namespace", "default"}}},
      {"spec", json::object{{"type", "ClusterIP"},
                            {"clusterIP", "10.0.0.1"},
                            {"ports", json::array{json::object{{"port", 443},
                                                               {"protocol", "TCP"}}}}}}};
}

// Replicas starting together both find no `kubernetes` Service and both create it; the one that
// comes second fails on the cluster IP (held by the first one's Service) before the name. The
// Service exists as asked: both succeed.
TEST_F(ResourceStoreTest, EnsureOfAServiceAnotherReplicaCreatedMeanwhileSucceeds) {
  auto services = scheme_->find("", "v1", "services");
  ASSERT_NE(services, nullptr);
  auto first = replica();
  auto second = replica();
  int succeeded = 0;
  std::string failure;
  for (auto store : {first, second}) {
    asio::co_spawn(
        ioc_,
        [&, store]() -> asio::awaitable<void> {
          auto r = co_await store->ensure(*services, kubernetes_service());
          if (r) {
            ++succeeded;
          } else {
            failure = r.error().message;
          }
        },
        asio::detached);
  }
  run_all();
  EXPECT_EQ(succeeded, 2) << failure;

  // One Service, on the address asked for.
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        auto got = co_await first->get(*services, "default", "kubernetes", "");
        EXPECT_TRUE(got);
        if (got) {
          EXPECT_EQ(got->at("spec").at("clusterIP").as_string(), "10.0.0.1");
        }
      },
      asio::detached);
  run_all();
}

// ensure() still reports what it could not create.
TEST_F(ResourceStoreTest, EnsureReportsAnInvalidObject) {
  auto services = scheme_->find("", "v1", "services");
  auto body = kubernetes_service();
  body["spec"].as_object()["clusterIP"] = "192.168.7.1";  // outside the range
  std::optional<apimachinery::ApiResult<void>> result;
  asio::co_spawn(
      ioc_,
      [&]() -> asio::awaitable<void> {
        result = co_await replica()->ensure(*services, std::move(body));
      },
      asio::detached);
  run_all();
  ASSERT_TRUE(result);
  ASSERT_FALSE(*result);
  EXPECT_EQ(result->error().code, apimachinery::Errc::invalid);
}

}  // namespace
}  // namespace kwatch::registry
