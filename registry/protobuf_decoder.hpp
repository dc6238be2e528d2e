// Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON
// objects, for the kinds kubectl's typed commands send that way (`kubectl create namespace`,
// `create configmap`, `create secret`, `create serviceaccount`, `create deployment`, `run`,
// `create service`, `expose`, `create job`, `create cronjob`, `create quota`,
// `create poddisruptionbudget`, `autoscale`, `create priorityclass`, `create ingress`, the RBAC
// kinds and the reviews), and those typed Go clients send with requests: DeleteOptions (`kubectl
// drain`, controllers' deletes), pods/eviction's Eviction and pods/binding's Binding.
//
// The decoder is table-driven: every message it knows lists its fields. A field it does not know
// is an `unsupported_media_type` error naming the field, never silently dropped, so no data is
// lost; such clients can send JSON instead. Pure functions; thread-safe.
#pragma once

#include "registry/api_error.hpp"

#include <boost/json/object.hpp>

#include <string_view>

namespace kwatch::registry {

inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";

// `bytes` is the whole body: the "k8s\0" magic, then a runtime.Unknown envelope.
ApiResult<boost::json::object> decode_protobuf_object(std::string_view bytes);

}  // namespace kwatch::registry
