#include "kinds/dynamic_resources.hpp"

#include "apimachinery/merge_patch.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/builtin_columns.hpp"
#include "kind_test_support.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

using testing::parse;
using testing::patched;
using testing::texts;

using Defaults = std::function<void(json::object&)>;
using Validate = std::function<void(const json::object&, const json::object*, Causes&)>;

// Each cause as "<type> <field>: <message>", after the kind's defaults (as the server runs them).
std::vector<std::string> causes_of(json::object obj, const Defaults& defaults,
                                   const Validate& validate, const json::object* old = nullptr) {
  defaults(obj);
  Causes causes;
  validate(obj, old, causes);
  return texts(causes);
}

// A /status write of `claim` over `old`, both defaulted.
std::vector<std::string> status_causes(json::object claim, json::object old) {
  default_resource_claim(claim);
  default_resource_claim(old);
  Causes causes;
  validate_resource_claim(claim, &old, causes);
  validate_resource_claim_update_path(claim, old, "status", causes);
  return texts(causes);
}

struct Case {
  std::string name;
  std::string patch;
  std::vector<std::string> causes;  // empty: valid
};

// Cases whose causes must begin with the given texts (compile errors carry the CEL parser's text).
bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

const std::string kSubdomain = apimachinery::dns1123_subdomain_errors("Bad_Name").at(0);
const std::string kLabel = apimachinery::dns1123_label_errors("Bad_Name").at(0);
constexpr std::string_view kRequestRef =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";
constexpr std::string_view kCIdentifier =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";

const json::object kClaim = parse(R"({"metadata": {"name": "c", "namespace": "ns"},
  "spec": {"devices": {"requests": [{"name": "gpu",
    "exactly": {"deviceClassName": "gpu.example.com"}}]}}})");

// A merge patch replacing the claim's requests.
std::string requests(std::string_view list) {
  return R"({"spec": {"devices": {"requests": )" + std::string(list) + "}}}";
}

std::string exactly(std::string_view members) {
  return requests(R"([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", )" +
                  std::string(members) + "}}]");
}

std::string devices(std::string_view members) {
  return R"({"spec": {"devices": {"requests": [{"name": "gpu", "exactly":
    {"deviceClassName": "gpu.example.com"}}, {"name": "nic", "firstAvailable": [
    {"name": "fast", "deviceClassName": "nic.example.com"}]}], )" + std::string(members) + "}}}";
}

std::string many(std::string_view item, std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += item;
  }
  return out + "]";
}

std::string named_requests(std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += R"({"name": "r)" + std::to_string(i) +
           R"(", "exactly": {"deviceClassName": "gpu.example.com"}})";
  }
  return out + "]";
}

void expect_cases(const json::object& base, const std::vector<Case>& cases,
                  const Defaults& defaults, const Validate& validate) {
  for (const Case& c : cases) {
    EXPECT_EQ(causes_of(patched(base, c.patch), defaults, validate), c.causes) << c.name;
  }
}

TEST(ResourceClaim, DefaultsAreV1s) {
  json::object claim = patched(kClaim, devices(R"("constraints": [{"requests": ["gpu"],
    "matchAttribute": "gpu.example.com/model", "distinctAttribute": "gpu.example.com/id"}])"));
  json::object& spec = claim["spec"].as_object()["devices"].as_object();
  spec["requests"].as_array()[0].as_object()["exactly"].as_object()["tolerations"] =
      json::array{json::object{{"key", "k"}}};
  spec["requests"].as_array()[0].as_object()["exactly"].as_object()["capacity"] =
      json::object{{"requests", json::object{{"memory", "1Gi"}}}};
  default_resource_claim(claim);
  const auto& requests = claim.at("spec").at("devices").at("requests").as_array();
  EXPECT_EQ(requests[0].at("exactly"),
            json::parse(R"({"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                            "count": 1})"))
      << "tolerations and capacity are features kube 1.34 leaves off";
  EXPECT_EQ(requests[1].at("firstAvailable").at(0),
            json::parse(R"({"name": "fast", "deviceClassName": "nic.example.com",
                            "allocationMode": "ExactCount", "count": 1})"));
  EXPECT_EQ(claim.at("spec").at("devices").at("constraints").at(0),
            json::parse(R"({"requests": ["gpu"], "matchAttribute": "gpu.example.com/model"})"));

  json::object all = patched(kClaim, exactly(R"("allocationMode": "All")"));
  default_resource_claim(all);
  EXPECT_EQ(all.at("spec").at("devices").at("requests").at(0).at("exactly"),
            json::parse(R"({"deviceClassName": "gpu.example.com", "allocationMode": "All"})"));
  json::object three = patched(kClaim, exactly(R"("count": 3)"));
  default_resource_claim(three);
  EXPECT_EQ(three.at("spec").at("devices").at("requests").at(0).at("exactly").at("count"), 3);

  json::object status = patched(kClaim, R"({"status": {"allocation": {
    "allocationTimestamp": "2025-01-01T00:00:00Z", "devices": {"results": [
      {"request": "gpu", "driver": "d.example.com", "pool": "p", "device": "g0",
       "shareID": "u", "consumedCapacity": {"memory": "1Gi"}, "bindingConditions": ["a"],
       "bindingFailureConditions": ["b"], "tolerations": [{"operator": "Exists"}]}]}},
    "devices": [{"driver": "d.example.com", "pool": "p", "device": "g0", "shareID": "u"}]}})");
  default_resource_claim(status);
  EXPECT_EQ(status.at("status"), json::parse(R"({"allocation": {"devices": {"results": [
      {"request": "gpu", "driver": "d.example.com", "pool": "p", "device": "g0"}]}},
    "devices": [{"driver": "d.example.com", "pool": "p", "device": "g0"}]})"));
}

TEST(ResourceClaim, ValidationIsKubesRuleByRule) {
  const std::string long_text(10241, 'x');
  const std::string long_driver(64, 'a');
  const std::vector<Case> cases = {
      {"the base claim", "{}", {}},
      {"several requests, constraints and config",
       devices(R"("constraints": [{"requests": ["gpu", "nic/fast"],
                   "matchAttribute": "gpu.example.com/numa"}],
                  "config": [{"requests": ["nic"], "opaque": {"driver": "nic.example.com",
                    "parameters": {"mtu": 9000}}}])"),
       {}},
      {"a request name that is no label", requests(R"([{"name": "Bad_Name",
         "exactly": {"deviceClassName": "gpu.example.com"}}])"),
       {"FieldValueInvalid spec.devices.requests[0].name: Invalid value: \"Bad_Name\": " + kLabel}},
      {"neither exactly nor firstAvailable", requests(R"([{"name": "gpu"}])"),
       {"FieldValueRequired spec.devices.requests[0]: Required value: exactly one of `exactly` or "
        "`firstAvailable` is required"}},
      {"both exactly and firstAvailable", requests(R"([{"name": "gpu",
         "exactly": {"deviceClassName": "gpu.example.com"},
         "firstAvailable": [{"name": "a", "deviceClassName": "gpu.example.com"}]}])"),
       {"FieldValueInvalid spec.devices.requests[0]: Invalid value: null: exactly one of "
        "`exactly` or `firstAvailable` is required, but multiple fields are set"}},
      {"a request name twice", requests(R"([
         {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
         {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}])"),
       {"FieldValueDuplicate spec.devices.requests[1]: Duplicate value: \"gpu\""}},
      {"32 requests", requests(named_requests(32)), {}},
      {"33 requests", requests(named_requests(33)),
       {"FieldValueTooMany spec.devices.requests: Too many: 33: must have at most 32 items"}},
      {"no device class", requests(R"([{"name": "gpu", "exactly": {"deviceClassName": ""}}])"),
       {"FieldValueRequired spec.devices.requests[0].exactly.deviceClassName: Required value"}},
      {"a device class name that is no subdomain",
       requests(R"([{"name": "gpu", "exactly": {"deviceClassName": "Bad_Name"}}])"),
       {"FieldValueInvalid spec.devices.requests[0].exactly.deviceClassName: Invalid value: "
        "\"Bad_Name\": " + kSubdomain}},
      {"All with a count", exactly(R"("allocationMode": "All", "count": 2)"),
       {"FieldValueInvalid spec.devices.requests[0].exactly.count: Invalid value: 2: must not be "
        "specified when allocationMode is 'All'"}},
      {"All without a count", exactly(R"("allocationMode": "All")"), {}},
      {"a negative count", exactly(R"("count": -1)"),
       {"FieldValueInvalid spec.devices.requests[0].exactly.count: Invalid value: -1: must be "
        "greater than zero"}},
      {"an unknown allocation mode", exactly(R"("allocationMode": "Some")"),
       {"FieldValueNotSupported spec.devices.requests[0].exactly.allocationMode: Unsupported "
        "value: \"Some\": supported values: \"All\", \"ExactCount\""}},
      {"a selector without cel", exactly(R"("selectors": [{}])"),
       {"FieldValueRequired spec.devices.requests[0].exactly.selectors[0].cel: Required value"}},
      {"a selector on attributes and capacity", exactly(R"("selectors": [{"cel": {"expression":
         "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model == 'a100' && device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}])"),
       {}},
      {"a selector giving a string", exactly(R"("selectors": [{"cel": {"expression": "device.driver"}}])"),
       {"FieldValueInvalid spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid "
        "value: \"device.driver\": must evaluate to bool or the unknown type, not string"}},
      {"a selector too long", exactly(R"("selectors": [{"cel": {"expression": ")" + long_text +
                                      R"("}}])"),
       {"FieldValueTooLong spec.devices.requests[0].exactly.selectors[0].cel.expression: Too "
        "long: may not be more than 10240 bytes"}},
      {"33 selectors", exactly(R"("selectors": )" +
                               many(R"({"cel": {"expression": "true"}})", 33)),
       {"FieldValueTooMany spec.devices.requests[0].exactly.selectors: Too many: 33: must have at "
        "most 32 items"}},
      {"a selector over kube's cost limit", exactly(R"j("selectors": [{"cel": {"expression":
         "device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, device.attributes.all(e, a == e)))))"}}])j"),
       {"FieldValueForbidden spec.devices.requests[0].exactly.selectors[0].cel.expression: "
        "Forbidden: too complex, exceeds cost limit"}},
      {"selectors within kube's bounds (driver 63 bytes, attribute values 64)",
       exactly(R"j("selectors": [{"cel": {"expression":
         "device.attributes['gpu.example.com'].model.matches('a1.*') && device.attributes['gpu.example.com'].vendor == device.driver"}}])j"),
       {}},
      {"a cheap comprehension", exactly(R"j("selectors": [{"cel": {"expression":
         "device.attributes.all(a, device.attributes.exists(b, b == 'gpu.example.com'))"}}])j"),
       {}},
      {"nine subrequests", requests(R"([{"name": "gpu", "firstAvailable": )" +
                                    many(R"({"name": "a", "deviceClassName": "c"})", 9) + "}]"),
       {"FieldValueTooMany spec.devices.requests[0].firstAvailable: Too many: 9: must have at most "
        "8 items"}},
      {"subrequests checked as requests", requests(R"([{"name": "gpu", "firstAvailable": [
         {"name": "a", "deviceClassName": "", "count": -2},
         {"name": "a", "deviceClassName": "c", "selectors": [{}]}]}])"),
       {"FieldValueRequired spec.devices.requests[0].firstAvailable[0].deviceClassName: Required "
        "value",
        "FieldValueInvalid spec.devices.requests[0].firstAvailable[0].count: Invalid value: -2: "
        "must be greater than zero",
        "FieldValueRequired spec.devices.requests[0].firstAvailable[1].selectors[0].cel: Required "
        "value",
        "FieldValueDuplicate spec.devices.requests[0].firstAvailable[1]: Duplicate value: \"a\""}},
      {"a constraint without attribute", devices(R"("constraints": [{"requests": ["gpu"]}])"),
       {"FieldValueRequired spec.devices.constraints[0].matchAttribute: Required value"}},
      {"a constraint on an unqualified attribute",
       devices(R"("constraints": [{"matchAttribute": "model"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: \"model\": "
        "a fully qualified name must be a domain and a name separated by a slash"}},
      {"a constraint's attribute without name or domain",
       devices(R"("constraints": [{"matchAttribute": "/"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: \"\": the "
        "domain must not be empty",
        "FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: \"\": the "
        "name must not be empty"}},
      {"a constraint's attribute with two slashes",
       devices(R"("constraints": [{"matchAttribute": "a.example.com/b/c"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: "
        "\"a.example.com/b/c\": must not contain more than one slash"}},
      {"a constraint's attribute in a bad domain",
       devices(R"("constraints": [{"matchAttribute": "Bad_Name/model"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: "
        "\"Bad_Name\": " + apimachinery::dns1123_subdomain_errors("bad_name").at(0)}},
      {"a constraint's attribute that is no C identifier",
       devices(R"("constraints": [{"matchAttribute": "gpu.example.com/a-b"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].matchAttribute: Invalid value: \"a-b\": " +
        std::string(kCIdentifier)}},
      {"a constraint naming unknown requests", devices(R"("constraints": [{"requests":
         ["cpu", "nic/slow", "a/b/c", "gpu", "gpu"], "matchAttribute": "gpu.example.com/numa"}])"),
       {"FieldValueInvalid spec.devices.constraints[0].requests[0]: Invalid value: \"cpu\": " +
            std::string(kRequestRef),
        "FieldValueInvalid spec.devices.constraints[0].requests[1]: Invalid value: \"nic/slow\": " +
            std::string(kRequestRef),
        "FieldValueInvalid spec.devices.constraints[0].requests[2]: Invalid value: \"a/b/c\": " +
            std::string(kRequestRef),
        "FieldValueDuplicate spec.devices.constraints[0].requests[4]: Duplicate value: \"gpu\""}},
      {"33 constraints", devices(R"("constraints": )" +
                                 many(R"({"matchAttribute": "gpu.example.com/numa"})", 33)),
       {"FieldValueTooMany spec.devices.constraints: Too many: 33: must have at most 32 items"}},
      {"a config without opaque", devices(R"("config": [{}])"),
       {"FieldValueRequired spec.devices.config[0].opaque: Required value"}},
      {"opaque config checked", devices(R"("config": [
         {"opaque": {"driver": "", "parameters": [1]}},
         {"opaque": {"driver": ")" + long_driver + R"("}},
         {"opaque": {"driver": "d.example.com", "parameters": {"x": ")" + long_text + R"("}}}])"),
       {"FieldValueRequired spec.devices.config[0].opaque.driver: Required value",
        "FieldValueInvalid spec.devices.config[0].opaque.driver: Invalid value: \"\": " +
            apimachinery::dns1123_subdomain_errors("").at(0),
        "FieldValueInvalid spec.devices.config[0].opaque.parameters: Invalid value: \"<value "
        "omitted>\": must be a valid JSON object",
        "FieldValueTooLong spec.devices.config[1].opaque.driver: Too long: may not be more than "
        "63 bytes",
        "FieldValueRequired spec.devices.config[1].opaque.parameters: Required value",
        "FieldValueTooLong spec.devices.config[2].opaque.parameters: Too long: may not be more "
        "than 10240 bytes"}},
      {"a config naming an unknown request",
       devices(R"("config": [{"requests": ["cpu"], "opaque": {"driver": "d.example.com",
                   "parameters": {}}}])"),
       {"FieldValueInvalid spec.devices.config[0].requests[0]: Invalid value: \"cpu\": " +
        std::string(kRequestRef)}},
      {"33 configs", devices(R"("config": )" +
                             many(R"({"opaque": {"driver": "d.example.com", "parameters": {}}})",
                                  33)),
       {"FieldValueTooMany spec.devices.config: Too many: 33: must have at most 32 items"}},
  };
  expect_cases(kClaim, cases, default_resource_claim, validate_resource_claim);
}

TEST(ResourceClaim, SelectorsThatDoNotCompileSayWhy) {
  for (const auto& [expression, wanted] :
       std::vector<std::pair<std::string, std::string>>{
           {"device.driver ==", "compilation failed: ERROR: <input>:1:"},
           {"foo == 'x'", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo'"},
           {"", "compilation failed: ERROR: <input>:1:1:"}}) {
    Causes causes;
    validate_device_selector_expression(expression, "x", causes);
    ASSERT_EQ(causes.size(), 1u) << expression;
    EXPECT_EQ(causes[0].type, "FieldValueInvalid");
    EXPECT_TRUE(starts_with(causes[0].message,
                            "Invalid value: " + apimachinery::go_quote(expression) + ": " + wanted))
        << causes[0].message;
  }
}

// An update of the claim (not /status), as the server runs the hooks.
std::vector<std::string> update_causes(json::object claim, json::object old) {
  default_resource_claim(claim);
  default_resource_claim(old);
  Causes causes;
  validate_resource_claim(claim, &old, causes);
  validate_resource_claim_update_path(claim, old, "", causes);
  return texts(causes);
}

TEST(ResourceClaim, SpecIsImmutable) {
  const json::object old = kClaim;
  EXPECT_EQ(update_causes(patched(kClaim, R"({"metadata": {"labels": {"a": "b"}}})"), old),
            std::vector<std::string>{});
  EXPECT_EQ(update_causes(patched(kClaim, exactly(R"("count": 2)")), old),
            std::vector<std::string>{
                "FieldValueInvalid spec: Invalid value: {\"Devices\":{\"Requests\":[{\"Name\":"
                "\"gpu\",\"Exactly\":{\"DeviceClassName\":\"gpu.example.com\",\"Selectors\":null,"
                "\"AllocationMode\":\"ExactCount\",\"Count\":2,\"AdminAccess\":null,"
                "\"Tolerations\":null,\"Capacity\":null},\"FirstAvailable\":null}],"
                "\"Constraints\":null,\"Config\":null}}: field is immutable"});
  // kube validates the whole claim again on update, not on a /status write.
  const json::object bad = patched(kClaim, exactly(R"("count": -1)"));
  const std::vector<std::string> count = {
      "FieldValueInvalid spec.devices.requests[0].exactly.count: Invalid value: -1: must be "
      "greater than zero"};
  EXPECT_EQ(update_causes(patched(bad, R"({"metadata": {"labels": {"a": "b"}}})"), bad), count);
  EXPECT_EQ(status_causes(patched(bad, R"({"status": {"reservedFor": []}})"), bad),
            std::vector<std::string>{});
}

const json::object kAllocated = patched(kClaim, R"({"status": {"allocation": {"devices": {
  "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "g0"}],
  "config": [{"source": "FromClass", "opaque": {"driver": "gpu.example.com", "parameters": {}}}]},
  "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
    "operator": "In", "values": ["node-1"]}]}]}}}})");

std::string reserved(std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += R"({"resource": "pods", "name": "p", "uid": "u)" + std::to_string(i) + R"("})";
  }
  return out + "]";
}

std::string status_device(std::string_view members) {
  return R"({"status": {"devices": [{"driver": "gpu.example.com", "pool": "node-1",
    "device": "g0", )" + std::string(members) + "}]}}";
}

std::string conditions(std::size_t n) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += R"({"type": "T)" + std::to_string(i) +
           R"(", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"})";
  }
  return out + "]";
}

TEST(ResourceClaim, StatusRulesAreKubes) {
  const json::object pending = kClaim;
  const auto status = [&](const json::object& base, std::string_view patch) {
    return status_causes(patched(base, patch), base);
  };
  EXPECT_EQ(status_causes(kAllocated, pending), std::vector<std::string>{});
  EXPECT_EQ(status(kAllocated, R"({"status": {"reservedFor": )" + reserved(256) + "}}"),
            std::vector<std::string>{});
  EXPECT_EQ(status(kAllocated, R"({"status": {"reservedFor": )" + reserved(257) + "}}"),
            std::vector<std::string>{
                "FieldValueTooMany status.reservedFor: Too many: 257: must have at most 256 items"});
  EXPECT_EQ(status(pending, R"({"status": {"reservedFor": )" + reserved(1) + "}}"),
            std::vector<std::string>{"FieldValueForbidden status.reservedFor: Forbidden: may not "
                                     "be specified when `allocated` is not set"});
  EXPECT_EQ(status(kAllocated, R"({"status": {"reservedFor": [{"resource": "", "name": "",
              "uid": ""}, {"resource": "pods", "name": "p", "uid": ""}]}})"),
            (std::vector<std::string>{
                "FieldValueRequired status.reservedFor[0].resource: Required value",
                "FieldValueRequired status.reservedFor[0].name: Required value",
                "FieldValueRequired status.reservedFor[0].uid: Required value",
                "FieldValueRequired status.reservedFor[1].uid: Required value",
                "FieldValueDuplicate status.reservedFor[1]: Duplicate value: \"\""}));

  // A claim being deleted may lose consumers, not gain them.
  json::object deleting = patched(kAllocated, R"({"metadata": {"deletionTimestamp":
    "2025-01-01T00:00:00Z"}, "status": {"reservedFor": )" + reserved(1) + "}}");
  EXPECT_EQ(status(deleting, R"({"status": {"reservedFor": []}})"), std::vector<std::string>{});
  EXPECT_EQ(status(deleting, R"({"status": {"reservedFor": )" + reserved(2) + "}}"),
            std::vector<std::string>{
                "FieldValueForbidden status.reservedFor: Forbidden: new entries may not be added "
                "while `deallocationRequested` or `deletionTimestamp` are set"});

  // The allocation is written once.
  EXPECT_EQ(status(kAllocated, R"({"status": {"allocation": null}})"), std::vector<std::string>{});
  const auto changed = status(kAllocated, R"({"status": {"allocation": {"nodeSelector": null}}})");
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0],
            "FieldValueInvalid status.allocation: Invalid value: {\"Devices\":{\"Results\":[{"
            "\"Request\":\"gpu\",\"Driver\":\"gpu.example.com\",\"Pool\":\"node-1\",\"Device\":"
            "\"g0\",\"AdminAccess\":null,\"Tolerations\":null,\"BindingConditions\":null,"
            "\"BindingFailureConditions\":null,\"ShareID\":null,\"ConsumedCapacity\":null}],"
            "\"Config\":[{\"Source\":\"FromClass\",\"Requests\":null,\"Opaque\":{\"Driver\":"
            "\"gpu.example.com\",\"Parameters\":{}}}]},\"NodeSelector\":null,"
            "\"AllocationTimestamp\":null}: field is immutable");

  // A new allocation is checked.
  EXPECT_EQ(status(pending, R"({"status": {"allocation": {"devices": {"results": [
              {"request": "cpu", "driver": "Bad_Name", "pool": "", "device": "Bad_Name"}],
              "config": [{"source": "", "opaque": {"driver": "d.example.com", "parameters": {}}},
                         {"source": "Other", "requests": ["gpu"],
                          "opaque": {"driver": "d.example.com", "parameters": {}}}]},
              "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "Foo"}, {"key": "zone", "operator": "In"}]}]}}}})"),
            (std::vector<std::string>{
                "FieldValueInvalid status.allocation.devices.results[0].request: Invalid value: "
                "\"cpu\": " + std::string(kRequestRef),
                "FieldValueInvalid status.allocation.devices.results[0].driver: Invalid value: "
                "\"Bad_Name\": " + apimachinery::dns1123_subdomain_errors("bad_name").at(0),
                "FieldValueRequired status.allocation.devices.results[0].pool: Required value",
                "FieldValueInvalid status.allocation.devices.results[0].device: Invalid value: "
                "\"Bad_Name\": " + kLabel,
                "FieldValueRequired status.allocation.devices.config[0].source: Required value",
                "FieldValueNotSupported status.allocation.devices.config[1].source: Unsupported "
                "value: \"Other\": supported values: \"FromClaim\", \"FromClass\"",
                "FieldValueInvalid status.allocation.nodeSelector.nodeSelectorTerms[0]."
                "matchExpressions[0].operator: Invalid value: \"Foo\": not a valid selector "
                "operator",
                "FieldValueRequired status.allocation.nodeSelector.nodeSelectorTerms[0]."
                "matchExpressions[1].values: Required value: must be specified when `operator` is "
                "'In' or 'NotIn'"}));
  EXPECT_EQ(status(pending, R"({"status": {"allocation": {"nodeSelector":
              {"nodeSelectorTerms": []}}}})"),
            std::vector<std::string>{
                "FieldValueRequired status.allocation.nodeSelector.nodeSelectorTerms: Required "
                "value: must have at least one node selector term"});
  EXPECT_EQ(status(pending, R"({"status": {"allocation": {"nodeSelector":
              {"nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In",
                "values": ["a", "b"]}]}]}}}})"),
            (std::vector<std::string>{
                "FieldValueRequired status.allocation.nodeSelector.nodeSelectorTerms[0]."
                "matchFields[0].values: Required value: must be only one value when `operator` "
                "is 'In' or 'NotIn' for node field selector",
                "FieldValueInvalid status.allocation.nodeSelector.nodeSelectorTerms[0]."
                "matchFields[0].key: Invalid value: \"spec.x\": not a valid field selector key"}));
  EXPECT_EQ(status(pending, R"({"status": {"allocation": {"devices": {"results": )" +
                                many(R"({"request": "gpu", "driver": "d.example.com",
                                         "pool": "p", "device": "d"})", 33) +
                                "}}}}"),
            std::vector<std::string>{"FieldValueTooMany status.allocation.devices.results: Too "
                                     "many: 33: must have at most 32 items"});
}

TEST(ResourceClaim, DeviceStatusesAreKubes) {
  const auto status = [&](std::string_view patch) {
    return status_causes(patched(kAllocated, patch), kAllocated);
  };
  EXPECT_EQ(status(status_device(R"("conditions": )" + conditions(8) + R"(, "data": {"a": 1},
              "networkData": {"interfaceName": "eth0", "ips": ["10.0.0.1/24", "2001:db8::1/64"],
                              "hardwareAddress": "aa:bb"})")),
            std::vector<std::string>{});
  EXPECT_EQ(status(R"({"status": {"devices": [{"driver": "gpu.example.com", "pool": "node-1",
              "device": "g1"}, {"driver": "gpu.example.com", "pool": "node-1", "device": "g0"},
              {"driver": "gpu.example.com", "pool": "node-1", "device": "g0"}]}})"),
            (std::vector<std::string>{
                "FieldValueInvalid status.devices[0]: Invalid value: \"gpu.example.com/node-1/g1\": "
                "must be an allocated device in the claim",
                "FieldValueDuplicate status.devices[2]: Duplicate value: "
                "\"gpu.example.com/node-1/g0\""}));
  EXPECT_EQ(status(status_device(R"("conditions": )" + conditions(9))),
            std::vector<std::string>{"FieldValueTooMany status.devices[0].conditions: Too many: "
                                     "9: must have at most 8 items"});
  EXPECT_EQ(status(status_device(R"("conditions": [{"type": "Bad Type", "status": "Maybe",
              "observedGeneration": -1, "reason": "", "message": "", "lastTransitionTime": ""},
              {"type": "Ready", "status": "True", "reason": "not-ok", "message": "",
               "lastTransitionTime": "2025-01-01T00:00:00Z"}])")),
            (std::vector<std::string>{
                "FieldValueInvalid status.devices[0].conditions[0].type: Invalid value: \"Bad "
                "Type\": " + apimachinery::qualified_name_errors("Bad Type").at(0),
                "FieldValueNotSupported status.devices[0].conditions[0].status: Unsupported "
                "value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "FieldValueInvalid status.devices[0].conditions[0].observedGeneration: Invalid "
                "value: -1: must be greater than or equal to zero",
                "FieldValueRequired status.devices[0].conditions[0].lastTransitionTime: Required "
                "value: must be set",
                "FieldValueRequired status.devices[0].conditions[0].reason: Required value: must "
                "be set",
                "FieldValueInvalid status.devices[0].conditions[1].reason: Invalid value: "
                "\"not-ok\": a condition reason must start with alphabetic character, optionally "
                "followed by a string of alphanumeric characters or '_,:', and must end with an "
                "alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or "
                "'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
                "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"}));
  EXPECT_EQ(status(status_device(R"("data": [1], "networkData": {"interfaceName": ")" +
                                 std::string(257, 'e') + R"(", "hardwareAddress": ")" +
                                 std::string(129, 'a') + R"(", "ips": ["10.0.0.1", "10.0.0.1"]})")),
            (std::vector<std::string>{
                "FieldValueInvalid status.devices[0].data: Invalid value: \"<value omitted>\": "
                "must be a valid JSON object",
                "FieldValueTooLong status.devices[0].networkData.interfaceName: Too long: may not "
                "be more than 256 bytes",
                "FieldValueTooLong status.devices[0].networkData.hardwareAddress: Too long: may "
                "not be more than 128 bytes",
                "FieldValueInvalid status.devices[0].networkData.ips[0]: Invalid value: "
                "\"10.0.0.1\": must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or "
                "2001:db8::1/64)",
                "FieldValueInvalid status.devices[0].networkData.ips[1]: Invalid value: "
                "\"10.0.0.1\": must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or "
                "2001:db8::1/64)",
                "FieldValueDuplicate status.devices[0].networkData.ips[1]: Duplicate value: "
                "\"10.0.0.1\""}));
}

TEST(ResourceClaim, StatusWritesDropDevicesNoLongerAllocated) {
  json::object old = patched(kAllocated, status_device("\"conditions\": []"));
  json::object deallocated = patched(old, R"({"status": {"allocation": null}})");
  keep_resource_claim_owned_fields(deallocated, old, "status");
  EXPECT_EQ(deallocated.at("status"), json::object{});
  json::object kept = old;
  keep_resource_claim_owned_fields(kept, old, "status");
  EXPECT_EQ(kept, old);
  json::object main = deallocated = patched(old, R"({"status": {"allocation": null}})");
  keep_resource_claim_owned_fields(main, old, "");
  EXPECT_EQ(main, deallocated) << "only /status writes it";
}

TEST(ResourceClaim, AdminAccessIsAskedWhereKubeLooksForIt) {
  const json::object admin = patched(kClaim, requests(R"([
    {"name": "a", "exactly": {"deviceClassName": "c", "adminAccess": false}},
    {"name": "b", "exactly": {"deviceClassName": "c", "adminAccess": true}}])"));
  EXPECT_EQ(admin_access_field(admin, "ResourceClaim", nullptr, ""),
            "spec.devices.requests[1].exactly.adminAccess");
  EXPECT_EQ(admin_access_field(kClaim, "ResourceClaim", nullptr, ""), std::nullopt);
  EXPECT_EQ(admin_access_field(admin, "ResourceClaim", &admin, ""), std::nullopt)
      << "the spec is immutable: only a create asks";
  json::object tmpl;
  tmpl["spec"] = json::object{{"spec", admin.at("spec")}};
  EXPECT_EQ(admin_access_field(tmpl, "ResourceClaimTemplate", nullptr, ""),
            "spec.devices.requests[1].exactly.adminAccess");
  EXPECT_EQ(admin_access_field(admin, "DeviceClass", nullptr, ""), std::nullopt);

  const json::object granted = patched(admin, R"({"status": {"allocation": {"devices": {"results": [
    {"request": "a", "driver": "d.example.com", "pool": "p", "device": "x"},
    {"request": "b", "driver": "d.example.com", "pool": "p", "device": "y", "adminAccess": true}]}}}})");
  EXPECT_EQ(admin_access_field(granted, "ResourceClaim", &admin, "status"),
            "status.allocation.devices.results[1].adminAccess");
  EXPECT_EQ(admin_access_field(patched(granted, R"({"status": {"reservedFor": []}})"),
                               "ResourceClaim", &granted, "status"),
            std::nullopt)
      << "granted by the stored allocation already";
  EXPECT_EQ(admin_access_detail(), "admin access to devices requires the "
                                   "`resource.kubernetes.io/admin-access: true` label on the "
                                   "containing namespace");
}

const json::object kTemplate = parse(R"({"metadata": {"name": "t", "namespace": "ns"},
  "spec": {"metadata": {"labels": {"app": "web"}}, "spec": {"devices": {"requests": [
    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})");

TEST(ResourceClaimTemplate, DefaultsAndValidationAreKubes) {
  json::object t = patched(kTemplate, R"({"spec": {"spec": {"devices": {"requests": [
    {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "tolerations": [{}]}}]}}}})");
  default_resource_claim_template(t);
  EXPECT_EQ(t.at("spec").at("spec").at("devices").at("requests").at(0).at("exactly"),
            json::parse(R"({"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount",
                            "count": 1})"));
  const std::vector<Case> cases = {
      {"the base template", "{}", {}},
      {"a request checked as a claim's",
       R"({"spec": {"spec": {"devices": {"requests": [{"name": "gpu"}]}}}})",
       {"FieldValueRequired spec.spec.devices.requests[0]: Required value: exactly one of "
        "`exactly` or `firstAvailable` is required"}},
      {"the claims' labels and annotations",
       R"({"spec": {"metadata": {"labels": {"Bad Key": "Bad Value"},
                                 "annotations": {"Bad Key": "v"}}}})",
       {"FieldValueInvalid spec.metadata.labels: Invalid value: \"Bad Key\": " +
            apimachinery::qualified_name_errors("Bad Key").at(0),
        "FieldValueInvalid spec.metadata.labels: Invalid value: \"Bad Value\": " +
            apimachinery::label_value_errors("Bad Value").at(0),
        "FieldValueInvalid spec.metadata.annotations: Invalid value: \"Bad Key\": " +
            apimachinery::qualified_name_errors("bad key").at(0)}},
  };
  expect_cases(kTemplate, cases, default_resource_claim_template,
               validate_resource_claim_template);

  json::object old = kTemplate;
  default_resource_claim_template(old);
  EXPECT_EQ(causes_of(patched(kTemplate, R"({"metadata": {"labels": {"a": "b"}}})"),
                      default_resource_claim_template, validate_resource_claim_template, &old),
            std::vector<std::string>{});
  // The whole template is validated again on update.
  json::object bad = patched(kTemplate, R"({"spec": {"spec": {"devices": {"requests": [
    {"name": "gpu"}]}}}})");
  EXPECT_EQ(causes_of(patched(bad, R"({"metadata": {"labels": {"a": "b"}}})"),
                      default_resource_claim_template, validate_resource_claim_template, &bad),
            std::vector<std::string>{
                "FieldValueRequired spec.spec.devices.requests[0]: Required value: exactly one "
                "of `exactly` or `firstAvailable` is required"});
  EXPECT_EQ(causes_of(patched(kTemplate, R"({"spec": {"metadata": {"labels": null}}})"),
                      default_resource_claim_template, validate_resource_claim_template, &old),
            std::vector<std::string>{
                "FieldValueInvalid spec: Invalid value: {\"ObjectMeta\":{\"creationTimestamp\":"
                "null},\"Spec\":{\"Devices\":{\"Requests\":[{\"Name\":\"gpu\",\"Exactly\":{"
                "\"DeviceClassName\":\"gpu.example.com\",\"Selectors\":null,\"AllocationMode\":"
                "\"ExactCount\",\"Count\":1,\"AdminAccess\":null,\"Tolerations\":null,"
                "\"Capacity\":null},\"FirstAvailable\":null}],\"Constraints\":null,\"Config\":"
                "null}}}: field is immutable"});
}

const json::object kDeviceClass = parse(R"({"metadata": {"name": "gpu.example.com"},
  "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
           "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"a": 1}}}]}})");

TEST(DeviceClass, DefaultsAndValidationAreKubes) {
  json::object dc = patched(kDeviceClass, R"({"spec": {"extendedResourceName": "example.com/gpu"}})");
  default_device_class(dc);
  EXPECT_EQ(dc, kDeviceClass) << "DRAExtendedResource is off in 1.34";
  const std::vector<Case> cases = {
      {"the base class", "{}", {}},
      {"an empty class", R"({"spec": null})", {}},
      {"a selector giving an int", R"({"spec": {"selectors": [{"cel": {"expression": "1"}}]}})",
       {"FieldValueInvalid spec.selectors[0].cel.expression: Invalid value: \"1\": must evaluate "
        "to bool or the unknown type, not int"}},
      {"a selector without cel", R"({"spec": {"selectors": [{}]}})",
       {"FieldValueRequired spec.selectors[0].cel: Required value"}},
      {"33 selectors", R"({"spec": {"selectors": )" +
                           many(R"({"cel": {"expression": "true"}})", 33) + "}}",
       {"FieldValueTooMany spec.selectors: Too many: 33: must have at most 32 items"}},
      {"a config without opaque", R"({"spec": {"config": [{}]}})",
       {"FieldValueRequired spec.config[0].opaque: Required value"}},
      {"a config with a bad driver",
       R"({"spec": {"config": [{"opaque": {"driver": "Bad_Name", "parameters": {}}}]}})",
       {"FieldValueInvalid spec.config[0].opaque.driver: Invalid value: \"Bad_Name\": " +
        apimachinery::dns1123_subdomain_errors("bad_name").at(0)}},
      {"33 configs", R"({"spec": {"config": )" +
                         many(R"({"opaque": {"driver": "d.example.com", "parameters": {}}})", 33) +
                         "}}",
       {"FieldValueTooMany spec.config: Too many: 33: must have at most 32 items"}},
  };
  expect_cases(kDeviceClass, cases, default_device_class, validate_device_class);

  // Selectors as stored before are not compiled again; changed ones are.
  json::object stored = patched(kDeviceClass, R"({"spec": {"selectors": [{"cel": {"expression": "1"}}]}})");
  EXPECT_EQ(causes_of(stored, default_device_class, validate_device_class, &stored),
            std::vector<std::string>{});
  EXPECT_EQ(causes_of(patched(stored, R"({"spec": {"selectors": [{"cel": {"expression": "2"}}]}})"),
                      default_device_class, validate_device_class, &stored),
            std::vector<std::string>{
                "FieldValueInvalid spec.selectors[0].cel.expression: Invalid value: \"2\": must "
                "evaluate to bool or the unknown type, not int"});
}

const json::object kSlice = parse(R"({"metadata": {"name": "node-1-gpu"}, "spec": {
  "driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
  "nodeName": "node-1", "devices": [{"name": "g0",
    "attributes": {"model": {"string": "a100"}, "gpu.example.com/index": {"int": 0},
                   "driverVersion": {"version": "1.2.3-rc.1+build.5"}, "ecc": {"bool": true}},
    "capacity": {"memory": {"value": "40Gi"}}}]}})");

std::string slice_devices(std::string_view list) {
  return R"({"spec": {"devices": )" + std::string(list) + "}}";
}

std::string attributes(std::string_view members) {
  return slice_devices(R"([{"name": "g0", "attributes": {)" + std::string(members) + "}}]");
}

std::string numbered(std::string_view prefix, std::string_view value, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    out += "\"" + std::string(prefix) + std::to_string(i) + "\": " + std::string(value);
  }
  return out;
}

TEST(ResourceSlice, DefaultsDropWhatKube134LeavesOff) {
  json::object slice = patched(kSlice, R"({"spec": {"perDeviceNodeSelection": true,
    "sharedCounters": [{"name": "c", "counters": {"mem": {"value": "1"}}}],
    "devices": [{"name": "g0", "taints": [{"key": "k", "effect": "NoSchedule"}],
      "consumesCounters": [], "nodeName": "n", "allNodes": true, "bindsToNode": true,
      "bindingConditions": ["a"], "bindingFailureConditions": ["b"],
      "allowMultipleAllocations": true,
      "capacity": {"memory": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}}}]}})");
  default_resource_slice(slice);
  EXPECT_EQ(slice.at("spec").at("devices"),
            json::parse(R"([{"name": "g0", "capacity": {"memory": {"value": "1Gi"}}}])"));
  EXPECT_EQ(slice.at("spec").as_object().count("perDeviceNodeSelection"), 0u);
  EXPECT_EQ(slice.at("spec").as_object().count("sharedCounters"), 0u);
}

TEST(ResourceSlice, ValidationIsKubesRuleByRule) {
  std::string named;
  for (std::size_t i = 0; i < 128; ++i) named += R"({"name": "d)" + std::to_string(i) + R"("}, )";
  const std::string long_key = "example.com/" + std::string(90, 'a');
  const std::vector<Case> cases = {
      {"the base slice", "{}", {}},
      {"an uppercase driver (kube only warns)", R"({"spec": {"driver": "GPU.example.com"}})", {}},
      {"no driver", R"({"spec": {"driver": ""}})",
       {"FieldValueRequired spec.driver: Required value",
        "FieldValueInvalid spec.driver: Invalid value: \"\": " +
            apimachinery::dns1123_subdomain_errors("").at(0)}},
      {"a pool without name", R"({"spec": {"pool": {"name": ""}}})",
       {"FieldValueRequired spec.pool.name: Required value"}},
      {"a pool name with a bad part", R"({"spec": {"pool": {"name": "a/Bad_Name"}}})",
       {"FieldValueInvalid spec.pool.name: Invalid value: \"Bad_Name\": " + kSubdomain}},
      {"a pool name too long", R"({"spec": {"pool": {"name": ")" + std::string(254, 'a') + "\"}}}",
       {"FieldValueTooLong spec.pool.name: Too long: may not be more than 253 bytes",
        "FieldValueInvalid spec.pool.name: Invalid value: \"" + std::string(254, 'a') + "\": " +
            apimachinery::dns1123_subdomain_errors(std::string(254, 'a')).at(0)}},
      {"no slices in the pool", R"({"spec": {"pool": {"resourceSliceCount": 0}}})",
       {"FieldValueInvalid spec.pool.resourceSliceCount: Invalid value: 0: must be greater than "
        "zero"}},
      {"a negative generation", R"({"spec": {"pool": {"generation": -1}}})",
       {"FieldValueInvalid spec.pool.generation: Invalid value: -1: must be greater than or equal "
        "to zero"}},
      {"no node selection", R"({"spec": {"nodeName": null}})",
       {"FieldValueRequired spec: Required value: exactly one of `nodeName`, `nodeSelector`, "
        "`allNodes`, `perDeviceNodeSelection` is required"}},
      {"all nodes", R"({"spec": {"nodeName": null, "allNodes": true}})", {}},
      {"a node and all nodes", R"({"spec": {"allNodes": true}})",
       {"FieldValueInvalid spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of "
        "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but "
        "multiple fields are set"}},
      {"an empty node name", R"({"spec": {"nodeName": ""}})",
       {"FieldValueInvalid spec.nodeName: Invalid value: \"\": must be either unset or set to a "
        "non-empty string",
        "FieldValueRequired spec: Required value: exactly one of `nodeName`, `nodeSelector`, "
        "`allNodes`, `perDeviceNodeSelection` is required"}},
      {"a bad node name", R"({"spec": {"nodeName": "Bad_Name"}})",
       {"FieldValueInvalid spec.nodeName: Invalid value: \"Bad_Name\": " + kSubdomain}},
      {"allNodes false", R"({"spec": {"nodeName": null, "allNodes": false}})",
       {"FieldValueInvalid spec.allNodes: Invalid value: false: must be either unset or set to "
        "true",
        "FieldValueRequired spec: Required value: exactly one of `nodeName`, `nodeSelector`, "
        "`allNodes`, `perDeviceNodeSelection` is required"}},
      {"a node selector", R"({"spec": {"nodeName": null, "nodeSelector": {"nodeSelectorTerms":
         [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}})",
       {}},
      {"a node selector of two terms", R"({"spec": {"nodeName": null, "nodeSelector":
         {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                                  "values": ["n"]}]}]}}})",
       {"FieldValueInvalid spec.nodeSelector.nodeSelectorTerms: Invalid value: "
        "[{\"MatchExpressions\":[{\"Key\":\"zone\",\"Operator\":\"Exists\",\"Values\":null}],"
        "\"MatchFields\":null},{\"MatchExpressions\":null,\"MatchFields\":[{\"Key\":"
        "\"metadata.name\",\"Operator\":\"In\",\"Values\":[\"n\"]}]}]: must have exactly one node "
        "selector term"}},
      {"a node selector checked as kube checks one", R"({"spec": {"nodeName": null,
         "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
           {"key": "zone", "operator": "Exists", "values": ["a"]},
           {"key": "n", "operator": "Gt", "values": []},
           {"key": "Bad Key", "operator": "In", "values": ["Bad Value"]}]}]}}})",
       {"FieldValueForbidden spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values: "
        "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        "FieldValueRequired spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[1].values: "
        "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        "FieldValueInvalid spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[2].key: "
        "Invalid value: \"Bad Key\": " + apimachinery::qualified_name_errors("Bad Key").at(0),
        "FieldValueInvalid spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[2].values[0]: "
        "Invalid value: \"Bad Value\": " + apimachinery::label_value_errors("Bad Value").at(0)}},
      {"128 devices", slice_devices("[" + named.substr(0, named.size() - 2) + "]"), {}},
      {"a device name twice", slice_devices(R"([{"name": "d"}, {"name": "d"}])"),
       {"FieldValueDuplicate spec.devices[1]: Duplicate value: \"d\""}},
      {"129 devices", slice_devices("[" + named + R"({"name": "d"}])"),
       {"FieldValueTooMany spec.devices: Too many: 129: must have at most 128 items"}},
      {"a device name that is no label", slice_devices(R"([{"name": "Bad_Name"}])"),
       {"FieldValueInvalid spec.devices[0].name: Invalid value: \"Bad_Name\": " + kLabel}},
      {"32 attributes and capacities",
       slice_devices(R"([{"name": "g0", "attributes": {)" + numbered("a", R"({"int": 1})", 31) +
                     R"(}, "capacity": {"mem": {"value": "1"}}}])"),
       {}},
      {"33 attributes and capacities",
       slice_devices(R"([{"name": "g0", "attributes": {)" + numbered("a", R"({"int": 1})", 32) +
                     R"(}, "capacity": {"mem": {"value": "1"}}}])"),
       {"FieldValueInvalid spec.devices[0]: Invalid value: 33: the total number of attributes and "
        "capacities must not exceed 32"}},
      {"an attribute name that is no C identifier", attributes(R"("a-b": {"int": 1})"),
       {"FieldValueInvalid spec.devices[0].attributes: Invalid value: \"a-b\": " +
        std::string(kCIdentifier)}},
      {"an attribute name too long", attributes("\"" + std::string(33, 'a') + R"(": {"int": 1})"),
       {"FieldValueTooLong spec.devices[0].attributes: Too long: may not be more than 32 bytes"}},
      {"an attribute without value", attributes(R"("a": {})"),
       {"FieldValueInvalid spec.devices[0].attributes[a]: Invalid value: \"\": exactly one value "
        "must be specified"}},
      {"an attribute with two values", attributes(R"("a": {"int": 1, "string": "x"})"),
       {"FieldValueInvalid spec.devices[0].attributes[a]: Invalid value: {\"IntValue\":1,"
        "\"BoolValue\":null,\"StringValue\":\"x\",\"VersionValue\":null}: exactly one value must "
        "be specified"}},
      {"an attribute string too long", attributes(R"("a": {"string": ")" + std::string(65, 'x') +
                                                  "\"}"),
       {"FieldValueTooLong spec.devices[0].attributes[a].string: Too long: may not be more than "
        "64 bytes"}},
      {"a version that is no semver", attributes(R"("a": {"version": "1.0"})"),
       {"FieldValueInvalid spec.devices[0].attributes[a].version: Invalid value: \"1.0\": must be "
        "a string compatible with semver.org spec 2.0.0"}},
      {"an attribute key too long to show whole", attributes("\"" + long_key + R"(": {})"),
       {"FieldValueTooLong spec.devices[0].attributes: Too long: may not be more than 32 bytes",
        "FieldValueInvalid spec.devices[0].attributes[" + long_key.substr(0, 47) + "..." +
            long_key.substr(long_key.size() - 46) +
            "]: Invalid value: \"\": exactly one value must be specified"}},
      {"a capacity name in a bad domain", slice_devices(R"([{"name": "g0", "capacity":
         {"/mem": {"value": "1"}}}])"),
       {"FieldValueInvalid spec.devices[0].capacity: Invalid value: \"\": the domain must not be "
        "empty"}},
  };
  expect_cases(kSlice, cases, default_resource_slice, validate_resource_slice);

  EXPECT_EQ(resource_slice_driver_warning(kSlice), std::nullopt);
  EXPECT_EQ(resource_slice_driver_warning(patched(kSlice, R"({"spec": {"driver": "GPU.example.com"}})")),
            "spec.driver: driver names should be lowercase; \"GPU.example.com\" contains "
            "uppercase characters");

  json::object old = kSlice;
  EXPECT_EQ(causes_of(patched(kSlice, R"({"spec": {"pool": {"generation": 2}}})"),
                      default_resource_slice, validate_resource_slice, &old),
            std::vector<std::string>{});
  EXPECT_EQ(causes_of(patched(kSlice, R"({"spec": {"driver": "other.example.com",
                        "pool": {"name": "pool-b"}, "nodeName": "node-2"}})"),
                      default_resource_slice, validate_resource_slice, &old),
            (std::vector<std::string>{
                "FieldValueInvalid spec.pool.name: Invalid value: \"pool-b\": field is immutable",
                "FieldValueInvalid spec.driver: Invalid value: \"other.example.com\": field is "
                "immutable",
                "FieldValueInvalid spec.nodeName: Invalid value: \"node-2\": field is immutable"}));
  EXPECT_EQ(causes_of(patched(kSlice, R"({"spec": {"nodeName": null, "allNodes": true}})"),
                      default_resource_slice, validate_resource_slice, &old),
            std::vector<std::string>{
                "FieldValueInvalid spec.nodeName: Invalid value: null: field is immutable"});
}

json::value cell(std::string_view kind, std::string_view column, const json::object& obj) {
  for (const PrinterColumn& c : builtin_columns("resource.k8s.io", kind)) {
    if (c.name != column) continue;
    if (c.cell) return c.cell(obj, std::chrono::system_clock::now());
    return json::value(c.json_path);
  }
  return nullptr;
}

std::vector<std::string> column_names(std::string_view kind) {
  std::vector<std::string> names;
  for (const auto& c : builtin_columns("resource.k8s.io", kind)) names.push_back(c.name);
  return names;
}

TEST(DynamicResourceColumns, AsKubePrintsThem) {
  EXPECT_EQ(column_names("ResourceClaim"), (std::vector<std::string>{"Name", "State", "Age"}));
  EXPECT_EQ(column_names("ResourceClaimTemplate"), (std::vector<std::string>{"Name", "Age"}));
  EXPECT_EQ(column_names("DeviceClass"), (std::vector<std::string>{"Name", "Age"}));
  EXPECT_EQ(column_names("ResourceSlice"),
            (std::vector<std::string>{"Name", "Node", "Driver", "Pool", "Age"}));
  EXPECT_EQ(cell("ResourceSlice", "Pool", kSlice), ".spec.pool.name");

  EXPECT_EQ(cell("ResourceClaim", "State", kClaim), "pending");
  EXPECT_EQ(cell("ResourceClaim", "State", kAllocated), "allocated");
  const json::object reserved_claim =
      patched(kAllocated, R"({"status": {"reservedFor": [{"resource": "pods", "name": "p",
                             "uid": "u"}]}})");
  EXPECT_EQ(cell("ResourceClaim", "State", reserved_claim), "allocated,reserved");
  const std::string deleting = R"({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}})";
  EXPECT_EQ(cell("ResourceClaim", "State", patched(kClaim, deleting)), "deleted");
  EXPECT_EQ(cell("ResourceClaim", "State", patched(reserved_claim, deleting)),
            "deleted,allocated,reserved");
}

}  // namespace
}  // namespace kwatch::kinds
