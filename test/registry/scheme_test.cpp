#include "registry/scheme.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::registry {
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
  const ResourceInfo* old = scheme.find("example.com", "v1", "widgets");
  scheme.set_owned("widgets.example.com", {a});
  EXPECT_EQ(scheme.find("example.com", "v2", "widgets"), nullptr);
  // A replaced description stays readable for requests that still hold it.
  EXPECT_EQ(old->resource, "widgets");
  scheme.set_owned("widgets.example.com", {});
  EXPECT_TRUE(scheme.owners().empty());
  EXPECT_EQ(scheme.find("example.com", "v1", "widgets"), nullptr);
}

}  // namespace
}  // namespace kwatch::registry
