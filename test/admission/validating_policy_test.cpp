// The ValidatingAdmissionPolicy plugin's judgement of writes, with policies put in force by
// load() (what its cache followers do).
#include "admission/validating_policy.hpp"

#include "policy_test_support.hpp"
#include "registry/deletion.hpp"

#include <gtest/gtest.h>

namespace kwatch::admission {
namespace {

using testing::parse;
using testing::run;
using testing::scheme;
using testing::Write;

boost::json::object policy(std::string_view name, std::string_view spec_extra,
                           std::string_view failure = "Fail") {
  return parse(std::string(R"({"metadata": {"name": ")") + std::string(name) +
               R"(", "resourceVersion": "1"}, "spec": {"failurePolicy": ")" +
               std::string(failure) + R"(",
      "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {},
        "objectSelector": {}, "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"], "scope": "*"}]})" +
               std::string(spec_extra) + "}}");
}

// The policy's first resource rule, to change what it matches.
boost::json::object& first_rule(boost::json::object& policy) {
  return policy["spec"].as_object()["matchConstraints"].as_object()["resourceRules"]
      .as_array()[0].as_object();
}

boost::json::object binding(std::string_view name, std::string_view policy_name,
                            std::string_view actions) {
  return parse(std::string(R"({"metadata": {"name": ")") + std::string(name) +
               R"("}, "spec": {"policyName": ")" + std::string(policy_name) +
               R"(", "validationActions": )" + std::string(actions) + "}}");
}

boost::json::object deployment(int replicas) {
  return parse(R"({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": )" +
               std::to_string(replicas) + "}}");
}

Write deployment_write() {
  Write w;
  w.info = scheme()->find("apps", "v1", "deployments");
  w.ns = "default";
  w.name = "web";
  return w;
}

std::optional<apimachinery::ApiError> judge(ValidatingPolicyPlugin& plugin, Write& w,
                                            const boost::json::object& object) {
  auto a = w.attributes();
  if (!plugin.handles(a)) return std::nullopt;
  return run(plugin.validate(a, &object));
}

constexpr std::string_view kLimit = R"(, "validations": [{"expression": "object.spec.replicas <= 5",
    "messageExpression": "'replicas ' + string(object.spec.replicas) + ' over 5'"}])";

TEST(ValidatingPolicy, DenyRefusesWithKubesStatus) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("limit", kLimit)}, {binding("b", "limit", R"(["Deny"])")});
  auto w = deployment_write();
  EXPECT_FALSE(judge(plugin, w, deployment(3)));
  auto e = judge(plugin, w, deployment(9));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, base::Errc::invalid);
  EXPECT_EQ(e->message, "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'limit' "
                        "with binding 'b' denied request: replicas 9 over 5");
  EXPECT_EQ(e->group, "apps");
  EXPECT_EQ(e->kind, "deployments");
  ASSERT_EQ(e->causes.size(), 1u);
  EXPECT_EQ(e->causes[0].message, "ValidatingAdmissionPolicy 'limit' with binding 'b' denied request: replicas 9 over 5");
}

TEST(ValidatingPolicy, AReasonChoosesTheCodeAndAMessageTheText) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("limit", R"(, "validations": [{"expression": "object.spec.replicas <= 5",
                 "message": "too many", "reason": "Forbidden"},
                 {"expression": "object.spec.replicas != 7"}])")},
              {binding("b", "limit", R"(["Deny"])")});
  auto w = deployment_write();
  auto e = judge(plugin, w, deployment(9));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, base::Errc::forbidden);
  EXPECT_NE(e->message.find("denied request: too many"), std::string::npos) << e->message;
  e = judge(plugin, w, deployment(7));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("denied request: too many"), std::string::npos) << e->message;
  e = judge(plugin, w, deployment(3));
  EXPECT_FALSE(e);
}

TEST(ValidatingPolicy, WarnAndAuditReportWithoutRefusing) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("limit", kLimit)}, {binding("b", "limit", R"(["Warn", "Audit"])")});
  auto w = deployment_write();
  EXPECT_FALSE(judge(plugin, w, deployment(9)));
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_EQ(w.warnings[0], "Validation failed for ValidatingAdmissionPolicy 'limit' with binding "
                           "'b': replicas 9 over 5");
  ASSERT_EQ(w.annotations.size(), 1u);
  EXPECT_EQ(w.annotations[0].first, "validation.policy.admission.k8s.io/validation_failure");
  EXPECT_EQ(w.annotations[0].second,
            R"([{"message":"replicas 9 over 5","policy":"limit","binding":"b","expressionIndex":0,"validationActions":["Warn","Audit"]}])");
}

TEST(ValidatingPolicy, FailurePolicyDecidesWhatAnErrorDoes) {
  constexpr std::string_view kBroken = R"(, "validations": [{"expression": "object.spec.nope == 1"}])";
  ValidatingPolicyPlugin fail(scheme(), nullptr);
  fail.load({policy("broken", kBroken)}, {binding("b", "broken", R"(["Deny"])")});
  auto w = deployment_write();
  auto e = judge(fail, w, deployment(1));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("denied request: expression 'object.spec.nope == 1' resulted in "
                            "error: no such key: nope"),
            std::string::npos)
      << e->message;
  ValidatingPolicyPlugin ignore(scheme(), nullptr);
  ignore.load({policy("broken", kBroken, "Ignore")}, {binding("b", "broken", R"(["Deny"])")});
  EXPECT_FALSE(judge(ignore, w, deployment(1)));
}

TEST(ValidatingPolicy, MatchConditionsVariablesAndTheRequest) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("users", R"j(,
      "matchConditions": [{"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}],
      "variables": [{"name": "who", "expression": "request.userInfo.username"},
                    {"name": "shout", "expression": "variables.who.upperAscii()"}],
      "validations": [{"expression": "variables.who != 'mallory'",
                       "messageExpression": "variables.shout + ' may not ' + request.operation"}])j")},
              {binding("b", "users", R"(["Deny"])")});
  auto w = deployment_write();
  w.user.name = "mallory";
  auto e = judge(plugin, w, deployment(1));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("denied request: MALLORY may not CREATE"), std::string::npos) << e->message;
  w.user.name = "system:serviceaccount:kube-system:mallory";
  EXPECT_FALSE(judge(plugin, w, deployment(1)));
}

TEST(ValidatingPolicy, TheAuthorizerAnswersAndEveryCheckCosts) {
  // Without RBAC (AlwaysAllow) every check is allowed; a check costs 350,000, so four of them in
  // one expression pass the per-expression limit of 1,000,000.
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("authz", R"j(, "validations": [
      {"expression": "authorizer.group('apps').resource('deployments').namespace('default').check('delete').allowed()"},
      {"expression": "authorizer.requestResource.check('create').allowed() && authorizer.path('/healthz').check('get').reason() == ''"},
      {"expression": "authorizer.serviceAccount('default', 'builder').group('').resource('secrets').check('list').allowed()"}])j")},
              {binding("b", "authz", R"(["Deny"])")});
  auto w = deployment_write();
  EXPECT_FALSE(judge(plugin, w, deployment(1)));
  ValidatingPolicyPlugin costly(scheme(), nullptr);
  costly.load({policy("costly", R"j(, "validations": [
      {"expression": "[1, 2, 3, 4].all(i, authorizer.requestResource.check('create').allowed())"}])j")},
              {binding("b", "costly", R"(["Deny"])")});
  auto e = judge(costly, w, deployment(1));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("operation cancelled: actual cost limit exceeded"), std::string::npos)
      << e->message;
}

TEST(ValidatingPolicy, TheRequestCarriesTheWritesOptions) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("options", R"j(, "validations": [{"expression":
      "request.options.kind == 'CreateOptions' && request.options.fieldManager == 'kubectl-create' && request.options.fieldValidation == 'Strict' && !has(request.options.dryRun)"}])j")},
              {binding("b", "options", R"(["Deny"])")});
  auto w = deployment_write();
  auto a = w.attributes();
  a.field_manager = "kubectl-create";
  a.field_validation = "Strict";
  const auto object = deployment(1);
  EXPECT_FALSE(run(plugin.validate(a, &object)));
  a.field_manager = "";
  EXPECT_TRUE(run(plugin.validate(a, &object)));
}

TEST(ValidatingPolicy, ADeletesOptionsAreInTheRequest) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  auto deletes = policy("delete-options", R"j(, "validations": [{"expression":
      "request.options.kind == 'DeleteOptions' && request.options.propagationPolicy == 'Foreground' && request.options.gracePeriodSeconds == 5 && request.options.preconditions.uid == 'u-1' && !has(request.options.preconditions.resourceVersion) && !has(request.options.orphanDependents)"}])j");
  first_rule(deletes)["operations"] = boost::json::array{"DELETE"};
  plugin.load({deletes}, {binding("b", "delete-options", R"(["Deny"])")});
  auto w = deployment_write();
  auto a = w.attributes();
  a.operation = registry::AdmissionOperation::remove;
  const auto old = deployment(1);
  a.old_object = &old;
  registry::DeleteQuery query;
  query.propagation = registry::Propagation::foreground;
  query.grace_period_seconds = 5;
  query.uid = "u-1";
  a.delete_query = &query;
  EXPECT_FALSE(run(plugin.validate(a, nullptr)));
  query.propagation = registry::Propagation::orphan;
  EXPECT_TRUE(run(plugin.validate(a, nullptr)));
  // A delete with no options has none of them.
  registry::DeleteQuery none;
  a.delete_query = &none;
  EXPECT_TRUE(run(plugin.validate(a, nullptr)));
}

TEST(ValidatingPolicy, AConnectIsJudgedOnItsOptions) {
  // As kube sends pods/exec to admission: operation CONNECT, the object the PodExecOptions, the
  // kind theirs, no request options.
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  auto no_rm = policy("no-rm", R"j(, "validations": [{"expression":
      "request.kind.kind == 'PodExecOptions' && request.subResource == 'exec' && !has(request.options) && oldObject == null && object.command[0] != 'rm'",
      "messageExpression": "'no ' + object.command[0] + ' in ' + request.name"}])j");
  auto& rule = first_rule(no_rm);
  rule["operations"] = boost::json::array{"CONNECT"};
  rule["apiGroups"] = boost::json::array{""};
  rule["resources"] = boost::json::array{"pods/exec"};
  plugin.load({no_rm}, {binding("b", "no-rm", R"(["Deny"])")});
  Write w;
  w.info = scheme()->find("", "v1", "pods");
  w.ns = "default";
  w.name = "web-0";
  w.subresource = "exec";
  w.operation = registry::AdmissionOperation::connect;
  auto a = w.attributes();
  const auto ls = parse(R"({"kind": "PodExecOptions", "apiVersion": "v1", "command": ["ls"]})");
  EXPECT_TRUE(plugin.handles(a));
  EXPECT_FALSE(run(plugin.validate(a, &ls)));
  const auto rm = parse(R"({"kind": "PodExecOptions", "apiVersion": "v1", "command": ["rm", "-rf"]})");
  auto e = run(plugin.validate(a, &rm));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("no rm in web-0"), std::string::npos) << e->message;
  // Creating the pod is no connect: the policy does not apply.
  w.subresource = "";
  w.operation = registry::AdmissionOperation::create;
  auto create = w.attributes();
  EXPECT_FALSE(run(plugin.validate(create, &rm)));
}

TEST(ValidatingPolicy, TheBudgetStopsAnExpensiveEvaluation) {
  // Each expression stays under the per-call limit; together they run past the policy's budget.
  std::string validations = R"(, "validations": [)";
  const std::string ten = "[1,2,3,4,5,6,7,8,9,10]";
  const std::string nested = ten + ".all(a, " + ten + ".all(b, " + ten + ".all(c, " + ten +
                             ".all(d, " + ten + ".all(e, a + b + c + d + e > 0)))))";
  for (int i = 0; i < 40; ++i) {
    if (i) validations += ",";
    validations += R"({"expression": ")" + nested + R"("})";
  }
  validations += "]";
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("costly", validations)}, {binding("b", "costly", R"(["Deny"])")});
  auto w = deployment_write();
  auto e = judge(plugin, w, deployment(1));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("validation failed due to running out of cost budget, no further "
                            "validation rules will be run"),
            std::string::npos)
      << e->message;
}

TEST(ValidatingPolicy, PolicyKindsAreExemptAndBindinglessPoliciesIdle) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  plugin.load({policy("limit", kLimit)}, {});
  auto w = deployment_write();
  EXPECT_FALSE(plugin.handles(w.attributes()));
  plugin.load({policy("limit", kLimit)}, {binding("b", "limit", R"(["Deny"])")});
  EXPECT_TRUE(plugin.handles(w.attributes()));
  Write self;
  self.info = scheme()->find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies");
  self.name = "limit";
  EXPECT_FALSE(plugin.handles(self.attributes()));
}

TEST(ValidatingPolicy, UsersAreRefusedUntilThePoliciesAreLoaded) {
  ValidatingPolicyPlugin plugin(scheme(), nullptr);
  auto w = deployment_write();
  EXPECT_TRUE(plugin.handles(w.attributes()));
  auto e = run(plugin.validate(w.attributes(), nullptr));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, base::Errc::forbidden);
  EXPECT_EQ(e->message, "deployments.apps \"web\" is forbidden: not yet ready to handle request");
  auto a = w.attributes();
  a.user = nullptr;  // kwatch's own start-up writes
  EXPECT_FALSE(plugin.handles(a));
}

}  // namespace
}  // namespace kwatch::admission
