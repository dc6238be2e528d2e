#include "registry/json_path.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::registry {
namespace {

namespace json = boost::json;

TEST(JsonPath, FindsFieldsInEveryNotationKindsUse) {
  auto obj = json::parse(R"({"spec":{"replicas":3,"selector":{"app":"web"}},"list":[1]})").as_object();
  for (auto path : {"spec.replicas", ".spec.replicas", "{.spec.replicas}"}) {
    const json::value* v = find_field(obj, path);
    ASSERT_NE(v, nullptr) << path;
    EXPECT_EQ(*v, 3) << path;
  }
  EXPECT_EQ(*find_field(obj, "spec.selector"), json::parse(R"({"app":"web"})"));
  EXPECT_EQ(find_field(obj, "spec.missing"), nullptr);
  EXPECT_EQ(find_field(obj, "spec.replicas.deeper"), nullptr);
  EXPECT_EQ(find_field(obj, "list.0"), nullptr);
  EXPECT_EQ(find_field(obj, ""), nullptr);
  EXPECT_EQ(find_field(obj, "."), nullptr);
}

TEST(JsonPath, SetCreatesObjectsOnTheWay) {
  json::object obj;
  set_field(obj, ".spec.replicas", 4);
  set_field(obj, "status.replicas", 2);
  EXPECT_EQ(obj, json::parse(R"({"spec":{"replicas":4},"status":{"replicas":2}})").as_object());
  obj["spec"] = 5;  // not an object: replaced
  set_field(obj, "spec.replicas", 1);
  EXPECT_EQ(obj.at("spec"), json::parse(R"({"replicas":1})"));
  set_field(obj, "", 9);  // no path: nothing
  EXPECT_EQ(obj.size(), 2u);
}

}  // namespace
}  // namespace kwatch::registry
