// The operations of /openapi/v3/<group-version> and /openapi/v2 as kube-apiserver publishes them,
// which swagger-based tools and generated clients read: for every served resource its collection
// (list or watch, create, delete collection), its objects (read, replace, patch, delete), the
// list across namespaces, the deprecated /watch/ paths, and its status and scale subresources;
// kube's operation IDs (`listCoreV1NamespacedConfigMap`), tags (`core_v1`), descriptions,
// `x-kubernetes-action` and `x-kubernetes-group-version-kind`, the query parameters of each verb
// with kube's descriptions (meta/v1's request options, schema/builtin_schemas.hpp), request
// bodies and answers. Only the media types kwatch produces are listed (JSON, YAML, JSON watch
// streams). Pure functions; thread-safe.
#pragma once

#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::server {

// The OpenAPI definition name of a resource's kind (its list is the name + "List").
using DefinitionName = std::function<std::string(const kinds::ResourceInfo&)>;

// The v3 `paths` of `resources` (one group/version's).
boost::json::object openapi_v3_paths(
    const std::vector<std::shared_ptr<const kinds::ResourceInfo>>& resources,
    const DefinitionName& definition);

// `v3_paths` in Swagger 2.0 terms: parameters typed in place, request bodies as `body`
// parameters, answers with a schema, consumes/produces, schemes; references to #/definitions/.
boost::json::object openapi_v2_paths(const boost::json::object& v3_paths);

// kube's operation ID form of a path part (ToValidOperationID): letters and digits kept, any
// other character dropped and the letter after it capitalized; the first letter capitalized when
// `capitalize_first`.
std::string operation_id_part(std::string_view text, bool capitalize_first);

}  // namespace kwatch::server
