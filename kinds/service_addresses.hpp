// networking.k8s.io/v1 ServiceCIDR and IPAddress as kinds, as kube-apiserver 1.34 serves them:
// kube's validation with its field paths and messages (pkg/apis/networking/validation): a
// ServiceCIDR holds one or two CIDRs in strict canonical form, one per family, fixed once
// written except that a single-family one may gain the other family; an IPAddress is named by
// an address in canonical form and points for good at the object that holds it. The Service
// allocator and the ServiceCIDR controller read the same objects; this file only says what may
// be stored.
//
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/object.hpp>

#include <string_view>
#include <vector>

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

// Names and labels kube gives these objects (k8s.io/api/networking/v1).
inline constexpr std::string_view kDefaultServiceCIDRName = "kubernetes";
inline constexpr std::string_view kServiceCIDRFinalizer = "networking.k8s.io/service-cidr-finalizer";
inline constexpr std::string_view kIPAddressFamilyLabel = "ipaddress.kubernetes.io/ip-family";
inline constexpr std::string_view kIPAddressManagedByLabel = "ipaddress.kubernetes.io/managed-by";
// The manager of the IPAddresses the Service allocator writes.
inline constexpr std::string_view kIPAllocatorName = "ipallocator.k8s.io";

// KindHooks::validate: kube's ValidateServiceCIDR on create, ValidateServiceCIDRUpdate on
// update (which checks the spec again only when a second family is added).
void validate_service_cidr(const boost::json::object& cidr, const boost::json::object* old,
                           Causes& causes);
// KindHooks::validate: kube's ValidateIPAddress, and on update its parentRef unchanged. The name
// is checked by the scheme (NameRule::ip_address).
void validate_ip_address(const boost::json::object& ip, const boost::json::object* old,
                         Causes& causes);

}  // namespace kwatch::kinds
