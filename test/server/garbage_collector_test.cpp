#include "server/garbage_collector.hpp"

#include "registry/deletion.hpp"
#include "registry/resource_store.hpp"
#include "registry/scheme.hpp"
#include "server/cacher_registry.hpp"
#include "storage/memory_storage.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

namespace kwatch::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// The collector over the embedded store, with caches made one by one so that a test decides
// which resources it follows, and when.
class GarbageCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    storage_ = std::move(*storage);
    scheme_ = registry::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<CacherRegistry>(ioc_.get_executor(), storage_, CacherDefaults{});
    configmaps_ = scheme_->find("", "v1", "configmaps");
    deployments_ = scheme_->find("apps", "v1", "deployments");
    ASSERT_NE(configmaps_, nullptr);
    ASSERT_NE(deployments_, nullptr);
    run([this]() -> asio::awaitable<void> {
      std::string ns = "t";
      auto r = co_await store_->ensure_namespace(std::move(ns));
      EXPECT_TRUE(r);
    });
  }

  void TearDown() override {
    if (collector_) collector_->stop();
    cachers_->stop_all();
    turn();
  }

  // Runs the io_context for a slice (it stops whenever it runs out of work).
  void turn() {
    if (ioc_.stopped()) ioc_.restart();
    ioc_.run_for(std::chrono::milliseconds(10));
  }

  template <class F>
  void run(F f) {
    bool done = false;
    asio::co_spawn(ioc_, f(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      turn();
    }
    ASSERT_TRUE(done) << "did not finish within the deadline";
  }

  // Runs the io_context until `condition` holds, at most `limit`.
  bool eventually(const std::function<bool()>& condition,
                  std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!condition()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      turn();
    }
    return true;
  }

  json::object create(const registry::ResourceInfo& info, const std::string& text) {
    json::object out;
    run([&]() -> asio::awaitable<void> {
      // Arguments named: GCC 12 mishandles converted temporaries passed to a coroutine.
      auto body = json::parse(text).as_object();
      std::string ns = "t";
      registry::WriteQuery query;
      auto r = co_await store_->create(info, std::move(ns), std::move(body), std::move(query));
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
      if (r) out = std::move(*r);
    });
    return out;
  }

  void remove(const registry::ResourceInfo& info, const std::string& name) {
    run([&]() -> asio::awaitable<void> {
      registry::DeleteQuery query;
      query.propagation = registry::Propagation::background;
      std::string ns = "t";
      std::string object_name = name;
      auto r = co_await store_->remove(info, std::move(ns), std::move(object_name), std::move(query));
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
    });
  }

  bool cached(const registry::ResourceInfo& info, const std::string& name) {
    auto cacher = cachers_->find(info);
    return cacher && cacher->get(info.key("t", name)) != nullptr;
  }

  static std::string configmap(const std::string& name, const std::string& owner_name,
                               const std::string& owner_uid) {
    return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
           R"(","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":")" +
           owner_name + R"(","uid":")" + owner_uid + R"("}]}})";
  }

  asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<registry::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<CacherRegistry> cachers_;
  std::shared_ptr<GarbageCollector> collector_;
  const registry::ResourceInfo* configmaps_ = nullptr;
  const registry::ResourceInfo* deployments_ = nullptr;
};

constexpr const char* kOwner = R"({"apiVersion":"apps/v1","kind":"Deployment",
    "metadata":{"name":"bg"},"spec":{"selector":{"matchLabels":{"app":"bg"}},
    "template":{"metadata":{"labels":{"app":"bg"}},
    "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})";

// The collector checks a dependent while its owner is there; the owner goes before the
// collector follows the owner's resource, so no DELETED event of it ever reaches the collector.
// Following that resource must still bring the dependent up again.
TEST_F(GarbageCollectorTest, AnOwnerThatWentBeforeItsResourceWasFollowedStillReleasesDependents) {
  cachers_->ensure(*configmaps_);
  collector_ = std::make_shared<GarbageCollector>(scheme_, store_, cachers_);
  collector_->start(ioc_.get_executor());
  const auto owner = create(*deployments_, kOwner);
  const std::string uid(owner.at("metadata").at("uid").as_string());
  create(*configmaps_, configmap("child", "bg", uid));
  // The queue is first in, first out: once this later dependent of a missing owner is
  // collected, the child has been looked at (and kept: its owner was there).
  create(*configmaps_, configmap("marker", "nobody", "0f0f0f0f-1111-2222-3333-444444444444"));
  ASSERT_TRUE(eventually([&] { return cached(*configmaps_, "child") && !cached(*configmaps_, "marker"); }));
  EXPECT_TRUE(cached(*configmaps_, "child"));

  remove(*deployments_, "bg");
  cachers_->ensure(*deployments_);
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "child"); }))
      << "the dependent of an owner deleted while its resource was not followed stayed";
}

// The usual order, for contrast: the owner's resource is followed and its DELETED event
// releases the dependent.
TEST_F(GarbageCollectorTest, AnOwnersDeletedEventReleasesItsDependents) {
  cachers_->ensure(*configmaps_);
  cachers_->ensure(*deployments_);
  collector_ = std::make_shared<GarbageCollector>(scheme_, store_, cachers_);
  collector_->start(ioc_.get_executor());
  const auto owner = create(*deployments_, kOwner);
  const std::string uid(owner.at("metadata").at("uid").as_string());
  create(*configmaps_, configmap("child", "bg", uid));
  ASSERT_TRUE(eventually([&] { return cached(*configmaps_, "child") && cached(*deployments_, "bg"); }));
  remove(*deployments_, "bg");
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "child"); }));
}

}  // namespace
}  // namespace kwatch::server
