// A custom resource whose definition converts through a webhook, with a converter the test
// controls in place of the webhook: writes through the other version are stored as the storage
// version, reads and lists answer in the version asked for (a list page in one conversion), the
// other version's watch cache holds its objects converted once per event, and a converter that
// fails is a 500 for that version only while its cache waits and then recovers.
#include "kinds/custom_resource_definition.hpp"
#include "kinds/version_converter.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::registry {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using base::Errc;

// v1 holds spec.hostPort "host:port"; v2 holds spec.host and spec.port.
class FakeConverter final : public kinds::VersionConverter {
 public:
  asio::awaitable<apimachinery::ApiResult<std::vector<json::object>>> convert(
      std::vector<json::object> objects, std::string api_version, bool as_list) const override {
    ++calls;
    last_as_list = as_list;
    if (failing) {
      co_return apimachinery::ApiError(
          Errc::internal, "Internal error occurred: conversion webhook for x failed: broken");
    }
    for (auto& o : objects) {
      if (o["apiVersion"].as_string() == api_version) continue;
      ++objects_converted;
      json::object& spec = o["spec"].as_object();
      if (api_version.ends_with("/v2")) {
        const std::string hp(spec["hostPort"].as_string());
        const auto colon = hp.find(':');
        spec.erase("hostPort");
        spec["host"] = hp.substr(0, colon);
        spec["port"] = std::stoi(hp.substr(colon + 1));
      } else {
        const std::string host(spec["host"].as_string());
        const std::int64_t port = spec["port"].as_int64();
        spec.erase("host");
        spec.erase("port");
        spec["hostPort"] = host + ":" + std::to_string(port);
      }
      o["apiVersion"] = api_version;
    }
    co_return std::move(objects);
  }

  mutable std::atomic<int> calls{0};
  mutable std::atomic<int> objects_converted{0};
  mutable std::atomic<bool> last_as_list{false};
  std::atomic<bool> failing{false};
};

constexpr const char* kDefinition = R"({
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.conv.example.com"},
  "spec": {"group": "conv.example.com", "scope": "Namespaced",
    "names": {"plural": "widgets", "kind": "Widget"},
    "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
      "clientConfig": {"url": "https://convert.example.com/convert"}}},
    "versions": [
      {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
          "hostPort": {"type": "string"}}}}}}},
      {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
          "host": {"type": "string"}, "port": {"type": "integer"}}}}}}}]}})";

class ConversionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto storage = storage::MemoryStorage::open({});
    ASSERT_TRUE(storage);
    storage_ = std::move(*storage);
    scheme_ = kinds::Scheme::builtin();
    store_ = std::make_shared<ResourceStore>(storage_, scheme_);
    cachers_ = std::make_shared<CacherRegistry>(ioc_.get_executor(), storage_, CacherDefaults{});
    auto infos = kinds::custom_resources(json::parse(kDefinition).as_object(), "/registry");
    ASSERT_TRUE(infos) << infos.error().message;
    ASSERT_EQ(infos->size(), 2u);
    for (auto& info : *infos) info.converter = converter_;
    v1_ = (*infos)[0];
    v2_ = (*infos)[1];
    ASSERT_FALSE(v1_.converted_by_webhook());
    ASSERT_TRUE(v2_.converted_by_webhook());
    run<bool>([&]() -> asio::awaitable<bool> {
      std::string ns = "t";
      co_return static_cast<bool>(co_await store_->ensure_namespace(std::move(ns)));
    });
  }

  void TearDown() override {
    cachers_->stop_all();
    test::turn(ioc_);
  }

  template <class T>
  T run(std::function<asio::awaitable<T>()> f) {
    return test::run_to_end<T>(ioc_, std::move(f));
  }

  apimachinery::ApiResult<json::object> create(const kinds::ResourceInfo& info,
                                               const std::string& body) {
    return run<apimachinery::ApiResult<json::object>>(
        [&]() -> asio::awaitable<apimachinery::ApiResult<json::object>> {
          std::string ns = "t";
          WriteQuery query;
          json::object object = json::parse(body).as_object();
          co_return co_await store_->create(info, std::move(ns), std::move(object),
                                            std::move(query));
        });
  }

  apimachinery::ApiResult<json::object> get(const kinds::ResourceInfo& info,
                                            const std::string& name) {
    return run<apimachinery::ApiResult<json::object>>(
        [&]() -> asio::awaitable<apimachinery::ApiResult<json::object>> {
          std::string ns = "t", n = name, rv;
          co_return co_await store_->get(info, std::move(ns), std::move(n), std::move(rv));
        });
  }

  std::string stored(const std::string& name) {
    return run<std::string>([&]() -> asio::awaitable<std::string> {
      auto kv = co_await storage_->get(v1_.key("t", name));
      co_return kv ? kv->value : std::string();
    });
  }

  void wait_until(const std::function<bool()>& condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!condition() && std::chrono::steady_clock::now() < deadline) test::turn(ioc_);
    ASSERT_TRUE(condition());
  }

  asio::io_context ioc_;
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<ResourceStore> store_;
  std::shared_ptr<CacherRegistry> cachers_;
  std::shared_ptr<FakeConverter> converter_ = std::make_shared<FakeConverter>();
  kinds::ResourceInfo v1_, v2_;
};

std::string v2_widget(const std::string& name, const std::string& host, int port) {
  return R"({"apiVersion":"conv.example.com/v2","kind":"Widget","metadata":{"name":")" + name +
         R"("},"spec":{"host":")" + host + R"(","port":)" + std::to_string(port) + "}}";
}

std::string v1_widget(const std::string& name, const std::string& host_port) {
  return R"({"apiVersion":"conv.example.com/v1","kind":"Widget","metadata":{"name":")" + name +
         R"("},"spec":{"hostPort":")" + host_port + R"("}})";
}

TEST_F(ConversionTest, AWriteThroughTheOtherVersionIsStoredAsTheStorageVersion) {
  auto made = create(v2_, v2_widget("a", "example.com", 80));
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ((*made)["apiVersion"].as_string(), "conv.example.com/v2");
  EXPECT_EQ(json::serialize((*made)["spec"]), R"({"host":"example.com","port":80})");
  // Converted to v1 to be stored, and back for the answer, as kube decodes what it wrote.
  EXPECT_EQ(converter_->calls.load(), 2);
  auto raw = json::parse(stored("a")).as_object();
  EXPECT_EQ(raw["apiVersion"].as_string(), "conv.example.com/v1");
  EXPECT_EQ(json::serialize(raw["spec"]), R"({"hostPort":"example.com:80"})");
  EXPECT_FALSE(raw["metadata"].as_object().contains("resourceVersion"));

  auto v2 = get(v2_, "a");
  ASSERT_TRUE(v2);
  EXPECT_EQ(json::serialize((*v2)["spec"]), R"({"host":"example.com","port":80})");
  const int before = converter_->calls.load();
  auto v1 = get(v1_, "a");
  ASSERT_TRUE(v1);
  EXPECT_EQ(converter_->calls.load(), before) << "the storage version needs no conversion";
  EXPECT_EQ(json::serialize((*v1)["spec"]), R"({"hostPort":"example.com:80"})");
}

TEST_F(ConversionTest, AnUpdateThroughTheOtherVersionConvertsBothWays) {
  ASSERT_TRUE(create(v1_, v1_widget("a", "one:1")));
  auto updated = run<apimachinery::ApiResult<json::object>>(
      [&]() -> asio::awaitable<apimachinery::ApiResult<json::object>> {
        // Named arguments: GCC 12 destroys temporaries in a co_await's call twice.
        std::string ns = "t", name = "a";
        json::object body = json::parse(v2_widget("a", "two", 2)).as_object();
        WriteQuery query;
        co_return co_await store_->update(v2_, std::move(ns), std::move(name), std::move(body),
                                          std::move(query));
      });
  ASSERT_TRUE(updated) << updated.error().message;
  EXPECT_EQ(json::serialize((*updated)["spec"]), R"({"host":"two","port":2})");
  EXPECT_EQ(json::serialize(json::parse(stored("a")).as_object()["spec"]),
            R"({"hostPort":"two:2"})");
}

TEST_F(ConversionTest, AListPageIsConvertedInOneCall) {
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(create(v1_, v1_widget(name, "h:1")));
  const int before = converter_->calls.load();
  auto listed = run<apimachinery::ApiResult<json::object>>(
      [&]() -> asio::awaitable<apimachinery::ApiResult<json::object>> {
        std::string ns = "t";
        CompiledListQuery query = *compile_list_query(v2_, {});
        co_return co_await store_->list(v2_, std::move(ns), std::move(query));
      });
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(converter_->calls.load(), before + 1);
  EXPECT_TRUE(converter_->last_as_list.load());
  const json::array& items = (*listed)["items"].as_array();
  ASSERT_EQ(items.size(), 3u);
  for (const auto& item : items) {
    EXPECT_EQ(item.at("apiVersion").as_string(), "conv.example.com/v2");
    EXPECT_EQ(json::serialize(item.at("spec")), R"({"host":"h","port":1})");
  }
}

TEST_F(ConversionTest, ALargeListIsConvertedInBoundedReviews) {
  for (int i = 0; i < 1001; ++i) ASSERT_TRUE(create(v1_, v1_widget("w" + std::to_string(i), "h:1")));
  int before = converter_->calls.load();
  auto listed = run<apimachinery::ApiResult<json::object>>(
      [&]() -> asio::awaitable<apimachinery::ApiResult<json::object>> {
        std::string ns = "t";
        CompiledListQuery query = *compile_list_query(v2_, {});
        co_return co_await store_->list(v2_, std::move(ns), std::move(query));
      });
  ASSERT_TRUE(listed);
  EXPECT_EQ((*listed)["items"].as_array().size(), 1001u);
  EXPECT_EQ(converter_->calls.load() - before, 3) << "500 + 500 + 1 objects";
  before = converter_->calls.load();
  auto v2_cache = cachers_->ensure(v2_);
  wait_until([&] { return v2_cache->ready(); });
  EXPECT_EQ(converter_->calls.load() - before, 3) << "the v2 cache's list, likewise";
  EXPECT_EQ(cachers_->converted_objects(v2_), 1001u);
}

TEST_F(ConversionTest, AFailingConverterIsA500ForThatVersionOnly) {
  ASSERT_TRUE(create(v1_, v1_widget("a", "h:1")));
  converter_->failing = true;
  auto v2 = get(v2_, "a");
  ASSERT_FALSE(v2);
  EXPECT_EQ(v2.error().code, Errc::internal);
  EXPECT_NE(v2.error().message.find("conversion webhook for x failed: broken"), std::string::npos);
  auto made = create(v2_, v2_widget("b", "h", 2));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, Errc::internal);
  EXPECT_TRUE(stored("b").empty()) << "nothing is stored when the conversion fails";
  EXPECT_TRUE(get(v1_, "a"));
  EXPECT_TRUE(create(v1_, v1_widget("c", "h:3")));
}

TEST_F(ConversionTest, TheOtherVersionHasItsOwnCacheConvertedOncePerEvent) {
  ASSERT_TRUE(create(v1_, v1_widget("a", "h:1")));
  auto v1_cache = cachers_->ensure(v1_);
  auto v2_cache = cachers_->ensure(v2_);
  ASSERT_NE(v1_cache, v2_cache);
  EXPECT_EQ(cachers_->find(v2_), v2_cache);
  EXPECT_EQ(cachers_->find(v1_), v1_cache);
  EXPECT_EQ(cachers_->ensure(v2_), v2_cache) << "one cache per version";
  wait_until([&] { return v1_cache->ready() && v2_cache->ready(); });
  auto cached = v2_cache->get(v2_.key("t", "a"));
  ASSERT_TRUE(cached);
  EXPECT_NE(cached->json.find(R"("host":"h")"), std::string::npos) << cached->json;
  // Every later write is converted once, for however many watchers the version has.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(create(v1_, v1_widget("w" + std::to_string(i), "w:" + std::to_string(i))));
  }
  wait_until([&] { return v2_cache->get(v2_.key("t", "w4")) != nullptr; });
  EXPECT_EQ(cachers_->converted_objects(v2_), 6u);
  EXPECT_EQ(cachers_->converted_objects(v1_), 0u);

  // A converter that fails stalls the v2 cache only; it re-lists once it works again.
  converter_->failing = true;
  ASSERT_TRUE(create(v1_, v1_widget("x", "x:1")));
  wait_until([&] { return !v2_cache->ready(); });
  wait_until([&] { return v1_cache->get(v1_.key("t", "x")) != nullptr; });
  EXPECT_TRUE(v1_cache->ready());
  converter_->failing = false;
  wait_until([&] { return v2_cache->ready() && v2_cache->get(v2_.key("t", "x")) != nullptr; });

  cachers_->remove(v1_);
  EXPECT_EQ(cachers_->find(v2_), nullptr) << "a definition's caches go together";
}

}  // namespace
}  // namespace kwatch::registry
