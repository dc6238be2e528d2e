#include "kinds/scheme.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

TEST(Scheme, SelectableFieldsReadAsKubeReadsThem) {
  auto scheme = Scheme::builtin();
  const auto& nodes = *scheme->find("", "v1", "nodes");
  EXPECT_EQ(nodes.field_value(json::parse(R"({"spec":{}})").as_object(), "spec.unschedulable"),
            "false");
  EXPECT_EQ(nodes.field_value(json::parse(R"({"spec":{"unschedulable":true}})").as_object(),
                              "spec.unschedulable"),
            "true");
  const auto& pods = *scheme->find("", "v1", "pods");
  EXPECT_EQ(pods.field_value(json::parse(R"({})").as_object(), "spec.hostNetwork"), "false");
  EXPECT_EQ(pods.field_value(json::parse(R"({"spec":{"nodeName":"n1"}})").as_object(),
                             "spec.nodeName"),
            "n1");
  EXPECT_EQ(pods.field_value(json::parse(R"({})").as_object(), "spec.nodeName"), "");
  EXPECT_EQ(pods.field_value(json::parse(R"({})").as_object(), "spec.bogus"), std::nullopt);
  const auto& events = *scheme->find("", "v1", "events");
  EXPECT_EQ(events.field_value(json::parse(R"({"source":{"component":"kubelet"}})").as_object(),
                               "source"),
            "kubelet");
  EXPECT_EQ(events.field_value(json::parse(R"({"reason":"Started"})").as_object(), "reason"),
            "Started");
}

TEST(Scheme, OwnedResourcesAreReplacedAndRemovedTogether) {
  Scheme scheme;
  const auto before = scheme.generation();
  ResourceInfo a;
  a.group = "example.com";
  a.version = "v1";
  a.resource = "widgets";
  ResourceInfo b = a;
  b.version = "v2";
  scheme.set_owned("widgets.example.com", {a, b});
  EXPECT_GT(scheme.generation(), before);
  EXPECT_NE(scheme.find("example.com", "v2", "widgets"), nullptr);
  EXPECT_EQ(scheme.owners(), std::vector<std::string>{"widgets.example.com"});
  std::shared_ptr<const ResourceInfo> old = scheme.find("example.com", "v1", "widgets");
  scheme.set_owned("widgets.example.com", {a});
  EXPECT_EQ(scheme.find("example.com", "v2", "widgets"), nullptr);
  // A replaced description stays readable for requests that still hold it.
  EXPECT_EQ(old->resource, "widgets");
  EXPECT_NE(scheme.find("example.com", "v1", "widgets"), old);
  scheme.set_owned("widgets.example.com", {});
  EXPECT_TRUE(scheme.owners().empty());
  EXPECT_EQ(scheme.find("example.com", "v1", "widgets"), nullptr);
}

TEST(Scheme, AReplacedDescriptionIsFreedWhenItsLastHolderLetsGo) {
  Scheme scheme;
  ResourceInfo a;
  a.group = "example.com";
  a.version = "v1";
  a.resource = "widgets";
  scheme.set_owned("widgets.example.com", {a});
  std::weak_ptr<const ResourceInfo> first = scheme.find("example.com", "v1", "widgets");
  std::shared_ptr<const ResourceInfo> held = scheme.find("example.com", "v1", "widgets");
  ASSERT_NE(held, nullptr);
  // 30 spec updates, as a definition's are served: each one replaces the description.
  std::vector<std::weak_ptr<const ResourceInfo>> replaced;
  for (int i = 0; i < 30; ++i) {
    replaced.push_back(scheme.find("example.com", "v1", "widgets"));
    a.short_names = {"w" + std::to_string(i)};
    scheme.set_owned("widgets.example.com", {a});
  }
  // The one a request still holds stays readable; every other replaced one is gone.
  EXPECT_FALSE(first.expired());
  EXPECT_EQ(held->resource, "widgets");
  for (std::size_t i = 1; i < replaced.size(); ++i) EXPECT_TRUE(replaced[i].expired()) << i;
  EXPECT_EQ(scheme.find("example.com", "v1", "widgets")->short_names,
            std::vector<std::string>{"w29"});
  held.reset();
  EXPECT_TRUE(first.expired());
  // Removing the definition frees its current description too, once unheld.
  std::weak_ptr<const ResourceInfo> last = scheme.find("example.com", "v1", "widgets");
  scheme.set_owned("widgets.example.com", {});
  EXPECT_TRUE(last.expired());
}

TEST(Scheme, APrefixFindsTheStorageVersionOrTheFirstResourceStoredUnderIt) {
  auto scheme = Scheme::builtin();
  auto pods = scheme->find_prefix("/registry/pods/");
  ASSERT_NE(pods, nullptr);
  EXPECT_EQ(pods->resource, "pods");
  EXPECT_EQ(scheme->find_prefix("/registry/pods"), nullptr);
  EXPECT_EQ(scheme->find_prefix("/registry/pod/"), nullptr);
  EXPECT_EQ(scheme->find_prefix("/registry/podsx/"), nullptr);
  ResourceInfo w;
  w.group = "example.com";
  w.version = "v1";
  w.resource = "widgets";
  w.key_resource = "example.com/widgets";
  ResourceInfo w2 = w;
  w2.version = "v2";
  scheme->set_owned("widgets.example.com", {w, w2});
  auto widgets = scheme->find_prefix("/registry/example.com/widgets/");
  ASSERT_NE(widgets, nullptr);
  EXPECT_EQ(widgets->version, "v1");
  EXPECT_EQ(widgets->key_prefix(), "/registry/example.com/widgets/");
  // A custom resource's storage version, when it is not the first served.
  w.storage_version = w2.storage_version = "v2";
  scheme->set_owned("widgets.example.com", {w, w2});
  EXPECT_EQ(scheme->find_prefix("/registry/example.com/widgets/")->version, "v2");
}

}  // namespace
}  // namespace kwatch::kinds
