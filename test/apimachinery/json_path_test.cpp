#include "apimachinery/json_path.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::apimachinery {


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

TEST(JsonPath, SetConditionMovesTheTransitionTimeOnlyWhenTheStatusChanges) {
  json::object status;
  auto first = set_condition(status, "Ready", "False", "t1");
  EXPECT_TRUE(first.changed);
  first.condition["reason"] = "Waiting";
  EXPECT_EQ(json::serialize(status),
            R"({"conditions":[{"type":"Ready","status":"False","lastTransitionTime":"t1","reason":"Waiting"}]})");
  auto same = set_condition(status, "Ready", "False", "t2");
  EXPECT_FALSE(same.changed);
  EXPECT_EQ(same.condition.at("lastTransitionTime"), "t1");
  auto flipped = set_condition(status, "Ready", "True", "t3");
  EXPECT_TRUE(flipped.changed);
  EXPECT_EQ(flipped.condition.at("lastTransitionTime"), "t3");
  EXPECT_EQ(flipped.condition.at("reason"), "Waiting");  // the caller's to change
  set_condition(status, "Other", "True", "t4");
  EXPECT_EQ(status.at("conditions").as_array().size(), 2u);
  // A condition without a transition time gets one; `conditions` of another type is replaced.
  json::object odd = json::parse(R"({"conditions":{"x":1}})").as_object();
  EXPECT_EQ(set_condition(odd, "A", "True", "t5").condition.at("lastTransitionTime"), "t5");
  json::object bare = json::parse(R"({"conditions":[{"type":"A","status":"True"}]})").as_object();
  auto kept = set_condition(bare, "A", "True", "t6");
  EXPECT_FALSE(kept.changed);
  EXPECT_EQ(kept.condition.at("lastTransitionTime"), "t6");
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
}  // namespace kwatch::apimachinery
