#include "kinds/horizontal_pod_autoscaler.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

namespace kwatch::kinds {

using apimachinery::Cause;

namespace {

namespace json = boost::json;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

constexpr const char* kV1 = R"({"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler",
  "metadata":{"name":"web"},
  "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
          "minReplicas":2,"maxReplicas":5,"targetCPUUtilizationPercentage":60},
  "status":{"currentReplicas":2,"desiredReplicas":2,"currentCPUUtilizationPercentage":40}})";

TEST(HorizontalPodAutoscaler, V1CpuTargetBecomesAV2ResourceMetric) {
  json::object hpa = parse(kV1);
  horizontal_pod_autoscaler_to_v2(hpa);
  EXPECT_EQ(hpa.at("apiVersion"), "autoscaling/v2");
  EXPECT_EQ(hpa.at("spec").at("metrics"), json::parse(R"([{"type":"Resource","resource":
      {"name":"cpu","target":{"type":"Utilization","averageUtilization":60}}}])"));
  EXPECT_FALSE(hpa.at("spec").as_object().contains("targetCPUUtilizationPercentage"));
  EXPECT_EQ(hpa.at("status").at("currentMetrics"), json::parse(R"([{"type":"Resource","resource":
      {"name":"cpu","current":{"averageUtilization":40}}}])"));
  horizontal_pod_autoscaler_to_v1(hpa);
  EXPECT_EQ(hpa.at("spec"), parse(kV1).at("spec"));
  EXPECT_EQ(hpa.at("status").at("currentCPUUtilizationPercentage"), 40);
}

TEST(HorizontalPodAutoscaler, AV1ObjectWithoutTargetGetsKubesImplicitOne) {
  json::object hpa = parse(R"({"apiVersion":"autoscaling/v1","spec":{"maxReplicas":3}})");
  horizontal_pod_autoscaler_to_v2(hpa);
  EXPECT_EQ(hpa.at("spec").at("metrics").at(0).at("resource").at("target").at("averageUtilization"), 80);
}

TEST(HorizontalPodAutoscaler, WhatV1CannotSayRidesInAnnotationsAndComesBack) {
  const char* v2 = R"({"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
    "metadata":{"name":"web","annotations":{"team":"a"}},
    "spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},
            "minReplicas":1,"maxReplicas":10,
            "metrics":[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":70}}},
                       {"type":"Pods","pods":{"metric":{"name":"rps"},"target":{"type":"AverageValue","averageValue":"100"}}},
                       {"type":"External","external":{"metric":{"name":"queue"},"target":{"type":"Value","value":"30"}}},
                       {"type":"Object","object":{"describedObject":{"kind":"Service","name":"s"},
                         "metric":{"name":"hits"},"target":{"type":"Value","value":"5"}}},
                       {"type":"Resource","resource":{"name":"memory","target":{"type":"AverageValue","averageValue":"1Gi"}}}],
            "behavior":{"scaleDown":{"stabilizationWindowSeconds":60}}},
    "status":{"currentReplicas":1,"desiredReplicas":1,
              "conditions":[{"type":"AbleToScale","status":"True","reason":"Ready"}],
              "currentMetrics":[{"type":"Resource","resource":{"name":"cpu","current":{"averageUtilization":35}}}]}})";
  json::object hpa = parse(v2);
  horizontal_pod_autoscaler_to_v1(hpa);
  const json::object& annotations = hpa.at("metadata").at("annotations").as_object();
  EXPECT_EQ(hpa.at("spec").at("targetCPUUtilizationPercentage"), 70);
  EXPECT_EQ(json::parse(annotations.at("autoscaling.alpha.kubernetes.io/metrics").as_string()).at(0),
            json::parse(R"({"type":"Pods","pods":{"metricName":"rps","targetAverageValue":"100"}})"));
  EXPECT_TRUE(annotations.contains("autoscaling.alpha.kubernetes.io/behavior"));
  EXPECT_TRUE(annotations.contains("autoscaling.alpha.kubernetes.io/conditions"));
  EXPECT_EQ(hpa.at("status").at("currentCPUUtilizationPercentage"), 35);
  EXPECT_FALSE(hpa.at("status").as_object().contains("conditions"));
  horizontal_pod_autoscaler_to_v2(hpa);
  json::object want = parse(v2);
  // kube's order: the annotation's metrics first, then the CPU target.
  json::array& metrics = want["spec"].as_object()["metrics"].as_array();
  json::value cpu = metrics[0];
  metrics.erase(metrics.begin());
  metrics.push_back(cpu);
  EXPECT_EQ(hpa, want);
}

TEST(HorizontalPodAutoscalerDefaults, MinReplicasCpuTargetAndScalingRules) {
  json::object hpa = parse(R"({"spec":{"maxReplicas":3,"behavior":{"scaleUp":{"selectPolicy":"Min"}}}})");
  default_horizontal_pod_autoscaler(hpa);
  EXPECT_EQ(hpa.at("spec").at("minReplicas"), 1);
  EXPECT_EQ(hpa.at("spec").at("metrics").as_array().size(), 1u);
  const json::value& b = hpa.at("spec").at("behavior");
  EXPECT_EQ(b.at("scaleUp").at("selectPolicy"), "Min");
  EXPECT_EQ(b.at("scaleUp").at("stabilizationWindowSeconds"), 0);
  EXPECT_EQ(b.at("scaleDown").at("stabilizationWindowSeconds"), 300);
  EXPECT_EQ(b.at("scaleUp").at("policies").as_array().size(), 2u);
}

TEST(HorizontalPodAutoscalerValidation, TargetAndReplicaBounds) {
  std::vector<Cause> causes;
  validate_horizontal_pod_autoscaler(
      parse(R"({"spec":{"scaleTargetRef":{},"minReplicas":4,"maxReplicas":2,
                "metrics":[{"type":"Pods"}]}})"),
      nullptr, causes);
  std::string out;
  for (const auto& c : causes) out += c.field + ": " + c.message + "\n";
  EXPECT_EQ(out,
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`\n"
            "spec.metrics[0].pods: Required value: must populate information for the given "
            "metric source\n");
}

TEST(HorizontalPodAutoscalerColumns, TargetsAsKubectlPrintsThem) {
  EXPECT_EQ(horizontal_pod_autoscaler_targets(parse(kV1)), "cpu: 40%/60%");
  json::object none = parse(R"({"apiVersion":"autoscaling/v2","spec":{"metrics":[
      {"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}},
      {"type":"Pods","pods":{"metric":{"name":"rps"},"target":{"type":"AverageValue","averageValue":"1k"}}},
      {"type":"External","external":{"metric":{"name":"q"},"target":{"type":"AverageValue","averageValue":"3"}}}]}})");
  EXPECT_EQ(horizontal_pod_autoscaler_targets(none), "cpu: <unknown>/80%, <unknown>/1k + 1 more...");
  EXPECT_EQ(horizontal_pod_autoscaler_targets(parse(R"({"spec":{}})")), "<none>");
}

}  // namespace
}  // namespace kwatch::kinds
