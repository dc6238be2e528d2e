// APIService as kube-aggregator validates and shows it, and the local APIServices kwatch
// registers for what it serves.
#include "kinds/api_service.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;
using apimachinery::Cause;

std::vector<Cause> check(const std::string& text) {
  std::vector<Cause> causes;
  validate_api_service(json::parse(text).as_object(), nullptr, causes);
  return causes;
}

std::string describe(const std::vector<Cause>& causes) {
  std::string out;
  for (const auto& c : causes) out += c.field + ": " + c.message + "\n";
  return out;
}

TEST(ApiService, ARemoteOneValidates) {
  auto causes = check(R"({"metadata":{"name":"v1beta1.metrics.k8s.io"},"spec":{
      "group":"metrics.k8s.io","version":"v1beta1","groupPriorityMinimum":100,
      "versionPriority":100,"insecureSkipTLSVerify":true,
      "service":{"namespace":"kube-system","name":"metrics-server","port":443}}})");
  EXPECT_TRUE(causes.empty()) << describe(causes);
}

TEST(ApiService, KubesMessagesForABadOne) {
  auto causes = check(R"({"metadata":{"name":"v1.wrong.example.com"},"spec":{
      "group":"example.com","version":"V1","groupPriorityMinimum":20001,"versionPriority":0,
      "caBundle":"Zm9vYg==","insecureSkipTLSVerify":true}})");
  ASSERT_EQ(causes.size(), 6u) << describe(causes);
  EXPECT_EQ(causes[0].field, "metadata.name");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"v1.wrong.example.com\": must be `spec.version+\".\"+spec.group`: "
            "\"V1.example.com\"");
  EXPECT_EQ(causes[1].field, "spec.version");
  EXPECT_EQ(causes[2].message,
            "Invalid value: 20001: must be positive and less than 20000");
  EXPECT_EQ(causes[3].message, "Invalid value: 0: must be positive and less than 1000");
  EXPECT_EQ(causes[4].field, "spec.caBundle");
  EXPECT_EQ(causes[4].message,
            "Invalid value: \"4 bytes\": local APIServices may not have a caBundle");
  EXPECT_EQ(causes[5].message,
            "Invalid value: true: local APIServices may not have insecureSkipTLSVerify");
}

TEST(ApiService, TheCoreGroupIsV1Only) {
  auto causes = check(R"({"metadata":{"name":"v2."},"spec":{"group":"","version":"v2",
      "groupPriorityMinimum":1,"versionPriority":1}})");
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].message,
            "Required value: only v1 may have an empty group and it better be legacy kube");
}

TEST(ApiService, ARemoteOneNeedsItsServiceAndOneWayToTrustIt) {
  auto causes = check(R"({"metadata":{"name":"v1.x.example.com"},"spec":{"group":"x.example.com",
      "version":"v1","groupPriorityMinimum":1,"versionPriority":1,"caBundle":"Zm9v",
      "insecureSkipTLSVerify":true,"service":{"port":70000}}})");
  ASSERT_EQ(causes.size(), 4u) << describe(causes);
  EXPECT_EQ(causes[0].field, "spec.service.namespace");
  EXPECT_EQ(causes[1].field, "spec.service.name");
  EXPECT_EQ(causes[2].message,
            "Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive");
  EXPECT_EQ(causes[3].message, "Invalid value: true: may not be true if caBundle is present");
}

TEST(ApiService, ConditionStatusesAreKubes) {
  auto causes = check(R"({"metadata":{"name":"v1.x.example.com"},"spec":{"group":"x.example.com",
      "version":"v1","groupPriorityMinimum":1,"versionPriority":1},
      "status":{"conditions":[{"type":"Available","status":"Maybe"}]}})");
  ASSERT_EQ(causes.size(), 1u) << describe(causes);
  EXPECT_EQ(causes[0].field, "status.conditions[0].status");
}

TEST(ApiService, ALocalOneIsAvailableFromItsCreate) {
  json::object local = local_api_service("apps", "v1", {17800, 15}, kAutomanagedOnStart);
  local["status"] = json::object{{"conditions", json::array{}}};
  prepare_api_service(local);
  EXPECT_EQ(api_service_target(local), "Local");
  EXPECT_EQ(api_service_available(local), "True");
  const auto& c = local["status"].at("conditions").at(0).as_object();
  EXPECT_EQ(c.at("reason").as_string(), "Local");
  EXPECT_EQ(c.at("message").as_string(), "Local APIServices are always available");
  EXPECT_EQ(local["metadata"].at("name").as_string(), "v1.apps");

  json::object remote = json::parse(R"({"spec":{"service":{"namespace":"ops","name":"m"}},
      "status":{"conditions":[{"type":"Available","status":"True"}]}})").as_object();
  prepare_api_service(remote);
  EXPECT_FALSE(remote.contains("status")) << "a create starts with no status";
  EXPECT_EQ(api_service_target(remote), "ops/m");
  EXPECT_EQ(api_service_available(remote), "Unknown");
  remote["status"] = json::parse(R"({"conditions":[{"type":"Available","status":"False",
      "reason":"FailedDiscoveryCheck"}]})");
  EXPECT_EQ(api_service_available(remote), "False (FailedDiscoveryCheck)");
}

TEST(ApiService, KubesPriorities) {
  EXPECT_EQ(api_service_name("", "v1"), "v1.");
  ASSERT_TRUE(builtin_api_service_priority("", "v1"));
  EXPECT_EQ(builtin_api_service_priority("", "v1")->group_priority_minimum, 18000);
  EXPECT_EQ(builtin_api_service_priority("autoscaling", "v2")->version_priority, 30);
  EXPECT_FALSE(builtin_api_service_priority("apiregistration.k8s.io", "v1"));
  EXPECT_FALSE(builtin_api_service_priority("example.com", "v1"));
}

}  // namespace
}  // namespace kwatch::kinds
