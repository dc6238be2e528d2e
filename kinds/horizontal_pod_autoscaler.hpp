// HorizontalPodAutoscalers, served as autoscaling/v2 and autoscaling/v1 over one stored form
// (v2), as kube-apiserver serves them.
//
// v1 has one metric, `targetCPUUtilizationPercentage`; everything else v2 says rides in
// annotations of the v1 object, as kube's conversion puts it there:
//   autoscaling.alpha.kubernetes.io/metrics          spec metrics other than CPU utilization,
//                                                    in autoscaling/v1's MetricSpec form
//   autoscaling.alpha.kubernetes.io/current-metrics  status.currentMetrics (v1 MetricStatus)
//   autoscaling.alpha.kubernetes.io/conditions       status.conditions
//   autoscaling.alpha.kubernetes.io/behavior         spec.behavior (v2's form)
// so a v1 client that reads and writes an object back loses nothing. A v1 object without any
// metric gets kube's implicit 80% CPU target.
//
// Pure functions over JSON objects; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace kwatch::kinds {

// In place: a v1 object to the stored v2 form, and back.
void horizontal_pod_autoscaler_to_v2(boost::json::object& hpa);
void horizontal_pod_autoscaler_to_v1(boost::json::object& hpa);

// autoscaling/v2's defaulting: minReplicas 1, an 80% CPU target when there is no metric, and the
// scaling rules a given behavior leaves out.
void default_horizontal_pod_autoscaler(boost::json::object& hpa);

// ValidateHorizontalPodAutoscaler's rules that the schema cannot say.
void validate_horizontal_pod_autoscaler(const boost::json::object& hpa,
                                        const boost::json::object* old,
                                        std::vector<apimachinery::Cause>& causes);

// kubectl's TARGETS column (formatHPAMetrics) of a v2 or v1 object: "cpu: 20%/80%",
// "<unknown>/100 (avg)", "... + 2 more...", "<none>".
std::string horizontal_pod_autoscaler_targets(const boost::json::object& hpa);

}  // namespace kwatch::kinds
