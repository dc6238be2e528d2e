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
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace kwatch::registry {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using base::Errc;

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


// ---- The update pipeline, without storage ----

json::object parse(const std::string& text) { return json::parse(text).as_object(); }

const char* kStoredDeployment = R"({"apiVersion":"apps/v1","kind":"Deployment",
  "metadata":{"name":"web","namespace":"t","uid":"u-1","resourceVersion":"7","generation":3,
              "creationTimestamp":"2026-01-01T00:00:00Z"},
  "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
          "template":{"metadata":{"labels":{"app":"web"}},
                      "spec":{"containers":[{"name":"c","image":"nginx"}]}}},
  "status":{"replicas":1}})";

class UpdatePipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scheme_ = kinds::Scheme::builtin();
    deployments_ = scheme_->find("apps", "v1", "deployments");
    ASSERT_NE(deployments_, nullptr);
    stored_ = parse(kStoredDeployment);
    // As stored objects are: with the defaults of their kind.
    auto settled = update(stored_);
    ASSERT_TRUE(settled) << settled.error().message;
    stored_ = std::move(*settled);
    stored_["metadata"].as_object()["generation"] = 3;
  }

  apimachinery::ApiResult<json::object> update(json::object next, WriteQuery query = {}) {
    return update_object(*deployments_, "t", "web", stored_, 7, std::move(next), query);
  }

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<const kinds::ResourceInfo> deployments_;
  json::object stored_;
};

TEST_F(UpdatePipelineTest, ServerManagedMetadataSurvivesWhateverTheBodySays) {
  auto next = stored_;
  auto& meta = next["metadata"].as_object();
  meta["uid"] = "forged";
  meta.erase("creationTimestamp");
  meta["generation"] = 99;
  meta.erase("resourceVersion");  // unset: no precondition
  auto r = update(std::move(next));
  ASSERT_TRUE(r) << r.error().message;
  const auto& out = r->at("metadata").as_object();
  EXPECT_EQ(out.at("uid").as_string(), "u-1");
  EXPECT_EQ(out.at("creationTimestamp").as_string(), "2026-01-01T00:00:00Z");
  EXPECT_EQ(out.at("generation").as_int64(), 3);  // the spec did not change
}

TEST_F(UpdatePipelineTest, AChangedSpecBumpsTheGeneration) {
  auto next = stored_;
  next["spec"].as_object()["replicas"] = 3;
  auto r = update(std::move(next));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("metadata").at("generation").as_int64(), 4);
}

TEST_F(UpdatePipelineTest, AStaleResourceVersionIsAConflict) {
  auto next = stored_;
  next["metadata"].as_object()["resourceVersion"] = "6";
  auto r = update(std::move(next));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::conflict);
}

TEST_F(UpdatePipelineTest, ANameOtherThanTheURLsIsABadRequest) {
  auto next = stored_;
  next["metadata"].as_object()["name"] = "other";
  auto r = update(std::move(next));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::bad_request);
  EXPECT_EQ(r.error().message,
            "the name of the object (other) does not match the name on the URL (web)");
}

TEST_F(UpdatePipelineTest, EachOfMainAndStatusWritesOnlyItsHalf) {
  auto next = stored_;
  next["spec"].as_object()["replicas"] = 5;
  next["status"].as_object()["replicas"] = 5;
  auto main = update(next);
  ASSERT_TRUE(main) << main.error().message;
  EXPECT_EQ(main->at("spec").at("replicas").as_int64(), 5);
  EXPECT_EQ(main->at("status").at("replicas").as_int64(), 1);

  WriteQuery status;
  status.subresource = "status";
  auto status_write = update(next, status);
  ASSERT_TRUE(status_write) << status_write.error().message;
  EXPECT_EQ(status_write->at("spec").at("replicas").as_int64(), 1);
  EXPECT_EQ(status_write->at("status").at("replicas").as_int64(), 5);
}

TEST_F(UpdatePipelineTest, TheKindsValidationRuns) {
  auto next = stored_;
  next["spec"].as_object()["replicas"] = -1;
  auto r = update(std::move(next));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
}

TEST_F(UpdatePipelineTest, ValidatingAdmissionSeesTheDefaultedObjectAndMayRefuse) {
  WriteQuery query;
  const json::object* seen_old = nullptr;
  bool defaulted = false;
  query.admit = [&](const json::object* old, const json::object& next)
      -> std::optional<apimachinery::ApiError> {
    seen_old = old;
    // Defaults are in place by now (a Deployment's strategy).
    defaulted = next.at("spec").as_object().contains("strategy");
    return apimachinery::ApiError(Errc::forbidden, "refused by admission");
  };
  auto r = update(stored_, query);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "refused by admission");
  EXPECT_EQ(seen_old, &stored_);
  EXPECT_TRUE(defaulted);
}

TEST_F(UpdatePipelineTest, NoFinalizerMayBeAddedToAnObjectBeingDeleted) {
  stored_["metadata"].as_object()["deletionTimestamp"] = "2026-01-02T00:00:00Z";
  auto next = stored_;
  next["metadata"].as_object()["finalizers"] = json::array{"example.com/hold"};
  auto r = update(std::move(next));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
}

// A namespace's spec.finalizers belong to /finalize (KindHooks::keep_owned_fields).
TEST(UpdatePipeline, OnlyFinalizeChangesANamespacesFinalizers) {
  auto scheme = kinds::Scheme::builtin();
  auto namespaces = scheme->find("", "v1", "namespaces");
  json::object stored = parse(R"({"apiVersion":"v1","kind":"Namespace",
    "metadata":{"name":"team","uid":"u-2","resourceVersion":"4"},
    "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})");
  auto next = stored;
  next["spec"].as_object()["finalizers"] = json::array();
  WriteQuery main;
  auto kept = update_object(*namespaces, "", "team", stored, 4, next, main);
  auto finalizers = [](const json::object& ns) -> std::size_t {
    const auto* spec = ns.if_contains("spec");
    const auto* list = spec && spec->is_object() ? spec->as_object().if_contains("finalizers")
                                                 : nullptr;
    return list && list->is_array() ? list->as_array().size() : 0;
  };
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(finalizers(*kept), 1u);
  WriteQuery finalize;
  finalize.subresource = "finalize";
  auto finalized = update_object(*namespaces, "", "team", stored, 4, next, finalize);
  ASSERT_TRUE(finalized) << finalized.error().message;
  EXPECT_EQ(finalizers(*finalized), 0u);
}

}  // namespace
}  // namespace kwatch::registry
