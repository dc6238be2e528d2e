// A Service's validation and strategy as kube-apiserver 1.34 has them (ValidateService,
// ValidateServiceUpdate, ValidateServiceClusterIPsRelatedFields; the strategy's
// NormalizeClusterIPs and dropTypeDependentFields), for what the kind's schema does not already
// check (its enums, the ports' range and (port, protocol) keys). What depends on the cluster (the
// IP families it serves, the ranges, what is allocated) is the allocator's
// (registry/service_allocator.hpp).
//
// Pure functions; safe from any thread.
#pragma once

#include "kinds/builtin_validation.hpp"

#include <boost/json/fwd.hpp>

#include <string>

namespace kwatch::kinds {

// A Service spec's type, "ClusterIP" when unset.
std::string service_type(const boost::json::object* spec);
// Whether its type has cluster IPs (every type but ExternalName).
bool needs_cluster_ip(const boost::json::object* spec);
// Whether it has a health check node port: a LoadBalancer whose external traffic stays on the
// node (externalTrafficPolicy Local).
bool needs_health_check_node_port(const boost::json::object* spec);

// PrepareForCreate: an old client's clusterIP alone gives clusterIPs; the status starts as Go
// writes an empty one (`{loadBalancer: {}}`).
void prepare_service_for_create(boost::json::object& service);

// PrepareForUpdate: NormalizeClusterIPs (a client that sent clusterIP alone, or cleared it)
// and dropTypeDependentFields (a type change drops what the new type cannot have and the client
// carried over unchanged: cluster IPs and IP families for ExternalName, node ports, the health
// check node port, allocateLoadBalancerNodePorts, loadBalancerClass, externalTrafficPolicy).
void prepare_service_for_update(boost::json::object& service, const boost::json::object& old);

// ValidateService (and ValidateServiceUpdate when `old` is set).
void validate_service(const boost::json::object& service, const boost::json::object* old,
                      Causes& causes);

}  // namespace kwatch::kinds
