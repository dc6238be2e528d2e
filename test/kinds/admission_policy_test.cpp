// ValidatingAdmissionPolicy and its binding as kinds: kube's validation texts and field paths,
// and the environment their expressions compile in.
#include "kinds/admission_policy.hpp"
#include "kinds/scheme.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <string>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;
using apimachinery::Cause;

// A valid policy (defaults set, as stored) with `spec` merged over its spec.
json::object policy(std::string_view spec_override = "{}") {
  json::object p = json::parse(R"j({
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "replicas.example.com"},
    "spec": {
      "failurePolicy": "Fail",
      "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"], "scope": "*"}]},
      "validations": [{"expression": "object.spec.replicas <= 5"}]
    }})j").as_object();
  const json::value override_value = json::parse(spec_override);
  for (const auto& [k, v] : override_value.as_object()) p["spec"].as_object()[k] = v;
  return p;
}

std::vector<Cause> policy_causes(const json::object& p, const json::object* old = nullptr) {
  std::vector<Cause> causes;
  validate_validating_admission_policy(p, old, causes);
  return causes;
}

std::string joined(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + ": " + c.message + "\n";
  return out;
}

TEST(AdmissionPolicyValidation, AValidPolicyHasNoCauses) {
  EXPECT_EQ(joined(policy_causes(policy())), "");
}

TEST(AdmissionPolicyValidation, MatchConstraintsAndTheirRulesAreRequired) {
  auto p = policy();
  p["spec"].as_object().erase("matchConstraints");
  EXPECT_EQ(joined(policy_causes(p)), "spec.matchConstraints: Required value\n");
  EXPECT_EQ(joined(policy_causes(policy(R"j({"matchConstraints": {"matchPolicy": "Exact",
      "namespaceSelector": {}, "objectSelector": {}}})j"))),
            "spec.matchConstraints.resourceRules: Required value\n");
}

TEST(AdmissionPolicyValidation, RulesAreCheckedAsKubeChecksThem) {
  const auto causes = policy_causes(policy(R"j({"matchConstraints": {"matchPolicy": "Sometimes",
      "namespaceSelector": {}, "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps", "*"],
      "apiVersions": [], "operations": ["PATCH"], "resources": ["pods/*", "pods/log"],
      "resourceNames": ["a/b"], "scope": "Galaxy"}]}})j"));
  const std::string at = "spec.matchConstraints";
  const std::string rule = at + ".resourceRules[0]";
  EXPECT_EQ(joined(causes),
            at + ".matchPolicy: Unsupported value: \"Sometimes\": supported values: \"Equivalent\", \"Exact\"\n" +
            rule + ".resourceNames[0]: Invalid value: \"a/b\": may not contain '/'\n" +
            rule + ".operations[0]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"\n" +
            rule + ".apiGroups: Invalid value: [\"apps\",\"*\"]: if '*' is present, must not specify other API groups\n" +
            rule + ".apiVersions: Required value\n" +
            rule + ".resources[1]: Invalid value: \"pods/log\": if 'pods/*' is present, must not specify pods/log\n" +
            rule + ".scope: Unsupported value: \"Galaxy\": supported values: \"*\", \"Cluster\", \"Namespaced\"\n");
}

TEST(AdmissionPolicyValidation, ExpressionsCompileInThePolicyEnvironment) {
  const auto causes = policy_causes(policy(R"j({
      "variables": [{"name": "r", "expression": "object.spec.replicas"},
                    {"name": "1r", "expression": "1 +"}],
      "validations": [{"expression": "params.max > 1"},
                      {"expression": "variables.r"},
                      {"expression": "request.operation", "messageExpression": "1"},
                      {"expression": "request.nope == ''"},
                      {"expression": "variables.r > 1 && namespaceObject.metadata.labels['a'] == 'b'",
                       "message": "two\nlines", "reason": "Teapot"}]})j"));
  const std::string text = joined(causes);
  EXPECT_NE(text.find("spec.variables[1].name: Invalid value: \"1r\": name is not a valid CEL identifier\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.variables[1].expression: Invalid value: \"1 +\": compilation failed: ERROR: <input>:1:4: Syntax error"),
            std::string::npos) << text;
  // No paramKind: `params` is not declared.
  EXPECT_NE(text.find("spec.validations[0].expression: Invalid value: \"params.max > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"),
            std::string::npos) << text;
  // A variable of dyn type may be a validation; a string may not.
  EXPECT_EQ(text.find("spec.validations[1]"), std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[2].expression: Invalid value: \"request.operation\": must evaluate to bool but got string\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[2].messageExpression: Invalid value: \"1\": must evaluate to string but got int\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[3].expression: Invalid value: \"request.nope == ''\": compilation failed: ERROR: <input>:1:8: undefined field 'nope'"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[4].message: Invalid value: \"two\\nlines\": message must not contain line breaks\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[4].reason: Unsupported value: \"Teapot\""), std::string::npos) << text;
  EXPECT_EQ(text.find("spec.validations[4].expression"), std::string::npos) << text;
}

TEST(AdmissionPolicyValidation, TheAuthorizerIsDeclaredButNotForMessages) {
  EXPECT_EQ(joined(policy_causes(policy(R"j({"validations": [
      {"expression": "authorizer.group('').resource('pods').check('get').allowed()"},
      {"expression": "authorizer.requestResource.check('update').errored() == false"}]})j"))),
            "");
  const std::string text = joined(policy_causes(policy(R"j({"validations": [
      {"expression": "true", "messageExpression": "authorizer.path('/x').check('get').reason()"},
      {"expression": "authorizer.group('').check('get').allowed()"}]})j")));
  EXPECT_NE(text.find("spec.validations[0].messageExpression: Invalid value: \"authorizer.path('/x').check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer'"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.validations[1].expression"), std::string::npos) << text;
}

TEST(AdmissionPolicyValidation, ParamsAreDeclaredWithAParamKind) {
  EXPECT_EQ(joined(policy_causes(policy(R"j({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
      "validations": [{"expression": "object.spec.replicas <= int(params.data.max)"}]})j"))),
            "");
  EXPECT_EQ(joined(policy_causes(policy(R"j({"paramKind": {"apiVersion": "a/b/c", "kind": ""}})j"))),
            "spec.paramKind.apiVersion: Invalid value: \"a/b/c\": unexpected GroupVersion string: a/b/c\n"
            "spec.paramKind.kind: Required value\n");
}

TEST(AdmissionPolicyValidation, MatchConditionsSeeNoVariablesAndNeedUniqueNames) {
  const auto causes = policy_causes(policy(R"j({
      "variables": [{"name": "r", "expression": "1"}],
      "matchConditions": [{"name": "a", "expression": "variables.r == 1"},
                          {"name": "a", "expression": "true"}]})j"));
  const std::string text = joined(causes);
  EXPECT_NE(text.find("spec.matchConditions[0].expression: Invalid value: \"variables.r == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables'"),
            std::string::npos) << text;
  EXPECT_NE(text.find("spec.matchConditions[1].name: Duplicate value: \"a\"\n"), std::string::npos) << text;
  // An update that keeps the stored match conditions does not check them again.
  const auto stored = policy(R"j({"variables": [{"name": "r", "expression": "1"}],
      "matchConditions": [{"name": "a", "expression": "variables.r == 1"}]})j");
  EXPECT_EQ(joined(policy_causes(stored, &stored)), "");
}

TEST(AdmissionPolicyValidation, ValidationsOrAuditAnnotationsAreRequired) {
  auto p = policy();
  p["spec"].as_object().erase("validations");
  EXPECT_EQ(joined(policy_causes(p)),
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item\n"
            "spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item\n");
  const auto causes = policy_causes(policy(R"j({"validations": [], "auditAnnotations": [
      {"key": "high", "valueExpression": "'yes'"}, {"key": "high", "valueExpression": "null"},
      {"key": "n", "valueExpression": "1"}]})j"));
  EXPECT_EQ(joined(causes),
            "spec.auditAnnotations[1].key: Duplicate value: \"high\"\n"
            "spec.auditAnnotations[2].valueExpression: Invalid value: \"1\": must evaluate to one of [string null_type] but got int\n");
}

TEST(AdmissionPolicyValidation, BindingsNeedAPolicyActionsAndOneWayToFindParams) {
  auto causes_of = [](std::string_view text) {
    std::vector<Cause> causes;
    validate_validating_admission_policy_binding(json::parse(text).as_object(), nullptr, causes);
    return joined(causes);
  };
  EXPECT_EQ(causes_of(R"j({"metadata": {"name": "b"}, "spec": {"policyName": "p",
      "validationActions": ["Deny"]}})j"), "");
  EXPECT_EQ(causes_of(R"j({"metadata": {"name": "b"}, "spec": {"validationActions": []}})j"),
            "spec.policyName: Required value\n"
            "spec.validationActions: Required value: at least one validation action is required\n");
  EXPECT_EQ(causes_of(R"j({"metadata": {"name": "b"}, "spec": {"policyName": "p",
      "validationActions": ["Deny", "Warn", "Deny", "Shout"],
      "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Maybe"}}})j"),
            "spec.paramRef.name: Forbidden: name and selector are mutually exclusive\n"
            "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive\n"
            "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"\n"
            "spec.validationActions[2]: Duplicate value: \"Deny\"\n"
            "spec.validationActions[3]: Unsupported value: \"Shout\": supported values: \"Audit\", \"Deny\", \"Warn\"\n"
            "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Shout\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)\n");
  EXPECT_EQ(causes_of(R"j({"metadata": {"name": "b"}, "spec": {"policyName": "p",
      "validationActions": ["Audit"], "paramRef": {"parameterNotFoundAction": "Deny"}}})j"),
            "spec.paramRef: Required value: one of name or selector must be specified\n");
}

TEST(AdmissionPolicyTypeChecking, ExpressionsAreCheckedAgainstTheSchemasOfTheKindsNamed) {
  const auto scheme = Scheme::builtin();
  auto p = policy(R"j({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
      "validations": [
        {"expression": "object.spec.replicas <= int(params.data.max) && object.metadata.labels['a'] == 'b'"},
        {"expression": "object.spec.replica > 1",
         "messageExpression": "object.spec.template.spec.containers[0].nme"},
        {"expression": "params.dat.max == '1'"}]})j");
  const auto warnings = type_check_validating_policy(p, *scheme);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0].field_ref, "spec.validations[1].expression");
  EXPECT_EQ(warnings[0].warning,
            "apps/v1, Kind=Deployment: compilation failed: ERROR: <input>:1:12: undefined field "
            "'replica'\n | object.spec.replica > 1\n | ...........^\n");
  EXPECT_EQ(warnings[1].field_ref, "spec.validations[1].messageExpression");
  EXPECT_NE(warnings[1].warning.find("undefined field 'nme'"), std::string::npos);
  EXPECT_EQ(warnings[2].field_ref, "spec.validations[2].expression");
  EXPECT_NE(warnings[2].warning.find("undefined field 'dat'"), std::string::npos);
  // A rule with a wildcard names no kind to check against.
  auto wild = policy(R"j({"matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
      "objectSelector": {}, "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["v1"],
      "operations": ["*"], "resources": ["deployments"]}]},
      "validations": [{"expression": "object.spec.replica > 1"}]})j");
  EXPECT_TRUE(type_check_validating_policy(wild, *scheme).empty());
}

TEST(AdmissionPolicyCompile, ProgramsShareTheSlotsAndKeepTheirErrors) {
  const auto compiled = compile_validating_policy(policy(R"j({"failurePolicy": "Ignore",
      "variables": [{"name": "n", "expression": "object.metadata.name"}],
      "validations": [{"expression": "variables.n.startsWith('a')", "message": "  starts with a  "},
                      {"expression": "nope"}]})j"));
  EXPECT_FALSE(compiled->fail_closed);
  ASSERT_EQ(compiled->validations.size(), 2u);
  EXPECT_TRUE(compiled->validations[0].expression.program.has_value());
  EXPECT_EQ(compiled->validations[0].message, "starts with a");
  EXPECT_FALSE(compiled->validations[1].expression.program.has_value());
  EXPECT_NE(compiled->validations[1].expression.compile_error.find("undeclared reference to 'nope'"),
            std::string::npos);
  EXPECT_EQ(policy_variable_names().size(), static_cast<std::size_t>(policy_slot_count));
}

}  // namespace
}  // namespace kwatch::kinds
