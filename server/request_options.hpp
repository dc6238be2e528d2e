// What a request asks for beyond its path, read as kube reads it: query parameters (dryRun,
// fieldValidation, fieldManager and force, list and watch parameters), the body as an object,
// DeleteOptions, the representation asked for (Table, aggregated discovery), and the attributes
// it is authorized by. Pure functions.
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/rbac_authorizer.hpp"
#include "registry/deletion.hpp"
#include "registry/list_query.hpp"
#include "registry/resource_store.hpp"
#include "server/http_types.hpp"
#include "server/url.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kwatch::kinds {
struct ResourceInfo;
}

namespace kwatch::server {

// A boolean query parameter as kube's parameter codec reads it: absent, "0" or any case of
// "false" is false; anything else (an empty value too) is true.
bool truthy(const std::optional<std::string>& v);

// The media type without parameters, lowercased.
std::string media_type(std::string_view content_type);

// A request's object is allocated from an arena of its own, released with the last object made
// from it (the response).
apimachinery::ApiResult<boost::json::object> parse_object(const ApiRequest& request,
                                                        std::string_view kind);

// The options every write shares (dryRun, fieldValidation) for a write by `user`.
apimachinery::ApiResult<registry::WriteQuery> write_query(const Url& url,
                                                          const std::string& subresource,
                                                          const apimachinery::UserInfo& user);

// Who a write is recorded under (fieldManager, else the User-Agent's product) and, for apply
// patches, `force`; 422 for what kube's options validation refuses. `options` names the
// request's options kind in errors.
std::optional<apimachinery::ApiError> set_field_manager(registry::WriteQuery& q, const Url& url,
                                          const ApiRequest& request, const std::string& options,
                                          bool apply);

// The list and watch parameters as sent; registry/list_query.hpp checks them.
registry::ListQuery list_query(const Url& url);

// The fields of a DeleteOptions object (a DELETE's body, an Eviction's deleteOptions) into `q`;
// `propagation` is left for check_propagation. A value of the wrong type is a 400 in the words of
// Go's decoder; null is unset.
std::optional<apimachinery::ApiError> read_delete_options(const boost::json::object& opts, registry::DeleteQuery& q,
                                            std::optional<std::string>& propagation);

// The propagation policy, as kube's ValidateDeleteOptions checks it.
std::optional<apimachinery::ApiError> check_propagation(registry::DeleteQuery& q,
                                          const std::optional<std::string>& propagation);

apimachinery::ApiResult<registry::DeleteQuery> delete_query(const ApiRequest& request,
                                                            const Url& url,
                                                            const apimachinery::UserInfo& user);

// Duplicate members of a JSON body matter only when fieldValidation reports them.
void find_duplicates(const ApiRequest& request, const boost::json::object& body,
                     registry::WriteQuery& query);

// The verb of a request that names no resource, as kube's authorizer sees it.
std::string lowercase_verb(const std::string& method);

// kube's verb for a request of a resource, from its method and the path's shape.
std::string resource_verb(const std::string& method, bool named, bool watch);

// kube's RequestInfo for a resource request: the verb from the method and the shape of the
// path (a name or not, a watch or not).
auth::RequestAttributes resource_attributes(const ApiRequest& request, const Url& url,
                                                const kinds::ResourceInfo& info, const std::string& ns,
                                                const std::string& name,
                                                const std::string& subresource, bool watch_prefix,
                                                const auth::UserInfo& user);

// kubectl asks for aggregated discovery first and takes the legacy documents otherwise.
bool wants_aggregated_discovery(const ApiRequest& request);


}  // namespace kwatch::server
