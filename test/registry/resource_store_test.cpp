#include "registry/resource_store.hpp"

#include "kinds/scheme.hpp"
#include "registry/namespace_lifecycle.hpp"
#include "registry/service_allocator.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
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
    auto allocator = std::make_shared<ServiceAllocator>(storage_, "/registry", *ranges);
    allocator->use_ip_addresses(store.get(), scheme_->find("networking.k8s.io", "v1", "ipaddresses"));
    store->set_service_allocator(allocator);
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


// ---- Admission plugins whose judgement is the test's ----

using Verdict = std::optional<apimachinery::ApiError>;

// Handles every write unless told which operation only.
class TestPluginBase {
 public:
  void only_for(AdmissionOperation operation) { only_ = operation; }

 protected:
  bool wants(const AdmissionAttributes& a) const { return !only_ || *only_ == a.operation; }

 private:
  std::optional<AdmissionOperation> only_;
};

class TestMutating final : public MutatingAdmission, public TestPluginBase {
 public:
  using Fn = std::function<asio::awaitable<Verdict>(const AdmissionAttributes&, json::object*)>;
  explicit TestMutating(Fn fn) : fn_(std::move(fn)) {}
  std::string_view name() const override { return "TestMutating"; }
  bool handles(const AdmissionAttributes& a) const override { return wants(a); }
  asio::awaitable<Verdict> admit(const AdmissionAttributes& a, json::object* object) override {
    co_return co_await fn_(a, object);
  }

 private:
  Fn fn_;
};

class TestValidating final : public ValidatingAdmission, public TestPluginBase {
 public:
  using Fn =
      std::function<asio::awaitable<Verdict>(const AdmissionAttributes&, const json::object*)>;
  explicit TestValidating(Fn fn) : fn_(std::move(fn)) {}
  std::string_view name() const override { return "TestValidating"; }
  bool handles(const AdmissionAttributes& a) const override { return wants(a); }
  asio::awaitable<Verdict> validate(const AdmissionAttributes& a,
                                    const json::object* object) override {
    co_return co_await fn_(a, object);
  }

 private:
  Fn fn_;
};

// ---- The update pipeline, without storage ----

json::object parse(const std::string& text) { return json::parse(text).as_object(); }

// update_object to its end (it waits only for the admission plugins).
apimachinery::ApiResult<json::object> pipeline(const kinds::ResourceInfo& info,
                                               const std::string& ns, const std::string& name,
                                               const json::object& existing,
                                               std::int64_t revision, json::object next,
                                               WriteQuery& query, const Admission& admission) {
  asio::io_context ioc;
  using Made = apimachinery::ApiResult<json::object>;
  return test::run_to_end<Made>(ioc, [&]() -> asio::awaitable<Made> {
    co_return co_await update_object(info, ns, name, existing, revision, std::move(next), query,
                                     admission);
  });
}

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
    return pipeline(*deployments_, "t", "web", stored_, 7, std::move(next), query, admission_);
  }

  Admission admission_;
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

TEST_F(UpdatePipelineTest, WhatAMutatingPluginChangesIsSettledAsAnObject) {
  // A plugin that renames, moves, re-identifies and adds a field the kind does not know.
  auto plugin = std::make_shared<TestMutating>(
      [](const AdmissionAttributes&, json::object* o) -> asio::awaitable<Verdict> {
        auto& meta = (*o)["metadata"].as_object();
        meta["uid"] = "forged";
        meta["labels"] = json::object{{"mutated", "yes"}};
        (*o)["spec"].as_object()["bogus"] = 1;
        (*o)["kind"] = "Pod";
        co_return std::nullopt;
      });
  admission_.add(plugin);
  auto next = stored_;
  auto r = update(std::move(next));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("metadata").at("uid").as_string(), "u-1");
  EXPECT_EQ(r->at("metadata").at("labels").at("mutated").as_string(), "yes");
  EXPECT_FALSE(r->at("spec").as_object().contains("bogus"));
  EXPECT_EQ(r->at("kind").as_string(), "Deployment");

  Admission renaming;
  renaming.add(std::make_shared<TestMutating>(
      [](const AdmissionAttributes&, json::object* o) -> asio::awaitable<Verdict> {
        (*o)["metadata"].as_object()["name"] = "other";
        co_return std::nullopt;
      }));
  WriteQuery query;
  auto renamed = pipeline(*deployments_, "t", "web", stored_, 7, stored_, query, renaming);
  ASSERT_FALSE(renamed);
  EXPECT_EQ(renamed.error().message,
            "Deployment.apps \"web\" is invalid: metadata.name: Invalid value: \"other\": field is "
            "immutable");
  Admission moving;
  moving.add(std::make_shared<TestMutating>(
      [](const AdmissionAttributes&, json::object* o) -> asio::awaitable<Verdict> {
        (*o)["metadata"].as_object()["namespace"] = "kube-system";
        co_return std::nullopt;
      }));
  auto moved = pipeline(*deployments_, "t", "web", stored_, 7, stored_, query, moving);
  ASSERT_FALSE(moved);
  EXPECT_EQ(moved.error().code, base::Errc::bad_request);
}

TEST_F(UpdatePipelineTest, AChangedSpecBumpsTheGeneration) {
  auto next = stored_;
  next["spec"].as_object()["replicas"] = 3;
  auto r = update(std::move(next));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("metadata").at("generation").as_int64(), 4);
}

// A built-in object stores Go's nulls (an EndpointSlice's `ports: null`), which a body read
// back and decoded drops: that is no change of what the generation counts.
TEST_F(UpdatePipelineTest, GosNullsAreNoChangeOfTheGeneration) {
  auto slices = scheme_->find("discovery.k8s.io", "v1", "endpointslices");
  ASSERT_NE(slices, nullptr);
  auto slice = parse(R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
      "metadata":{"name":"s","namespace":"t","uid":"u-2","resourceVersion":"7",
                  "creationTimestamp":"2026-01-01T00:00:00Z","generation":1},
      "addressType":"IPv4","endpoints":[]})");
  WriteQuery query;
  auto settled = pipeline(*slices, "t", "s", slice, 7, slice, query, admission_);
  ASSERT_TRUE(settled) << settled.error().message;
  ASSERT_TRUE(settled->at("ports").is_null());
  auto next = *settled;
  next["metadata"].as_object()["annotations"] = json::object{{"a", "b"}};
  auto r = pipeline(*slices, "t", "s", *settled, 7, std::move(next), query, admission_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("metadata").at("generation").as_int64(), 1);
  EXPECT_TRUE(r->at("ports").is_null());
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
  const json::object* seen_old = nullptr;
  const json::object* seen_next = nullptr;
  bool defaulted = false;
  std::string seen;
  admission_.add(std::make_shared<TestValidating>(
      [&](const AdmissionAttributes& a, const json::object* next) -> asio::awaitable<Verdict> {
        seen_old = a.old_object;
        seen_next = next;
        seen = std::string(operation_name(a.operation)) + " " + a.ns + "/" + a.name;
        // Defaults are in place by now (a Deployment's strategy).
        defaulted = next != nullptr && next->at("spec").as_object().contains("strategy");
        co_return apimachinery::ApiError(Errc::forbidden, "refused by admission");
      }));
  auto r = update(stored_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "refused by admission");
  EXPECT_EQ(seen_old, &stored_);
  EXPECT_NE(seen_next, nullptr);
  EXPECT_EQ(seen, "UPDATE t/web");
  EXPECT_TRUE(defaulted);
}

// Mutating admission runs after defaults and before the kind's preparation and validation: what
// it changes bumps the generation, is validated, and is what validating admission judges.
TEST_F(UpdatePipelineTest, MutatingAdmissionChangesWhatIsValidatedAndStored) {
  int replicas = 2;
  admission_.add(std::make_shared<TestMutating>(
      [&](const AdmissionAttributes&, json::object* next) -> asio::awaitable<Verdict> {
        (*next)["spec"].as_object()["replicas"] = replicas;
        co_return std::nullopt;
      }));
  bool judged_mutated = false;
  admission_.add(std::make_shared<TestValidating>(
      [&](const AdmissionAttributes&, const json::object* next) -> asio::awaitable<Verdict> {
        judged_mutated = next->at("spec").at("replicas").as_int64() == replicas;
        co_return std::nullopt;
      }));
  auto r = update(stored_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at("spec").at("replicas").as_int64(), 2);
  EXPECT_EQ(r->at("metadata").at("generation").as_int64(), 4);
  EXPECT_TRUE(judged_mutated);

  replicas = -1;
  judged_mutated = false;
  r = update(stored_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid);
  EXPECT_FALSE(judged_mutated) << "an invalid object reached validating admission";
}

// Plugins run in the order they were added; the first refusal ends the write; a plugin that
// does not handle the write is not asked.
TEST_F(UpdatePipelineTest, PluginsRunInOrderAndTheFirstRefusalEndsTheWrite) {
  std::vector<std::string> asked;
  auto plugin = [&](std::string name, bool refuses) {
    return std::make_shared<TestValidating>(
        [&asked, name, refuses](const AdmissionAttributes&,
                                const json::object*) -> asio::awaitable<Verdict> {
          asked.push_back(name);
          if (refuses) co_return apimachinery::ApiError(Errc::forbidden, name + " refuses");
          co_return std::nullopt;
        });
  };
  auto bystander = plugin("bystander", true);
  bystander->only_for(AdmissionOperation::create);
  admission_.add(bystander);
  admission_.add(plugin("first", false));
  admission_.add(plugin("second", true));
  admission_.add(plugin("third", true));
  auto r = update(stored_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "second refuses");
  EXPECT_EQ(asked, (std::vector<std::string>{"first", "second"}));
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
  const Admission none;
  auto kept = pipeline(*namespaces, "", "team", stored, 4, next, main, none);
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
  auto finalized = pipeline(*namespaces, "", "team", stored, 4, next, finalize, none);
  ASSERT_TRUE(finalized) << finalized.error().message;
  EXPECT_EQ(finalizers(*finalized), 0u);
}

// ---- Admission in the store: NamespaceLifecycle, deletes, plugins that wait ----

json::object config_map(const std::string& ns, const std::string& name) {
  return json::object{{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", json::object{{"name", name}, {"namespace", ns}}},
                      {"data", json::object{{"a", "1"}}}};
}

using Made = apimachinery::ApiResult<json::object>;

// Nothing is created in a namespace that does not exist (404) or is being deleted (403): the
// NamespaceLifecycle plugin every store starts with, for kwatch's own writes too.
TEST_F(ResourceStoreTest, NamespaceLifecycleGuardsCreates) {
  auto store = replica();
  EXPECT_EQ(store->admission().names(),
            (std::vector<std::string>{"NamespaceLifecycle", "DynamicResourceRules"}));
  auto configmaps = scheme_->find("", "v1", "configmaps");
  auto namespaces = scheme_->find("", "v1", "namespaces");
  auto missing = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    WriteQuery q;
    auto c = config_map("nowhere", "c");
    co_return co_await store->create(*configmaps, "nowhere", std::move(c), q);
  });
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::not_found);
  EXPECT_EQ(missing.error().message, "namespaces \"nowhere\" not found");

  // (Built outside the coroutine: GCC 12 cannot compile a braced list inside one.)
  json::object going_ns{{"apiVersion", "v1"},
                        {"kind", "Namespace"},
                        {"metadata", json::object{{"name", "going"}}}};
  auto going = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    WriteQuery q;
    DeleteQuery d;
    auto ns = co_await store->create(*namespaces, "", std::move(going_ns), q);
    EXPECT_TRUE(ns);
    auto removed = co_await store->remove(*namespaces, "", "going", d);
    EXPECT_TRUE(removed);
    auto c = config_map("going", "c");
    co_return co_await store->create(*configmaps, "going", std::move(c), q);
  });
  ASSERT_FALSE(going);
  EXPECT_EQ(going.error().code, Errc::forbidden);
  EXPECT_EQ(going.error().message,
            "configmaps \"c\" is forbidden: unable to create new content in namespace going "
            "because it is being terminated");
}

TEST_F(ResourceStoreTest, TheNamespacesKwatchReliesOnCannotBeDeleted) {
  EXPECT_TRUE(is_immortal_namespace("kube-system"));
  EXPECT_FALSE(is_immortal_namespace("kube-systems"));
  auto store = replica();
  auto namespaces = scheme_->find("", "v1", "namespaces");
  auto r = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    DeleteQuery d;
    co_return co_await store->remove(*namespaces, "", "default", d);
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::forbidden);
  EXPECT_EQ(r.error().message, "namespaces \"default\" is forbidden: this namespace may not be deleted");
}

// A create is admitted with the name the request gave ("" when the server generates it), the
// requester, and dry run as asked; a refusal stores nothing.
TEST_F(ResourceStoreTest, ACreateIsAdmittedAsTheRequestAsked) {
  auto store = replica();
  std::vector<std::string> seen;
  store->admission().add(std::make_shared<TestValidating>(
      [&](const AdmissionAttributes& a, const json::object* object) -> asio::awaitable<Verdict> {
        seen.push_back(std::string(operation_name(a.operation)) + " " + a.ns + "/" + a.name +
                       " by " + (a.user ? a.user->name : "kwatch") +
                       (a.dry_run ? " (dry run)" : "") +
                       (object != nullptr && a.old_object == nullptr ? " new" : ""));
        co_return apimachinery::ApiError(Errc::forbidden, "no");
      }));
  auto configmaps = scheme_->find("", "v1", "configmaps");
  WriteQuery by_bob;
  apimachinery::UserInfo bob;
  bob.name = "bob";
  by_bob.user = std::make_shared<const apimachinery::UserInfo>(bob);
  by_bob.dry_run = true;
  auto generated = config_map("default", "");
  generated["metadata"].as_object()["generateName"] = "c-";
  auto r = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    auto c = config_map("default", "c");
    auto named = co_await store->create(*configmaps, "default", std::move(c), by_bob);
    EXPECT_FALSE(named);
    WriteQuery q;
    co_return co_await store->create(*configmaps, "default", std::move(generated), q);
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(seen, (std::vector<std::string>{"CREATE default/c by bob (dry run) new",
                                            "CREATE default/ by kwatch new"}));
  auto left = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    CompiledListQuery lq;
    co_return co_await store->list(*configmaps, "default", std::move(lq));
  });
  ASSERT_TRUE(left);
  EXPECT_TRUE(left->at("items").as_array().empty());
}

// A delete: mutating admission before the object is read (no object), validating admission on
// the object that would go; a refusal keeps it.
TEST_F(ResourceStoreTest, ADeleteIsAdmittedOnTheObjectItRemoves) {
  auto store = replica();
  auto configmaps = scheme_->find("", "v1", "configmaps");
  bool mutating_saw_no_object = false;
  auto mutating = std::make_shared<TestMutating>(
      [&](const AdmissionAttributes& a, json::object* object) -> asio::awaitable<Verdict> {
        mutating_saw_no_object = object == nullptr && a.old_object == nullptr;
        co_return std::nullopt;
      });
  mutating->only_for(AdmissionOperation::remove);
  store->admission().add(mutating);
  std::string judged;
  auto validating = std::make_shared<TestValidating>(
      [&](const AdmissionAttributes& a, const json::object*) -> asio::awaitable<Verdict> {
        judged = a.old_object->at("data").at("a").as_string().c_str();
        co_return apimachinery::ApiError(Errc::forbidden, "keep it");
      });
  validating->only_for(AdmissionOperation::remove);
  store->admission().add(validating);
  auto r = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    WriteQuery q;
    DeleteQuery d;
    auto c = config_map("default", "c");
    auto created = co_await store->create(*configmaps, "default", std::move(c), q);
    EXPECT_TRUE(created);
    auto removed = co_await store->remove(*configmaps, "default", "c", d);
    EXPECT_FALSE(removed);
    if (!removed) {
      EXPECT_EQ(removed.error().message, "keep it");
    }
    co_return co_await store->get(*configmaps, "default", "c", "");
  });
  EXPECT_TRUE(r) << "the refused delete removed the object";
  EXPECT_TRUE(mutating_saw_no_object);
  EXPECT_EQ(judged, "1");
}

// A plugin may wait (as a webhook does). When another writer changes the object meanwhile, the
// update starts over from the new state and the plugin judges again: what it admitted is what
// is stored, and neither change is lost.
TEST_F(ResourceStoreTest, APluginThatWaitsJudgesTheStateTheWriteStores) {
  auto store = replica();
  auto other = replica();
  auto configmaps = scheme_->find("", "v1", "configmaps");
  int calls = 0;
  std::vector<std::string> judged;
  auto waits = std::make_shared<TestValidating>(
      [&](const AdmissionAttributes& a, const json::object* next) -> asio::awaitable<Verdict> {
        judged.push_back(a.old_object->at("data").as_object().contains("b") ? "with b"
                                                                              : "without b");
        if (++calls == 1) {
          // Meanwhile, another replica writes the same object.
          WriteQuery q;
          json::value change = json::parse(R"({"data":{"b":"2"}})");
          auto theirs = co_await other->patch(*configmaps, "default", "c", PatchType::merge,
                                              std::move(change), q);
          EXPECT_TRUE(theirs);
        }
        EXPECT_TRUE(next->at("data").as_object().contains("z"));
        co_return std::nullopt;
      });
  waits->only_for(AdmissionOperation::update);
  store->admission().add(waits);
  auto r = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    WriteQuery q;
    auto c = config_map("default", "c");
    auto created = co_await store->create(*configmaps, "default", std::move(c), q);
    EXPECT_TRUE(created);
    json::value ours = json::parse(R"({"data":{"z":"9"}})");
    co_return co_await store->patch(*configmaps, "default", "c", PatchType::merge,
                                    std::move(ours), q);
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(judged, (std::vector<std::string>{"without b", "with b"}));
  auto stored = test::run_to_end<Made>(ioc_, [&]() -> asio::awaitable<Made> {
    co_return co_await store->get(*configmaps, "default", "c", "");
  });
  ASSERT_TRUE(stored);
  EXPECT_EQ(json::serialize(stored->at("data")), R"({"a":"1","b":"2","z":"9"})");
}

}  // namespace
}  // namespace kwatch::registry
