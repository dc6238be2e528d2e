#include "kinds/horizontal_pod_autoscaler.hpp"

#include "apimachinery/json_path.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <optional>
#include <string_view>

namespace kwatch::kinds {

using apimachinery::string_member;
using apimachinery::Cause;
using apimachinery::object_member;

namespace json = boost::json;

namespace {

constexpr std::string_view kMetrics = "autoscaling.alpha.kubernetes.io/metrics";
constexpr std::string_view kCurrentMetrics = "autoscaling.alpha.kubernetes.io/current-metrics";
constexpr std::string_view kConditions = "autoscaling.alpha.kubernetes.io/conditions";
constexpr std::string_view kBehavior = "autoscaling.alpha.kubernetes.io/behavior";
constexpr std::int64_t kDefaultCpuUtilization = 80;

json::object& object_at(json::object& obj, std::string_view key) {
  json::value& v = obj[key];
  if (!v.is_object()) v = json::object();
  return v.get_object();
}

const json::object* member(const json::object* obj, std::string_view key) {
  return obj != nullptr ? object_member(*obj, key) : nullptr;
}

const json::value* value(const json::object* obj, std::string_view key) {
  return obj != nullptr ? obj->if_contains(key) : nullptr;
}

const json::array* array_member(const json::object* obj, std::string_view key) {
  const json::value* v = value(obj, key);
  return v != nullptr ? v->if_array() : nullptr;
}

bool is_cpu_utilization(const json::object& metric) {
  if (string_member(&metric, "type") != "Resource") return false;
  const json::object* resource = member(&metric, "resource");
  return string_member(resource, "name") == "cpu" &&
         value(member(resource, "target"), "averageUtilization") != nullptr;
}

// ---- autoscaling/v1 MetricSpec and MetricStatus <-> v2 ----

// Where a field of a v1 metric source lives in the v2 one: `v2_object` ("" for the source
// itself, "metric", "target", "current", or "describedObject" as a whole when `v2_field` is "").
struct FieldMap {
  std::string_view v1;
  std::string_view v2_object;
  std::string_view v2_field;
};

struct SourceMap {
  std::string_view type;  // MetricSpec.type: "Resource", "Pods", ...
  std::string_view key;   // the member holding the source: "resource", "pods", ...
  std::vector<FieldMap> spec;
  std::vector<FieldMap> status;
};

const std::vector<SourceMap>& source_maps() {
  static const std::vector<SourceMap> maps = {
      {"Resource", "resource",
       {{"name", "", "name"}, {"targetAverageUtilization", "target", "averageUtilization"},
        {"targetAverageValue", "target", "averageValue"}},
       {{"name", "", "name"}, {"currentAverageUtilization", "current", "averageUtilization"},
        {"currentAverageValue", "current", "averageValue"}}},
      {"ContainerResource", "containerResource",
       {{"name", "", "name"}, {"container", "", "container"},
        {"targetAverageUtilization", "target", "averageUtilization"},
        {"targetAverageValue", "target", "averageValue"}},
       {{"name", "", "name"}, {"container", "", "container"},
        {"currentAverageUtilization", "current", "averageUtilization"},
        {"currentAverageValue", "current", "averageValue"}}},
      {"Pods", "pods",
       {{"metricName", "metric", "name"}, {"selector", "metric", "selector"},
        {"targetAverageValue", "target", "averageValue"}},
       {{"metricName", "metric", "name"}, {"selector", "metric", "selector"},
        {"currentAverageValue", "current", "averageValue"}}},
      {"Object", "object",
       {{"target", "describedObject", ""}, {"metricName", "metric", "name"},
        {"selector", "metric", "selector"}, {"targetValue", "target", "value"},
        {"averageValue", "target", "averageValue"}},
       {{"target", "describedObject", ""}, {"metricName", "metric", "name"},
        {"selector", "metric", "selector"}, {"currentValue", "current", "value"},
        {"averageValue", "current", "averageValue"}}},
      {"External", "external",
       {{"metricName", "metric", "name"}, {"metricSelector", "metric", "selector"},
        {"targetValue", "target", "value"}, {"targetAverageValue", "target", "averageValue"}},
       {{"metricName", "metric", "name"}, {"metricSelector", "metric", "selector"},
        {"currentValue", "current", "value"}, {"currentAverageValue", "current", "averageValue"}}},
  };
  return maps;
}

const SourceMap* source_map(std::string_view type) {
  for (const auto& m : source_maps()) {
    if (m.type == type) return &m;
  }
  return nullptr;
}

// kube's v1 -> v2 target type: Resource metrics by utilization when one is given, Pods by
// average value, Object by average value when one is given, External by value when one is.
std::string_view target_type(std::string_view metric, const json::object& target) {
  if (metric == "Resource" || metric == "ContainerResource") {
    return target.contains("averageUtilization") ? "Utilization" : "AverageValue";
  }
  if (metric == "Object") return target.contains("averageValue") ? "AverageValue" : "Value";
  if (metric == "External") return target.contains("value") ? "Value" : "AverageValue";
  return "AverageValue";
}

// One metric (spec or status) from v1's form to v2's (`to_v2`) or back; metrics of a type
// neither version knows keep only their type.
json::object convert_metric(const json::object& m, bool status, bool to_v2) {
  json::object out;
  const std::string_view type = string_member(&m, "type");
  out["type"] = type;
  const SourceMap* map = source_map(type);
  if (map == nullptr) return out;
  const json::object* source = member(&m, map->key);
  json::object converted;
  for (const FieldMap& f : status ? map->status : map->spec) {
    if (to_v2) {
      const json::value* v = value(source, f.v1);
      if (v == nullptr || v->is_null()) continue;
      if (f.v2_object.empty()) {
        converted[f.v2_field] = *v;
      } else if (f.v2_field.empty()) {
        converted[f.v2_object] = *v;
      } else {
        object_at(converted, f.v2_object)[f.v2_field] = *v;
      }
    } else {
      const json::value* v = f.v2_object.empty()  ? value(source, f.v2_field)
                             : f.v2_field.empty() ? value(source, f.v2_object)
                                                  : value(member(source, f.v2_object), f.v2_field);
      if (v != nullptr && !v->is_null()) converted[f.v1] = *v;
    }
  }
  if (to_v2 && !status) {
    json::object& target = object_at(converted, "target");
    target["type"] = target_type(map->type, target);
  }
  if (to_v2 && (map->type == "Pods" || map->type == "Object" || map->type == "External")) {
    object_at(converted, "metric");  // v2 requires the identifier, even when empty
  }
  out[map->key] = std::move(converted);
  return out;
}

// The annotation's JSON list, removed from `annotations`; nullopt when absent or unreadable.
std::optional<json::array> take_annotation(json::object* annotations, std::string_view key) {
  if (annotations == nullptr) return std::nullopt;
  auto it = annotations->find(key);
  if (it == annotations->end()) return std::nullopt;
  std::optional<json::array> out;
  if (it->value().is_string()) {
    boost::system::error_code ec;
    json::value v = json::parse(it->value().get_string(), ec);
    if (!ec && v.is_array()) out = std::move(v.get_array());
  }
  annotations->erase(it);
  return out;
}

json::object scaling_rules(const json::object* given, std::int64_t window, json::array policies) {
  json::object rules = given != nullptr ? *given : json::object();
  if (!rules.contains("stabilizationWindowSeconds")) rules["stabilizationWindowSeconds"] = window;
  if (!rules.contains("selectPolicy")) rules["selectPolicy"] = "Max";
  if (!rules.contains("policies")) rules["policies"] = std::move(policies);
  return rules;
}

std::string text_of(const json::value* v) {
  if (v == nullptr || v->is_null()) return "<unknown>";
  if (v->is_string()) return std::string(v->get_string());
  return json::serialize(*v);
}

}  // namespace

void horizontal_pod_autoscaler_to_v2(json::object& hpa) {
  hpa["apiVersion"] = "autoscaling/v2";
  json::object& meta = object_at(hpa, "metadata");
  json::object* annotations = meta.contains("annotations") ? &object_at(meta, "annotations") : nullptr;
  json::object& spec = object_at(hpa, "spec");
  json::array metrics;
  if (auto other = take_annotation(annotations, kMetrics)) {
    for (const auto& m : *other) {
      if (m.is_object()) metrics.push_back(convert_metric(m.get_object(), false, true));
    }
  }
  if (auto it = spec.find("targetCPUUtilizationPercentage"); it != spec.end()) {
    if (!it->value().is_null()) {
      metrics.push_back(json::object{
          {"type", "Resource"},
          {"resource", json::object{{"name", "cpu"},
                                    {"target", json::object{{"type", "Utilization"},
                                                            {"averageUtilization", it->value()}}}}}});
    }
    spec.erase(it);
  }
  if (metrics.empty()) {
    // autoscaling/v1's implicit target, made explicit.
    metrics.push_back(json::object{
        {"type", "Resource"},
        {"resource", json::object{{"name", "cpu"},
                                  {"target", json::object{{"type", "Utilization"},
                                                          {"averageUtilization", kDefaultCpuUtilization}}}}}});
  }
  spec["metrics"] = std::move(metrics);
  if (annotations != nullptr) {
    if (auto it = annotations->find(kBehavior); it != annotations->end()) {
      if (it->value().is_string()) {
        boost::system::error_code ec;
        json::value b = json::parse(it->value().get_string(), ec);
        if (!ec && b.is_object()) spec["behavior"] = std::move(b);
      }
      annotations->erase(it);
    }
  }

  json::value* status_v = hpa.if_contains("status");
  json::object* status = status_v != nullptr && status_v->is_object() ? &status_v->get_object() : nullptr;
  json::array current;
  if (auto listed = take_annotation(annotations, kCurrentMetrics)) {
    for (const auto& m : *listed) {
      if (m.is_object()) current.push_back(convert_metric(m.get_object(), true, true));
    }
  }
  auto conditions = take_annotation(annotations, kConditions);
  if (status != nullptr) {
    if (auto it = status->find("currentCPUUtilizationPercentage"); it != status->end()) {
      // The CPU figure is kept in the current-metrics annotation too; only without it does the
      // field say more.
      if (current.empty() && !it->value().is_null()) {
        current.push_back(json::object{
            {"type", "Resource"},
            {"resource", json::object{{"name", "cpu"},
                                      {"current", json::object{{"averageUtilization", it->value()}}}}}});
      }
      status->erase(it);
    }
  }
  if (!current.empty() || conditions) {
    json::object& s = object_at(hpa, "status");
    if (!current.empty()) s["currentMetrics"] = std::move(current);
    if (conditions) s["conditions"] = std::move(*conditions);
  }
  if (annotations != nullptr && annotations->empty()) meta.erase("annotations");
}

void horizontal_pod_autoscaler_to_v1(json::object& hpa) {
  hpa["apiVersion"] = "autoscaling/v1";
  json::object& spec = object_at(hpa, "spec");
  json::array other;
  if (const json::array* metrics = array_member(&spec, "metrics")) {
    for (const auto& m : *metrics) {
      if (!m.is_object()) continue;
      if (is_cpu_utilization(m.get_object()) && !spec.contains("targetCPUUtilizationPercentage")) {
        spec["targetCPUUtilizationPercentage"] =
            *value(member(member(&m.get_object(), "resource"), "target"), "averageUtilization");
        continue;
      }
      other.push_back(convert_metric(m.get_object(), false, false));
    }
  }
  spec.erase("metrics");
  json::object annotations_to_add;
  if (!other.empty()) annotations_to_add[kMetrics] = json::serialize(other);
  if (auto it = spec.find("behavior"); it != spec.end()) {
    if (it->value().is_object()) annotations_to_add[kBehavior] = json::serialize(it->value());
    spec.erase(it);
  }
  if (json::value* status_v = hpa.if_contains("status"); status_v && status_v->is_object()) {
    json::object& status = status_v->get_object();
    if (const json::array* current = array_member(&status, "currentMetrics")) {
      json::array v1;
      for (const auto& m : *current) {
        if (!m.is_object()) continue;
        if (string_member(&m.get_object(), "type") == "Resource" &&
            string_member(member(&m.get_object(), "resource"), "name") == "cpu") {
          const json::value* u = value(member(member(&m.get_object(), "resource"), "current"),
                                       "averageUtilization");
          if (u != nullptr && !status.contains("currentCPUUtilizationPercentage")) {
            status["currentCPUUtilizationPercentage"] = *u;
          }
        }
        v1.push_back(convert_metric(m.get_object(), true, false));
      }
      if (!v1.empty()) annotations_to_add[kCurrentMetrics] = json::serialize(v1);
    }
    status.erase("currentMetrics");
    // v1 writes both counts even when 0 (no omitempty); v2 leaves currentReplicas out then.
    for (const char* count : {"currentReplicas", "desiredReplicas"}) {
      if (!status.contains(count) || status.at(count).is_null()) status[count] = 0;
    }
    if (const json::array* conditions = array_member(&status, "conditions")) {
      if (!conditions->empty()) annotations_to_add[kConditions] = json::serialize(*conditions);
    }
    status.erase("conditions");
  }
  if (!annotations_to_add.empty()) {
    json::object& annotations = object_at(object_at(hpa, "metadata"), "annotations");
    for (auto& [k, v] : annotations_to_add) annotations[k] = std::move(v);
  }
}

void default_horizontal_pod_autoscaler(json::object& hpa) {
  json::object& spec = object_at(hpa, "spec");
  if (!spec.contains("minReplicas") || spec["minReplicas"].is_null()) spec["minReplicas"] = 1;
  const json::array* metrics = array_member(&spec, "metrics");
  if (metrics == nullptr || metrics->empty()) {
    spec["metrics"] = json::array{json::object{
        {"type", "Resource"},
        {"resource", json::object{{"name", "cpu"},
                                  {"target", json::object{{"type", "Utilization"},
                                                          {"averageUtilization", kDefaultCpuUtilization}}}}}}};
  }
  if (json::value* b = spec.if_contains("behavior"); b != nullptr && b->is_object()) {
    json::object& behavior = b->get_object();
    behavior["scaleUp"] = scaling_rules(
        member(&behavior, "scaleUp"), 0,
        json::array{json::object{{"type", "Pods"}, {"value", 4}, {"periodSeconds", 15}},
                    json::object{{"type", "Percent"}, {"value", 100}, {"periodSeconds", 15}}});
    behavior["scaleDown"] = scaling_rules(
        member(&behavior, "scaleDown"), 300,
        json::array{json::object{{"type", "Percent"}, {"value", 100}, {"periodSeconds", 15}}});
  }
}

void validate_horizontal_pod_autoscaler(const json::object& hpa, const json::object* old,
                                        std::vector<Cause>& causes) {
  (void)old;
  const json::object* spec = object_member(hpa, "spec");
  // scaleTargetRef.kind and .name: required by the schema.
  const json::value* min = value(spec, "minReplicas");
  const json::value* max = value(spec, "maxReplicas");
  if (min != nullptr && max != nullptr && min->is_int64() && max->is_int64() &&
      max->get_int64() < min->get_int64()) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: " + json::serialize(*max) +
                          ": must be greater than or equal to `minReplicas`",
                      "spec.maxReplicas"});
  }
  if (const json::array* metrics = array_member(spec, "metrics")) {
    for (std::size_t i = 0; i < metrics->size(); ++i) {
      const json::object* m = (*metrics)[i].if_object();
      const std::string path = "spec.metrics[" + std::to_string(i) + "]";
      const std::string type(string_member(m, "type"));
      static const std::pair<std::string_view, std::string_view> kSources[] = {
          {"Object", "object"}, {"Pods", "pods"}, {"Resource", "resource"},
          {"ContainerResource", "containerResource"}, {"External", "external"}};
      std::string_view source;
      for (auto [t, s] : kSources) {
        if (t == type) source = s;
      }
      if (type.empty()) {
        causes.push_back({"FieldValueRequired", "Required value: must specify a metric source type",
                          path + ".type"});
      } else if (!source.empty() && value(m, source) == nullptr) {
        causes.push_back({"FieldValueRequired",
                          "Required value: must populate information for the given metric source",
                          path + "." + std::string(source)});
      }
    }
  }
}

std::string horizontal_pod_autoscaler_targets(const json::object& served) {
  json::object hpa = served;
  if (string_member(&hpa, "apiVersion") == "autoscaling/v1") horizontal_pod_autoscaler_to_v2(hpa);
  const json::array* specs = array_member(member(&hpa, "spec"), "metrics");
  const json::array* statuses = array_member(member(&hpa, "status"), "currentMetrics");
  if (specs == nullptr || specs->empty()) return "<none>";
  auto status_of = [&](std::size_t i, std::string_view key) -> const json::object* {
    if (statuses == nullptr || i >= statuses->size() || !(*statuses)[i].is_object()) return nullptr;
    return member(member(&(*statuses)[i].get_object(), key), "current");
  };
  std::vector<std::string> list;
  for (std::size_t i = 0; i < specs->size(); ++i) {
    const json::object* m = (*specs)[i].if_object();
    const std::string type(string_member(m, "type"));
    if (type == "External" || type == "Object") {
      const std::string key = type == "External" ? "external" : "object";
      const json::object* target = member(member(m, key), "target");
      if (const json::value* avg = value(target, "averageValue")) {
        list.push_back(text_of(value(status_of(i, key), "averageValue")) + "/" + text_of(avg) + " (avg)");
      } else {
        list.push_back(text_of(value(status_of(i, key), "value")) + "/" + text_of(value(target, "value")));
      }
    } else if (type == "Pods") {
      list.push_back(text_of(value(status_of(i, "pods"), "averageValue")) + "/" +
                     text_of(value(member(member(m, "pods"), "target"), "averageValue")));
    } else if (type == "Resource" || type == "ContainerResource") {
      const std::string key = type == "Resource" ? "resource" : "containerResource";
      const json::object* source = member(m, key);
      const json::object* target = member(source, "target");
      const std::string name(string_member(source, "name"));
      if (const json::value* avg = value(target, "averageValue")) {
        list.push_back(name + ": " + text_of(value(status_of(i, key), "averageValue")) + "/" + text_of(avg));
      } else {
        const json::value* current = value(status_of(i, key), "averageUtilization");
        const json::value* want = value(target, "averageUtilization");
        list.push_back(name + ": " + (current != nullptr ? text_of(current) + "%" : "<unknown>") +
                       "/" + (want != nullptr ? text_of(want) + "%" : "<auto>"));
      }
    } else {
      list.push_back("<unknown type>");
    }
  }
  std::string out;
  const std::size_t shown = std::min<std::size_t>(list.size(), 2);
  for (std::size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + list[i];
  if (list.size() > 2) out += " + " + std::to_string(list.size() - 2) + " more...";
  return out;
}

}  // namespace kwatch::kinds
