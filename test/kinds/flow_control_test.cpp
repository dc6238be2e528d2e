#include "kinds/flow_control.hpp"

#include "apimachinery/merge_patch.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/builtin_columns.hpp"
#include "kind_test_support.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <chrono>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

using testing::parse;
using testing::patched;
using testing::texts;

// Each cause as "<type> <field>: <message>", after the kind's defaults (as the server runs them).
std::vector<std::string> flow_schema_causes(json::object fs) {
  default_flow_schema(fs);
  Causes causes;
  validate_flow_schema(fs, nullptr, causes);
  return texts(causes);
}

std::vector<std::string> priority_level_causes(json::object pl) {
  default_priority_level_configuration(pl);
  Causes causes;
  validate_priority_level_configuration(pl, nullptr, causes);
  return texts(causes);
}

const json::object kFlowSchema = parse(R"({"metadata": {"name": "fs"}, "spec": {
  "priorityLevelConfiguration": {"name": "pl"}, "matchingPrecedence": 500,
  "distinguisherMethod": {"type": "ByUser"},
  "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
    "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"],
                       "namespaces": ["default"]}],
    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}]}})");

const json::object kPriorityLevel = parse(R"({"metadata": {"name": "pl"}, "spec": {
  "type": "Limited", "limited": {"nominalConcurrencyShares": 10,
    "limitResponse": {"type": "Queue",
      "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}}})");

// A merge patch of a FlowSchema's first rule.
std::string rule(std::string_view members) {
  return R"({"spec": {"rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}], )" +
         std::string(members) + "}]}}";
}

std::string subject(std::string_view subject_json) {
  return R"({"spec": {"rules": [{"subjects": [)" + std::string(subject_json) +
         R"(], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})";
}

std::string resource_rule(std::string_view rule_json) {
  return rule(R"("resourceRules": [)" + std::string(rule_json) + "]");
}

std::string urls(std::string_view list) {
  return rule(R"("nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": )" +
              std::string(list) + "}]");
}

struct Case {
  std::string name;
  std::string patch;
  std::vector<std::string> causes;  // empty: valid
};

const std::string kSubdomain = apimachinery::dns1123_subdomain_errors("Bad_Name").at(0);
const std::string kLabel = apimachinery::dns1123_label_errors("Bad.ns").at(0);

TEST(FlowSchema, ValidationIsKubesRuleByRule) {
  const std::vector<Case> cases = {
      {"the base object", "{}", {}},
      {"precedence at the maximum", R"({"spec": {"matchingPrecedence": 10000}})", {}},
      {"negative precedence", R"({"spec": {"matchingPrecedence": -5}})",
       {"FieldValueInvalid spec.matchingPrecedence: Invalid value: -5: must be a positive value"}},
      {"precedence past the maximum", R"({"spec": {"matchingPrecedence": 10001}})",
       {"FieldValueInvalid spec.matchingPrecedence: Invalid value: 10001: must not be greater "
        "than 10000"}},
      {"precedence 1 on another schema", R"({"spec": {"matchingPrecedence": 1}})",
       {"FieldValueInvalid spec.matchingPrecedence: Invalid value: 1: only the schema named "
        "'exempt' may have matchingPrecedence 1"}},
      {"by namespace", R"({"spec": {"distinguisherMethod": {"type": "ByNamespace"}}})", {}},
      {"no distinguisher", R"({"spec": {"distinguisherMethod": null}})", {}},
      {"unknown distinguisher", R"({"spec": {"distinguisherMethod": {"type": "ByFoo"}}})",
       {"FieldValueNotSupported spec.distinguisherMethod.type: Unsupported value: "
        "flowcontrol.FlowDistinguisherMethod{Type:\"ByFoo\"}: supported values: \"ByNamespace\", "
        "\"ByUser\""}},
      {"no priority level", R"({"spec": {"priorityLevelConfiguration": {"name": ""}}})",
       {"FieldValueRequired spec.priorityLevelConfiguration.name: Required value: must reference "
        "a priority level"}},
      {"a priority level name that is no subdomain",
       R"({"spec": {"priorityLevelConfiguration": {"name": "Bad_Name"}}})",
       {"FieldValueInvalid spec.priorityLevelConfiguration.name: Invalid value: \"Bad_Name\": " +
        kSubdomain}},
      {"no subjects",
       R"({"spec": {"rules": [{"subjects": [], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})",
       {"FieldValueRequired spec.rules[0].subjects: Required value: subjects must contain at "
        "least one value"}},
      {"no rules in a rule", rule(R"("resourceRules": [])"),
       {"FieldValueRequired spec.rules[0]: Required value: at least one of resourceRules and "
        "nonResourceRules has to be non-empty"}},
      {"an unknown subject kind", subject(R"({"kind": "Robot"})"),
       {"FieldValueNotSupported spec.rules[0].subjects[0].kind: Unsupported value: \"Robot\": "
        "supported values: \"Group\", \"ServiceAccount\", \"User\""}},
      {"a user subject without user", subject(R"({"kind": "User"})"),
       {"FieldValueRequired spec.rules[0].subjects[0].user: Required value: user is required "
        "when subject kind is 'User'"}},
      {"a user without name", subject(R"({"kind": "User", "user": {"name": ""}})"),
       {"FieldValueRequired spec.rules[0].subjects[0].user.name: Required value"}},
      {"a user subject naming a group too",
       subject(R"({"kind": "User", "user": {"name": "a"}, "group": {"name": "g"}})"),
       {"FieldValueForbidden spec.rules[0].subjects[0].group: Forbidden: group is forbidden "
        "when subject kind is not 'Group'"}},
      {"a group subject", subject(R"({"kind": "Group", "group": {"name": "system:masters"}})"),
       {}},
      {"a group subject without group", subject(R"({"kind": "Group"})"),
       {"FieldValueRequired spec.rules[0].subjects[0].group: Required value: group is required "
        "when subject kind is 'Group'"}},
      {"a group subject naming a user and an account",
       subject(R"({"kind": "Group", "group": {"name": "g"}, "user": {"name": "u"},
                   "serviceAccount": {"namespace": "ns", "name": "sa"}})"),
       {"FieldValueForbidden spec.rules[0].subjects[0].serviceAccount: Forbidden: serviceAccount "
        "is forbidden when subject kind is not 'ServiceAccount'",
        "FieldValueForbidden spec.rules[0].subjects[0].user: Forbidden: user is forbidden when "
        "subject kind is not 'User'"}},
      {"every account of a namespace",
       subject(R"({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}})"),
       {}},
      {"an account subject without account", subject(R"({"kind": "ServiceAccount"})"),
       {"FieldValueRequired spec.rules[0].subjects[0].serviceAccount: Required value: "
        "serviceAccount is required when subject kind is 'ServiceAccount'"}},
      {"an account without name and namespace",
       subject(R"({"kind": "ServiceAccount", "serviceAccount": {"namespace": "", "name": ""}})"),
       {"FieldValueRequired spec.rules[0].subjects[0].serviceAccount.name: Required value",
        "FieldValueRequired spec.rules[0].subjects[0].serviceAccount.namespace: Required value: "
        "must specify namespace for service account"}},
      {"an account with bad names",
       subject(R"({"kind": "ServiceAccount", "serviceAccount": {"namespace": "Bad.ns", "name": "Bad_Name"}})"),
       {"FieldValueInvalid spec.rules[0].subjects[0].serviceAccount.name: Invalid value: "
        "\"Bad_Name\": " + kSubdomain,
        "FieldValueInvalid spec.rules[0].subjects[0].serviceAccount.namespace: Invalid value: "
        "\"Bad.ns\": " + kLabel}},
      {"no verbs",
       resource_rule(R"({"verbs": [], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true})"),
       {"FieldValueRequired spec.rules[0].resourceRules[0].verbs: Required value: verbs must "
        "contain at least one value"}},
      {"a verb beside *",
       resource_rule(R"({"verbs": ["*", "get"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true})"),
       {"FieldValueInvalid spec.rules[0].resourceRules[0].verbs: Invalid value: []string{\"*\", "
        "\"get\"}: if '*' is present, must not specify other verbs"}},
      {"an unknown verb",
       resource_rule(R"({"verbs": ["get", "fly"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true})"),
       {"FieldValueNotSupported spec.rules[0].resourceRules[0].verbs: Unsupported value: "
        "[]string{\"get\", \"fly\"}: supported values: \"create\", \"delete\", "
        "\"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\""}},
      {"no api groups",
       resource_rule(R"({"verbs": ["*"], "apiGroups": [], "resources": ["*"], "clusterScope": true})"),
       {"FieldValueRequired spec.rules[0].resourceRules[0].apiGroups: Required value: resource "
        "rules must supply at least one api group"}},
      {"an api group beside *",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*", "apps"], "resources": ["*"], "clusterScope": true})"),
       {"FieldValueInvalid spec.rules[0].resourceRules[0].apiGroups: Invalid value: "
        "[]string{\"*\", \"apps\"}: if '*' is present, must not specify other api groups"}},
      {"no resources",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": [], "clusterScope": true})"),
       {"FieldValueRequired spec.rules[0].resourceRules[0].resources: Required value: resource "
        "rules must supply at least one resource"}},
      {"a resource beside *",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": ["pods", "*"], "clusterScope": true})"),
       {"FieldValueInvalid spec.rules[0].resourceRules[0].resources: Invalid value: "
        "[]string{\"pods\", \"*\"}: if '*' is present, must not specify other resources"}},
      {"neither cluster scope nor namespaces",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})"),
       {"FieldValueRequired spec.rules[0].resourceRules[0].namespaces: Required value: resource "
        "rules that are not cluster scoped must supply at least one namespace"}},
      {"every namespace",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]})"),
       {}},
      {"a namespace beside *",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*", "a"]})"),
       {"FieldValueInvalid spec.rules[0].resourceRules[0].namespaces: Invalid value: "
        "[]string{\"*\", \"a\"}: if '*' is present, must not specify other namespaces"}},
      {"a namespace that is no label",
       resource_rule(R"({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["ok", "Bad.ns"]})"),
       {"FieldValueInvalid spec.rules[0].resourceRules[0].namespaces[1]: Invalid value: "
        "\"Bad.ns\": each member of this list must be '*' or a DNS-1123 label; " + kLabel}},
      {"no non-resource URLs", urls("[]"),
       {"FieldValueRequired spec.rules[0].nonResourceRules[0].nonResourceURLs: Required value: "
        "nonResourceURLs must contain at least one value"}},
      {"a URL beside *", urls(R"(["*", "/x"])"),
       {"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs: Invalid value: "
        "[]string{\"*\", \"/x\"}: if '*' is present, must not specify other non-resource URLs"}},
      {"good URLs", urls(R"(["/", "/apis/*", "/healthz"])"), {}},
      {"bad URLs", urls(R"(["", "healthz", "/a b", "/a//b", "/a*", "/*/*"])"),
       {"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "
        "\"\": must not be empty",
        "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: "
        "\"healthz\": must start with slash",
        "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[2]: Invalid value: "
        "\"/a b\": must not contain white-space",
        "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[3]: Invalid value: "
        "\"/a//b\": must not contain double slash",
        "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[4]: Invalid value: "
        "\"/a*\": wildcard can only do suffix matching",
        "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[5]: Invalid value: "
        "\"/*/*\": wildcard can only do suffix matching"}},
      {"a non-resource verb beside *",
       rule(R"("nonResourceRules": [{"verbs": ["get", "*"], "nonResourceURLs": ["/x"]}])"),
       {"FieldValueInvalid spec.rules[0].nonResourceRules[0].verbs: Invalid value: "
        "[]string{\"get\", \"*\"}: if '*' is present, must not specify other verbs"}},
      {"conditions", R"({"status": {"conditions": [{"type": "Dangling", "status": "False"}]}})",
       {}},
      {"a repeated condition",
       R"({"status": {"conditions": [{"type": "Dangling", "status": "False"}, {"type": "Dangling", "status": "True"}]}})",
       {"FieldValueDuplicate status.conditions[1].type: Duplicate value: \"Dangling\""}},
      {"a condition without type", R"({"status": {"conditions": [{"status": "True"}]}})",
       {"FieldValueRequired status.conditions[0].type: Required value: must not be empty"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(flow_schema_causes(patched(kFlowSchema, c.patch)), c.causes) << c.name;
  }
}

TEST(FlowSchema, TheMandatorySchemasKeepKubesSpec) {
  for (const json::object& fs : mandatory_flow_schemas()) {
    EXPECT_TRUE(flow_schema_causes(fs).empty()) << json::serialize(fs);
  }
  json::object exempt = mandatory_flow_schemas().at(0);
  ASSERT_EQ(exempt.at("metadata").at("name"), "exempt");
  // Labels and annotations are free; the spec is not.
  auto causes = flow_schema_causes(patched(exempt, R"({"metadata": {"labels": {"a": "b"}}})"));
  EXPECT_TRUE(causes.empty());
  causes = flow_schema_causes(patched(exempt, R"({"spec": {"matchingPrecedence": 2}})"));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].substr(0, causes[0].find("{")),
            "FieldValueInvalid spec: Invalid value: flowcontrol.FlowSchemaSpec");
  EXPECT_NE(causes[0].find("MatchingPrecedence:2, DistinguisherMethod:"
                           "(*flowcontrol.FlowDistinguisherMethod)(nil), Rules:"),
            std::string::npos)
      << causes[0];
  EXPECT_TRUE(causes[0].ends_with("}: spec of 'exempt' must equal the fixed value")) << causes[0];
  json::object catch_all = mandatory_flow_schemas().at(1);
  EXPECT_TRUE(flow_schema_causes(catch_all).empty());
  causes = flow_schema_causes(patched(catch_all, R"({"spec": {"distinguisherMethod": null}})"));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_TRUE(causes[0].ends_with("spec of 'catch-all' must equal the fixed value"));
}

TEST(FlowSchema, DefaultsAreV1s) {
  json::object fs = parse(R"({"spec": {}})");
  default_flow_schema(fs);
  EXPECT_EQ(fs.at("spec").at("matchingPrecedence"), 1000);
  fs = parse(R"({"spec": {"matchingPrecedence": 0}})");
  default_flow_schema(fs);
  EXPECT_EQ(fs.at("spec").at("matchingPrecedence"), 1000);
  fs = parse(R"({"spec": {"matchingPrecedence": 7}})");
  default_flow_schema(fs);
  EXPECT_EQ(fs.at("spec").at("matchingPrecedence"), 7);
}

TEST(PriorityLevelConfiguration, ValidationIsKubesRuleByRule) {
  const std::string queuing = R"({"spec": {"limited": {"limitResponse": {"queuing": )";
  const std::vector<Case> cases = {
      {"the base object", "{}", {}},
      {"exempt under another name",
       R"({"spec": {"type": "Exempt", "limited": null}})",
       {"FieldValueInvalid spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and "
        "only if name is 'exempt'"}},
      {"an unknown type", R"({"spec": {"type": "Bogus"}})",
       {"FieldValueNotSupported spec.type: Unsupported value: \"Bogus\": supported values: "
        "\"Exempt\", \"Limited\""}},
      {"limited without limits", R"({"spec": {"limited": null}})",
       {"FieldValueRequired spec.limited: Required value: must not be empty when type is Limited"}},
      {"limited with an exempt section", R"({"spec": {"exempt": {}}})",
       {"FieldValueForbidden spec.exempt: Forbidden: must be nil if the type is Limited"}},
      {"zero shares", R"({"spec": {"limited": {"nominalConcurrencyShares": 0}}})", {}},
      {"negative shares", R"({"spec": {"limited": {"nominalConcurrencyShares": -1}}})",
       {"FieldValueInvalid spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a "
        "non-negative integer"}},
      {"lending all", R"({"spec": {"limited": {"lendablePercent": 100, "borrowingLimitPercent": 300}}})",
       {}},
      {"lending more than all", R"({"spec": {"limited": {"lendablePercent": 101}}})",
       {"FieldValueInvalid spec.limited.lendablePercent: Invalid value: 101: must be between 0 "
        "and 100, inclusive"}},
      {"lending less than nothing", R"({"spec": {"limited": {"lendablePercent": -1}}})",
       {"FieldValueInvalid spec.limited.lendablePercent: Invalid value: -1: must be between 0 "
        "and 100, inclusive"}},
      {"borrowing less than nothing", R"({"spec": {"limited": {"borrowingLimitPercent": -1}}})",
       {"FieldValueInvalid spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, "
        "must be a non-negative integer"}},
      {"an unknown limit response", R"({"spec": {"limited": {"limitResponse": {"type": "Drop"}}}})",
       {"FieldValueNotSupported spec.limited.limitResponse.type: Unsupported value: \"Drop\": "
        "supported values: \"Queue\", \"Reject\""}},
      {"rejecting", R"({"spec": {"limited": {"limitResponse": {"type": "Reject", "queuing": null}}}})",
       {}},
      {"rejecting with queues", R"({"spec": {"limited": {"limitResponse": {"type": "Reject"}}}})",
       {"FieldValueForbidden spec.limited.limitResponse.queuing: Forbidden: must be nil if "
        "limited.limitResponse.type is not Limited"}},
      {"queuing without queues", R"({"spec": {"limited": {"limitResponse": {"queuing": null}}}})",
       {"FieldValueRequired spec.limited.limitResponse.queuing: Required value: must not be "
        "empty if limited.limitResponse.type is Limited"}},
      {"negative queues", queuing + R"({"queues": -1}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.queues: Invalid value: -1: must be "
        "positive",
        "FieldValueInvalid spec.limited.limitResponse.queuing.handSize: Invalid value: 8: should "
        "not be greater than queues (-1)"}},
      {"too many queues", queuing + R"({"queues": 10000001, "handSize": 1}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.queues: Invalid value: 10000001: "
        "must not be greater than 10000000"}},
      {"a negative hand", queuing + R"({"handSize": -1}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.handSize: Invalid value: -1: must "
        "be positive"}},
      {"a hand larger than the deck", queuing + R"({"handSize": 65}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.handSize: Invalid value: 65: "
        "should not be greater than queues (64)"}},
      {"60 bits of entropy", queuing + R"({"queues": 1024, "handSize": 6}}}}})", {}},
      {"70 bits of entropy", queuing + R"({"queues": 1024, "handSize": 7}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.handSize: Invalid value: 7: "
        "required entropy bits of deckSize 1024 and handSize 7 should not be greater than 60"}},
      {"a negative queue length limit", queuing + R"({"queueLengthLimit": -1}}}}})",
       {"FieldValueInvalid spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: "
        "-1: must be positive"}},
      {"a repeated condition",
       R"({"status": {"conditions": [{"type": "ConcurrencyShared"}, {"type": "ConcurrencyShared"}]}})",
       {"FieldValueDuplicate status.conditions[1].type: Duplicate value: \"ConcurrencyShared\""}},
      {"a condition without type", R"({"status": {"conditions": [{"status": "True"}]}})",
       {"FieldValueRequired status.conditions[0].type: Required value: must not be empty"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(priority_level_causes(patched(kPriorityLevel, c.patch)), c.causes) << c.name;
  }
}

TEST(PriorityLevelConfiguration, TheMandatoryLevelsKeepKubesSpec) {
  for (const json::object& pl : mandatory_priority_level_configurations()) {
    EXPECT_TRUE(priority_level_causes(pl).empty()) << json::serialize(pl);
  }
  const json::object catch_all = mandatory_priority_level_configurations().at(0);
  const json::object exempt = mandatory_priority_level_configurations().at(1);
  ASSERT_EQ(exempt.at("metadata").at("name"), "exempt");
  // The exempt level's spec.exempt is tunable...
  EXPECT_TRUE(priority_level_causes(patched(
                  exempt, R"({"spec": {"exempt": {"nominalConcurrencyShares": 50, "lendablePercent": 10}}})"))
                  .empty());
  // ...within its own bounds.
  EXPECT_EQ(priority_level_causes(patched(
                exempt, R"({"spec": {"exempt": {"nominalConcurrencyShares": -1, "lendablePercent": 200}}})")),
            (std::vector<std::string>{
                "FieldValueInvalid spec.exempt.nominalConcurrencyShares: Invalid value: -1: must "
                "be a non-negative integer",
                "FieldValueInvalid spec.exempt.lendablePercent: Invalid value: 200: must be "
                "between 0 and 100, inclusive"}));
  auto causes = priority_level_causes(patched(
      exempt, R"({"spec": {"limited": {"limitResponse": {"type": "Reject"}}}})"));
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[0], "FieldValueForbidden spec.limited: Forbidden: must be nil if the type is "
                       "not Limited");
  EXPECT_TRUE(causes[1].starts_with("FieldValueInvalid spec: Invalid value: "
                                    "flowcontrol.PriorityLevelConfigurationSpec{Type:\"Exempt\", "
                                    "Limited:&flowcontrol.LimitedPriorityLevelConfiguration{"))
      << causes[1];
  EXPECT_TRUE(causes[1].ends_with(
      ": spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"));
  // Another name may not be exempt; the catch-all level is fixed whole.
  causes = priority_level_causes(
      patched(catch_all, R"({"spec": {"limited": {"nominalConcurrencyShares": 6}}})"));
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0],
            "FieldValueInvalid spec: Invalid value: flowcontrol.PriorityLevelConfigurationSpec{"
            "Type:\"Limited\", Limited:&flowcontrol.LimitedPriorityLevelConfiguration{"
            "NominalConcurrencyShares:6, LimitResponse:flowcontrol.LimitResponse{Type:\"Reject\", "
            "Queuing:(*flowcontrol.QueuingConfiguration)(nil)}, LendablePercent:(*int32)(0), "
            "BorrowingLimitPercent:(*int32)(nil)}, "
            "Exempt:(*flowcontrol.ExemptPriorityLevelConfiguration)(nil)}: spec of 'catch-all' "
            "must equal the fixed value");
}

TEST(PriorityLevelConfiguration, DefaultsAreV1s) {
  json::object pl = parse(R"({"spec": {"type": "Limited", "limited": {
      "limitResponse": {"type": "Queue", "queuing": {"queues": 0}}}}})");
  default_priority_level_configuration(pl);
  EXPECT_EQ(json::serialize(pl.at("spec")),
            R"({"type":"Limited","limited":{"limitResponse":{"type":"Queue","queuing":)"
            R"({"queues":64,"handSize":8,"queueLengthLimit":50}},)"
            R"("nominalConcurrencyShares":30,"lendablePercent":0}})");
  // In v1 a zero share count is the client's to keep.
  pl = parse(R"({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0,
      "lendablePercent": 5, "limitResponse": {"type": "Reject"}}}})");
  default_priority_level_configuration(pl);
  EXPECT_EQ(pl.at("spec").at("limited").at("nominalConcurrencyShares"), 0);
  EXPECT_EQ(pl.at("spec").at("limited").at("lendablePercent"), 5);
  EXPECT_FALSE(pl.at("spec").at("limited").at("limitResponse").as_object().contains("queuing"));
  pl = parse(R"({"spec": {"type": "Exempt", "exempt": {}}})");
  default_priority_level_configuration(pl);
  EXPECT_EQ(json::serialize(pl.at("spec")),
            R"({"type":"Exempt","exempt":{"nominalConcurrencyShares":0,"lendablePercent":0}})");
  // No exempt section is made up.
  pl = parse(R"({"spec": {"type": "Exempt"}})");
  default_priority_level_configuration(pl);
  EXPECT_EQ(json::serialize(pl.at("spec")), R"({"type":"Exempt"})");
}

TEST(PriorityLevelConfiguration, RequiredEntropyBitsRoundUp) {
  EXPECT_EQ(required_entropy_bits(64, 8), 48);
  EXPECT_EQ(required_entropy_bits(128, 6), 42);
  EXPECT_EQ(required_entropy_bits(100, 9), 60);  // 59.79... rounds up to 60
  EXPECT_EQ(required_entropy_bits(100, 10), 67);
}

// kube's bootstrap configuration (k8s.io/apiserver pkg/apis/flowcontrol/bootstrap/default.go at
// v0.34.0) as a client would write it: every object passes validation once defaulted.
constexpr std::string_view kBootstrapPriorityLevels = R"([
 {"metadata": {"name": "exempt"}, "spec": {"type": "Exempt",
   "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}},
 {"metadata": {"name": "catch-all"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 5, "lendablePercent": 0, "limitResponse": {"type": "Reject"}}}},
 {"metadata": {"name": "system"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 30, "lendablePercent": 33, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}}}},
 {"metadata": {"name": "node-high"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 40, "lendablePercent": 25, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50}}}}},
 {"metadata": {"name": "leader-election"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 10, "lendablePercent": 0, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 50}}}}},
 {"metadata": {"name": "workload-high"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 40, "lendablePercent": 50, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}},
 {"metadata": {"name": "workload-low"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 100, "lendablePercent": 90, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}},
 {"metadata": {"name": "global-default"}, "spec": {"type": "Limited", "limited": {
   "nominalConcurrencyShares": 20, "lendablePercent": 50, "limitResponse": {"type": "Queue",
   "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}}
])";

// Every resource (cluster-scoped and in every namespace) and every non-resource URL, by any verb.
constexpr std::string_view kEverything =
    R"("resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
         "clusterScope": true, "namespaces": ["*"]}],
       "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}])";

std::string flow_schema(std::string_view name, std::string_view level, int precedence,
                        std::string_view method, std::string_view rule_json) {
  std::string out = R"({"metadata": {"name": ")" + std::string(name) +
                    R"("}, "spec": {"priorityLevelConfiguration": {"name": ")" +
                    std::string(level) + R"("}, "matchingPrecedence": )" +
                    std::to_string(precedence);
  if (!method.empty()) out += R"(, "distinguisherMethod": {"type": ")" + std::string(method) + "\"}";
  return out + R"(, "rules": [)" + std::string(rule_json) + "]}}";
}

std::vector<std::string> bootstrap_flow_schemas() {
  const std::string group = R"({"kind": "Group", "group": {"name": ")";
  const std::string user = R"({"kind": "User", "user": {"name": ")";
  const std::string kube_system_accounts =
      R"({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}})";
  const std::string everyone =
      group + "system:unauthenticated\"}}, " + group + "system:authenticated\"}}";
  const auto everything_for = [](const std::string& subjects) {
    return R"({"subjects": [)" + subjects + "], " + std::string(kEverything) + "}";
  };
  return {
      flow_schema("exempt", "exempt", 1, "", everything_for(group + "system:masters\"}}")),
      flow_schema("catch-all", "catch-all", 10000, "ByUser", everything_for(everyone)),
      flow_schema("system-nodes", "system", 500, "ByUser",
                  everything_for(group + "system:nodes\"}}")),
      flow_schema("system-node-high", "node-high", 400, "ByUser",
                  R"({"subjects": [)" + group + R"(system:nodes"}}], "resourceRules": [
                    {"verbs": ["*"], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                     "clusterScope": true, "namespaces": ["*"]},
                    {"verbs": ["*"], "apiGroups": ["coordination.k8s.io"],
                     "resources": ["leases"], "namespaces": ["*"]}]})"),
      flow_schema("probes", "exempt", 2, "",
                  R"({"subjects": [)" + everyone + R"(], "nonResourceRules": [
                    {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]})"),
      flow_schema("system-leader-election", "leader-election", 100, "ByUser",
                  R"({"subjects": [)" + user + "system:kube-controller-manager\"}}, " + user +
                      "system:kube-scheduler\"}}, " + kube_system_accounts +
                      R"(], "resourceRules": [{"verbs": ["get", "create", "update"],
                    "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "namespaces": ["*"]}]})"),
      flow_schema("kube-controller-manager", "workload-high", 800, "ByNamespace",
                  everything_for(user + "system:kube-controller-manager\"}}")),
      flow_schema("kube-scheduler", "workload-high", 800, "ByNamespace",
                  everything_for(user + "system:kube-scheduler\"}}")),
      flow_schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace",
                  everything_for(kube_system_accounts)),
      flow_schema("service-accounts", "workload-low", 9000, "ByUser",
                  everything_for(group + "system:serviceaccounts\"}}")),
      flow_schema("global-default", "global-default", 9900, "ByUser", everything_for(everyone)),
  };
}

TEST(FlowControlBootstrap, EveryMandatoryAndSuggestedObjectValidates) {
  const auto levels = json::parse(kBootstrapPriorityLevels).as_array();
  ASSERT_EQ(levels.size(), 8u);
  for (const auto& pl : levels) {
    EXPECT_EQ(priority_level_causes(pl.as_object()), std::vector<std::string>{})
        << json::serialize(pl);
  }
  const auto schemas = bootstrap_flow_schemas();
  ASSERT_EQ(schemas.size(), 11u);
  for (const auto& text : schemas) {
    EXPECT_EQ(flow_schema_causes(parse(text)), std::vector<std::string>{}) << text;
  }
  // The mandatory objects as this file writes them are the ones validation fixes.
  for (const json::object& fs : mandatory_flow_schemas()) {
    json::object copy = parse(fs.at("metadata").at("name") == "exempt" ? schemas[0] : schemas[1]);
    default_flow_schema(copy);
    EXPECT_EQ(copy.at("spec"), fs.at("spec"));
  }
}

json::value cell(std::string_view kind, std::string_view column, const json::object& obj) {
  for (const PrinterColumn& c : builtin_columns("flowcontrol.apiserver.k8s.io", kind)) {
    if (c.name != column) continue;
    if (c.cell) return c.cell(obj, std::chrono::system_clock::now());
    return json::string(c.json_path);
  }
  return "no such column";
}

TEST(FlowControlColumns, AsKubePrintsThem) {
  std::vector<std::string> names;
  for (const auto& c : builtin_columns("flowcontrol.apiserver.k8s.io", "FlowSchema")) {
    names.push_back(c.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "PriorityLevel", "MatchingPrecedence",
                                              "DistinguisherMethod", "Age", "MissingPL"}));
  names.clear();
  for (const auto& c : builtin_columns("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration")) {
    names.push_back(c.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Type", "NominalConcurrencyShares", "Queues",
                                              "HandSize", "QueueLengthLimit", "Age"}));

  json::object fs = kFlowSchema;
  EXPECT_EQ(cell("FlowSchema", "PriorityLevel", fs), ".spec.priorityLevelConfiguration.name");
  EXPECT_EQ(cell("FlowSchema", "MatchingPrecedence", fs), 500);
  EXPECT_EQ(cell("FlowSchema", "DistinguisherMethod", fs), "ByUser");
  EXPECT_EQ(cell("FlowSchema", "MissingPL", fs), "?");
  fs = patched(fs, R"({"spec": {"distinguisherMethod": null},
                       "status": {"conditions": [{"type": "Dangling", "status": "True"}]}})");
  EXPECT_EQ(cell("FlowSchema", "DistinguisherMethod", fs), "<none>");
  EXPECT_EQ(cell("FlowSchema", "MissingPL", fs), "True");

  EXPECT_EQ(cell("PriorityLevelConfiguration", "NominalConcurrencyShares", kPriorityLevel), 10);
  EXPECT_EQ(cell("PriorityLevelConfiguration", "Queues", kPriorityLevel), 64);
  EXPECT_EQ(cell("PriorityLevelConfiguration", "HandSize", kPriorityLevel), 8);
  EXPECT_EQ(cell("PriorityLevelConfiguration", "QueueLengthLimit", kPriorityLevel), 50);
  const json::object exempt = mandatory_priority_level_configurations().at(1);
  for (const char* column : {"NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit"}) {
    EXPECT_EQ(cell("PriorityLevelConfiguration", column, exempt), "<none>") << column;
  }
}

TEST(FlowControlColumns, FlowSchemaRowsComeInMatchingOrder) {
  const auto order = builtin_row_order("flowcontrol.apiserver.k8s.io", "FlowSchema");
  ASSERT_TRUE(order);
  const auto fs = [](std::string name, int precedence) {
    return json::object{{"metadata", json::object{{"name", std::move(name)}}},
                        {"spec", json::object{{"matchingPrecedence", precedence}}}};
  };
  EXPECT_TRUE(order(fs("z", 1), fs("a", 2)));
  EXPECT_FALSE(order(fs("a", 2), fs("z", 1)));
  EXPECT_TRUE(order(fs("a", 5), fs("b", 5)));
  EXPECT_FALSE(order(fs("b", 5), fs("a", 5)));
  EXPECT_FALSE(builtin_row_order("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"));
}

}  // namespace
}  // namespace kwatch::kinds
