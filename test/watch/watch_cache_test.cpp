#include "watch/watch_cache.hpp"

#include "watch/object_codec.hpp"

#include <boost/json/object.hpp>
#include <gtest/gtest.h>

namespace kwatch::watch {
namespace {

ObjectPtr pod(const std::string& ns, const std::string& name, const std::string& node,
              std::int64_t rv) {
  std::string json = R"({"metadata":{"name":")" + name + R"(","namespace":")" + ns +
                     R"("},"spec":{"nodeName":")" + node + R"("}})";
  FieldsFn fields = [](const boost::json::object& o) {
    return Attributes{{"spec.nodeName", std::string(o.at("spec").at("nodeName").as_string())}};
  };
  return *decode_object("/registry/pods/" + ns + "/" + name, json, rv, fields);
}

class NodePredicate : public Predicate {
 public:
  explicit NodePredicate(std::string node) : node_(std::move(node)) {}
  bool matches(const CachedObject& o) const override {
    const std::string_view* v = o.field("spec.nodeName");
    return v != nullptr && *v == node_;
  }
  bool empty() const override { return false; }
  std::optional<std::string> exact_field(std::string_view f) const override {
    if (f == "spec.nodeName") return node_;
    return std::nullopt;
  }

 private:
  std::string node_;
};

std::vector<std::string> names(const CacheList& list) {
  std::vector<std::string> out;
  for (const auto& o : list.objects) out.emplace_back(o->name);
  return out;
}

TEST(WatchCache, DecodedObjectsCarryTheirVersionAndAttributes) {
  auto p = pod("ns1", "a", "n1", 42);
  EXPECT_EQ(p->ns, "ns1");
  EXPECT_EQ(p->name, "a");
  EXPECT_NE(p->json.find(R"("resourceVersion":"42")"), std::string::npos);
  EXPECT_EQ(*p->field("spec.nodeName"), "n1");
  EXPECT_EQ(*p->field("metadata.name"), "a");
}

TEST(WatchCache, ListsByPrefixInKeyOrderWithLimits) {
  WatchCache cache(10, 10, "spec.nodeName");
  cache.replace({pod("b", "x", "n1", 5), pod("a", "y", "n2", 6), pod("a", "x", "n1", 7)}, 7);
  EXPECT_EQ(names(cache.list("/registry/pods/", "", 0, nullptr)),
            (std::vector<std::string>{"x", "y", "x"}));
  EXPECT_EQ(names(cache.list("/registry/pods/a/", "", 0, nullptr)),
            (std::vector<std::string>{"x", "y"}));
  auto page = cache.list("/registry/pods/", "", 2, nullptr);
  EXPECT_TRUE(page.more);
  EXPECT_EQ(page.remaining, 1);
  EXPECT_EQ(page.resource_version, 7);
  auto rest = cache.list("/registry/pods/", std::string("/registry/pods/a/y") + '\0', 0, nullptr);
  EXPECT_EQ(names(rest), (std::vector<std::string>{"x"}));
}

TEST(WatchCache, TriggerIndexServesListsPinnedToAField) {
  WatchCache cache(10, 10, "spec.nodeName");
  cache.replace({pod("a", "p1", "n1", 2), pod("a", "p2", "n2", 3), pod("b", "p3", "n1", 4)}, 4);
  NodePredicate on_n1("n1");
  EXPECT_EQ(names(cache.list("/registry/pods/", "", 0, &on_n1)),
            (std::vector<std::string>{"p1", "p3"}));
  EXPECT_EQ(names(cache.list("/registry/pods/b/", "", 0, &on_n1)), (std::vector<std::string>{"p3"}));
  // Moving a pod to another node moves it between index buckets.
  cache.apply_put(pod("a", "p1", "n2", 5), pod("a", "p1", "n1", 5), std::chrono::steady_clock::now());
  EXPECT_EQ(names(cache.list("/registry/pods/", "", 0, &on_n1)), (std::vector<std::string>{"p3"}));
  cache.apply_delete(pod("b", "p3", "n1", 6), std::chrono::steady_clock::now());
  EXPECT_TRUE(cache.list("/registry/pods/", "", 0, &on_n1).objects.empty());
}

class LabelEquals : public Predicate {
 public:
  LabelEquals(std::string k, std::string v) : k_(std::move(k)), v_(std::move(v)) {}
  bool matches(const CachedObject& o) const override {
    const std::string_view* v = o.label(k_);
    return v != nullptr && *v == v_;
  }
  bool empty() const override { return false; }
  std::optional<std::string> exact_field(std::string_view) const override { return std::nullopt; }
  std::optional<std::pair<std::string, std::string>> exact_label() const override {
    return std::make_pair(k_, v_);
  }

 private:
  std::string k_, v_;
};

ObjectPtr labelled(const std::string& name, const std::string& app, std::int64_t rv) {
  return *decode_object("/registry/configmaps/ns/" + name,
                        R"({"metadata":{"name":")" + name + R"(","namespace":"ns","labels":{"app":")" +
                            app + R"("}}})",
                        rv, nullptr);
}

TEST(WatchCache, LabelIndexServesEqualitySelectorsAndFollowsChanges) {
  WatchCache cache(10, 10, "");
  cache.replace({labelled("a", "web", 2), labelled("b", "db", 3), labelled("c", "web", 4)}, 4);
  LabelEquals web("app", "web");
  LabelEquals none("app", "none");
  EXPECT_EQ(names(cache.list("/registry/configmaps/", "", 0, &web)),
            (std::vector<std::string>{"a", "c"}));
  EXPECT_TRUE(cache.list("/registry/configmaps/", "", 0, &none).objects.empty());
  const auto now = std::chrono::steady_clock::now();
  cache.apply_put(labelled("a", "db", 5), labelled("a", "web", 5), now);
  cache.apply_put(labelled("d", "web", 6), nullptr, now);
  cache.apply_delete(labelled("c", "web", 7), now);
  EXPECT_EQ(names(cache.list("/registry/configmaps/", "", 0, &web)), (std::vector<std::string>{"d"}));
  auto page = cache.list("/registry/configmaps/", "", 1, &web);
  EXPECT_EQ(names(page), (std::vector<std::string>{"d"}));
}

TEST(WatchCache, EventsAreRecordedWithTypesAndVersions) {
  WatchCache cache(10, 10, "");
  cache.replace({}, 10);
  const auto now = std::chrono::steady_clock::now();
  cache.apply_put(pod("a", "x", "n", 11), nullptr, now);
  cache.apply_put(pod("a", "x", "n", 12), pod("a", "x", "n", 12), now);
  cache.apply_delete(pod("a", "x", "n", 13), now);
  cache.advance(20);
  auto events = cache.events_since(10);
  ASSERT_TRUE(events);
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0]->type, EventType::added);
  EXPECT_EQ((*events)[1]->type, EventType::modified);
  EXPECT_EQ((*events)[2]->type, EventType::deleted);
  EXPECT_EQ((*events)[2]->resource_version, 13);
  EXPECT_EQ(cache.resource_version(), 20);
  EXPECT_FALSE(cache.get("/registry/pods/a/x"));
  EXPECT_FALSE(cache.events_since(9));
}

}  // namespace
}  // namespace kwatch::watch
