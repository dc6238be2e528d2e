#include "kinds/storage_kinds.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <functional>

#include "apimachinery/merge_patch.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/builtin_columns.hpp"
#include "kind_test_support.hpp"

namespace kwatch::kinds {
namespace {

namespace json = boost::json;
using apimachinery::dns1123_subdomain_errors;
using apimachinery::go_quote;
using apimachinery::qualified_name_errors;

using testing::parse;
using testing::patched;
using testing::texts;

using Validate = std::function<void(const json::object&, const json::object*, Causes&)>;

// Each cause as "<type> <field>: <message>".
std::vector<std::string> causes_of(const Validate& validate, const json::object& obj,
                                   const json::object* old = nullptr) {
  Causes causes;
  validate(obj, old, causes);
  return texts(causes);
}

struct Case {
  std::string name;
  std::string patch;
  std::vector<std::string> causes;  // empty: valid
};

// A create of `base` patched by each case gives exactly the case's causes.
void expect_cases(const Validate& validate, const json::object& base,
                  const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    EXPECT_EQ(causes_of(validate, patched(base, c.patch)), c.causes) << c.name;
  }
}

// An update of `base` to `base` patched by each case gives exactly the case's causes.
void expect_update_cases(const Validate& validate, const json::object& base,
                         const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    EXPECT_EQ(causes_of(validate, patched(base, c.patch), &base), c.causes) << c.name;
  }
}

// Every problem kube's helper names for `value`, as causes at `field`.
std::vector<std::string> invalid_each(std::string_view field, const std::string& value,
                                      const std::vector<std::string>& problems) {
  std::vector<std::string> out;
  for (const auto& p : problems) {
    out.push_back("FieldValueInvalid " + std::string(field) +
                  ": Invalid value: " + go_quote(value) + ": " + p);
  }
  return out;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- CSINode ----

const json::object kCSINode = parse(R"({"metadata": {"name": "node-1"}, "spec": {"drivers": [
  {"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.example.com/zone"],
   "allocatable": {"count": 10}}]}})");

// A merge patch making the node's one driver {name csi.example.com, nodeID n1} with `members`
// set over it.
std::string driver(std::string_view members) {
  json::object d = parse(R"({"name": "csi.example.com", "nodeID": "n1"})");
  for (const auto& [k, v] : parse("{" + std::string(members) + "}")) d[k] = v;
  return json::serialize(json::object{{"spec", json::object{{"drivers", json::array{d}}}}});
}

TEST(CSINode, ValidationIsKubesRuleByRule) {
  const std::string long_name(64, 'a');
  const std::vector<Case> cases = {
      {"the base object", "{}", {}},
      {"no drivers", R"({"spec": {"drivers": []}})", {}},
      {"a driver without topology keys or allocatable",
       R"({"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1"}]}})",
       {}},
      {"an upper-case driver name (checked lowercased)",
       driver(R"("name": "CSI.Example.com")"),
       {}},
      {"a driver name of 63 bytes", driver(R"("name": ")" + std::string(63, 'a') + "\""), {}},
      {"no driver name", driver(R"("name": "")"),
       std::vector<std::string>{"FieldValueRequired spec.drivers[0].name: Required value"} +
           invalid_each("spec.drivers[0].name", "", dns1123_subdomain_errors(""))},
      {"a driver name of 64 bytes",
       driver(R"("name": ")" + long_name + "\""),
       {"FieldValueTooLong spec.drivers[0].name: Too long: may not be more than 63 bytes"}},
      {"a driver name that is no subdomain", driver(R"("name": "csi_driver")"),
       invalid_each("spec.drivers[0].name", "csi_driver", dns1123_subdomain_errors("csi_driver"))},
      {"no node ID",
       driver(R"("nodeID": "")"),
       {"FieldValueRequired spec.drivers[0].nodeID: Required value"}},
      {"a node ID of 256 characters", driver(R"("nodeID": ")" + std::string(256, 'n') + "\""), {}},
      {"a node ID of 257 characters",
       driver(R"("nodeID": ")" + std::string(257, 'n') + "\""),
       {"FieldValueInvalid spec.drivers[0].nodeID: Invalid value: \"" + std::string(257, 'n') +
        "\": must be 256 characters or less"}},
      {"a zero count", driver(R"("allocatable": {"count": 0})"), {}},
      {"an allocatable without count", driver(R"("allocatable": {})"), {}},
      {"a negative count",
       driver(R"("allocatable": {"count": -1})"),
       {"FieldValueInvalid spec.drivers[0].allocatable.count: Invalid value: -1: must be greater "
        "than or equal to 0"}},
      {"two drivers of one name",
       R"({"spec": {"drivers": [{"name": "a.example.com", "nodeID": "n1"},
                                 {"name": "b.example.com", "nodeID": "n1"},
                                 {"name": "a.example.com", "nodeID": "n2"}]}})",
       {"FieldValueDuplicate spec.drivers[2].name: Duplicate value: \"a.example.com\""}},
      {"an empty topology key", driver(R"("topologyKeys": [""])"),
       std::vector<std::string>{"FieldValueRequired spec.drivers[0]: Required value"} +
           invalid_each("spec.drivers[0]", "", qualified_name_errors(""))},
      {"a topology key twice",
       driver(R"("topologyKeys": ["zone", "rack", "zone"])"),
       {"FieldValueDuplicate spec.drivers[0]: Duplicate value: \"zone\""}},
      {"a topology key that is no qualified name", driver(R"("topologyKeys": ["bad key!"])"),
       invalid_each("spec.drivers[0]", "bad key!", qualified_name_errors("bad key!"))},
  };
  expect_cases(validate_csi_node, kCSINode, cases);
}

TEST(CSINode, AnExistingDriverNeverChanges) {
  const std::vector<Case> cases = {
      {"nothing changed", "{}", {}},
      {"a driver added",
       R"({"spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1",
           "topologyKeys": ["topology.example.com/zone"], "allocatable": {"count": 10}},
           {"name": "other.example.com", "nodeID": "n9"}]}})",
       {}},
      {"the driver removed", R"({"spec": {"drivers": []}})", {}},
      {"labels changed", R"({"metadata": {"labels": {"a": "b"}}})", {}},
      {"its node ID changed",
       driver(R"("nodeID": "n2", "topologyKeys": ["topology.example.com/zone"],
                                       "allocatable": {"count": 10})"),
       {"FieldValueInvalid spec.drivers: Invalid value: {\"Name\":\"csi.example.com\","
        "\"NodeID\":\"n2\",\"TopologyKeys\":[\"topology.example.com/zone\"],"
        "\"Allocatable\":{\"Count\":10}}: field is immutable"}},
      {"its count changed",
       driver(R"("topologyKeys": ["topology.example.com/zone"],
                                     "allocatable": {"count": 11})"),
       {"FieldValueInvalid spec.drivers: Invalid value: {\"Name\":\"csi.example.com\","
        "\"NodeID\":\"n1\",\"TopologyKeys\":[\"topology.example.com/zone\"],"
        "\"Allocatable\":{\"Count\":11}}: field is immutable"}},
      {"its allocatable removed",
       driver(R"("topologyKeys": ["topology.example.com/zone"])"),
       {"FieldValueInvalid spec.drivers: Invalid value: {\"Name\":\"csi.example.com\","
        "\"NodeID\":\"n1\",\"TopologyKeys\":[\"topology.example.com/zone\"],"
        "\"Allocatable\":null}: field is immutable"}},
      {"its topology keys removed",
       driver(R"("allocatable": {"count": 10})"),
       {"FieldValueInvalid spec.drivers: Invalid value: {\"Name\":\"csi.example.com\","
        "\"NodeID\":\"n1\",\"TopologyKeys\":null,\"Allocatable\":{\"Count\":10}}: field is "
        "immutable"}},
  };
  expect_update_cases(validate_csi_node, kCSINode, cases);

  // An absent list and an empty one are the same to kube's semantic equality.
  const json::object no_keys = patched(kCSINode, driver(R"("allocatable": {"count": 10})"));
  EXPECT_EQ(
      causes_of(validate_csi_node,
                patched(no_keys, driver(R"("topologyKeys": [], "allocatable": {"count": 10})")),
                &no_keys),
      std::vector<std::string>{});
}

// ---- CSIStorageCapacity ----

const json::object kCapacity = parse(R"({"metadata": {"name": "c1", "namespace": "default"},
  "storageClassName": "fast", "capacity": "10Gi", "maximumVolumeSize": "1Gi",
  "nodeTopology": {"matchLabels": {"topology.example.com/zone": "a"}}})");

TEST(CSIStorageCapacity, ValidationIsKubesRuleByRule) {
  const std::vector<Case> cases = {
      {"the base object", "{}", {}},
      {"no topology, capacity or maximum",
       R"({"nodeTopology": null, "capacity": null, "maximumVolumeSize": null})",
       {}},
      {"an empty topology", R"({"nodeTopology": {}})", {}},
      {"a zero capacity", R"({"capacity": "-0"})", {}},
      {"a negative capacity",
       R"({"capacity": "-1Gi"})",
       {"FieldValueInvalid capacity: Invalid value: \"-1Gi\": must be greater than or equal to 0"}},
      {"a negative maximum volume size (kube does not check it)",
       R"({"maximumVolumeSize": "-1Gi"})",
       {}},
      {"no storage class name", R"({"storageClassName": ""})",
       invalid_each("storageClassName", "", dns1123_subdomain_errors(""))},
      {"a storage class name that is no subdomain", R"({"storageClassName": "Fast_SC"})",
       invalid_each("storageClassName", "Fast_SC", dns1123_subdomain_errors("Fast_SC"))},
      {"a topology label value that is wrong",
       R"({"nodeTopology": {"matchLabels": {"zone": "a b"}}})",
       {"FieldValueInvalid nodeTopology.matchLabels: Invalid value: \"a b\": " +
        apimachinery::label_value_errors("a b").at(0)}},
      {"an unknown operator",
       R"({"nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "Near"}]}})",
       {"FieldValueInvalid nodeTopology.matchExpressions[0].operator: Invalid value: \"Near\": "
        "not a valid selector operator"}},
      {"an expression value that is wrong",
       R"({"nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "In",
                                                  "values": ["a b"]}]}})",
       {"FieldValueInvalid nodeTopology.matchExpressions[0].values[0]: Invalid value: \"a b\": " +
        apimachinery::label_value_errors("a b").at(0)}},
  };
  expect_cases(validate_csi_storage_capacity, kCapacity, cases);
}

TEST(CSIStorageCapacity, TopologyAndClassAreFixedOnceWritten) {
  const std::vector<Case> cases = {
      {"the capacity changed", R"({"capacity": "5Gi", "maximumVolumeSize": "2Gi"})", {}},
      {"the class changed",
       R"({"storageClassName": "slow"})",
       {"FieldValueInvalid storageClassName: Invalid value: \"slow\": field is immutable"}},
      {"the topology changed",
       R"({"nodeTopology": {"matchLabels": {"topology.example.com/zone": "b"},
           "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]},
                                {"key": "row", "operator": "Exists"}]}})",
       {"FieldValueInvalid nodeTopology: Invalid value: {\"matchLabels\":"
        "{\"topology.example.com/zone\":\"b\"},\"matchExpressions\":[{\"key\":\"rack\","
        "\"operator\":\"In\",\"values\":[\"r1\"]},{\"key\":\"row\",\"operator\":\"Exists\"}]}: "
        "field is immutable"}},
      {"the topology removed",
       R"({"nodeTopology": null})",
       {"FieldValueInvalid nodeTopology: Invalid value: null: field is immutable"}},
  };
  expect_update_cases(validate_csi_storage_capacity, kCapacity, cases);

  // An update keeps expression values its old selector already had wrong; a selector that was
  // right may not take them.
  const json::object bad_value = patched(kCapacity, R"({"nodeTopology": {"matchExpressions": [
      {"key": "zone", "operator": "In", "values": ["a b"]}]}})");
  EXPECT_EQ(causes_of(validate_csi_storage_capacity, patched(bad_value, R"({"capacity": "1Gi"})"),
                      &bad_value),
            std::vector<std::string>{});
  EXPECT_EQ(causes_of(validate_csi_storage_capacity, bad_value, &kCapacity).size(), 2u);
}

// ---- VolumeAttributesClass ----

const json::object kClass = parse(R"({"metadata": {"name": "gold"},
  "driverName": "csi.example.com", "parameters": {"iops": "1000"}})");

TEST(VolumeAttributesClass, ValidationIsKubesRuleByRule) {
  json::object limit;
  for (int i = 0; i < 512; ++i) limit["k" + std::to_string(i)] = "v";
  json::object many = limit;
  many[""] = "v";  // past the limit, an empty key is not reported
  json::object large;
  large["big"] = std::string(kMaxParametersSize, 'x');
  json::object at_limit;
  at_limit["big"] = std::string(kMaxParametersSize - 3, 'x');
  expect_cases(
      validate_volume_attributes_class, kClass,
      {
          {"the base object", "{}", {}},
          {"an upper-case driver name (checked lowercased)",
           R"({"driverName": "CSI.Example.com"})",
           {}},
          {"no driver name",
           R"({"driverName": ""})",
           {"FieldValueRequired driverName: Required value"}},
          {"a driver name that is no qualified name (shown lowercased)",
           R"({"driverName": "Bad Driver!"})",
           invalid_each("driverName", "bad driver!", qualified_name_errors("bad driver!"))},
      });
  // The parameters' cases start from a class without any (a merge patch would add to them).
  json::object bare = kClass;
  bare.erase("parameters");
  expect_cases(validate_volume_attributes_class, bare,
               {
                   {"no parameters",
                    "{}",
                    {"FieldValueRequired parameters: Required value: must contain at least one "
                     "key/value pair"}},
                   {"empty parameters",
                    R"({"parameters": {}})",
                    {"FieldValueRequired parameters: Required value: must contain at least one "
                     "key/value pair"}},
                   {"an empty key",
                    R"({"parameters": {"": "x"}})",
                    {"FieldValueInvalid parameters: Invalid value: \"\": field can not be empty."}},
                   {"512 parameters", R"({"parameters": )" + json::serialize(limit) + "}", {}},
                   {"513 parameters (nothing else is checked then)",
                    R"({"parameters": )" + json::serialize(many) + "}",
                    {"FieldValueTooLong parameters: Too long: may not be more than 512 bytes"}},
                   {"256 KiB of keys and values",
                    R"({"parameters": )" + json::serialize(at_limit) + "}",
                    {}},
                   {"more than 256 KiB",
                    R"({"parameters": )" + json::serialize(large) + "}",
                    {"FieldValueTooLong parameters: Too long: may not be more than 262144 bytes"}},
               });
}

TEST(VolumeAttributesClass, DriverAndParametersAreFixedOnceWritten) {
  const std::vector<Case> cases = {
      {"labels changed", R"({"metadata": {"labels": {"tier": "gold"}}})", {}},
      {"the driver changed",
       R"({"driverName": "other.example.com"})",
       {"FieldValueForbidden driverName: Forbidden: updates to driverName are forbidden."}},
      {"a parameter changed",
       R"({"parameters": {"iops": "2000"}})",
       {"FieldValueForbidden parameters: Forbidden: updates to parameters are forbidden."}},
      {"a parameter added",
       R"({"parameters": {"throughput": "50"}})",
       {"FieldValueForbidden parameters: Forbidden: updates to parameters are forbidden."}},
      {"the driver emptied",
       R"({"driverName": ""})",
       {"FieldValueForbidden driverName: Forbidden: updates to driverName are forbidden.",
        "FieldValueRequired driverName: Required value"}},
  };
  expect_update_cases(validate_volume_attributes_class, kClass, cases);
}

// ---- columns ----

json::value cell(std::string_view kind, std::string_view column, const json::object& obj) {
  for (const auto& c : builtin_columns("storage.k8s.io", kind)) {
    if (c.name != column) continue;
    if (c.cell) return c.cell(obj, std::chrono::system_clock::now());
    return json::value(c.json_path);
  }
  return json::value("no such column");
}

std::vector<std::string> column_names(std::string_view kind) {
  std::vector<std::string> names;
  for (const auto& c : builtin_columns("storage.k8s.io", kind)) names.push_back(c.name);
  return names;
}

TEST(StorageColumns, AsKubePrintsThem) {
  EXPECT_EQ(column_names("CSINode"), (std::vector<std::string>{"Name", "Drivers", "Age"}));
  // kube's storage of CSIStorageCapacity serves the default table, not its printer's columns.
  EXPECT_EQ(column_names("CSIStorageCapacity"), (std::vector<std::string>{"Name", "Created At"}));
  EXPECT_EQ(column_names("VolumeAttributesClass"),
            (std::vector<std::string>{"Name", "DriverName", "Age"}));

  EXPECT_EQ(cell("CSINode", "Drivers", kCSINode), 1);
  EXPECT_EQ(cell("CSINode", "Drivers", patched(kCSINode, R"({"spec": {"drivers": []}})")), 0);
  EXPECT_EQ(cell("CSIStorageCapacity", "Created At", kCapacity), ".metadata.creationTimestamp");
  EXPECT_EQ(cell("VolumeAttributesClass", "DriverName", kClass), ".driverName");
}

}  // namespace
}  // namespace kwatch::kinds
