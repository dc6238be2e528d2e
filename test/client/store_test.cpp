#include "client/store.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

namespace kwatch::client {
namespace {

namespace json = boost::json;

json::object cm(const std::string& ns, const std::string& name, const std::string& app,
                const std::string& rv = "1") {
  return json::parse(R"({"kind":"ConfigMap","metadata":{"namespace":")" + ns + R"(","name":")" + name +
                     R"(","resourceVersion":")" + rv + R"(","labels":{"app":")" + app +
                     R"("},"managedFields":[{"manager":"x"}]}})")
      .as_object();
}

TEST(Store, KeysIndexesAndTransform) {
  Store s;
  s.add_index("namespace", Store::by_namespace());
  s.add_index("app", Store::by_label("app"));
  s.set_transform([](json::object& o) { o["metadata"].as_object().erase("managedFields"); });
  EXPECT_EQ(s.upsert(cm("a", "x", "web")), nullptr);
  s.upsert(cm("a", "y", "db"));
  s.upsert(cm("b", "x", "web"));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.keys(), (std::vector<std::string>{"a/x", "a/y", "b/x"}));
  EXPECT_EQ(s.by_index("namespace", "a").size(), 2u);
  EXPECT_EQ(s.by_index("app", "web").size(), 2u);
  EXPECT_FALSE(s.get("a/x")->at("metadata").as_object().contains("managedFields"));

  // A change moves the object between index values; the old version a reader holds stays as it was.
  auto held = s.get("a/x");
  auto previous = s.upsert(cm("a", "x", "db", "2"));
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(previous, held);
  EXPECT_EQ(held->at("metadata").at("resourceVersion"), "1");
  EXPECT_EQ(s.by_index("app", "web").size(), 1u);
  EXPECT_EQ(s.by_index("app", "db").size(), 2u);

  EXPECT_NE(s.remove("a/y"), nullptr);
  EXPECT_EQ(s.remove("a/y"), nullptr);
  EXPECT_EQ(s.by_index("app", "db").size(), 1u);
}

TEST(Store, ReplaceReportsWhatWentAndReindexes) {
  Store s;
  s.add_index("app", Store::by_label("app"));
  s.upsert(cm("a", "x", "web"));
  s.upsert(cm("a", "y", "web"));
  std::vector<json::object> fresh;
  fresh.push_back(cm("a", "y", "db"));
  fresh.push_back(cm("a", "z", "db"));
  auto gone = s.replace(std::move(fresh));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(Store::key_of(*gone[0]), "a/x");
  EXPECT_TRUE(s.by_index("app", "web").empty());
  EXPECT_EQ(s.by_index("app", "db").size(), 2u);
  EXPECT_EQ(Store::key_of(json::parse(R"({"metadata":{"name":"node-1"}})").as_object()), "node-1");
}

// The compact representation keeps text and parses on each read: the same contents, keys and
// indexes; a reader's copy is its own.
TEST(Store, CompactKeepsTheSameObjectsIndexesAndTransform) {
  Store s(Store::Representation::compact);
  s.add_index("app", Store::by_label("app"));
  s.set_transform([](json::object& o) { o["metadata"].as_object().erase("managedFields"); });
  Store::Object stored;
  EXPECT_EQ(s.upsert(cm("a", "x", "web"), &stored), nullptr);
  ASSERT_NE(stored, nullptr);
  EXPECT_FALSE(stored->at("metadata").as_object().contains("managedFields"));
  s.upsert(cm("a", "y", "web"));
  auto held = s.get("a/x");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, *stored);
  EXPECT_NE(held, s.get("a/x"));  // parsed again
  auto previous = s.upsert(cm("a", "x", "db", "2"));
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(*previous, *held);
  EXPECT_EQ(s.get("a/x")->at("metadata").at("resourceVersion"), "2");
  EXPECT_EQ(s.by_index("app", "web").size(), 1u);
  EXPECT_EQ(s.by_index("app", "db").size(), 1u);
  std::vector<json::object> fresh;
  fresh.push_back(cm("a", "z", "db"));
  auto gone = s.replace(std::move(fresh));
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_EQ(s.keys(), std::vector<std::string>{"a/z"});
  EXPECT_EQ(s.by_index("app", "db").size(), 1u);
  EXPECT_EQ(s.remove("a/z")->at("metadata").at("name"), "z");
  EXPECT_EQ(s.size(), 0u);
}

TEST(Store, ListsByLabelSelectorAsKubectlReadsOne) {
  Store s;
  s.upsert(cm("a", "web", "web"));
  s.upsert(cm("a", "db", "db"));
  s.upsert(json::parse(R"({"metadata":{"namespace":"a","name":"bare"}})").as_object());
  auto names = [&](std::string_view text) {
    auto sel = apimachinery::parse_label_selector(text);
    EXPECT_TRUE(sel) << text;
    std::vector<std::string> out;
    if (!sel) return out;
    for (const auto& o : s.list(*sel)) out.push_back(Store::key_of(*o));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(""), (V{"a/bare", "a/db", "a/web"}));
  EXPECT_EQ(names("app=web"), (V{"a/web"}));
  EXPECT_EQ(names("app==web"), (V{"a/web"}));
  EXPECT_EQ(names("app!=web"), (V{"a/bare", "a/db"})) << "!= also matches objects without the label";
  EXPECT_EQ(names("app in (web, db)"), (V{"a/db", "a/web"}));
  EXPECT_EQ(names("app notin (web)"), (V{"a/bare", "a/db"}));
  EXPECT_EQ(names("app"), (V{"a/db", "a/web"}));
  EXPECT_EQ(names("!app"), (V{"a/bare"}));
  EXPECT_EQ(names("app,app!=db"), (V{"a/web"}));
  EXPECT_FALSE(apimachinery::parse_label_selector("app in (web"));
  EXPECT_FALSE(apimachinery::parse_label_selector("a b c"));
  EXPECT_FALSE(apimachinery::parse_label_selector("app=web,"));
  EXPECT_FALSE(apimachinery::parse_label_selector("app between (a)"));
}

}  // namespace
}  // namespace kwatch::client
