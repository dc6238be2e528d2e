#include "server/media_type.hpp"
#include "base/yaml_subset.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;

TEST(MediaType, TheFirstRangeKwatchCanAnswerWins) {
  EXPECT_EQ(negotiate("", false), Representation::json);
  EXPECT_EQ(negotiate("application/json", false), Representation::json);
  EXPECT_EQ(negotiate("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
                      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                      false),
            Representation::json);
  EXPECT_EQ(negotiate("application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("application/json;q=0, application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("text/html, */*;q=0.8", false), Representation::json);
  EXPECT_EQ(negotiate("application/vnd.kubernetes.protobuf", false), std::nullopt);
  EXPECT_EQ(negotiate("application/xml", false), std::nullopt);
  EXPECT_EQ(negotiate("application/yaml", true), std::nullopt);  // no YAML stream
}

TEST(MediaType, YamlReadsBackAsTheSameValues) {
  auto v = json::parse(R"({"kind":"ConfigMap","metadata":{"name":"a","labels":{}},
    "data":{"port":"8080","flag":"true","empty":"","colon":"a: b","hash":"x #y","multi":"l1\nl2",
    "dash":"-x","n":"null"},"list":[1,"two",{"k":"v","z":[]},[3]],"none":null,"yes":true})");
  const std::string text = to_yaml(v);
  auto doc = base::parse_yaml_subset(text);
  ASSERT_TRUE(doc.has_value()) << text << doc.error();
  const auto* data = doc->find("data");
  ASSERT_NE(data, nullptr);
  for (const char* key : {"port", "flag", "empty", "colon", "hash", "dash", "n", "multi"}) {
    const auto* value = data->find(key);
    ASSERT_NE(value, nullptr) << key;
    EXPECT_EQ(value->scalar, v.at("data").at(key).as_string()) << key;
  }
  // Strings YAML would read as something else are quoted.
  EXPECT_TRUE(data->find("port")->quoted);
  EXPECT_TRUE(data->find("flag")->quoted);
  EXPECT_TRUE(data->find("n")->quoted);
  EXPECT_FALSE(doc->find("kind")->quoted);
  EXPECT_NE(text.find("labels: {}"), std::string::npos) << text;
  const auto* list = doc->find("list");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), 4u);
  EXPECT_EQ(list->items[2].find("k")->scalar, "v");
  EXPECT_EQ(list->items[3].items.size(), 1u);
  // Keys come sorted, as kube-apiserver writes them.
  EXPECT_LT(text.find("data:"), text.find("kind:"));
}

}  // namespace
}  // namespace kwatch::server
