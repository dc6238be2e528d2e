// APIService (apiregistration.k8s.io/v1) as a kind, as kube-aggregator serves it: its strategy
// (a create starts with no status, or, for a local APIService, Available=True "Local"), its
// validation word for word, the table's SERVICE and AVAILABLE columns, and the local APIServices
// every served group/version gets, with kube's priorities.
//
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

// KindHooks::prepare_for_create: status cleared; a local APIService (no spec.service) is
// Available at once ("Local", "Local APIServices are always available").
void prepare_api_service(boost::json::object& service);

// KindHooks::validate: kube's ValidateAPIService and ValidateAPIServiceStatus.
void validate_api_service(const boost::json::object& service, const boost::json::object* old,
                          std::vector<apimachinery::Cause>& causes);

// The SERVICE and AVAILABLE cells of `kubectl get apiservices`: "Local" or "<ns>/<name>";
// "True", "False (FailedDiscoveryCheck)", "Unknown".
std::string api_service_target(const boost::json::object& service);
std::string api_service_available(const boost::json::object& service);

struct ApiServicePriority {
  std::int32_t group_priority_minimum = 0;
  std::int32_t version_priority = 0;
};

// kube-apiserver's priorities of a built-in group/version (its apiVersionPriorities table);
// nullopt for one kube does not list (kube then makes no APIService for it).
std::optional<ApiServicePriority> builtin_api_service_priority(std::string_view group,
                                                               std::string_view version);

// The priorities of a CustomResourceDefinition's group/versions (kube's CRD registration).
inline constexpr ApiServicePriority kCustomResourcePriority{1000, 100};

// The label kube's autoregistration puts on the APIServices it manages, and its values: made
// once at start-up (built-in group/versions), kept in line continuously (CRDs' group/versions).
inline constexpr std::string_view kAutomanagedLabel = "kube-aggregator.kubernetes.io/automanaged";
inline constexpr std::string_view kAutomanagedOnStart = "onstart";
inline constexpr std::string_view kAutomanagedContinuously = "true";

// The name of the APIService of a group/version: "v1." for the core group, "v1.apps" else.
std::string api_service_name(std::string_view group, std::string_view version);

// A local APIService of `group`/`version` with `priority`, labelled `automanaged`.
boost::json::object local_api_service(std::string_view group, std::string_view version,
                                      ApiServicePriority priority, std::string_view automanaged);

}  // namespace kwatch::kinds
