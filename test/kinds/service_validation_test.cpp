// A Service's validation and strategy as kube-apiserver 1.34 words them.
#include "kinds/service_validation.hpp"

#include "kinds/builtin_columns.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

// "<field>: <message>" of each cause of `spec` (a Service's spec as JSON), given `old_spec`.
std::vector<std::string> problems(std::string_view spec, std::string_view old_spec = "") {
  const auto svc = parse(R"({"metadata":{"name":"s"},"spec":)" + std::string(spec) + "}");
  std::optional<json::object> old;
  if (!old_spec.empty()) {
    old = parse(R"({"metadata":{"name":"s"},"spec":)" + std::string(old_spec) + "}");
  }
  Causes causes;
  validate_service(svc, old ? &*old : nullptr, causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

using V = std::vector<std::string>;

TEST(ServiceValidation, AValidServiceHasNoProblems) {
  EXPECT_EQ(problems(R"({"type":"ClusterIP","ports":[{"name":"http","port":80,"targetPort":"web"},
      {"name":"dns","port":53,"protocol":"UDP","targetPort":5353}],"selector":{"app":"web"},
      "clusterIP":"10.0.0.5","clusterIPs":["10.0.0.5"],"ipFamilies":["IPv4"],
      "ipFamilyPolicy":"SingleStack","sessionAffinity":"ClientIP",
      "sessionAffinityConfig":{"clientIP":{"timeoutSeconds":10800}},
      "internalTrafficPolicy":"Cluster","trafficDistribution":"PreferClose"})"),
            V{});
  EXPECT_EQ(problems(R"({"type":"ExternalName","externalName":"db.example.com."})"), V{});
  EXPECT_EQ(problems(R"({"clusterIP":"None","clusterIPs":["None"]})"), V{}) << "headless";
}

TEST(ServiceValidation, PortsAsKubeChecksThem) {
  EXPECT_EQ(problems(R"({"type":"ClusterIP"})"), V{"spec.ports: Required value"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80},{"port":81,"name":"b"}]})"),
            V{"spec.ports[0].name: Required value"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80,"name":"a"},{"port":81,"name":"a"}]})"),
            V{"spec.ports[1].name: Duplicate value: \"a\""});
  EXPECT_EQ(problems(R"({"ports":[{"port":80,"targetPort":"web--x"}]})"),
            V{"spec.ports[0].targetPort: Invalid value: \"web--x\": must not contain "
              "consecutive hyphens"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80,"targetPort":70000}]})"),
            V{"spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, "
              "inclusive"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80,"appProtocol":"-x"}]})").size(), 1u);
  EXPECT_EQ(problems(R"({"type":"ClusterIP","ports":[{"port":80,"nodePort":30080}]})"),
            V{"spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"});
  EXPECT_EQ(problems(R"({"type":"NodePort","ports":[{"name":"a","port":80,"nodePort":30080},
      {"name":"b","port":81,"nodePort":30080}]})"),
            V{"spec.ports[1].nodePort: Duplicate value: 30080"});
}

TEST(ServiceValidation, ExternalNameServices) {
  EXPECT_EQ(problems(R"({"type":"ExternalName"})"), V{"spec.externalName: Required value"});
  EXPECT_EQ(problems(R"({"type":"ExternalName","externalName":"Not_A_Name"})").size(), 1u);
  EXPECT_EQ(problems(R"({"type":"ExternalName","externalName":"db","clusterIP":"10.0.0.5",
      "clusterIPs":["10.0.0.5"],"ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack"})"),
            (V{"spec.clusterIPs: Forbidden: may not be set for ExternalName services",
               "spec.ipFamilies: Forbidden: may not be set for ExternalName services",
               "spec.ipFamilyPolicy: Forbidden: may not be set for ExternalName services"}));
}

TEST(ServiceValidation, SelectorAndAffinity) {
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"selector":{"app":"a b"}})").size(), 1u);
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"sessionAffinity":"ClientIP",
      "sessionAffinityConfig":{"clientIP":{"timeoutSeconds":90000}}})"),
            V{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 90000: must be "
              "greater than 0 and less than 86400"});
}

TEST(ServiceValidation, ClusterIPsIPFamiliesAndPolicy) {
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5",
      "clusterIPs":["10.0.0.6"]})"),
            V{"spec.clusterIPs: Invalid value: []string{\"10.0.0.6\"}: first value must match "
              "`clusterIP`"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIPs":["10.0.0.6"]})"),
            V{"spec.clusterIPs: Invalid value: []string{\"10.0.0.6\"}: must be empty when "
              "`clusterIP` is not specified"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"x","clusterIPs":["x"]})"),
            V{"spec.clusterIPs[0]: Invalid value: \"x\": must be a valid IP address, (e.g. "
              "10.9.8.7 or 2001:db8::ffff)"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5",
      "clusterIPs":["10.0.0.5","10.0.0.6"]})"),
            V{"spec.clusterIPs: Invalid value: []string{\"10.0.0.5\", \"10.0.0.6\"}: may specify "
              "no more than one IP for each IP family"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5","clusterIPs":["10.0.0.5"],
      "ipFamilies":["IPv6"]})"),
            V{"spec.clusterIPs[0]: Invalid value: \"10.0.0.5\": expected an IPv6 value as "
              "indicated by `ipFamilies[0]`"});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"ipFamilies":["IPv4","IPv4"],
      "ipFamilyPolicy":"Both"})"),
            (V{"spec.ipFamilies[1]: Duplicate value: \"IPv4\"",
               "spec.ipFamilyPolicy: Unsupported value: \"Both\": supported values: "
               "\"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""}));
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"None",
      "clusterIPs":["None","10.0.0.5"]})"),
            V{"spec.clusterIPs: Invalid value: []string{\"None\", \"10.0.0.5\"}: 'None' must be "
              "the first and only value"});
}

TEST(ServiceValidation, AddressesAndPoliciesByType) {
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"externalIPs":["127.0.0.1"]})"),
            V{"spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback "
              "range (127.0.0.0/8, ::1/128)"});
  EXPECT_EQ(problems(R"({"type":"ClusterIP","ports":[{"port":80}],
      "loadBalancerSourceRanges":["10.0.0.0/8"],"allocateLoadBalancerNodePorts":true,
      "loadBalancerClass":"example.com/lb","externalTrafficPolicy":"Local",
      "healthCheckNodePort":30001})"),
            (V{"spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is "
               "'LoadBalancer'",
               "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is "
               "'LoadBalancer'",
               "spec.loadBalancerClass: Forbidden: may only be used when `type` is "
               "'LoadBalancer'",
               "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for "
               "externally-accessible services",
               "spec.healthCheckNodePort: Invalid value: 30001: may only be set when `type` is "
               "'LoadBalancer' and `externalTrafficPolicy` is 'Local'"}));
  EXPECT_EQ(problems(R"({"type":"LoadBalancer","ports":[{"port":80}],
      "loadBalancerSourceRanges":["10.0.0.0/33"],"internalTrafficPolicy":"Nearby",
      "trafficDistribution":"Anywhere"})"),
            (V{"spec.LoadBalancerSourceRanges[0]: Invalid value: \"10.0.0.0/33\": must be a valid "
               "CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
               "spec.internalTrafficPolicy: Unsupported value: \"Nearby\": supported values: "
               "\"Cluster\", \"Local\"",
               "spec.trafficDistribution: Unsupported value: \"Anywhere\": supported values: "
               "\"PreferClose\", \"PreferSameZone\", \"PreferSameNode\""}));
}

TEST(ServiceValidation, AnUpdateKeepsItsPrimaryIPAndReleasesOnlyWhenSingleStack) {
  const char* dual = R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5",
      "clusterIPs":["10.0.0.5","fd00::5"],"ipFamilies":["IPv4","IPv6"],
      "ipFamilyPolicy":"PreferDualStack"})";
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5","clusterIPs":["10.0.0.5"],
      "ipFamilies":["IPv4"],"ipFamilyPolicy":"PreferDualStack"})", dual),
            (V{"spec.ipFamilyPolicy: Invalid value: \"PreferDualStack\": must be set to "
               "'SingleStack' when releasing the secondary clusterIP",
               "spec.ipFamilyPolicy: Invalid value: \"PreferDualStack\": must be set to "
               "'SingleStack' when releasing the secondary ipFamily"}));
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.5","clusterIPs":["10.0.0.5"],
      "ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack"})", dual),
            V{});
  EXPECT_EQ(problems(R"({"ports":[{"port":80}],"clusterIP":"10.0.0.7",
      "clusterIPs":["10.0.0.7","fd00::5"],"ipFamilies":["IPv4","IPv6"],
      "ipFamilyPolicy":"PreferDualStack"})", dual),
            V{"spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.7\", \"fd00::5\"}: may not "
              "change once set"});
}

TEST(ServiceStrategy, ATypeChangeDropsWhatTheClientCarriedOver) {
  auto old = parse(R"({"spec":{"type":"NodePort","clusterIP":"10.0.0.5",
      "clusterIPs":["10.0.0.5"],"ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack",
      "externalTrafficPolicy":"Cluster","ports":[{"port":80,"nodePort":30080}]}})");
  auto to_cluster_ip = old;
  to_cluster_ip["spec"].as_object()["type"] = "ClusterIP";
  prepare_service_for_update(to_cluster_ip, old);
  EXPECT_EQ(to_cluster_ip["spec"].at("ports"), json::parse(R"([{"port":80}])"));
  EXPECT_FALSE(to_cluster_ip["spec"].as_object().contains("externalTrafficPolicy"));
  EXPECT_EQ(to_cluster_ip["spec"].at("clusterIP"), "10.0.0.5");
  auto to_external = old;
  to_external["spec"].as_object()["type"] = "ExternalName";
  to_external["spec"].as_object()["externalName"] = "db.example.com";
  prepare_service_for_update(to_external, old);
  for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"}) {
    EXPECT_FALSE(to_external["spec"].as_object().contains(f)) << f;
  }
  // What the client changed itself stays, for validation to judge.
  auto asked = old;
  asked["spec"].as_object()["type"] = "ClusterIP";
  asked["spec"].at("ports").at(0).as_object()["nodePort"] = 30081;
  prepare_service_for_update(asked, old);
  EXPECT_EQ(asked["spec"].at("ports").at(0).at("nodePort"), 30081);
}

TEST(ServiceStrategy, AnOldClientsClusterIPAloneGivesClusterIPs) {
  auto created = parse(R"({"spec":{"clusterIP":"10.0.0.9","ports":[{"port":80}]}})");
  prepare_service_for_create(created);
  EXPECT_EQ(created["spec"].at("clusterIPs"), json::parse(R"(["10.0.0.9"])"));
  EXPECT_EQ(created["status"], json::parse(R"({"loadBalancer":{}})"));
  auto old = parse(R"({"spec":{"clusterIP":"10.0.0.9","clusterIPs":["10.0.0.9"]}})");
  auto patched = parse(R"({"spec":{"clusterIP":"10.0.0.9"}})");
  prepare_service_for_update(patched, old);
  EXPECT_EQ(patched["spec"].at("clusterIPs"), json::parse(R"(["10.0.0.9"])"));
}

// kubectl's EXTERNAL-IP column (getServiceExternalIP): by the Service's type.
TEST(ServiceColumns, TheExternalIPColumnAsKubectlPrintsIt) {
  auto external_ip = [](std::string_view text) {
    const auto obj = parse(text);
    for (const auto& c : builtin_columns("", "Service")) {
      if (c.name == "External-IP") {
        return std::string(c.cell(obj, std::chrono::system_clock::now()).as_string());
      }
    }
    return std::string("no column");
  };
  EXPECT_EQ(external_ip(R"({"spec":{"type":"ExternalName","externalName":"db.example.com"}})"),
            "db.example.com");
  EXPECT_EQ(external_ip(R"({"spec":{"type":"ClusterIP"}})"), "<none>");
  EXPECT_EQ(external_ip(R"({"spec":{"type":"NodePort","externalIPs":["1.2.3.4","5.6.7.8"]}})"),
            "1.2.3.4,5.6.7.8");
  EXPECT_EQ(external_ip(R"({"spec":{"type":"LoadBalancer"}})"), "<pending>");
  EXPECT_EQ(external_ip(R"({"spec":{"type":"LoadBalancer","externalIPs":["9.9.9.9"]},
      "status":{"loadBalancer":{"ingress":[{"ip":"1.1.1.1"},{"hostname":"lb.example.com"}]}}})"),
            "1.1.1.1,lb.example.com,9.9.9.9");
}

}  // namespace
}  // namespace kwatch::kinds
