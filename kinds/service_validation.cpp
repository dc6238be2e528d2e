#include "kinds/service_validation.hpp"

#include "apimachinery/ip_address.hpp"
#include "apimachinery/json_equality.hpp"
#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/field_errors.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;
using namespace field_errors;

namespace {

constexpr std::int64_t kMaxClientIPAffinitySeconds = 86400;

// A pointer field.Invalid shows: what it points to, or "null".
std::string shown_pointer(const json::object* spec, std::string_view key) {
  const json::value* v = spec != nullptr ? spec->if_contains(key) : nullptr;
  if (v == nullptr || !v->is_string()) return "\"null\"";
  return go_quote(v->get_string());
}

bool headless(const json::object* spec) {
  if (string_at(spec, "clusterIP") == "None") return true;
  const auto ips = string_items(spec, "clusterIPs");
  return !ips.empty() && ips[0] == "None";
}

// isHeadlessService of the cluster-IP validation: clusterIPs is exactly ["None"].
bool headless_by_ips(const json::object* spec) {
  const auto ips = string_items(spec, "clusterIPs");
  return ips.size() == 1 && ips[0] == "None";
}

bool needs_node_ports(const json::object* spec) {
  const std::string t = service_type(spec);
  return t == "NodePort" || t == "LoadBalancer";
}

bool externally_accessible(const json::object* spec) {
  const std::string t = service_type(spec);
  return t == "LoadBalancer" || t == "NodePort" ||
         (t == "ClusterIP" && !string_items(spec, "externalIPs").empty());
}

// The same in both as Go's decoded objects compare (a null member is one left out).
bool same_member(const json::object* a, const json::object* b, std::string_view key) {
  static const json::value null;
  const json::value* x = a != nullptr ? a->if_contains(key) : nullptr;
  const json::value* y = b != nullptr ? b->if_contains(key) : nullptr;
  return apimachinery::json_equal_as_decoded(x != nullptr ? *x : null, y != nullptr ? *y : null);
}

std::vector<std::int64_t> node_ports_of(const json::object* spec) {
  std::vector<std::int64_t> out;
  const json::value* ports = spec != nullptr ? spec->if_contains("ports") : nullptr;
  if (ports == nullptr || !ports->is_array()) return out;
  for (const auto& p : ports->get_array()) {
    const json::value* np = p.is_object() ? p.get_object().if_contains("nodePort") : nullptr;
    out.push_back(np != nullptr && np->is_int64() ? np->get_int64() : 0);
  }
  return out;
}

bool is_ipv6(std::string_view text) {
  auto ip = apimachinery::parse_ip(text);
  return ip && !ip->v4;
}

// IsValidPortName.
std::vector<std::string> port_name_errors(std::string_view name) {
  std::vector<std::string> out;
  if (name.size() > 15) out.push_back("must be no more than 15 characters");
  const bool charset = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
  if (!charset) {
    out.push_back("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
  }
  if (std::none_of(name.begin(), name.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
    out.push_back("must contain at least one letter (a-z)");
  }
  if (name.find("--") != std::string_view::npos) {
    out.push_back("must not contain consecutive hyphens");
  }
  if (!name.empty() && (name.front() == '-' || name.back() == '-')) {
    out.push_back("must not begin or end with a hyphen");
  }
  return out;
}

void check_ports(const json::object* spec, Causes& causes) {
  const json::value* ports = spec->if_contains("ports");
  const std::size_t count = ports != nullptr && ports->is_array() ? ports->get_array().size() : 0;
  if (count == 0 && !headless(spec) && service_type(spec) != "ExternalName") {
    required(causes, "spec.ports");
  }
  if (count == 0) return;
  std::set<std::string> names;
  std::set<std::pair<std::string, std::int64_t>> node_ports;
  for (std::size_t i = 0; i < count; ++i) {
    const json::object* port = ports->get_array()[i].if_object();
    if (port == nullptr) continue;
    const std::string at = index("spec.ports", i);
    const std::string name = string_at(port, "name");
    if (count > 1 && name.empty()) {
      required(causes, at + ".name");
    } else if (!name.empty()) {
      for (const auto& e : apimachinery::dns1123_label_errors(name)) {
        invalid(causes, at + ".name", go_quote(name), e);
      }
      if (!names.insert(name).second) duplicate(causes, at + ".name", go_quote(name));
    }
    if (const json::value* target = port->if_contains("targetPort")) {
      if (target->is_int64() && (target->get_int64() < 1 || target->get_int64() > 65535)) {
        invalid(causes, at + ".targetPort", std::to_string(target->get_int64()),
                "must be between 1 and 65535, inclusive");
      } else if (target->is_string()) {
        for (const auto& e : port_name_errors(target->get_string())) {
          invalid(causes, at + ".targetPort", go_quote(target->get_string()), e);
        }
      }
    }
    if (const json::value* app = port->if_contains("appProtocol"); app && app->is_string()) {
      for (const auto& e : apimachinery::qualified_name_errors(app->get_string())) {
        invalid(causes, at + ".appProtocol", go_quote(app->get_string()), e);
      }
    }
    const json::value* np = port->if_contains("nodePort");
    const std::int64_t node_port = np != nullptr && np->is_int64() ? np->get_int64() : 0;
    if (node_port == 0) continue;
    if (service_type(spec) == "ClusterIP") {
      forbidden(causes, at + ".nodePort", "may not be used when `type` is 'ClusterIP'");
    }
    const std::string protocol = string_at(port, "protocol").empty() ? "TCP"
                                                                        : string_at(port, "protocol");
    if (!node_ports.insert({protocol, node_port}).second) {
      duplicate(causes, at + ".nodePort", std::to_string(node_port));
    }
  }
}

// ValidateServiceClusterIPsRelatedFields.
void check_cluster_ips(const json::object* spec, Causes& causes) {
  if (service_type(spec) == "ExternalName") return;
  const std::string cluster_ip = string_at(spec, "clusterIP");
  const auto ips = string_items(spec, "clusterIPs");
  const std::string ips_shown = go_strings(ips);
  if (!cluster_ip.empty()) {
    if (ips.empty()) {
      required(causes, "spec.clusterIPs");
    } else if (ips[0] != cluster_ip) {
      invalid(causes, "spec.clusterIPs", ips_shown, "first value must match `clusterIP`");
    }
  } else if (!ips.empty()) {
    invalid(causes, "spec.clusterIPs", ips_shown, "must be empty when `clusterIP` is not specified");
  }
  const auto families = string_items(spec, "ipFamilies");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < families.size(); ++i) {
    if (families[i] != "IPv4" && families[i] != "IPv6") {
      not_supported(causes, index("spec.ipFamilies", i), families[i], {"IPv4", "IPv6"});
    }
    if (!seen.insert(families[i]).second) {
      duplicate(causes, index("spec.ipFamilies", i), go_quote(families[i]));
    }
  }
  if (const json::value* policy = spec->if_contains("ipFamilyPolicy");
      policy != nullptr && policy->is_string()) {
    const std::string_view p = policy->get_string();
    if (p != "SingleStack" && p != "PreferDualStack" && p != "RequireDualStack") {
      not_supported(causes, "spec.ipFamilyPolicy", std::string(p),
                    {"PreferDualStack", "RequireDualStack", "SingleStack"});
    }
  }
  bool bad_ips = false;
  for (std::size_t i = 0; i < ips.size(); ++i) {
    if (i == 0 && ips[i] == "None") {
      if (ips.size() > 1) {
        bad_ips = true;
        invalid(causes, "spec.clusterIPs", ips_shown, "'None' must be the first and only value");
      }
      continue;
    }
    if (!apimachinery::parse_ip(ips[i])) {
      bad_ips = true;
      invalid(causes, index("spec.clusterIPs", i), go_quote(ips[i]),
              "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
    }
  }
  if (ips.size() > 2) invalid(causes, "spec.clusterIPs", ips_shown, "may only hold up to 2 values");
  if (bad_ips) return;
  if (ips.size() > 1 && (ips.size() != 2 || is_ipv6(ips[0]) == is_ipv6(ips[1]))) {
    invalid(causes, "spec.clusterIPs", ips_shown,
            "may specify no more than one IP for each IP family");
  }
  if (headless_by_ips(spec) || ips.empty()) return;
  for (std::size_t i = 0; i < ips.size() && i < families.size(); ++i) {
    if (families[i] == "IPv4" && is_ipv6(ips[i])) {
      invalid(causes, index("spec.clusterIPs", i), go_quote(ips[i]),
              "expected an IPv4 value as indicated by `ipFamilies[" + std::to_string(i) + "]`");
    }
    if (families[i] == "IPv6" && !is_ipv6(ips[i])) {
      invalid(causes, index("spec.clusterIPs", i), go_quote(ips[i]),
              "expected an IPv6 value as indicated by `ipFamilies[" + std::to_string(i) + "]`");
    }
  }
}

// validateUpgradeDowngradeClusterIPs and validateUpgradeDowngradeIPFamilies.
void check_ip_changes(const json::object* spec, const json::object* old_spec, Causes& causes) {
  if (service_type(spec) == "ExternalName" || service_type(old_spec) == "ExternalName") return;
  const bool now_headless = headless_by_ips(spec), was_headless = headless_by_ips(old_spec);
  const auto ips = string_items(spec, "clusterIPs");
  const auto old_ips = string_items(old_spec, "clusterIPs");
  const std::string ips_shown = go_strings(ips);
  const bool single = string_at(spec, "ipFamilyPolicy") == "SingleStack";
  if (!(now_headless && was_headless)) {
    if (old_ips.size() == ips.size()) {
      for (std::size_t i = 0; i < ips.size(); ++i) {
        if (ips[i] != old_ips[i]) {
          invalid(causes, index("spec.clusterIPs", i), ips_shown, "may not change once set");
        }
      }
    } else if (old_ips.size() > ips.size()) {
      if (ips.empty()) {
        invalid(causes, "spec.clusterIPs[0]", ips_shown, "primary clusterIP can not be unset");
      } else if (ips[0] != old_ips[0]) {
        invalid(causes, "spec.clusterIPs[0]", ips_shown, "may not change once set");
      }
      if (ips.size() == 1 && !single) {
        invalid(causes, "spec.ipFamilyPolicy", shown_pointer(spec, "ipFamilyPolicy"),
                "must be set to 'SingleStack' when releasing the secondary clusterIP");
      }
    } else if (!old_ips.empty() && ips[0] != old_ips[0]) {
      invalid(causes, "spec.clusterIPs[0]", ips_shown, "may not change once set");
    }
  }
  if (now_headless != was_headless || now_headless) return;
  const auto families = string_items(spec, "ipFamilies");
  const auto old_families = string_items(old_spec, "ipFamilies");
  const std::string families_shown = go_strings(families, "core.IPFamily");
  if (old_families.size() == families.size()) {
    for (std::size_t i = 0; i < families.size(); ++i) {
      if (families[i] != old_families[i]) {
        invalid(causes, "spec.ipFamilies[0]", families_shown, "may not change once set");
      }
    }
  } else if (old_families.size() > families.size()) {
    if (ips.empty()) {
      invalid(causes, "spec.ipFamilies[0]", families_shown, "primary ipFamily can not be unset");
    }
    if (!families.empty() && families[0] != old_families[0]) {
      invalid(causes, "spec.ipFamilies[0]", ips_shown, "may not change once set");
    }
    if (families.size() == 1 && !single) {
      invalid(causes, "spec.ipFamilyPolicy", shown_pointer(spec, "ipFamilyPolicy"),
              "must be set to 'SingleStack' when releasing the secondary ipFamily");
    }
  } else if (!old_families.empty() && !families.empty() && families[0] != old_families[0]) {
    invalid(causes, "spec.ipFamilies[0]", ips_shown, "may not change once set");
  }
}

void check_external_name(const json::object* spec, Causes& causes) {
  if (service_type(spec) != "ExternalName") return;
  if (!string_items(spec, "clusterIPs").empty()) {
    forbidden(causes, "spec.clusterIPs", "may not be set for ExternalName services");
  }
  if (!string_items(spec, "ipFamilies").empty()) {
    forbidden(causes, "spec.ipFamilies", "may not be set for ExternalName services");
  }
  if (const json::value* p = spec->if_contains("ipFamilyPolicy"); p && !p->is_null()) {
    forbidden(causes, "spec.ipFamilyPolicy", "may not be set for ExternalName services");
  }
  std::string cname = string_at(spec, "externalName");
  if (!cname.empty() && cname.back() == '.') cname.pop_back();  // fully qualified
  if (cname.empty()) {
    required(causes, "spec.externalName");
    return;
  }
  for (const auto& e : apimachinery::dns1123_subdomain_errors(cname)) {
    invalid(causes, "spec.externalName", go_quote(cname), e);
  }
}

void check_affinity(const json::object* spec, Causes& causes) {
  const std::string affinity = string_at(spec, "sessionAffinity");
  const json::object* config = object_member(spec, "sessionAffinityConfig");
  if (affinity == "None" && config != nullptr) {
    forbidden(causes, "spec.sessionAffinityConfig", "must not be set when session affinity is None");
  }
  if (affinity != "ClientIP") return;
  const std::string detail = "when session affinity type is ClientIP";
  if (config == nullptr) {
    required(causes, "spec.sessionAffinityConfig", detail);
    return;
  }
  const json::object* client = object_member(config, "clientIP");
  if (client == nullptr) {
    required(causes, "spec.sessionAffinityConfig.clientIP", detail);
    return;
  }
  const json::value* timeout = client->if_contains("timeoutSeconds");
  if (timeout == nullptr || !timeout->is_int64()) {
    required(causes, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", detail);
  } else if (timeout->get_int64() <= 0 || timeout->get_int64() > kMaxClientIPAffinitySeconds) {
    invalid(causes, "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            std::to_string(timeout->get_int64()),
            "must be greater than 0 and less than 86400");
  }
}

void check_addresses(const json::object* spec, Causes& causes) {
  const auto external = string_items(spec, "externalIPs");
  for (std::size_t i = 0; i < external.size(); ++i) {
    const std::string at = index("spec.externalIPs", i);
    auto problems = endpoint_ip_problems(external[i], /*allow_loopback=*/false);
    if (problems.size() == 1 && problems[0] == "must be a valid IP address") {
      invalid(causes, at, go_quote(external[i]),
              "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
      continue;
    }
    for (const auto& p : problems) invalid(causes, at, go_quote(external[i]), p);
  }
  const auto ranges = string_items(spec, "loadBalancerSourceRanges");
  const bool load_balancer = service_type(spec) == "LoadBalancer";
  if (!ranges.empty()) {
    if (!load_balancer) {
      forbidden(causes, "spec.LoadBalancerSourceRanges",
                "may only be used when `type` is 'LoadBalancer'");
    }
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const std::string value(apimachinery::trim_space(ranges[i]));
      if (!apimachinery::parse_cidr(value)) {
        invalid(causes, index("spec.LoadBalancerSourceRanges", i), go_quote(value),
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)");
      }
    }
  }
}

void check_policies(const json::object* spec, Causes& causes) {
  const bool load_balancer = service_type(spec) == "LoadBalancer";
  if (const json::value* a = spec->if_contains("allocateLoadBalancerNodePorts");
      a != nullptr && !a->is_null() && !load_balancer) {
    forbidden(causes, "spec.allocateLoadBalancerNodePorts",
              "may only be used when `type` is 'LoadBalancer'");
  }
  if (const json::value* c = spec->if_contains("loadBalancerClass"); c && c->is_string()) {
    if (!load_balancer) {
      forbidden(causes, "spec.loadBalancerClass", "may only be used when `type` is 'LoadBalancer'");
    } else {
      for (const auto& e : apimachinery::qualified_name_errors(c->get_string())) {
        invalid(causes, "spec.loadBalancerClass", go_quote(c->get_string()), e);
      }
    }
  }
  const std::string external = string_at(spec, "externalTrafficPolicy");
  if (!externally_accessible(spec)) {
    if (!external.empty()) {
      invalid(causes, "spec.externalTrafficPolicy", go_quote(external),
              "may only be set for externally-accessible services");
    }
  } else if (!external.empty() && external != "Cluster" && external != "Local") {
    not_supported(causes, "spec.externalTrafficPolicy", external, {"Cluster", "Local"});
  }
  const json::value* hc = spec->if_contains("healthCheckNodePort");
  const std::int64_t health = hc != nullptr && hc->is_int64() ? hc->get_int64() : 0;
  if (!needs_health_check_node_port(spec) && health != 0) {
    invalid(causes, "spec.healthCheckNodePort", std::to_string(health),
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is "
            "'Local'");
  } else if (needs_health_check_node_port(spec) && (health < 0 || health > 65535)) {
    invalid(causes, "spec.healthCheckNodePort", std::to_string(health),
            "must be between 1 and 65535, inclusive");
  }
  const std::string internal = string_at(spec, "internalTrafficPolicy");
  if (!internal.empty() && internal != "Cluster" && internal != "Local") {
    not_supported(causes, "spec.internalTrafficPolicy", internal, {"Cluster", "Local"});
  }
  if (const json::value* d = spec->if_contains("trafficDistribution"); d && d->is_string()) {
    const std::string_view v = d->get_string();
    if (v != "PreferClose" && v != "PreferSameZone" && v != "PreferSameNode") {
      not_supported(causes, "spec.trafficDistribution", std::string(v),
                    {"PreferClose", "PreferSameZone", "PreferSameNode"});
    }
  }
}

}  // namespace

std::string service_type(const json::object* spec) {
  const std::string t = string_at(spec, "type");
  return t.empty() ? "ClusterIP" : t;
}

bool needs_cluster_ip(const json::object* spec) { return service_type(spec) != "ExternalName"; }

bool needs_health_check_node_port(const json::object* spec) {
  return service_type(spec) == "LoadBalancer" &&
         string_at(spec, "externalTrafficPolicy") == "Local";
}

void prepare_service_for_create(json::object& service) {
  service["status"] = json::object{{"loadBalancer", json::object()}};
  json::value* spec_v = service.if_contains("spec");
  json::object* spec = spec_v != nullptr ? spec_v->if_object() : nullptr;
  if (spec == nullptr) return;
  const std::string ip = string_at(spec, "clusterIP");
  if (!ip.empty() && string_items(spec, "clusterIPs").empty()) {
    (*spec)["clusterIPs"] = json::array{json::value(ip)};
  }
}

void prepare_service_for_update(json::object& service, const json::object& old) {
  json::value* spec_v = service.if_contains("spec");
  json::object* spec = spec_v != nullptr ? spec_v->if_object() : nullptr;
  const json::object* old_spec = object_member(old, "spec");
  if (spec == nullptr || old_spec == nullptr) return;
  // NormalizeClusterIPs.
  const std::string ip = string_at(spec, "clusterIP");
  const std::string old_ip = string_at(old_spec, "clusterIP");
  const auto old_ips = string_items(old_spec, "clusterIPs");
  if (!old_ips.empty() && string_items(spec, "clusterIPs").empty() && ip == old_ip) {
    (*spec)["clusterIPs"] = old_spec->at("clusterIPs");
  }
  if (ip != old_ip) {
    const bool same_ips = same_member(spec, old_spec, "clusterIPs");
    if (!old_ip.empty() && ip.empty() && same_ips) spec->erase("clusterIPs");
    if (!ip.empty() && same_ips) (*spec)["clusterIPs"] = json::array{json::value(ip)};
  }
  // dropTypeDependentFields.
  if (needs_cluster_ip(old_spec) && !needs_cluster_ip(spec)) {
    if (same_member(spec, old_spec, "clusterIPs")) {
      spec->erase("clusterIP");
      spec->erase("clusterIPs");
    }
    if (same_member(spec, old_spec, "ipFamilies")) spec->erase("ipFamilies");
    if (same_member(spec, old_spec, "ipFamilyPolicy")) spec->erase("ipFamilyPolicy");
  }
  if (needs_node_ports(old_spec) && !needs_node_ports(spec) &&
      node_ports_of(spec) == node_ports_of(old_spec)) {
    if (json::value* ports = spec->if_contains("ports"); ports && ports->is_array()) {
      for (auto& p : ports->get_array()) {
        if (p.is_object()) p.get_object().erase("nodePort");
      }
    }
  }
  if (needs_health_check_node_port(old_spec) && !needs_health_check_node_port(spec) &&
      same_member(spec, old_spec, "healthCheckNodePort")) {
    spec->erase("healthCheckNodePort");
  }
  if (service_type(old_spec) == "LoadBalancer" && service_type(spec) != "LoadBalancer") {
    const json::value* a = spec->if_contains("allocateLoadBalancerNodePorts");
    const json::value* b = old_spec->if_contains("allocateLoadBalancerNodePorts");
    if (a != nullptr && b != nullptr && a->is_bool() && b->is_bool() && *a == *b) {
      spec->erase("allocateLoadBalancerNodePorts");
    }
    if (same_member(spec, old_spec, "loadBalancerClass")) spec->erase("loadBalancerClass");
  }
  if (externally_accessible(old_spec) && !externally_accessible(spec) &&
      same_member(spec, old_spec, "externalTrafficPolicy")) {
    spec->erase("externalTrafficPolicy");
  }
}

void validate_service(const json::object& service, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(service, "spec");
  if (spec == nullptr) {
    required(causes, "spec.ports");
    return;
  }
  if (old != nullptr) {
    if (const json::object* old_spec = object_member(*old, "spec")) {
      check_ip_changes(spec, old_spec, causes);
      // validateLoadBalancerClassField on update: fixed while the type stays LoadBalancer.
      if (service_type(spec) == "LoadBalancer" && service_type(old_spec) == "LoadBalancer" &&
          !same_member(spec, old_spec, "loadBalancerClass")) {
        invalid(causes, "spec.loadBalancerClass", shown_pointer(spec, "loadBalancerClass"),
                "may not change once set");
      }
    }
  }
  check_ports(spec, causes);
  check_external_name(spec, causes);
  if (const json::object* selector = object_member(spec, "selector")) {
    for (const auto& [key, value] : *selector) {
      for (const auto& e : apimachinery::qualified_name_errors(key)) {
        invalid(causes, "spec.selector", go_quote(key), e);
      }
      const std::string_view v = value.is_string() ? std::string_view(value.get_string()) : "";
      for (const auto& e : apimachinery::label_value_errors(v)) {
        invalid(causes, "spec.selector", go_quote(v), e);
      }
    }
  }
  check_affinity(spec, causes);
  check_cluster_ips(spec, causes);
  check_addresses(spec, causes);
  check_policies(spec, causes);
}

}  // namespace kwatch::kinds
