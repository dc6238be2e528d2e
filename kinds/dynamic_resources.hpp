// resource.k8s.io/v1 (dynamic resource allocation) as kinds, as kube-apiserver 1.34 serves them
// with its default feature gates: DeviceClass, ResourceClaim (with /status),
// ResourceClaimTemplate and ResourceSlice. v1's defaults (pkg/apis/resource/v1/defaults.go and
// the types' +default markers), the fields of alpha features kube 1.34 drops on every write
// (device taints and tolerations, partitionable devices, binding conditions, consumable capacity,
// extended resource names), kube's validation with its field paths and messages
// (pkg/apis/resource/validation), device selectors' CEL expressions compiled and costed in kube's
// DRA environment, and the printer cells kube's table shows. Nothing allocates devices: claims
// stay pending until a client writes their status.
//
// Pure functions; safe from any thread (the CEL environment is built once, thread-safe).
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

// kube's limits (k8s.io/api/resource/v1).
inline constexpr std::size_t kDeviceRequestsMaxSize = 32;
inline constexpr std::size_t kDeviceConstraintsMaxSize = 32;
inline constexpr std::size_t kDeviceConfigMaxSize = 32;
inline constexpr std::size_t kDeviceSelectorsMaxSize = 32;
inline constexpr std::size_t kFirstAvailableDeviceRequestMaxSize = 8;
inline constexpr std::size_t kAllocationResultsMaxSize = 32;
inline constexpr std::size_t kResourceClaimReservedForMaxSize = 256;
inline constexpr std::size_t kResourceSliceMaxDevices = 128;
inline constexpr std::size_t kResourceSliceMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr std::size_t kAllocatedDeviceStatusMaxConditions = 8;
inline constexpr std::size_t kCELSelectorExpressionMaxLength = 10 * 1024;
inline constexpr std::uint64_t kCELSelectorExpressionMaxCost = 1000000;
inline constexpr std::size_t kOpaqueParametersMaxLength = 10 * 1024;

// KindHooks::set_defaults. A claim's requests (and each firstAvailable subrequest): allocationMode
// ExactCount when absent, count 1 for ExactCount when absent or 0, a toleration's operator Equal;
// then the fields of features kube 1.34 leaves off are dropped, as its strategies do.
void default_device_class(boost::json::object& dc);
void default_resource_claim(boost::json::object& claim);
void default_resource_claim_template(boost::json::object& tmpl);
void default_resource_slice(boost::json::object& slice);

// KindHooks::keep_owned_fields of ResourceClaim: a status write drops the status.devices entries
// of devices the old allocation had and the new one has not (kube's dropDeallocatedStatusDevices).
void keep_resource_claim_owned_fields(boost::json::object& claim, const boost::json::object& old,
                                      std::string_view subresource);

// KindHooks::validate. `old` is the stored object on updates, null on creates. A template is
// validated whole on every write and its spec is immutable; a claim is validated here on create
// only (its updates by the path they take, below); a class's CEL expressions are compiled only
// when new or changed, as kube treats stored expressions.
void validate_device_class(const boost::json::object& dc, const boost::json::object* old,
                           Causes& causes);
void validate_resource_claim(const boost::json::object& claim, const boost::json::object* old,
                             Causes& causes);
void validate_resource_claim_template(const boost::json::object& tmpl,
                                      const boost::json::object* old, Causes& causes);
void validate_resource_slice(const boost::json::object& slice, const boost::json::object* old,
                             Causes& causes);
// KindHooks::validate_update_path of ResourceClaim: an update of the claim is validated whole
// again and its spec is immutable; a /status write is kube's ValidateResourceClaimStatusUpdate
// (reservedFor, status.devices, the allocation set once), which does not look at the spec.
void validate_resource_claim_update_path(const boost::json::object& claim,
                                         const boost::json::object& old,
                                         std::string_view subresource, Causes& causes);

// One device selector's CEL expression as kube's DRA compiler judges it: the causes at `path`
// (compile errors, a result other than bool, kube's length and cost limits).
void validate_device_selector_expression(const std::string& expression, const std::string& path,
                                         Causes& causes);

// Admin access to devices (DRAAdminAccess, on in 1.34) needs the namespace label
// `resource.kubernetes.io/admin-access: "true"`: the field that asks for it, which kube's
// Forbidden cause names, or nullopt. A claim's or a template's create: the first request of
// `exactly` with adminAccess true (kube names the claim's path for both). A claim's /status
// write (`old` its stored object): the first allocation result granting it, unless the stored
// allocation granted it already.
inline constexpr std::string_view kAdminAccessNamespaceLabel = "resource.kubernetes.io/admin-access";
std::optional<std::string> admin_access_field(const boost::json::object& obj,
                                              std::string_view kind,
                                              const boost::json::object* old,
                                              std::string_view subresource);
// kube's Forbidden detail for it.
std::string admin_access_detail();

// kube's warning for a ResourceSlice whose driver name has capital letters, or nullopt.
std::optional<std::string> resource_slice_driver_warning(const boost::json::object& slice);

// ResourceClaim's STATE cell: "deleted", "pending", "allocated", "reserved" joined by commas.
std::string resource_claim_state_cell(const boost::json::object& claim);

}  // namespace kwatch::kinds
