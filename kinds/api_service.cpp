#include "kinds/api_service.hpp"

#include "kinds/field_errors.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;
using field_errors::Causes;
using field_errors::index;
using field_errors::invalid;
using field_errors::not_supported;
using field_errors::required;

namespace {

std::int64_t int_at(const json::object* o, std::string_view key, std::int64_t otherwise = 0) {
  const json::value* v = o != nullptr ? o->if_contains(key) : nullptr;
  return v != nullptr && v->is_int64() ? v->get_int64() : otherwise;
}

const json::object* available_condition(const json::object& service) {
  const json::array* conditions =
      apimachinery::array_member(object_member(service, "status"), "conditions");
  if (conditions == nullptr) return nullptr;
  for (const auto& c : *conditions) {
    if (string_at(c.if_object(), "type") == "Available") return c.if_object();
  }
  return nullptr;
}

}  // namespace

void prepare_api_service(json::object& service) {
  service.erase("status");
  const json::object* spec = object_member(service, "spec");
  if (spec != nullptr && spec->contains("service") && !spec->at("service").is_null()) return;
  service["status"] = json::object{
      {"conditions", json::array{json::object{
                         {"type", "Available"},
                         {"status", "True"},
                         {"lastTransitionTime", base::now_rfc3339()},
                         {"reason", "Local"},
                         {"message", "Local APIServices are always available"}}}}};
}

void validate_api_service(const json::object& service, const json::object* /*old*/,
                          Causes& causes) {
  const json::object* spec = object_member(service, "spec");
  const std::string group = string_at(spec, "group");
  const std::string version = string_at(spec, "version");
  const std::string name = string_at(object_member(service, "metadata"), "name");
  const std::string want = version + "." + group;
  if (!name.empty() && name != want) {
    invalid(causes, "metadata.name", go_quote(name),
            "must be `spec.version+\".\"+spec.group`: " + go_quote(want));
  }
  if (group.empty() && version != "v1") {
    required(causes, "spec.group", "only v1 may have an empty group and it better be legacy kube");
  }
  if (!group.empty()) {
    for (const auto& e : apimachinery::dns1123_subdomain_errors(group)) {
      invalid(causes, "spec.group", go_quote(group), e);
    }
  }
  for (const auto& e : apimachinery::dns1035_label_errors(version)) {
    invalid(causes, "spec.version", go_quote(version), e);
  }
  const std::int64_t group_priority = int_at(spec, "groupPriorityMinimum");
  if (group_priority <= 0 || group_priority > 20000) {
    invalid(causes, "spec.groupPriorityMinimum", std::to_string(group_priority),
            "must be positive and less than 20000");
  }
  const std::int64_t version_priority = int_at(spec, "versionPriority");
  if (version_priority <= 0 || version_priority > 1000) {
    invalid(causes, "spec.versionPriority", std::to_string(version_priority),
            "must be positive and less than 1000");
  }
  const std::string ca_bundle = string_at(spec, "caBundle");
  const json::value* skip = spec != nullptr ? spec->if_contains("insecureSkipTLSVerify") : nullptr;
  const bool insecure = skip != nullptr && skip->is_bool() && skip->get_bool();
  const json::object* target = object_member(spec, "service");
  if (target == nullptr) {
    if (!ca_bundle.empty()) {
      // kube shows the decoded length; base64 holds 3 bytes in 4 characters.
      std::size_t bytes = ca_bundle.size() / 4 * 3;
      if (ca_bundle.ends_with("==")) bytes -= 2;
      else if (ca_bundle.ends_with("=")) bytes -= 1;
      invalid(causes, "spec.caBundle", go_quote(std::to_string(bytes) + " bytes"),
              "local APIServices may not have a caBundle");
    }
    if (insecure) {
      invalid(causes, "spec.insecureSkipTLSVerify", "true",
              "local APIServices may not have insecureSkipTLSVerify");
    }
  } else {
    if (string_at(target, "namespace").empty()) required(causes, "spec.service.namespace");
    if (string_at(target, "name").empty()) required(causes, "spec.service.name");
    const std::int64_t port = int_at(target, "port", 443);
    if (port < 1 || port > 65535) {
      invalid(causes, "spec.service.port", std::to_string(port),
              "port is not valid: must be between 1 and 65535, inclusive");
    }
    if (insecure && !ca_bundle.empty()) {
      invalid(causes, "spec.insecureSkipTLSVerify", "true", "may not be true if caBundle is present");
    }
  }
  // ValidateAPIServiceStatus.
  if (const json::array* conditions =
          apimachinery::array_member(object_member(service, "status"), "conditions")) {
    for (std::size_t i = 0; i < conditions->size(); ++i) {
      const std::string status = string_at((*conditions)[i].if_object(), "status");
      if (status != "True" && status != "False" && status != "Unknown") {
        not_supported(causes, index("status.conditions", i) + ".status", status,
                      {"True", "False", "Unknown"});
      }
    }
  }
}

std::string api_service_target(const json::object& service) {
  const json::object* target = object_member(object_member(service, "spec"), "service");
  if (target == nullptr) return "Local";
  return string_at(target, "namespace") + "/" + string_at(target, "name");
}

std::string api_service_available(const json::object& service) {
  const json::object* c = available_condition(service);
  if (c == nullptr) return "Unknown";
  const std::string status = string_at(c, "status");
  if (status == "True") return "True";
  const std::string reason = string_at(c, "reason");
  return reason.empty() ? status : status + " (" + reason + ")";
}

std::optional<ApiServicePriority> builtin_api_service_priority(std::string_view group,
                                                               std::string_view version) {
  struct Entry {
    std::string_view group, version;
    ApiServicePriority priority;
  };
  // kube-apiserver's apiVersionPriorities, for the group/versions kwatch serves or reviews.
  static constexpr Entry kTable[] = {
      {"", "v1", {18000, 1}},
      {"apps", "v1", {17800, 15}},
      {"events.k8s.io", "v1", {17750, 15}},
      {"authentication.k8s.io", "v1", {17700, 15}},
      {"authorization.k8s.io", "v1", {17600, 15}},
      {"autoscaling", "v2", {17500, 30}},
      {"autoscaling", "v1", {17500, 15}},
      {"batch", "v1", {17400, 15}},
      {"certificates.k8s.io", "v1", {17300, 15}},
      {"networking.k8s.io", "v1", {17200, 15}},
      {"policy", "v1", {17100, 15}},
      {"rbac.authorization.k8s.io", "v1", {17000, 15}},
      {"storage.k8s.io", "v1", {16800, 15}},
      {"apiextensions.k8s.io", "v1", {16700, 15}},
      {"admissionregistration.k8s.io", "v1", {16700, 15}},
      {"admissionregistration.k8s.io", "v1beta1", {16700, 12}},
      {"scheduling.k8s.io", "v1", {16600, 15}},
      {"coordination.k8s.io", "v1", {16500, 15}},
      {"node.k8s.io", "v1", {16300, 15}},
      {"discovery.k8s.io", "v1", {16200, 15}},
      {"flowcontrol.apiserver.k8s.io", "v1", {16100, 21}},
      {"resource.k8s.io", "v1", {15900, 21}},
  };
  for (const Entry& e : kTable) {
    if (e.group == group && e.version == version) return e.priority;
  }
  return std::nullopt;
}

std::string api_service_name(std::string_view group, std::string_view version) {
  return std::string(version) + "." + std::string(group);
}

json::object local_api_service(std::string_view group, std::string_view version,
                               ApiServicePriority priority, std::string_view automanaged) {
  return json::object{
      {"apiVersion", "apiregistration.k8s.io/v1"},
      {"kind", "APIService"},
      {"metadata", json::object{{"name", api_service_name(group, version)},
                                {"labels", json::object{{kAutomanagedLabel, automanaged}}}}},
      {"spec", json::object{{"group", group},
                            {"version", version},
                            {"groupPriorityMinimum", priority.group_priority_minimum},
                            {"versionPriority", priority.version_priority}}}};
}

}  // namespace kwatch::kinds
