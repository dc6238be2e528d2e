// Discovery documents: what kubectl and client-go read to learn which resources exist, plus the
// OpenAPI v3 documents kubectl consults before it writes. Pure functions of the scheme.
#pragma once

#include "kinds/scheme.hpp"

#include <boost/json/object.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::aggregator {
struct RemoteApiService;
}

namespace kwatch::server {

// GET /api
boost::json::object api_versions(std::string_view server_address);
// GET /apis
boost::json::object api_group_list(const kinds::Scheme& scheme);
// The groups of remote APIServices (aggregator/api_service_proxy.hpp) in discovery, as
// kube-aggregator lists them: each group once, its versions by versionPriority, the first
// preferred; groups served here are left as they are. In the aggregated (v2) document a version
// whose extension has passed a discovery check lists its resources ("Current"), one that has not
// lists none ("Stale").
void add_remote_groups(boost::json::object& group_list,
                       const std::vector<aggregator::RemoteApiService>& remote);
std::optional<boost::json::object> remote_api_group(
    std::string_view group, const std::vector<aggregator::RemoteApiService>& remote);
void add_remote_discovery(boost::json::object& discovery_list,
                          const std::vector<aggregator::RemoteApiService>& remote);
// Orders a /apis document (an APIGroupList or an APIGroupDiscoveryList) once the remote groups
// are in it, as kube-aggregator orders all of its APIServices, local and remote: by their
// priorities (a group/version served here has kube's), then by name; a group's versions by
// versionPriority, then kube's version order (apimachinery/kube_version.hpp).
void order_discovery(boost::json::object& doc, const kinds::Scheme& scheme,
                     const std::vector<aggregator::RemoteApiService>& remote);

// The OpenAPI v3 root (`root`, JSON text) with the remote APIServices' group/versions added, each
// at /openapi/v3/apis/<group>/<version> (passed to its extension server).
void add_remote_openapi_paths(std::string& root,
                              const std::vector<aggregator::RemoteApiService>& remote);

// The kind of a review resource ("tokenreviews": "TokenReview"); "" for another resource.
std::string_view review_kind(std::string_view resource);
// The group-versions served: the scheme's and the reviews' (all v1), in order, once each.
std::vector<kinds::GroupVersion> served_group_versions(const kinds::Scheme& scheme);
// GET /apis/<group>; nullopt if the group is not served.
std::optional<boost::json::object> api_group(const kinds::Scheme& scheme,
                                             std::string_view group);
// kube's storageVersionHash of a resource (legacy discovery): the first 8 bytes of the SHA-256
// of the group/version/kind its objects are stored as, in base64 ("/v1/Pod" -> "xPOwRZ+Yhw8=").
// It changes when the storage version does: the storage version migrator and the garbage
// collector compare it across discoveries. The aggregated form has no such field.
std::string storage_version_hash(const kinds::Scheme& scheme, const kinds::ResourceInfo& r);
// GET /api/v1, /apis/<group>/<version>; nullopt if not served.
std::optional<boost::json::object> api_resource_list(const kinds::Scheme& scheme,
                                                     std::string_view group,
                                                     std::string_view version);
// GET /api (core) or /apis (the rest) as kubectl 1.26+ asks first: the aggregated discovery
// document (apidiscovery.k8s.io/v2 APIGroupDiscoveryList) with every resource of every version,
// so that one request replaces one per group-version.
boost::json::object aggregated_discovery(const kinds::Scheme& scheme, bool core);
inline constexpr std::string_view kAggregatedDiscoveryType =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

// GET /version
boost::json::object version_info();

// The OpenAPI v3 documents, serialized once per scheme generation (a CRD coming or going makes
// a new one): kubectl fetches the root on most commands. Thread-safe.
class OpenApiDocuments {
 public:
  // The root (nullopt path) or one group-version's document ("api/v1", "apis/apps/v1") as JSON
  // text; nullopt when not served. kV2Json and kV2Protobuf: the v2 document (openapi_v2.hpp),
  // with what the remote APIServices' extension servers publish in theirs merged in, as kube's
  // aggregator merges them: their groups' paths and the definitions this server has no
  // definition of (RemoteApiService::openapi_v2). Each merge is kept until the scheme or a
  // remote spec changes.
  std::optional<std::string> get(const kinds::Scheme& scheme, std::string_view path,
                                 const std::vector<aggregator::RemoteApiService>& remote = {});
  static constexpr std::string_view kV2Json = "/v2.json";  // no v3 path starts with '/'
  static constexpr std::string_view kV2Protobuf = "/v2.pb";

 private:
  std::mutex mutex_;
  std::uint64_t generation_ = ~std::uint64_t{0};
  std::shared_ptr<const std::map<std::string, std::string, std::less<>>> documents_;
  std::shared_ptr<const boost::json::object> v2_;  // this server's own v2 document
  // The last merge: the remote specs it was made of (their identities), and its two forms.
  std::string merged_key_;
  std::uint64_t merged_generation_ = ~std::uint64_t{0};
  std::shared_ptr<const std::pair<std::string, std::string>> merged_;  // JSON, protobuf
};

// GET /openapi/v3/api/v1, /openapi/v3/apis/<g>/<v>; nullopt if not served. Each resource gets its
// paths with a PATCH operation tagged with its group-version-kind and the `fieldValidation`
// parameter, which tells kubectl to leave field validation to the server.
std::optional<boost::json::object> openapi_v3_group_version(const kinds::Scheme& scheme,
                                                            std::string_view group,
                                                            std::string_view version);

}  // namespace kwatch::server
