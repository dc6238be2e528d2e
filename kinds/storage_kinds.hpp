// storage.k8s.io/v1 CSINode, CSIStorageCapacity and VolumeAttributesClass as kinds, as
// kube-apiserver 1.34 serves them: kube's validation with its field paths and messages
// (pkg/apis/storage/validation: ValidateCSINode and ValidateCSINodeUpdate with the long node IDs
// its strategy allows, ValidateCSIStorageCapacity and its update, ValidateVolumeAttributesClass
// and its update). None of the three has defaults in v1, a status, or a generation kube counts.
// Metadata is the scheme's (names are DNS subdomains).
//
// Pure functions; safe from any thread.
#pragma once

#include <boost/json/object.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "apimachinery/api_error.hpp"

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

// The limits kube checks these kinds against (pkg/apis/storage/validation and core's
// ValidateCSIDriverName).
inline constexpr std::size_t kCSINodeIDMaxLength = 256;  // the strategy's AllowLongNodeID
inline constexpr std::size_t kCSIDriverNameMaxLength = 63;
inline constexpr std::size_t kMaxParameters = 512;
inline constexpr std::size_t kMaxParametersSize = 256 * 1024;

// KindHooks::validate: kube's ValidateCSINode (each driver's name as a CSI driver name, its
// nodeID, allocatable count, topology keys; no two drivers of one name) and, on update,
// ValidateCSINodeUpdate: a driver the old object had keeps every field, its allocatable count
// too (MutableCSINodeAllocatableCount is off by default in 1.34).
void validate_csi_node(const boost::json::object& node, const boost::json::object* old,
                       Causes& causes);

// KindHooks::validate: kube's ValidateCSIStorageCapacity (nodeTopology a label selector,
// storageClassName a DNS subdomain, a capacity not negative; maximumVolumeSize is not checked,
// as in kube) and, on update, ValidateCSIStorageCapacityUpdate (nodeTopology and
// storageClassName immutable). An update keeps label values the old selector already had wrong.
void validate_csi_storage_capacity(const boost::json::object& capacity,
                                   const boost::json::object* old, Causes& causes);

// KindHooks::validate: kube's ValidateVolumeAttributesClass (driverName a qualified name once
// lowercased, parameters non-empty, at most 512 of them and 256 KiB of keys and values, no empty
// key) and, on update, ValidateVolumeAttributesClassUpdate (driverName and parameters forbidden
// to change).
void validate_volume_attributes_class(const boost::json::object& vac,
                                      const boost::json::object* old, Causes& causes);

}  // namespace kwatch::kinds
