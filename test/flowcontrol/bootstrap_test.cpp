#include "flowcontrol/bootstrap.hpp"

#include "flowcontrol/configuration.hpp"
#include "kinds/flow_control.hpp"

#include <gtest/gtest.h>

namespace kwatch::flowcontrol {
namespace {

namespace json = boost::json;

std::string name_of(const json::object& o) {
  return std::string(o.at("metadata").as_object().at("name").as_string());
}

json::object stored(json::object o, std::int64_t generation, const char* annotation) {
  auto& meta = o["metadata"].as_object();
  meta["generation"] = generation;
  meta["resourceVersion"] = "7";
  if (annotation == nullptr) {
    meta.erase("annotations");
  } else {
    meta["annotations"] = json::object{{kinds::kAutoUpdateAnnotation, annotation}};
  }
  return o;
}

TEST(BootstrapObjects, AreKubesAndParse) {
  const auto& b = bootstrap_objects();
  EXPECT_EQ(b.mandatory_levels.size(), 2u);
  EXPECT_EQ(b.mandatory_schemas.size(), 2u);
  EXPECT_EQ(b.suggested_levels.size(), 6u);
  EXPECT_EQ(b.suggested_schemas.size(), 9u);
  for (const auto* list : {&b.mandatory_levels, &b.suggested_levels}) {
    for (const auto& o : *list) EXPECT_TRUE(parse_priority_level(o)) << name_of(o);
  }
  for (const auto* list : {&b.mandatory_schemas, &b.suggested_schemas}) {
    for (const auto& o : *list) EXPECT_TRUE(parse_flow_schema(o)) << name_of(o);
  }
}

TEST(BootstrapPlan, CreatesWhatIsMissing) {
  const auto& b = bootstrap_objects();
  auto plan = plan_bootstrap({}, b.mandatory_levels, b.suggested_levels);
  EXPECT_EQ(plan.create.size(), 8u);
  EXPECT_TRUE(plan.update.empty());
  EXPECT_TRUE(plan.remove.empty());
}

TEST(BootstrapPlan, MandatorySpecsAreAlwaysRestored) {
  const auto& b = bootstrap_objects();
  auto changed = stored(b.mandatory_levels[0], 3, "false");
  changed["spec"].as_object()["limited"].as_object()["nominalConcurrencyShares"] = 99;
  auto plan = plan_bootstrap({changed}, {b.mandatory_levels[0]}, {});
  ASSERT_EQ(plan.update.size(), 1u);
  EXPECT_EQ(plan.update[0].at("spec"), b.mandatory_levels[0].at("spec"));
  EXPECT_EQ(plan.update[0].at("metadata").at("annotations").at(kinds::kAutoUpdateAnnotation), "true");
  EXPECT_EQ(plan.update[0].at("metadata").at("resourceVersion"), "7");
}

TEST(BootstrapPlan, SuggestedObjectsFollowTheirAnnotation) {
  const auto& b = bootstrap_objects();
  const auto& boot = b.suggested_levels[0];
  auto edited = [&](std::int64_t generation, const char* annotation) {
    auto o = stored(boot, generation, annotation);
    o["spec"].as_object()["limited"].as_object()["nominalConcurrencyShares"] = 99;
    return o;
  };
  // "false": the user's spec stays.
  EXPECT_TRUE(plan_bootstrap({edited(5, "false")}, {}, {boot}).update.empty());
  // "true": restored.
  auto plan = plan_bootstrap({edited(5, "true")}, {}, {boot});
  ASSERT_EQ(plan.update.size(), 1u);
  EXPECT_EQ(plan.update[0].at("spec"), boot.at("spec"));
  // No annotation and never changed (generation 1): restored, annotated "true".
  plan = plan_bootstrap({edited(1, nullptr)}, {}, {boot});
  ASSERT_EQ(plan.update.size(), 1u);
  EXPECT_EQ(plan.update[0].at("spec"), boot.at("spec"));
  EXPECT_EQ(plan.update[0].at("metadata").at("annotations").at(kinds::kAutoUpdateAnnotation), "true");
  // No annotation and changed since: left alone, annotated "false".
  plan = plan_bootstrap({edited(2, nullptr)}, {}, {boot});
  ASSERT_EQ(plan.update.size(), 1u);
  EXPECT_NE(plan.update[0].at("spec"), boot.at("spec"));
  EXPECT_EQ(plan.update[0].at("metadata").at("annotations").at(kinds::kAutoUpdateAnnotation), "false");
  // Go's ParseBool forms count ("T" is true: nothing to fix); a value that is none of them
  // counts as no annotation.
  EXPECT_TRUE(plan_bootstrap({stored(boot, 4, "T")}, {}, {boot}).update.empty());
  plan = plan_bootstrap({stored(boot, 4, "yes")}, {}, {boot});
  ASSERT_EQ(plan.update.size(), 1u);
  EXPECT_EQ(plan.update[0].at("metadata").at("annotations").at(kinds::kAutoUpdateAnnotation), "false");
  // Unchanged and annotated: nothing to do.
  EXPECT_TRUE(plan_bootstrap({stored(boot, 4, "true")}, {}, {boot}).update.empty());
  // Deleted ones come back.
  EXPECT_EQ(plan_bootstrap({}, {}, {boot}).create.size(), 1u);
}

TEST(BootstrapPlan, RemovesOnlyStaleServerObjects) {
  const auto& b = bootstrap_objects();
  auto stale = stored(b.suggested_levels[0], 1, "true");
  stale["metadata"].as_object()["name"] = "from-an-older-server";
  auto users = stored(b.suggested_levels[0], 1, nullptr);
  users["metadata"].as_object()["name"] = "mine";
  auto kept = stored(b.suggested_levels[0], 1, "false");
  kept["metadata"].as_object()["name"] = "kept";
  auto plan = plan_bootstrap({stale, users, kept}, {}, {});
  ASSERT_EQ(plan.remove.size(), 1u);
  EXPECT_EQ(plan.remove[0], "from-an-older-server");
}

}  // namespace
}  // namespace kwatch::flowcontrol
