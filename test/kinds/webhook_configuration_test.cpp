// Webhook configurations as kinds: kube's validation texts and field paths (with what an update
// keeps of a stored configuration), and the compiled form the webhook plugins call.
#include "kinds/webhook_configuration.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <string>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;
using apimachinery::Cause;

// A configuration of one valid webhook (defaults set, as stored) with `webhook` merged over it.
json::object configuration(std::string_view webhook_override = "{}", bool mutating = false) {
  json::object c = json::parse(R"j({
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "deny"},
    "webhooks": [{
      "name": "deny.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
      "clientConfig": {"url": "https://127.0.0.1:8443/validate"},
      "failurePolicy": "Fail", "matchPolicy": "Equivalent", "namespaceSelector": {},
      "objectSelector": {}, "timeoutSeconds": 10,
      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["configmaps"], "scope": "*"}]}]})j").as_object();
  if (mutating) {
    c["kind"] = "MutatingWebhookConfiguration";
    c["webhooks"].as_array()[0].as_object()["reinvocationPolicy"] = "Never";
  }
  const json::value o = json::parse(webhook_override);
  for (const auto& [k, v] : o.as_object()) c["webhooks"].as_array()[0].as_object()[k] = v;
  return c;
}

std::string causes_of(const json::object& c, const json::object* old = nullptr,
                      bool mutating = false) {
  std::vector<Cause> causes;
  if (mutating) {
    validate_mutating_webhook_configuration(c, old, causes);
  } else {
    validate_validating_webhook_configuration(c, old, causes);
  }
  std::string out;
  for (const auto& cause : causes) out += cause.field + ": " + cause.message + "\n";
  return out;
}

TEST(WebhookConfigurationValidation, AValidConfigurationHasNoCauses) {
  EXPECT_EQ(causes_of(configuration()), "");
  EXPECT_EQ(causes_of(configuration("{}", true), nullptr, true), "");
}

TEST(WebhookConfigurationValidation, TheNameIsAFullyQualifiedDomain) {
  EXPECT_EQ(causes_of(configuration(R"({"name": "example.com"})")),
            "webhooks[0].name: Invalid value: \"example.com\": should be a domain with at least "
            "three segments separated by dots\n");
  EXPECT_EQ(causes_of(configuration(R"({"name": ""})")), "webhooks[0].name: Required value\n");
  EXPECT_NE(causes_of(configuration(R"({"name": "Deny.Example.com"})")).find("RFC 1123"),
            std::string::npos);
}

TEST(WebhookConfigurationValidation, DuplicateNamesAreRefusedUnlessStoredSo) {
  auto c = configuration();
  auto& hooks = c["webhooks"].as_array();
  hooks.push_back(hooks[0]);
  EXPECT_EQ(causes_of(c), "webhooks[1].name: Duplicate value: \"deny.example.com\"\n");
  // An update of a configuration that already had them keeps them.
  EXPECT_EQ(causes_of(c, &c), "");
}

TEST(WebhookConfigurationValidation, SideEffectsTimeoutAndVersions) {
  auto c = configuration();
  c["webhooks"].as_array()[0].as_object().erase("sideEffects");
  EXPECT_EQ(causes_of(c),
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun\n");
  EXPECT_EQ(causes_of(configuration(R"({"sideEffects": "Some"})")),
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", "
            "\"NoneOnDryRun\"\n");
  // A stored webhook with side effects lets an update keep them.
  const auto old = configuration(R"({"sideEffects": "Unknown"})");
  EXPECT_EQ(causes_of(configuration(R"({"sideEffects": "Some"})"), &old), "");
  EXPECT_EQ(causes_of(configuration(R"({"timeoutSeconds": 31})")),
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 "
            "and 30 seconds\n");
  EXPECT_EQ(causes_of(configuration(R"({"admissionReviewVersions": []})")),
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, "
            "v1beta1\n");
  EXPECT_EQ(causes_of(configuration(R"({"admissionReviewVersions": ["v2", "v2"]})")),
            "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v2\": duplicate version\n"
            "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must "
            "include at least one of v1, v1beta1\n");
}

TEST(WebhookConfigurationValidation, ClientConfigIsAnHttpsUrlOrAService) {
  EXPECT_EQ(causes_of(configuration(R"({"clientConfig": {}})")),
            "webhooks[0].clientConfig: Required value: exactly one of url or service is "
            "required\n");
  EXPECT_EQ(causes_of(configuration(R"({"clientConfig": {"url": "http://u:p@h/x?a=b#f"}})")),
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed "
            "URL scheme; desired format: https://host[/path]\n"
            "webhooks[0].clientConfig.url: Invalid value: \"u:p\": user information is not "
            "permitted in the URL\n"
            "webhooks[0].clientConfig.url: Invalid value: \"f\": fragments are not permitted in "
            "the URL\n"
            "webhooks[0].clientConfig.url: Invalid value: \"a=b\": query parameters are not "
            "permitted in the URL\n");
  EXPECT_EQ(causes_of(configuration(R"({"clientConfig": {"url": "example.com/hook"}})")),
            "webhooks[0].clientConfig.url: Invalid value: \"\": 'https' is the only allowed URL "
            "scheme; desired format: https://host[/path]\n"
            "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired "
            "format: https://host[/path]\n");
  // kube reports a missing namespace at `.name` and a missing name at `.namespace`.
  EXPECT_EQ(causes_of(configuration(
                R"({"clientConfig": {"service": {"name": "hook", "port": 0, "path": "/a//b"}}})")),
            "webhooks[0].clientConfig.service.name: Required value\n"
            "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be "
            "between 1 and 65535, inclusive\n"
            "webhooks[0].clientConfig.service.path: Invalid value: \"/a//b\": segment[1] may not "
            "be empty\n");
}

TEST(WebhookConfigurationValidation, RulesPoliciesAndMatchConditions) {
  EXPECT_EQ(causes_of(configuration(R"({"rules": [{"apiGroups": [""], "apiVersions": ["v1"],
      "operations": ["PATCH"], "resources": ["pods"], "scope": "*"}], "failurePolicy": "Never",
      "matchPolicy": "Loose"})")),
            "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\": supported values: "
            "\"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"\n"
            "webhooks[0].failurePolicy: Unsupported value: \"Never\": supported values: \"Fail\", "
            "\"Ignore\"\n"
            "webhooks[0].matchPolicy: Unsupported value: \"Loose\": supported values: "
            "\"Equivalent\", \"Exact\"\n");
  EXPECT_EQ(causes_of(configuration(R"({"reinvocationPolicy": "Always"})", true), nullptr, true),
            "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: "
            "\"IfNeeded\", \"Never\"\n");
  EXPECT_EQ(causes_of(configuration(R"({"matchConditions": [
      {"name": "a", "expression": "object.metadata.name"},
      {"name": "a", "expression": "params.x == 1"}]})")),
            "webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name\": "
            "must evaluate to bool\n"
            "webhooks[0].matchConditions[1].expression: Invalid value: \"params.x == 1\": "
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in "
            "container '')\n | params.x == 1\n | ^\n"
            "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"\n");
}

TEST(WebhookConfigurationValidation, CompiledWebhooksCarryWhatACallNeeds) {
  auto c = configuration(R"({"clientConfig": {"service": {"namespace": "ns", "name": "hook",
      "port": 8443, "path": "/v"}, "caBundle": "Q0E="}, "failurePolicy": "Ignore",
      "admissionReviewVersions": ["v2", "v1beta1", "v1"], "timeoutSeconds": 3,
      "matchConditions": [{"name": "not-system", "expression": "request.namespace != 'kube-system'"}]})",
                         true);
  c["webhooks"].as_array()[0].as_object()["reinvocationPolicy"] = "IfNeeded";
  const auto hooks = compile_webhooks(c, true);
  ASSERT_EQ(hooks.size(), 1u);
  const CompiledWebhook& h = hooks[0];
  EXPECT_EQ(h.configuration, "deny");
  EXPECT_EQ(h.name, "deny.example.com");
  ASSERT_TRUE(h.service);
  EXPECT_EQ(h.service->ns, "ns");
  EXPECT_EQ(h.service->port, 8443);
  EXPECT_EQ(h.ca_pem, "CA");
  EXPECT_FALSE(h.fail_closed);
  EXPECT_EQ(h.review_version, "v1beta1");
  EXPECT_EQ(h.timeout, std::chrono::seconds(3));
  EXPECT_TRUE(h.reinvoke);
  ASSERT_EQ(h.conditions->match_conditions.size(), 1u);
  EXPECT_TRUE(h.conditions->match_conditions[0].expression.program.has_value());
  EXPECT_TRUE(h.match.contains("resourceRules"));
}

}  // namespace
}  // namespace kwatch::kinds
