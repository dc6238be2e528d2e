#include "registry/service_endpoints.hpp"

#include "kinds/builtin_validation.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "watch/cacher.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/value.hpp>

#include <atomic>
#include <optional>
#include <vector>

namespace kwatch::registry {

namespace json = boost::json;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

const json::object* cached_object(const kinds::Scheme& scheme,
                                  const CacherRegistry* cachers,
                                  std::string_view resource, std::string_view ns,
                                  std::string_view name, std::optional<json::value>& holder) {
  auto info = scheme.find("", "v1", resource);
  auto cacher = info && cachers != nullptr ? cachers->find(*info) : nullptr;
  auto cached = cacher ? cacher->get(info->key(ns, name)) : nullptr;
  if (!cached) return nullptr;
  holder = apimachinery::parse_json(cached->json);
  return holder && holder->is_object() ? &holder->get_object() : nullptr;
}

}  // namespace

std::optional<json::value> cached_core_object(const kinds::Scheme& scheme,
                                              const CacherRegistry* cachers,
                                              std::string_view resource, std::string_view ns,
                                              std::string_view name) {
  std::optional<json::value> holder;
  if (cached_object(scheme, cachers, resource, ns, name, holder) == nullptr) return std::nullopt;
  return holder;
}

// Why an endpoint address may not be called (kube's ValidateNonSpecialIP, which kube applies
// to every Endpoints and EndpointSlice address): "" when it may. Names are refused when they
// are "localhost".
std::string special_address(std::string_view host) {
  if (host == "localhost" || host.ends_with(".localhost")) {
    return "may not be in the loopback range (127.0.0.0/8, ::1/128)";
  }
  // kube's ValidateEndpointIP (kinds/builtin_validation.hpp); a name is not refused here.
  const auto problems = kinds::endpoint_ip_problems(host, /*allow_loopback=*/false);
  if (problems.empty() || problems.front() == "must be a valid IP address") return "";
  return problems.front();
}

ServiceEndpoint resolve_service_endpoint(const kinds::Scheme& scheme,
                                         const CacherRegistry* cachers, std::string_view ns,
                                         std::string_view name, int port, bool allow_loopback) {
  ServiceEndpoint out;
  std::optional<json::value> service_holder, endpoints_holder;
  const json::object* service =
      cached_object(scheme, cachers, "services", ns, name, service_holder);
  if (service == nullptr) {
    out.error = "service " + go_quote(name) + " not found";
    return out;
  }
  const json::object* spec = object_member(*service, "spec");
  if (string_at(spec, "type") == "ExternalName") {
    const std::string host = string_at(spec, "externalName");
    if (const std::string why = special_address(host); !why.empty() && !allow_loopback) {
      out.error = "service " + go_quote(name) + " names " + go_quote(host) + ", which " + why;
      return out;
    }
    out.address = host + ":" + std::to_string(port);
    return out;
  }
  const json::object* service_port = nullptr;
  if (const json::array* ports = apimachinery::array_member(spec, "ports")) {
    for (const auto& p : *ports) {
      const json::object* po = p.if_object();
      const json::value* number = po != nullptr ? po->if_contains("port") : nullptr;
      if (number != nullptr && number->is_int64() && number->get_int64() == port) {
        service_port = po;
        break;
      }
    }
  }
  if (service_port == nullptr) {
    out.error = "no service port " + std::to_string(port) + " found for service " + go_quote(name);
    return out;
  }
  const std::string port_name = string_at(service_port, "name");
  const json::object* endpoints =
      cached_object(scheme, cachers, "endpoints", ns, name, endpoints_holder);
  std::vector<std::string> candidates;
  std::string refused;
  if (const json::array* subsets = apimachinery::array_member(endpoints, "subsets")) {
    for (const auto& subset : *subsets) {
      const json::object* so = subset.if_object();
      std::int64_t target = -1;
      if (const json::array* ports = apimachinery::array_member(so, "ports")) {
        for (const auto& p : *ports) {
          const json::object* po = p.if_object();
          const json::value* number = po != nullptr ? po->if_contains("port") : nullptr;
          if (string_at(po, "name") == port_name && number != nullptr && number->is_int64()) {
            target = number->get_int64();
          }
        }
      }
      if (target < 0) continue;
      if (const json::array* addresses = apimachinery::array_member(so, "addresses")) {
        for (const auto& a : *addresses) {
          const std::string ip = string_at(a.if_object(), "ip");
          if (ip.empty()) continue;
          if (const std::string why = special_address(ip); !why.empty() && !allow_loopback) {
            refused = ip + " " + why;
            continue;
          }
          const bool v6 = ip.find(':') != std::string::npos;
          candidates.push_back((v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(target));
        }
      }
    }
  }
  if (candidates.empty()) {
    out.error = "no endpoints available for service " + go_quote(name) +
                (refused.empty() ? "" : " (endpoint " + refused + ")");
    return out;
  }
  // Spread over the endpoints, as kube picks one at random.
  static std::atomic<std::size_t> next{0};
  out.address = candidates[next.fetch_add(1, std::memory_order_relaxed) % candidates.size()];
  return out;
}


}  // namespace kwatch::registry
