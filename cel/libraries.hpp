// The extension libraries of Kubernetes' CEL environment, each adding its overloads to a
// FunctionRegistry. `add_kubernetes_libraries` adds every library kube enables, so a rule that
// runs on kube runs here.
#pragma once

#include "cel/functions.hpp"

namespace kwatch::cel {

// cel-go ext.Strings version 2: charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace,
// split, substring, trim, join, strings.quote.
void add_strings_library(FunctionRegistry& registry);

// cel-go ext.Math: math.greatest/least, rounding, bit operations, sqrt, abs, sign, isNaN/isInf/
// isFinite.
void add_math_library(FunctionRegistry& registry);

// cel-go ext.Sets (sets.contains, sets.equivalent, sets.intersects) and ext.Encoders
// (base64.encode, base64.decode).
void add_sets_and_encoders_libraries(FunctionRegistry& registry);

// Kubernetes' IP and CIDR libraries: ip(), cidr(), isIP, isCIDR and the net.IP / net.CIDR methods.
void add_network_library(FunctionRegistry& registry);

// Kubernetes' quantity library: quantity(), isQuantity and the kubernetes.Quantity methods.
void add_quantity_library(FunctionRegistry& registry);

// Kubernetes' semver library (version 1): semver(), isSemver and the kubernetes.Semver methods.
void add_semver_library(FunctionRegistry& registry);

// Kubernetes' format library: format.named, format.<name>() and <format>.validate.
void add_format_library(FunctionRegistry& registry);

// Kubernetes' URL library: url(), isURL and the kubernetes.URL accessors.
void add_url_library(FunctionRegistry& registry);

// The standard definitions and every library above.
void add_kubernetes_libraries(FunctionRegistry& registry);

// A registry with kube's whole environment, made once per process (thread-safe, immutable).
const FunctionRegistry& kubernetes_functions();

}  // namespace kwatch::cel
