#include "registry/deletion.hpp"
#include "kinds/scheme.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::registry {
using kinds::ResourceInfo;
using kinds::Scheme;
namespace {

namespace json = boost::json;
using Action = DeletionPlan::Action;
using namespace std::chrono;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

ResourceInfo info(std::string group, std::string resource) {
  ResourceInfo i;
  i.group = std::move(group);
  i.resource = std::move(resource);
  return i;
}

// A kind as kwatch serves it (its deletion rules come from the kinds table).
const ResourceInfo& served(std::string_view group, std::string_view resource) {
  static const auto scheme = Scheme::builtin();
  return *scheme->find(group, "v1", resource);
}

const system_clock::time_point kNow = system_clock::from_time_t(1'800'000'000);  // 2027-01-15T08:00:00Z

json::array finalizers(const DeletionPlan& p) {
  const json::value* f = p.object.at("metadata").as_object().if_contains("finalizers");
  return f != nullptr ? f->as_array() : json::array();
}

TEST(Deletion, AnObjectWithoutFinalizersIsRemovedAtOnce) {
  auto plan = plan_deletion(info("", "configmaps"), parse(R"({"metadata":{"name":"a"}})"), {}, true, kNow);
  EXPECT_EQ(plan.action, Action::remove);
}

TEST(Deletion, FinalizersKeepTheObjectMarkedWithNoGracePeriod) {
  auto cm = parse(R"({"metadata":{"name":"a","generation":3,"finalizers":["example.com/hold"]}})");
  auto plan = plan_deletion(info("", "configmaps"), cm, {}, true, kNow);
  ASSERT_EQ(plan.action, Action::write);
  const auto& meta = plan.object.at("metadata").as_object();
  EXPECT_EQ(meta.at("deletionTimestamp"), "2027-01-15T08:00:00Z");
  EXPECT_EQ(meta.at("deletionGracePeriodSeconds"), 0);
  EXPECT_EQ(meta.at("generation"), 4);
  // Deleting it again changes nothing.
  auto again = plan_deletion(info("", "configmaps"), plan.object, {}, true, kNow + seconds(5));
  EXPECT_EQ(again.action, Action::keep);
  EXPECT_EQ(again.object.at("metadata").as_object().at("deletionTimestamp"), "2027-01-15T08:00:00Z");
}

TEST(Deletion, PropagationPoliciesChooseTheCollectorsFinalizer) {
  auto deploy = parse(R"({"metadata":{"name":"d"}})");
  DeleteQuery orphan;
  orphan.propagation = Propagation::orphan;
  auto p = plan_deletion(info("apps", "deployments"), deploy, orphan, true, kNow);
  ASSERT_EQ(p.action, Action::write);
  EXPECT_EQ(finalizers(p), json::array({"orphan"}));

  DeleteQuery foreground;
  foreground.propagation = Propagation::foreground;
  p = plan_deletion(info("apps", "deployments"), deploy, foreground, true, kNow);
  ASSERT_EQ(p.action, Action::write);
  EXPECT_EQ(finalizers(p), json::array({"foregroundDeletion"}));

  DeleteQuery background;
  background.propagation = Propagation::background;
  EXPECT_EQ(plan_deletion(info("apps", "deployments"), deploy, background, true, kNow).action,
            Action::remove);
  // The deprecated orphanDependents says the same.
  DeleteQuery legacy;
  legacy.orphan_dependents = true;
  EXPECT_EQ(finalizers(plan_deletion(info("apps", "deployments"), deploy, legacy, true, kNow)),
            json::array({"orphan"}));
}

TEST(Deletion, ASecondDeleteMaySwitchAPendingPolicy) {
  auto marked = parse(R"({"metadata":{"name":"d","deletionTimestamp":"2027-01-15T07:59:00Z",
      "deletionGracePeriodSeconds":0,"finalizers":["orphan","example.com/x"]}})");
  DeleteQuery foreground;
  foreground.propagation = Propagation::foreground;
  auto p = plan_deletion(info("apps", "deployments"), marked, foreground, true, kNow);
  ASSERT_EQ(p.action, Action::write);
  EXPECT_EQ(finalizers(p), json::array({"example.com/x", "foregroundDeletion"}));
  // The earlier deletionTimestamp stays.
  EXPECT_EQ(p.object.at("metadata").as_object().at("deletionTimestamp"), "2027-01-15T07:59:00Z");
  // With no policy given, the finalizer already there decides.
  EXPECT_EQ(plan_deletion(info("apps", "deployments"), marked, {}, true, kNow).action, Action::keep);
}

TEST(Deletion, ReplicationControllersAndJobsOrphanByDefaultAndTheCollectorCanBeOff) {
  auto rc = parse(R"({"metadata":{"name":"r"}})");
  EXPECT_EQ(finalizers(plan_deletion(served("", "replicationcontrollers"), rc, {}, true, kNow)),
            json::array({"orphan"}));
  EXPECT_EQ(finalizers(plan_deletion(served("batch", "jobs"), rc, {}, true, kNow)),
            json::array({"orphan"}));
  DeleteQuery orphan;
  orphan.propagation = Propagation::orphan;
  EXPECT_EQ(plan_deletion(info("apps", "deployments"), rc, orphan, false, kNow).action,
            Action::remove);
}

TEST(Deletion, APodOnANodeGetsItsGracePeriodWhichMayOnlyShorten) {
  auto pod = parse(R"({"metadata":{"name":"p","generation":1},
      "spec":{"nodeName":"n1","terminationGracePeriodSeconds":30}})");
  auto p = plan_deletion(served("", "pods"), pod, {}, true, kNow);
  ASSERT_EQ(p.action, Action::write);
  auto meta = p.object.at("metadata").as_object();
  EXPECT_EQ(meta.at("deletionTimestamp"), "2027-01-15T08:00:30Z");
  EXPECT_EQ(meta.at("deletionGracePeriodSeconds"), 30);
  EXPECT_EQ(meta.at("generation"), 2);

  DeleteQuery longer;
  longer.grace_period_seconds = 60;
  EXPECT_EQ(plan_deletion(served("", "pods"), p.object, longer, true, kNow).action, Action::keep);

  DeleteQuery shorter;
  shorter.grace_period_seconds = 10;
  auto s = plan_deletion(served("", "pods"), p.object, shorter, true, kNow + seconds(5));
  ASSERT_EQ(s.action, Action::write);
  EXPECT_EQ(s.object.at("metadata").as_object().at("deletionTimestamp"), "2027-01-15T08:00:10Z");
  EXPECT_EQ(s.object.at("metadata").as_object().at("deletionGracePeriodSeconds"), 10);

  DeleteQuery now;
  now.grace_period_seconds = 0;
  EXPECT_EQ(plan_deletion(served("", "pods"), s.object, now, true, kNow).action, Action::remove);
}

TEST(Deletion, APodOnNoNodeOrFinishedGoesAtOnce) {
  EXPECT_EQ(plan_deletion(served("", "pods"),
                          parse(R"({"metadata":{"name":"p"},"spec":{"terminationGracePeriodSeconds":30}})"),
                          {}, true, kNow)
                .action,
            Action::remove);
  EXPECT_EQ(plan_deletion(served("", "pods"),
                          parse(R"({"metadata":{"name":"p"},"spec":{"nodeName":"n",
                              "terminationGracePeriodSeconds":30},"status":{"phase":"Succeeded"}})"),
                          {}, true, kNow)
                .action,
            Action::remove);
  // A negative grace period means one second.
  DeleteQuery negative;
  negative.grace_period_seconds = -5;
  auto p = plan_deletion(served("", "pods"),
                         parse(R"({"metadata":{"name":"p"},"spec":{"nodeName":"n"}})"), negative,
                         true, kNow);
  ASSERT_EQ(p.action, Action::write);
  EXPECT_EQ(p.object.at("metadata").as_object().at("deletionGracePeriodSeconds"), 1);
}

TEST(Deletion, ANamespaceTurnsTerminatingFirstAndGoesWhenFinalized) {
  auto ns = parse(R"({"metadata":{"name":"n"},"spec":{"finalizers":["kubernetes"]},
      "status":{"phase":"Active"}})");
  auto p = plan_deletion(served("", "namespaces"), ns, {}, true, kNow);
  ASSERT_EQ(p.action, Action::write);
  EXPECT_EQ(p.object.at("status").as_object().at("phase"), "Terminating");
  EXPECT_EQ(p.object.at("metadata").as_object().at("deletionTimestamp"), "2027-01-15T08:00:00Z");
  EXPECT_FALSE(deletion_complete(served("", "namespaces"), p.object));
  // While the namespace controller works, deletes change nothing.
  EXPECT_EQ(plan_deletion(served("", "namespaces"), p.object, {}, true, kNow).action, Action::keep);
  p.object["spec"].as_object()["finalizers"] = json::array();
  EXPECT_TRUE(deletion_complete(served("", "namespaces"), p.object));
  EXPECT_EQ(plan_deletion(served("", "namespaces"), p.object, {}, true, kNow).action, Action::remove);
  // orphanDependents=false asks a namespace for foreground deletion.
  DeleteQuery no_orphans;
  no_orphans.orphan_dependents = false;
  EXPECT_EQ(finalizers(plan_deletion(served("", "namespaces"), ns, no_orphans, true, kNow)),
            json::array({"foregroundDeletion"}));
}

TEST(Deletion, WhatADeleteAnswersWith) {
  EXPECT_TRUE(served("", "pods").delete_returns_object);
  EXPECT_TRUE(served("", "services").delete_returns_object);
  EXPECT_FALSE(served("", "configmaps").delete_returns_object);
  EXPECT_FALSE(served("apps", "deployments").delete_returns_object);
  EXPECT_EQ(parse_propagation("Foreground"), Propagation::foreground);
  EXPECT_EQ(parse_propagation("foreground"), std::nullopt);
}

TEST(Deletion, APodInItsGracePeriodIsNotCompleteWithoutFinalizers) {
  auto pod = parse(R"({"metadata":{"name":"p","deletionTimestamp":"2027-01-15T08:00:30Z",
      "deletionGracePeriodSeconds":30}})");
  EXPECT_FALSE(deletion_complete(served("", "pods"), pod));
  pod["metadata"].as_object()["deletionGracePeriodSeconds"] = 0;
  EXPECT_TRUE(deletion_complete(served("", "pods"), pod));
}

}  // namespace
}  // namespace kwatch::registry
