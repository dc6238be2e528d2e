#include "schema/strategic_merge_patch.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <string>

namespace kwatch::schema {

using apimachinery::ApiError;
using base::Errc;

namespace {

namespace json = boost::json;

const PatchSchema& pod() { return builtin_patch_schema("", "Pod"); }

json::value smp(std::string_view original, std::string_view patch,
                const PatchSchema& schema = pod()) {
  auto r = apply_strategic_merge_patch(json::parse(original), json::parse(patch), schema);
  EXPECT_TRUE(r.has_value()) << patch << ": " << (r ? "" : r.error().message);
  return r ? *r : json::value{};
}

ApiError smp_error(std::string_view original, std::string_view patch,
                   const PatchSchema& schema = pod()) {
  auto r = apply_strategic_merge_patch(json::parse(original), json::parse(patch), schema);
  EXPECT_FALSE(r.has_value()) << patch;
  return r ? ApiError{} : r.error();
}

constexpr const char* kTwoContainers =
    R"({"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}})";

TEST(StrategicMergePatch, MergesContainersByName) {
  EXPECT_EQ(smp(kTwoContainers, R"({"spec":{"containers":[{"name":"b","image":"b:2"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"a","image":"a:1"},
                                                  {"name":"b","image":"b:2"}]}})"));
}

TEST(StrategicMergePatch, PutsNewListItemsFirstWithoutAnOrderDirective) {
  // Kubernetes' mergeSortedSlice places patch items the live list does not know ahead.
  EXPECT_EQ(smp(kTwoContainers, R"({"spec":{"containers":[{"name":"c","image":"c:1"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"c","image":"c:1"},
                                                  {"name":"a","image":"a:1"},
                                                  {"name":"b","image":"b:1"}]}})"));
}

TEST(StrategicMergePatch, SetElementOrderFixesTheOrderOfAMergedList) {
  EXPECT_EQ(smp(kTwoContainers,
                R"({"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"},{"name":"c"}],
                            "containers":[{"name":"c","image":"c:1"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"a","image":"a:1"},
                                                  {"name":"b","image":"b:1"},
                                                  {"name":"c","image":"c:1"}]}})"));
}

TEST(StrategicMergePatch, SetElementOrderAloneReordersTheLiveList) {
  EXPECT_EQ(smp(kTwoContainers,
                R"({"spec":{"$setElementOrder/containers":[{"name":"b"},{"name":"a"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"b","image":"b:1"},
                                                  {"name":"a","image":"a:1"}]}})"));
}

TEST(StrategicMergePatch, SetElementOrderMustAgreeWithThePatchList) {
  auto err = smp_error(kTwoContainers,
                       R"({"spec":{"$setElementOrder/containers":[{"name":"a"},{"name":"b"}],
                                   "containers":[{"name":"b"},{"name":"a"}]}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message.rfind("The order in patch list:", 0), 0u) << err.message;
}

TEST(StrategicMergePatch, DeletesAListItemWithThePatchDirective) {
  EXPECT_EQ(smp(kTwoContainers, R"({"spec":{"containers":[{"name":"a","$patch":"delete"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"b","image":"b:1"}]}})"));
}

TEST(StrategicMergePatch, ReplacesAMergingListWithThePatchDirective) {
  EXPECT_EQ(smp(kTwoContainers,
                R"({"spec":{"containers":[{"name":"z","image":"z"},{"$patch":"replace"}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"z","image":"z"}]}})"));
}

TEST(StrategicMergePatch, ReplacesOrDeletesAMapWithThePatchDirective) {
  EXPECT_EQ(smp(R"({"spec":{"a":1,"b":{"c":2}}})", R"({"spec":{"$patch":"replace","x":1}})"),
            json::parse(R"({"spec":{"x":1}})"));
  EXPECT_EQ(smp(R"({"spec":{"a":1},"k":1})", R"({"spec":{"$patch":"delete"}})"),
            json::parse(R"({"spec":{},"k":1})"));
}

TEST(StrategicMergePatch, RejectsUnknownDirectives) {
  auto err = smp_error(R"({"spec":{}})", R"({"spec":{"$patch":"frob"}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "unknown patch type: frob in map: map[$patch:frob]");
  err = smp_error(kTwoContainers, R"({"spec":{"containers":[{"name":"a","$patch":"merge"}]}})");
  EXPECT_EQ(err.message, "merging lists cannot yet be specified in the patch");
}

TEST(StrategicMergePatch, RetainKeysDropsUnlistedFields) {
  const auto& deploy = builtin_patch_schema("apps", "Deployment");
  EXPECT_EQ(smp(R"({"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1}}}})",
                R"({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}})", deploy),
            json::parse(R"({"spec":{"strategy":{"type":"Recreate"}}})"));
}

TEST(StrategicMergePatch, RetainKeysMustListEveryPatchedField) {
  auto err = smp_error(R"({"spec":{}})", R"({"spec":{"$retainKeys":["a"],"b":1}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "invalid patch format of retainKeys");
  err = smp_error(R"({"spec":{}})", R"({"spec":{"$retainKeys":"a"}})");
  EXPECT_EQ(err.message, "invalid patch format of retainKeys");
}

TEST(StrategicMergePatch, UnionsFinalizersOfAnyKind) {
  const auto& any = builtin_patch_schema("example.com", "Widget");
  EXPECT_EQ(smp(R"({"metadata":{"finalizers":["a","b"]}})",
                R"({"metadata":{"finalizers":["b","c"]}})", any),
            json::parse(R"({"metadata":{"finalizers":["a","b","c"]}})"));
  EXPECT_EQ(smp(R"({"metadata":{"finalizers":["a","b"]}})", R"({"metadata":{"finalizers":["c"]}})",
                any),
            json::parse(R"({"metadata":{"finalizers":["c","a","b"]}})"));
}

TEST(StrategicMergePatch, DeletesFromAPrimitiveList) {
  EXPECT_EQ(smp(R"({"metadata":{"finalizers":["a","b","c"]}})",
                R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["b","x"]}})"),
            json::parse(R"({"metadata":{"finalizers":["a","c"]}})"));
  EXPECT_EQ(smp(R"({"metadata":{}})", R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["b"]}})"),
            json::parse(R"({"metadata":{}})"));
  auto err = smp_error(R"({"metadata":{}})", R"({"metadata":{"$deleteFromPrimitiveList":["b"]}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "invalid patch format of primitive list");
}

TEST(StrategicMergePatch, MergesOwnerReferencesByUid) {
  const auto& any = builtin_patch_schema("", "ConfigMap");
  EXPECT_EQ(smp(R"({"metadata":{"ownerReferences":[{"uid":"1","name":"x"}]}})",
                R"({"metadata":{"ownerReferences":[{"uid":"1","controller":true}]}})", any),
            json::parse(R"({"metadata":{"ownerReferences":[{"uid":"1","name":"x",
                                                            "controller":true}]}})"));
}

TEST(StrategicMergePatch, NullDeletesAFieldAndUnmatchedNullsAreIgnored) {
  EXPECT_EQ(smp(R"({"metadata":{"labels":{"a":"1","b":"2"}}})",
                R"({"metadata":{"labels":{"a":null,"zz":null}}})"),
            json::parse(R"({"metadata":{"labels":{"b":"2"}}})"));
}

TEST(StrategicMergePatch, ListsWithoutAStrategyAreReplaced) {
  EXPECT_EQ(smp(R"({"spec":{"tolerations":[{"key":"a"}],"containers":[{"name":"c","args":["x","y"]}]}})",
                R"({"spec":{"tolerations":[{"key":"b"}],"containers":[{"name":"c","args":["z"]}]}})"),
            json::parse(R"({"spec":{"tolerations":[{"key":"b"}],
                                    "containers":[{"name":"c","args":["z"]}]}})"));
}

TEST(StrategicMergePatch, MergesNestedContainerListsByTheirKeys) {
  auto original = R"({"spec":{"containers":[{"name":"c",
      "env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
      "ports":[{"containerPort":80,"name":"http"}],
      "volumeMounts":[{"mountPath":"/data","name":"d"}]}]}})";
  auto patch = R"({"spec":{"containers":[{"name":"c",
      "env":[{"name":"B","value":"3"}],
      "ports":[{"containerPort":80,"protocol":"TCP"}],
      "volumeMounts":[{"mountPath":"/data","$patch":"delete"}]}]}})";
  EXPECT_EQ(smp(original, patch),
            json::parse(R"({"spec":{"containers":[{"name":"c",
                "env":[{"name":"A","value":"1"},{"name":"B","value":"3"}],
                "ports":[{"containerPort":80,"name":"http","protocol":"TCP"}],
                "volumeMounts":[]}]}})"));
}

TEST(StrategicMergePatch, MergesTheDeploymentPodTemplate) {
  const auto& deploy = builtin_patch_schema("apps", "Deployment");
  EXPECT_EQ(smp(R"({"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"a","image":"1"},{"name":"b","image":"1"}]}}}})",
                R"({"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"a","image":"2"}]}}}})",
                deploy),
            json::parse(R"({"spec":{"replicas":3,"template":{"spec":{"containers":[
                {"name":"a","image":"2"},{"name":"b","image":"1"}]}}}})"));
}

TEST(StrategicMergePatch, MergesServicePortsAndNodeStatusByTheirKeys) {
  EXPECT_EQ(smp(R"({"spec":{"ports":[{"port":80,"name":"http"},{"port":443,"name":"https"}]}})",
                R"({"spec":{"ports":[{"port":443,"targetPort":8443}]}})",
                builtin_patch_schema("", "Service")),
            json::parse(R"({"spec":{"ports":[{"port":80,"name":"http"},
                                             {"port":443,"name":"https","targetPort":8443}]}})"));
  EXPECT_EQ(smp(R"({"status":{"conditions":[{"type":"Ready","status":"False"}],
                              "addresses":[{"type":"Hostname","address":"n1"}]}})",
                R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})",
                builtin_patch_schema("core", "Node")),
            json::parse(R"({"status":{"conditions":[{"type":"Ready","status":"True"}],
                                      "addresses":[{"type":"Hostname","address":"n1"}]}})"));
}

TEST(StrategicMergePatch, RequiresTheMergeKeyInPatchItems) {
  auto err = smp_error(kTwoContainers, R"({"spec":{"containers":[{"image":"x"}]}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "map: map[image:x] does not contain declared merge key: name");
}

TEST(StrategicMergePatch, RefusesListsOfListsWith422) {
  auto err = smp_error(R"({"metadata":{"finalizers":[]}})",
                       R"({"metadata":{"finalizers":[["b"]]}})");
  EXPECT_EQ(err.code, Errc::invalid);
  err = smp_error(R"({"metadata":{"finalizers":["a"]}})", R"({"metadata":{"finalizers":[1]}})");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "list element types are not identical: [[a] [1]]");
}

TEST(StrategicMergePatch, AddsMissingFieldsWithoutTheirNulls) {
  EXPECT_EQ(smp(R"({"metadata":{"name":"p"}})", R"({"spec":{"nodeName":"n","x":null}})"),
            json::parse(R"({"metadata":{"name":"p"},"spec":{"nodeName":"n"}})"));
}

TEST(StrategicMergePatch, RejectsAPatchThatIsNotAnObject) {
  auto err = smp_error("{}", "[]");
  EXPECT_EQ(err.code, Errc::bad_request);
  EXPECT_EQ(err.message, "json: cannot unmarshal array into Go value of type map[string]interface {}");
}

TEST(StrategicMergePatch, KeepsTheOrderOfUntouchedFields) {
  EXPECT_EQ(json::serialize(smp(R"({"a":1,"b":2,"c":3})", R"({"b":null,"d":4,"a":5})")),
            R"({"a":5,"c":3,"d":4})");
}

TEST(StrategicMergePatch, MergesDuplicateItemsOfTheOriginalIntoTheFirst) {
  EXPECT_EQ(smp(R"({"spec":{"containers":[{"name":"a","x":1},{"name":"b"},{"name":"a","x":2}]}})",
                R"({"spec":{"containers":[{"name":"a","y":3},{"name":"a","z":4}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":"a","x":1,"y":3,"z":4},
                                                  {"name":"a","x":2},{"name":"b"}]}})"));
}

TEST(StrategicMergePatch, ComparesMergeKeysAndSetMembersByValue) {
  // 1 and 1.0 are one key, "1" another; set members alike.
  EXPECT_EQ(smp(R"({"spec":{"containers":[{"name":1,"x":1},{"name":"1","x":2}]}})",
                R"({"spec":{"containers":[{"name":1.0,"y":3}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":1.0,"x":1,"y":3},{"name":"1","x":2}]}})"));
  EXPECT_EQ(json::serialize(smp(R"({"spec":{"podCIDRs":[1,2,1.0]}})",
                                R"({"spec":{"podCIDRs":[2.0,3,3]}})", builtin_patch_schema("", "Node"))),
            R"({"spec":{"podCIDRs":[1,2,3]}})");
  // An integer a double cannot hold is not the double nearest to it.
  EXPECT_EQ(smp(R"({"spec":{"containers":[{"name":9007199254740993,"x":1}]}})",
                R"({"spec":{"containers":[{"name":9007199254740992.0,"y":3}]}})"),
            json::parse(R"({"spec":{"containers":[{"name":9007199254740992.0,"y":3},
                                                  {"name":9007199254740993,"x":1}]}})"));
}

TEST(StrategicMergePatch, AFieldDeletedAndAddedAgainMovesToTheEnd) {
  EXPECT_EQ(json::serialize(smp(R"({"metadata":{"finalizers":["a"],"name":"n"}})",
                                R"({"metadata":{"$deleteFromPrimitiveList/finalizers":null,
                                                "finalizers":["c"]}})")),
            R"({"metadata":{"name":"n","finalizers":["c"]}})");
}

// The tests below merge lists big enough that quadratic merging would run for many minutes
// (and be stopped by the ctest timeout); a linear merge takes a fraction of a second. They
// check results, not times: benchmarks measure time (bench/strategic_merge_patch_bench.cpp).

std::string numbered(const char* prefix, int i) { return prefix + std::to_string(i); }

TEST(StrategicMergePatch, MergesAndDeletesHundredsOfThousandsOfFinalizers) {
  constexpr int kN = 300000;
  const auto& any = builtin_patch_schema("example.com", "Widget");
  json::array original, patch;
  for (int i = 0; i < kN; ++i) original.emplace_back(numbered("example.com/f-", i));
  for (int i = kN / 2; i < kN + kN / 2; ++i) patch.emplace_back(numbered("example.com/f-", i));
  json::value o = {{"metadata", {{"finalizers", std::move(original)}}}};
  json::value p = {{"metadata", {{"finalizers", std::move(patch)}}}};
  auto merged = apply_strategic_merge_patch(o, p, any);
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  const auto& union_list = merged->at("metadata").at("finalizers").as_array();
  ASSERT_EQ(union_list.size(), std::size_t{kN + kN / 2});
  for (int i = 0; i < kN + kN / 2; ++i) {
    ASSERT_EQ(union_list[i], json::value(numbered("example.com/f-", i))) << i;
  }

  json::array remove;
  for (int i = 0; i < kN + kN / 2; i += 2) remove.emplace_back(numbered("example.com/f-", i));
  json::value d = {{"metadata", {{"$deleteFromPrimitiveList/finalizers", std::move(remove)}}}};
  auto left = apply_strategic_merge_patch(*merged, d, any);
  ASSERT_TRUE(left.has_value()) << left.error().message;
  const auto& odd = left->at("metadata").at("finalizers").as_array();
  ASSERT_EQ(odd.size(), std::size_t{(kN + kN / 2) / 2});
  for (std::size_t i = 0; i < odd.size(); ++i) {
    ASSERT_EQ(odd[i], json::value(numbered("example.com/f-", 2 * static_cast<int>(i) + 1))) << i;
  }
}

TEST(StrategicMergePatch, MergesAHundredThousandContainersByNameInTheRequestedOrder) {
  constexpr int kN = 100000;
  auto container = [](int i, const char* image) {
    return json::object{{"name", numbered("c-", i)}, {"image", image}};
  };
  json::array original, patch, order;
  for (int i = 0; i < kN; ++i) original.push_back(container(i, "v1"));
  // The patch updates the second half, adds as many new ones and deletes every fourth of the
  // first half; $setElementOrder asks for everything that remains in reverse.
  for (int i = kN + kN / 2 - 1; i >= kN / 2; --i) patch.push_back(container(i, "v2"));
  for (int i = 0; i < kN / 2; i += 4) {
    patch.push_back(json::object{{"name", numbered("c-", i)}, {"$patch", "delete"}});
  }
  for (int i = kN + kN / 2 - 1; i >= 0; --i) {
    if (i < kN / 2 && i % 4 == 0) continue;
    order.push_back(json::object{{"name", numbered("c-", i)}});
  }
  json::value o = {{"spec", {{"containers", std::move(original)}}}};
  json::value p = {{"spec", {{"$setElementOrder/containers", std::move(order)},
                             {"containers", std::move(patch)}}}};
  auto merged = apply_strategic_merge_patch(o, p, pod());
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  const auto& list = merged->at("spec").at("containers").as_array();
  ASSERT_EQ(list.size(), std::size_t{kN + kN / 2 - kN / 8});
  std::size_t at = 0;
  for (int i = kN + kN / 2 - 1; i >= 0; --i) {
    if (i < kN / 2 && i % 4 == 0) continue;
    ASSERT_EQ(list[at], json::value(container(i, i < kN / 2 ? "v1" : "v2"))) << i;
    ++at;
  }
}

TEST(StrategicMergePatch, DeletesTensOfThousandsOfFieldsKeepingTheOrderOfTheRest) {
  constexpr int kN = 100000;
  json::object labels, patch;
  for (int i = 0; i < kN; ++i) labels.emplace(numbered("l-", i), "x");
  for (int i = 0; i < kN; i += 2) patch.emplace(numbered("l-", i), nullptr);
  patch.emplace("added", "y");
  json::value o = {{"metadata", {{"labels", std::move(labels)}}}};
  json::value p = {{"metadata", {{"labels", std::move(patch)}}}};
  auto merged = apply_strategic_merge_patch(o, p, pod());
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  const auto& left = merged->at("metadata").at("labels").as_object();
  ASSERT_EQ(left.size(), std::size_t{kN / 2 + 1});
  int i = 1;
  for (const auto& [k, v] : left) {
    if (i < kN) {
      ASSERT_EQ(std::string_view(k), numbered("l-", i));
      i += 2;
    } else {
      EXPECT_EQ(std::string_view(k), "added");
    }
  }
}

TEST(StrategicMergePatch, MergesListsNestedAHundredLevelsDeep) {
  // 49 merging lists of objects inside each other: 99 levels, plus the scalars inside.
  constexpr int kLists = 49;
  PatchSchema schema;
  std::string path = "l";
  for (int i = 0; i < kLists; ++i, path += "[].l") schema.merge_list(path, "k");
  json::value original = json::object{}, patch = json::object{}, expected = json::object{};
  json::object* o = &original.as_object();
  json::object* p = &patch.as_object();
  json::object* e = &expected.as_object();
  for (int i = 0; i < kLists; ++i) {
    auto& oi = (*o)["l"].emplace_array().emplace_back(json::object{{"k", "x"}, {"v", i}});
    auto& pi = (*p)["l"].emplace_array().emplace_back(json::object{{"k", "x"}, {"w", i}});
    auto& ei = (*e)["l"].emplace_array().emplace_back(json::object{{"k", "x"}, {"v", i}, {"w", i}});
    o = &oi.as_object();
    p = &pi.as_object();
    e = &ei.as_object();
  }
  auto merged = apply_strategic_merge_patch(original, patch, schema);
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  EXPECT_EQ(*merged, expected);
}

TEST(StrategicMergePatch, MatchesMergeKeysNestedNearlyAHundredLevelsDeep) {
  // spec.containers[].name is at level 5; the key's value goes down to level 100.
  json::value key = "leaf";
  for (int i = 0; i < 95; ++i) key = json::object{{"a", std::move(key)}, {"n", i}};
  json::value o = {{"spec", {{"containers", {json::object{{"name", key}, {"x", 1}},
                                             json::object{{"name", "b"}}}}}}};
  json::value p = {{"spec", {{"containers", {json::object{{"name", key}, {"y", 2}}}}}}};
  json::value expected = {{"spec", {{"containers", {json::object{{"name", key}, {"x", 1}, {"y", 2}},
                                                    json::object{{"name", "b"}}}}}}};
  auto merged = apply_strategic_merge_patch(o, p, pod());
  ASSERT_TRUE(merged.has_value()) << merged.error().message;
  EXPECT_EQ(*merged, expected);
}

TEST(PatchSchema, BuiltinSchemasDeclareTheKubernetesMergeKeys) {
  EXPECT_EQ(pod().find("spec.containers")->merge_key, "name");
  EXPECT_EQ(pod().find("spec.containers[].env")->merge_key, "name");
  EXPECT_EQ(pod().find("spec.initContainers[2].ports")->merge_key, "containerPort");
  EXPECT_EQ(pod().find("spec.containers[].volumeMounts")->merge_key, "mountPath");
  EXPECT_EQ(pod().find("spec.containers[].volumeDevices")->merge_key, "devicePath");
  EXPECT_EQ(pod().find("spec.volumes")->merge_key, "name");
  EXPECT_TRUE(pod().find("spec.volumes")->retain_keys);
  EXPECT_EQ(pod().find("spec.imagePullSecrets")->merge_key, "name");
  EXPECT_EQ(pod().find("spec.hostAliases")->merge_key, "ip");
  EXPECT_EQ(pod().find("status.conditions")->merge_key, "type");
  EXPECT_EQ(pod().find("spec.tolerations"), nullptr);
  EXPECT_EQ(pod().find("metadata.finalizers")->merge_key, "");
  EXPECT_EQ(pod().find("metadata.ownerReferences")->merge_key, "uid");
  const auto& deploy = builtin_patch_schema("apps", "Deployment");
  EXPECT_EQ(deploy.find("spec.template.spec.containers[].env")->merge_key, "name");
  EXPECT_EQ(deploy.find("spec.template.metadata.finalizers")->strategy, PatchStrategy::merge);
  EXPECT_EQ(builtin_patch_schema("", "Service").find("spec.ports")->merge_key, "port");
  EXPECT_EQ(builtin_patch_schema("", "Node").find("status.addresses")->merge_key, "type");
  EXPECT_EQ(builtin_patch_schema("", "ServiceAccount").find("secrets")->merge_key, "name");
  EXPECT_EQ(builtin_patch_schema("coordination.k8s.io", "Lease").find("spec.containers"), nullptr);
  EXPECT_EQ(builtin_patch_schema("x", "Y").find("metadata.ownerReferences")->merge_key, "uid");
}

TEST(PatchSchema, CustomSchemasDriveTheMerge) {
  PatchSchema s;
  s.merge_list("items", "id").merge_list("items[].tags");
  EXPECT_EQ(smp(R"({"items":[{"id":1,"tags":["a"]}]})", R"({"items":[{"id":1,"tags":["b"]}]})", s),
            json::parse(R"({"items":[{"id":1,"tags":["b","a"]}]})"));
}

}  // namespace
}  // namespace kwatch::schema

namespace kwatch::schema {
namespace {

TEST(GoPrint, PrintsDecodedJsonAsGosPercentV) {
  auto p = [](std::string_view text) { return go_print(boost::json::parse(text)); };
  EXPECT_EQ(p(R"({"data":"x"})"), "map[data:x]");
  EXPECT_EQ(p(R"({"b":[1,"two",true,null],"a":{"z":1,"y":{}}})"),
            "map[a:map[y:map[] z:1] b:[1 two true <nil>]]");
  // float64 as %v prints it: shortest digits, %e below 1e-4 and from 1e21.
  EXPECT_EQ(p("[1.5, 0.1, 100000.5, 1e21, 1e20, 0.00001, 0.0001, -2.5e-7]"),
            "[1.5 0.1 100000.5 1e+21 100000000000000000000 1e-05 0.0001 -2.5e-07]");
}

}  // namespace
}  // namespace kwatch::schema
