#include "controllers/garbage_collector.hpp"

#include "test/controllers/controller_fixture.hpp"

#include "kinds/custom_resource_definition.hpp"
#include "registry/deletion.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "storage/memory_storage.hpp"
#include "test/support/io_turns.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::controllers {
using registry::CacherDefaults;
using registry::CacherRegistry;
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

// The collector over the embedded store, with caches made one by one so that a test decides
// which resources it follows, and when.
class GarbageCollectorTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    configmaps_ = scheme_->find("", "v1", "configmaps");
    deployments_ = scheme_->find("apps", "v1", "deployments");
    ASSERT_NE(configmaps_, nullptr);
    ASSERT_NE(deployments_, nullptr);
  }

  void TearDown() override {
    if (collector_) collector_->stop();
    ControllerTest::TearDown();
  }

  // Gives the ConfigMap `name` blocking references to the ConfigMaps `owners` (name, uid).
  void set_owners(const std::string& name,
                  const std::vector<std::pair<std::string, std::string>>& owners) {
    update(*configmaps_, name, [&](json::object& current) {
      json::array refs;
      for (const auto& [owner, uid] : owners) {
        refs.push_back(json::object{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", owner},
                                    {"uid", uid}, {"blockOwnerDeletion", true}});
      }
      current["metadata"].as_object()["ownerReferences"] = std::move(refs);
    });
  }

  std::string create_configmap(const std::string& name) {
    const auto created =
        create(*configmaps_, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" +
                                 name + R"("}})");
    return std::string(created.at("metadata").at("uid").as_string());
  }

  void start_collector() {
    cachers_->ensure(*configmaps_);
    collector_ = std::make_shared<GarbageCollector>(scheme_, store_, cachers_);
    collector_->start(ioc_.get_executor());
  }

  // The collector following ConfigMaps and Deployments, and the Deployment kOwner; its uid.
  std::string start_following_both_with_an_owner();

  bool cached(const kinds::ResourceInfo& info, const std::string& name,
              const std::string& in = "t") {
    auto cacher = cachers_->find(info);
    return cacher && cacher->get(info.key(in, name)) != nullptr;
  }

  static std::string configmap(const std::string& name, const std::string& owner_name,
                               const std::string& owner_uid) {
    return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
           R"(","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":")" +
           owner_name + R"(","uid":")" + owner_uid + R"("}]}})";
  }

  std::shared_ptr<GarbageCollector> collector_;
  std::shared_ptr<const kinds::ResourceInfo> configmaps_;
  std::shared_ptr<const kinds::ResourceInfo> deployments_;
};

constexpr const char* kOwner = R"({"apiVersion":"apps/v1","kind":"Deployment",
    "metadata":{"name":"bg"},"spec":{"selector":{"matchLabels":{"app":"bg"}},
    "template":{"metadata":{"labels":{"app":"bg"}},
    "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})";

std::string GarbageCollectorTest::start_following_both_with_an_owner() {
  cachers_->ensure(*configmaps_);
  cachers_->ensure(*deployments_);
  collector_ = std::make_shared<GarbageCollector>(scheme_, store_, cachers_);
  collector_->start(ioc_.get_executor());
  const auto owner = create(*deployments_, kOwner);
  return std::string(owner.at("metadata").at("uid").as_string());
}

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
  const std::string uid = start_following_both_with_an_owner();
  create(*configmaps_, configmap("child", "bg", uid));
  ASSERT_TRUE(eventually([&] { return cached(*configmaps_, "child") && cached(*deployments_, "bg"); }));
  remove(*deployments_, "bg");
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "child"); }));
}

// Each cache's events come on a stream of their own: the owner's deletion in foreground may reach
// the collector before the creation of a dependent made just before it. The owner must still
// wait for that dependent (it blocks, and a finalizer holds it), not go as if it had none.
TEST_F(GarbageCollectorTest, AnOwnerInForegroundWaitsForADependentWhoseCacheLags) {
  const std::string uid = start_following_both_with_an_owner();
  ASSERT_TRUE(eventually([&] { return cached(*deployments_, "bg"); }));

  breakable_->hold_events_under(configmaps_->key_prefix());
  create(*configmaps_, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held",
      "finalizers":["example.com/hold"],
      "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"bg",
      "uid":")" + uid + R"(","blockOwnerDeletion":true}]}})");
  remove(*deployments_, "bg", registry::Propagation::foreground);
  // While the dependent's creation has not reached the collector, the owner cannot go.
  EXPECT_FALSE(eventually([&] { return !get(*deployments_, "bg", "t"); },
                          std::chrono::milliseconds(500)))
      << "the owner went before the collector knew of its blocking dependent";

  breakable_->release_events();
  ASSERT_TRUE(eventually([&] {
    auto held = get(*configmaps_, "held");
    return held && held->at("metadata").as_object().contains("deletionTimestamp");
  })) << "the dependent was not deleted";
  EXPECT_TRUE(get(*deployments_, "bg", "t")) << "the owner went while a dependent blocks it";
  update(*configmaps_, "held", [](json::object& current) {
    current["metadata"].as_object().erase("finalizers");
  });
  EXPECT_TRUE(eventually([&] { return !get(*deployments_, "bg", "t"); }))
      << "the owner stayed after its last dependent went";
}

// kube's reproducer of a wait that never ends: each waits in foreground for the other.
TEST_F(GarbageCollectorTest, TwoObjectsOwningEachOtherBothGoWhenOneIsDeletedInForeground) {
  start_collector();
  const std::string a = create_configmap("a");
  const std::string b = create_configmap("b");
  set_owners("a", {{"b", b}});
  set_owners("b", {{"a", a}});
  ASSERT_TRUE(eventually([&] { return cached(*configmaps_, "a") && cached(*configmaps_, "b"); }));
  remove(*configmaps_, "a", registry::Propagation::foreground);
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "a") && !cached(*configmaps_, "b"); }))
      << "a cycle of blocking owner references kept both objects";
}

TEST_F(GarbageCollectorTest, AnObjectOwningItselfGoesWhenDeletedInForeground) {
  start_collector();
  const std::string self = create_configmap("self");
  set_owners("self", {{"self", self}});
  remove(*configmaps_, "self", registry::Propagation::foreground);
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "self"); }));
}

TEST_F(GarbageCollectorTest, ThreeObjectsOwningEachOtherInACircleAllGo) {
  start_collector();
  const std::string a = create_configmap("a");
  const std::string b = create_configmap("b");
  const std::string c = create_configmap("c");
  set_owners("b", {{"a", a}});
  set_owners("c", {{"b", b}});
  set_owners("a", {{"c", c}});
  remove(*configmaps_, "a", registry::Propagation::foreground);
  EXPECT_TRUE(eventually([&] {
    return !cached(*configmaps_, "a") && !cached(*configmaps_, "b") && !cached(*configmaps_, "c");
  }));
}

// Both ends of a cycle deleted in foreground by a client (before the collector starts), not one
// by the collector.
TEST_F(GarbageCollectorTest, TwoObjectsOwningEachOtherBothDeletedInForegroundBothGo) {
  cachers_->ensure(*configmaps_);
  const std::string a = create_configmap("a");
  const std::string b = create_configmap("b");
  set_owners("a", {{"b", b}});
  set_owners("b", {{"a", a}});
  remove(*configmaps_, "a", registry::Propagation::foreground);
  remove(*configmaps_, "b", registry::Propagation::foreground);
  ASSERT_TRUE(eventually([&] { return cached(*configmaps_, "a") && cached(*configmaps_, "b"); }));
  start_collector();
  EXPECT_TRUE(eventually([&] { return !cached(*configmaps_, "a") && !cached(*configmaps_, "b"); }));
}

// A large family deleted just before a small one in another namespace: the small one's
// dependents take turns with the large one's instead of waiting behind all of them.
TEST_F(GarbageCollectorTest, DependentsInAnotherNamespaceTakeTurnsWithALargeFamily) {
  run([this]() -> asio::awaitable<void> {
    std::string ns = "u";
    auto r = co_await store_->ensure_namespace(std::move(ns));
    EXPECT_TRUE(r);
  });
  cachers_->ensure(*deployments_);
  start_collector();
  constexpr int kLarge = 2000;
  constexpr int kSmall = 20;
  const auto large = create(*deployments_, kOwner);
  const std::string large_uid(large.at("metadata").at("uid").as_string());
  const auto small = create(*deployments_, kOwner, "u");
  const std::string small_uid(small.at("metadata").at("uid").as_string());
  run([&]() -> asio::awaitable<void> {  // one run: each run() costs at least a slice
    for (int i = 0; i < kLarge + kSmall; ++i) {
      const bool large_one = i < kLarge;
      auto body = json::parse(large_one ? configmap("large-" + std::to_string(i), "bg", large_uid)
                                        : configmap("small-" + std::to_string(i - kLarge), "bg",
                                                    small_uid))
                      .as_object();
      std::string ns = large_one ? "t" : "u";
      registry::WriteQuery query;
      auto r = co_await store_->create(*configmaps_, std::move(ns), std::move(body),
                                       std::move(query));
      EXPECT_TRUE(r);
    }
  });
  ASSERT_TRUE(eventually([&] {
    return cached(*configmaps_, "large-" + std::to_string(kLarge - 1)) &&
           cached(*configmaps_, "small-" + std::to_string(kSmall - 1), "u");
  }));
  remove(*deployments_, "bg");
  remove(*deployments_, "bg", registry::Propagation::background, "u");
  auto left = [&](const std::string& prefix, int n, const std::string& in) {
    int count = 0;
    for (int i = 0; i < n; ++i) count += cached(*configmaps_, prefix + std::to_string(i), in);
    return count;
  };
  ASSERT_TRUE(eventually([&] { return left("small-", kSmall, "u") == 0; }));
  EXPECT_GT(left("large-", kLarge, "t"), kLarge / 2)
      << "the small family waited behind most of the large one";
}

// Orphaning goes a batch a turn, the owner queued again after each.
TEST_F(GarbageCollectorTest, AnOwnerOrphaningManyDependentsReleasesThemAllAndGoes) {
  cachers_->ensure(*deployments_);
  start_collector();
  constexpr int kDependents = 100;
  const auto owner = create(*deployments_, kOwner);
  const std::string uid(owner.at("metadata").at("uid").as_string());
  run([&]() -> asio::awaitable<void> {
    for (int i = 0; i < kDependents; ++i) {
      auto body = json::parse(configmap("dep-" + std::to_string(i), "bg", uid)).as_object();
      std::string ns = "t";
      registry::WriteQuery query;
      auto r = co_await store_->create(*configmaps_, std::move(ns), std::move(body),
                                       std::move(query));
      EXPECT_TRUE(r);
    }
  });
  ASSERT_TRUE(eventually([&] {
    return cached(*configmaps_, "dep-" + std::to_string(kDependents - 1)) &&
           cached(*deployments_, "bg");
  }));
  remove(*deployments_, "bg", registry::Propagation::orphan);
  auto cacher = cachers_->find(*configmaps_);
  auto released = [&] {
    for (int i = 0; i < kDependents; ++i) {
      auto o = cacher->get(configmaps_->key("t", "dep-" + std::to_string(i)));
      if (!o || o->json.find("ownerReferences") != std::string::npos) return false;
    }
    return true;
  };
  EXPECT_TRUE(eventually([&] { return !cached(*deployments_, "bg") && released(); }));
}

// A definition of gadgets whose spec.color defaults to "blue" `with_default` only.
json::object gadget_definition(bool with_default) {
  const std::string color =
      with_default ? R"({"type":"string","default":"blue"})" : R"({"type":"string"})";
  return json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1",
    "kind":"CustomResourceDefinition","metadata":{"name":"gadgets.example.com"},
    "spec":{"group":"example.com","scope":"Namespaced",
      "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},
      "versions":[{"name":"v1","served":true,"storage":true,
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","properties":{"size":{"type":"integer"},"color":)" +
                     color + R"(}}}}}}]}})")
      .as_object();
}

// The collector follows a custom resource's cache across spec updates of its definition: the
// writes it makes then are validated and defaulted under the current spec, not the one the
// resource had when the collector began following it.
TEST_F(GarbageCollectorTest, AWriteAfterASpecUpdateUsesTheDefinitionsCurrentSchema) {
  auto served = kinds::custom_resources(gadget_definition(false), "/registry");
  ASSERT_TRUE(served) << served.error().message;
  scheme_->set_owned("gadgets.example.com", std::move(*served));
  std::weak_ptr<const kinds::ResourceInfo> old = scheme_->find("example.com", "v1", "gadgets");
  std::weak_ptr<const schema::StructuralSchema> old_schema =
      scheme_->find("example.com", "v1", "gadgets")->schema;
  cachers_->ensure(*scheme_->find("example.com", "v1", "gadgets"));
  start_collector();
  const std::string kept = create_configmap("kept");
  const std::string gone = create_configmap("gone");
  create(*scheme_->find("example.com", "v1", "gadgets"),
         R"({"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g",
             "ownerReferences":[
               {"apiVersion":"v1","kind":"ConfigMap","name":"kept","uid":")" + kept + R"("},
               {"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":")" + gone + R"("}]},
             "spec":{"size":1}})");
  ASSERT_TRUE(eventually([&] {
    return cached(*scheme_->find("example.com", "v1", "gadgets"), "g") && cached(*configmaps_, "gone");
  }));
  // The spec update: a default for spec.color. The cache (one per storage prefix) stays.
  auto updated = kinds::custom_resources(gadget_definition(true), "/registry");
  ASSERT_TRUE(updated) << updated.error().message;
  scheme_->set_owned("gadgets.example.com", std::move(*updated));
  auto gadgets = scheme_->find("example.com", "v1", "gadgets");
  EXPECT_TRUE(eventually([&] { return old.expired(); }))
      << "the replaced description is still held";
  EXPECT_TRUE(old_schema.expired()) << "the cache made with the old description keeps its schema";
  // One owner goes: the collector removes the reference to it, and that write is defaulted.
  remove(*configmaps_, "gone");
  std::string color;
  std::size_t refs = 0;
  EXPECT_TRUE(eventually([&] {
    auto cacher = cachers_->find(*gadgets);
    auto object = cacher ? cacher->get(gadgets->key("t", "g")) : nullptr;
    if (!object) return false;
    auto parsed = json::parse(object->json).as_object();
    refs = parsed.at("metadata").as_object().at("ownerReferences").as_array().size();
    const json::value* c = parsed.at("spec").as_object().if_contains("color");
    color = c != nullptr && c->is_string() ? std::string(c->get_string()) : "";
    return refs == 1;
  }));
  EXPECT_EQ(refs, 1u);
  EXPECT_EQ(color, "blue") << "the collector wrote the gadget under the replaced schema";
}

// The collector's pure parts.

gc::FairQueue::Item item(const std::string& ns, const std::string& key) {
  return {"", key, ns};
}

std::vector<std::string> drain(gc::FairQueue& queue) {
  std::vector<std::string> keys;
  while (auto i = queue.pop()) keys.push_back(i->key);
  return keys;
}

TEST(GarbageCollectorQueueTest, NamespacesTakeTurnsSoASmallOneIsNotBehindALargeOne) {
  gc::FairQueue queue;
  for (int i = 0; i < 1000; ++i) queue.push("owner big", item("big", "big/" + std::to_string(i)));
  for (int i = 0; i < 3; ++i) {
    queue.push("owner small", item("small", "small/" + std::to_string(i)));
  }
  const auto order = drain(queue);
  ASSERT_EQ(order.size(), 1003u);
  EXPECT_EQ(std::vector<std::string>(order.begin(), order.begin() + 6),
            (std::vector<std::string>{"big/0", "small/0", "big/1", "small/1", "big/2", "small/2"}));
}

TEST(GarbageCollectorQueueTest, WithinANamespaceOwnersTakeTurnsInTheOrderTheyCame) {
  gc::FairQueue queue;
  for (int i = 0; i < 3; ++i) queue.push("owner x", item("t", "x" + std::to_string(i)));
  queue.push("owner y", item("t", "y0"));
  queue.push("object z", item("t", "z0"));
  EXPECT_EQ(drain(queue), (std::vector<std::string>{"x0", "y0", "z0", "x1", "x2"}));
}

TEST(GarbageCollectorQueueTest, AKeyIsQueuedOnceUntilItIsTakenThenAgain) {
  gc::FairQueue queue;
  EXPECT_TRUE(queue.push("g", item("t", "k")));
  EXPECT_FALSE(queue.push("h", item("u", "k")));
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_TRUE(queue.contains("k"));
  EXPECT_EQ(queue.pop()->key, "k");
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.pop());
  EXPECT_TRUE(queue.push("g", item("t", "k")));
  EXPECT_EQ(drain(queue), std::vector<std::string>{"k"});
}

TEST(GarbageCollectorCycleTest, AnOwnerAndADependentWaitingForEachOtherAreACycle) {
  const gc::WaitGraph waits{{"a", {"b"}}, {"b", {"a"}}};
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "a"), "b");
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "b"), "a");
}

TEST(GarbageCollectorCycleTest, AnObjectWaitingForItselfIsACycle) {
  EXPECT_EQ(gc::dependent_on_wait_cycle({{"a", {"a"}}}, "a"), "a");
}

TEST(GarbageCollectorCycleTest, ALongerCycleIsFoundFromEachMember) {
  const gc::WaitGraph waits{{"a", {"b"}}, {"b", {"c"}}, {"c", {"d"}}, {"d", {"a"}}};
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "a"), "b");
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "c"), "d");
}

TEST(GarbageCollectorCycleTest, AChainOrADiamondIsNoCycle) {
  gc::WaitGraph chain;
  for (int i = 0; i < 1000; ++i) chain[std::to_string(i)] = {std::to_string(i + 1)};
  EXPECT_EQ(gc::dependent_on_wait_cycle(chain, "0"), std::nullopt);
  const gc::WaitGraph diamond{{"a", {"b", "c"}}, {"b", {"d"}}, {"c", {"d"}}};
  EXPECT_EQ(gc::dependent_on_wait_cycle(diamond, "a"), std::nullopt);
  EXPECT_EQ(gc::dependent_on_wait_cycle({}, "a"), std::nullopt);
}

TEST(GarbageCollectorCycleTest, AnOwnerWaitingForACycleElsewhereIsNotOnIt) {
  // x waits for a; a and b wait for each other: x's wait ends once a's or b's is broken.
  const gc::WaitGraph waits{{"x", {"a"}}, {"a", {"b"}}, {"b", {"a"}}};
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "x"), std::nullopt);
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "a"), "b");
}

TEST(GarbageCollectorCycleTest, TheDependentOnTheCycleIsChosenAmongSeveral) {
  const gc::WaitGraph waits{{"a", {"b", "c", "d"}}, {"b", {"e"}}, {"d", {"a"}}};
  EXPECT_EQ(gc::dependent_on_wait_cycle(waits, "a"), "d");
}

TEST(GarbageCollectorStepTest, AnOwnerWithNoBlockingDependentFinishes) {
  EXPECT_EQ(gc::foreground_step({{"a", {"a"}}}, "a", 0).action,
            gc::ForegroundStep::Action::finish);
}

TEST(GarbageCollectorStepTest, AnOwnerOnACycleUnblocksItsDependentOnIt) {
  const auto step = gc::foreground_step({{"a", {"b"}}, {"b", {"a"}}}, "a", 1);
  EXPECT_EQ(step.action, gc::ForegroundStep::Action::unblock);
  EXPECT_EQ(step.dependent, "b");
}

TEST(GarbageCollectorStepTest, AnOwnerWithBlockingDependentsOnNoCycleWaits) {
  EXPECT_EQ(gc::foreground_step({{"a", {"b"}}}, "a", 2).action, gc::ForegroundStep::Action::wait);
  EXPECT_EQ(gc::foreground_step({}, "a", 1).action, gc::ForegroundStep::Action::wait);
}

TEST(GarbageCollectorRetryTest, RetriesWaitLongerEachTimeUpToHalfAMinute) {
  EXPECT_EQ(gc::retry_delay(1), std::chrono::milliseconds(100));
  EXPECT_EQ(gc::retry_delay(2), std::chrono::milliseconds(200));
  EXPECT_EQ(gc::retry_delay(5), std::chrono::milliseconds(1600));
  EXPECT_EQ(gc::retry_delay(9), std::chrono::milliseconds(25600));
  EXPECT_EQ(gc::retry_delay(10), std::chrono::seconds(30));
  EXPECT_EQ(gc::retry_delay(1000), std::chrono::seconds(30));
}

}  // namespace
}  // namespace kwatch::controllers
