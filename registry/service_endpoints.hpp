// Where a Service is reached when kwatch itself calls it (admission and conversion webhooks,
// aggregated APIServices), as kube-apiserver routes with --enable-aggregator-routing (kwatch has
// no cluster IPs to route through): the Service's port, then a ready address of its Endpoints
// with that port's name (an ExternalName Service: its name). Addresses kube refuses in Endpoints
// (ValidateNonSpecialIP: loopback, link-local, unspecified) are never dialed unless
// `allow_loopback` (a development switch) says so: a user who controls a Service's Endpoints
// cannot point the server at itself or its host.
//
// Reads the watch caches only; safe from any thread.
#pragma once

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {

class CacherRegistry;

struct ServiceEndpoint {
  std::string address;  // "host:port" ("[v6]:port")
  std::string error;    // why there is none: kube's words ("service \"x\" not found", ...)
};

ServiceEndpoint resolve_service_endpoint(const kinds::Scheme& scheme,
                                         const CacherRegistry* cachers, std::string_view ns,
                                         std::string_view name, int port, bool allow_loopback);

// A core/v1 object (`resource`: "services", "endpoints") from its watch cache; nullopt when
// there is none.
std::optional<boost::json::value> cached_core_object(const kinds::Scheme& scheme,
                                                     const CacherRegistry* cachers,
                                                     std::string_view resource,
                                                     std::string_view ns, std::string_view name);

// Why an endpoint address may not be dialed (kube's ValidateNonSpecialIP): "" when it may.
std::string special_address(std::string_view host);

}  // namespace kwatch::registry
