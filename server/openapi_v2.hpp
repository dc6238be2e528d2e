// GET /openapi/v2: every served kind's schema as an OpenAPI v2 (Swagger 2.0) `definitions`
// section, in JSON or in the protobuf form (gnostic's openapi_v2.Document) kubectl asks for.
//
// kubectl reads v2 models where v3 does not answer: to validate the items of a `kind: List` file
// (`kubectl create -f` of what `kubectl get -o yaml` wrote) and, failing v3, for client-side
// apply's patch strategies. The definitions are the v3 components rewritten to what kube's v2
// models parse: references as `#/definitions/...`, objects with properties as kinds, maps with
// their value schema, arrays with one item schema, anything else arbitrary, and the
// `x-kubernetes-*` extensions (group-version-kind, patch strategies, list types) kept. The
// operations (server/openapi_paths.hpp) are in the JSON form; the protobuf form, which kubectl
// reads for its models, carries the definitions only. Pure functions; thread-safe.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace kwatch::server {

inline constexpr std::string_view kOpenApiV2ProtobufType =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

// The v2 document whose definitions are the union of `v3_components` (every group-version's
// components.schemas), with info.version `version`.
boost::json::object openapi_v2_document(const boost::json::object& v3_components,
                                        std::string_view version);

// A custom resource's definition in the v2 document, from its version's openAPIV3Schema, as
// kube-apiserver's CRD builder publishes it for kubectl's v2 validation: a kind whose root keeps
// unknown fields is only `{"type": "object"}` (with no properties kubectl would check fields
// against); otherwise what v2 cannot say is dropped (allOf/anyOf/oneOf/not, defaults; a nullable
// value's type, properties and items and its name in `required`; the properties and items of a
// value that keeps unknown fields; an array's type without items), then the metadata,
// apiVersion and kind properties are added, and to every embedded resource that does not keep
// unknown fields; the value validations and `x-kubernetes-*` extensions are kept.
boost::json::object custom_resource_v2_schema(const boost::json::object& openapi_v3_schema,
                                              std::string_view group, std::string_view version,
                                              std::string_view kind);

// `doc` (as openapi_v2_document makes it) as a serialized openapi_v2.Document.
std::string openapi_v2_protobuf(const boost::json::object& doc);

}  // namespace kwatch::server
