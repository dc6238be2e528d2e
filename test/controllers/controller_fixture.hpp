// What every controller's suite runs on: the embedded store (whose watch streams a test may hold
// back), the watch caches of a
// CacherRegistry over it (made when a controller or a test asks), one io_context the test drives,
// namespace `t`, and helpers that create, read and delete objects through the ResourceStore as
// clients would. Controllers a test starts are stopped at its end.
#pragma once

#include "controllers/reconciler.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/breakable_storage.hpp"
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
#include <vector>

namespace kwatch::controllers {

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    breakable_ = std::make_shared<test::BreakableStorage>(
        std::shared_ptr<storage::Storage>(std::move(*storage)));
    storage_ = breakable_;
    scheme_ = kinds::Scheme::builtin();
    store_ = std::make_shared<registry::ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<registry::CacherRegistry>(ioc_.get_executor(), storage_,
                                                          registry::CacherDefaults{});
    run([this]() -> boost::asio::awaitable<void> {
      std::string ns = "t";
      auto r = co_await store_->ensure_namespace(std::move(ns));
      EXPECT_TRUE(r);
    });
  }

  void TearDown() override {
    for (auto& c : controllers_) c->stop();
    cachers_->stop_all();
    turn();
  }

  // Starts `controller` on the test's io_context; it is stopped at the end of the test.
  void start(std::shared_ptr<Reconciler> controller) {
    controller->start(ioc_.get_executor());
    controllers_.push_back(std::move(controller));
  }

  // Runs the io_context for a slice (it stops whenever it runs out of work).
  void turn() { test::turn(ioc_); }

  template <class F>
  void run(F f) {
    bool done = false;
    boost::asio::co_spawn(ioc_, f(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < deadline) turn();
    ASSERT_TRUE(done) << "did not finish within the deadline";
  }

  // Runs the io_context until `condition` holds, at most `limit`.
  bool eventually(const std::function<bool()>& condition,
                  std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    return test::eventually(ioc_, condition, limit);
  }

  boost::json::object create(const kinds::ResourceInfo& info, const std::string& text,
                             const std::string& in = "t") {
    boost::json::object out;
    run([&]() -> boost::asio::awaitable<void> {
      // Arguments named: GCC 12 mishandles converted temporaries passed to a coroutine.
      auto body = boost::json::parse(text).as_object();
      std::string ns = in;
      registry::WriteQuery query;
      auto r = co_await store_->create(info, std::move(ns), std::move(body), std::move(query));
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
      if (r) out = std::move(*r);
    });
    return out;
  }

  // The stored object, or nullopt when there is none.
  std::optional<boost::json::object> get(const kinds::ResourceInfo& info, const std::string& name,
                                         const std::string& in = "t") {
    std::optional<boost::json::object> out;
    run([&]() -> boost::asio::awaitable<void> {
      std::string ns = in, object_name = name, any_version;
      auto r = co_await store_->get(info, std::move(ns), std::move(object_name),
                                    std::move(any_version));
      if (r) out = std::move(*r);
    });
    return out;
  }

  void remove(const kinds::ResourceInfo& info, const std::string& name,
              registry::Propagation propagation = registry::Propagation::background,
              const std::string& in = "t") {
    run([&]() -> boost::asio::awaitable<void> {
      registry::DeleteQuery query;
      query.propagation = propagation;
      std::string ns = in;
      std::string object_name = name;
      auto r = co_await store_->remove(info, std::move(ns), std::move(object_name),
                                       std::move(query));
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
    });
  }

  // Replaces the stored object `name` with what `change` makes of it.
  void update(const kinds::ResourceInfo& info, const std::string& name,
              const std::function<void(boost::json::object&)>& change,
              const std::string& in = "t") {
    run([&]() -> boost::asio::awaitable<void> {
      std::string ns = in, object_name = name, any_version;
      auto current = co_await store_->get(info, std::move(ns), std::move(object_name),
                                          std::move(any_version));
      EXPECT_TRUE(current);
      if (!current) co_return;
      change(*current);
      std::string ns_arg = in, name_arg = name;
      registry::WriteQuery query;
      auto r = co_await store_->update(info, std::move(ns_arg), std::move(name_arg),
                                       std::move(*current), std::move(query));
      EXPECT_TRUE(r) << (r ? "" : r.error().message);
    });
  }

  boost::asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<test::BreakableStorage> breakable_;  // storage_, to make a cache fall behind
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::vector<std::shared_ptr<Reconciler>> controllers_;
};

}  // namespace kwatch::controllers
