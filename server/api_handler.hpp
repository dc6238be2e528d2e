// Routes one API request to discovery, health, metrics or a resource verb, and renders the result
// (JSON, a Table for kubectl, or a Status on error). Knows nothing of sockets: the HTTP session
// hands it an `ApiRequest` and writes back the `ApiResponse`.
//
// Thread-safety: shared by every connection; `handle` may run concurrently on any thread.
#pragma once

#include "auth/access.hpp"
#include "flowcontrol/priority_and_fairness.hpp"
#include "server/request_limits.hpp"
#include "server/discovery.hpp"
#include "server/http_types.hpp"
#include "auth/rbac_authorizer.hpp"
#include "server/metrics.hpp"
#include "server/media_type.hpp"
#include "server/table.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {
class Scheme;
struct ResourceInfo;
struct Subresource;
}  // namespace kwatch::kinds

namespace kwatch::registry {
struct CompiledListQuery;
class ResourceStore;
struct WriteQuery;
}  // namespace kwatch::registry

namespace kwatch::watch {
class Cacher;
struct CacheList;
}

namespace kwatch::registry {
class CacherRegistry;
}  // namespace kwatch::registry

namespace kwatch::aggregator {
class ApiServiceProxy;
struct RemoteApiService;
}

namespace kwatch::server {

struct Url;

class AuditLog;
struct AuditEvent;

struct WatchOptions {
  // Watches without timeoutSeconds last min-request-timeout x (1 + rand[0,1)).
  std::chrono::seconds min_request_timeout{1800};
};

// Requests whose decoding and merging can take a CPU for milliseconds (patches, large bodies)
// run on `executor` when it is set, so that they never hold the I/O threads other connections
// and health checks need. Without one they run inline.
struct ComputeOptions {
  boost::asio::any_io_executor executor;
  std::size_t large_body_bytes = 64 * 1024;
};

// Registers the gauges of one watch cache (watchers, window, objects, readiness, ...).
void add_cacher_metrics(Metrics& metrics, const std::string& resource,
                        const std::shared_ptr<watch::Cacher>& cacher);

// Who a request acts as, decided from its head (ApiHandler::admit_head).
struct AdmittedUser {
  auth::UserInfo authenticated;  // who the credentials name
  auth::UserInfo user;           // whom the request acts as (impersonated, or the same)
  // What its head was authorized for (nothing when no authorizer ran): a request is authorized
  // once, as kube's filter does, so the same attributes are not asked again when it is served.
  std::optional<auth::RequestAttributes> allowed;
};

class ApiHandler {
 public:
  ApiHandler(std::shared_ptr<kinds::Scheme> scheme,
             std::shared_ptr<registry::ResourceStore> store, std::shared_ptr<Metrics> metrics,
             std::string server_address, std::shared_ptr<registry::CacherRegistry> cachers = nullptr,
             WatchOptions watch_options = {},
             ComputeOptions compute = {});

  // Not a coroutine itself: without an audit log it is `serve` and nothing more.
  boost::asio::awaitable<ApiResponse> handle(ApiRequest request);

  // Called with a request's head before its body is read, as kube's filter chain authenticates
  // and authorizes on the headers: a client must authenticate, may impersonate only whom it is
  // allowed to, and must be allowed the verb on the resource before the server buffers a byte
  // of its body. True: read the body; the users are set in `request.admitted`. False: the
  // request is refused whatever its body; `handle` answers it (401 or 403, audited) with no body
  // read, and the connection closes.
  boost::asio::awaitable<bool> admit_head(ApiRequest& request);

  // --audit-log-path (server/audit_log.hpp); before serving starts.
  void set_audit(std::shared_ptr<AuditLog> audit);
  bool auditing() const { return audit_ != nullptr; }

  // Authentication and authorization (auth/access.hpp); before serving starts.
  void set_access(auth::AccessOptions access) { access_ = std::move(access); }
  // Overload protection (null: none): the in-flight limits and per-user watch limits, and with
  // --enable-priority-and-fairness the seats of API Priority and Fairness instead of the
  // in-flight limits (server/priority_and_fairness_filter.cpp).
  void set_limits(std::shared_ptr<RequestLimits> limits) { limits_ = std::move(limits); }
  void set_priority_and_fairness(std::shared_ptr<flowcontrol::PriorityAndFairness> apf);
  // Requests for the group/versions of remote APIServices are passed to their extension
  // servers (server/handle_proxy.cpp); none: every group/version is served here.
  void set_aggregator(std::shared_ptr<const aggregator::ApiServiceProxy> proxy) {
    proxy_ = std::move(proxy);
  }

  // Readiness as /readyz reports it; flipped by the server once start-up work is done.
  void set_ready(bool ready) { ready_ = ready; }
  // The health checks' storage check: its name (kube's "etcd" on etcd, "storage" for the
  // embedded store) and how long it waits for /livez and /healthz, and for /readyz. Before
  // serving starts.
  void set_storage_check(std::string name, std::chrono::milliseconds health_timeout,
                         std::chrono::milliseconds ready_timeout) {
    storage_check_name_ = std::move(name);
    storage_health_timeout_ = health_timeout;
    storage_ready_timeout_ = ready_timeout;
  }
  // Graceful shutdown: /readyz fails from `set_shutting_down`; new watches are refused (429 with
  // Retry-After, so that clients ask another replica) from `refuse_watches`. Thread-safe.
  void set_shutting_down() { shutting_down_ = true; }
  void refuse_watches() { refusing_watches_ = true; }

 private:
  // Where a resource request goes, and what it was, for its handler and its metrics.
    struct Route {
    std::shared_ptr<const kinds::ResourceInfo> info;  // held for the request (a watch: its stream)
    std::string ns;
    std::string name;
    std::string subresource;
    bool watch_prefix = false;
    IncludeObject table_include = IncludeObject::metadata;  // rows of a Table answer
    OutputForm form;  // what the answer is turned into, as the request's Accept asked
    std::string verb;  // for metrics: get, list, watch, create, update, patch, delete, ...
    auth::UserInfo user;
  };
  struct Exchange;
  // Routes and serves one request through the filter chain; fills `audit` (when not null) with
  // who asked for what and the authorization decision, where the handler learns them.
  boost::asio::awaitable<ApiResponse> serve(ApiRequest request, AuditEvent* audit);
  // The chain's steps, in order; each refuses with the error to answer, or lets it through.
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> identify(Exchange& exchange);
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> take_seat(Exchange& exchange);
  // take_seat under API Priority and Fairness.
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> take_fair_seat(Exchange& exchange);
  // /debug/api_priority_and_fairness/dump_*; nullopt for another path.
  std::optional<ApiResponse> serve_priority_and_fairness_dump(const Exchange& exchange) const;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> authorize_path(
      Exchange& exchange);
  boost::asio::awaitable<ApiResponse> dispatch(Exchange& exchange);
  void account(Exchange& exchange, ApiResponse& response,
               std::chrono::steady_clock::duration elapsed);
  // The endpoints dispatch chooses from.
  boost::asio::awaitable<std::optional<ApiResponse>> serve_review(Exchange& exchange);
  // POST /api/v1/namespaces/<ns>/bindings: the legacy way to bind a pod (the binding names it),
  // as pods/binding does. nullopt: the request is for something else.
  boost::asio::awaitable<std::optional<ApiResponse>> serve_legacy_binding(Exchange& exchange);
  // The remote APIService whose group/version the request is for; nullopt: served here (no
  // coroutine frame for the requests that are not passed on).
  std::optional<aggregator::RemoteApiService> aggregated_target(const Exchange& exchange) const;
  // A request for a remote APIService's group/version, authorized and passed on.
  boost::asio::awaitable<ApiResponse> serve_aggregated(
      Exchange& exchange, const aggregator::RemoteApiService& target);
  // The request passed to `target`'s extension server (authorized already) and its answer.
  boost::asio::awaitable<ApiResponse> pass_to(const aggregator::RemoteApiService& target,
                                              Exchange& exchange);
  boost::asio::awaitable<ApiResponse> pass_websocket_to(const aggregator::RemoteApiService& target,
                                                        Exchange& exchange);
  boost::asio::awaitable<ApiResponse> serve_path(Exchange& exchange);
  // A document of OpenApiDocuments (built on the compute executor when it must be rebuilt).
  boost::asio::awaitable<std::optional<std::string>> openapi_document(std::string path);
  boost::asio::awaitable<std::optional<std::string>> build_openapi_document(std::string path);
  boost::asio::awaitable<ApiResponse> serve_api(Exchange& exchange);
  boost::asio::awaitable<ApiResponse> serve_resource(Exchange& exchange);
  // GET /api/v1/componentstatuses[/<name>] (server/handle_component_status.cpp).
  boost::asio::awaitable<ApiResponse> serve_component_statuses(Exchange& exchange);
  boost::asio::awaitable<ApiResponse> serve_audited(ApiRequest request);
  // /livez, /readyz, /healthz and their single checks (server/health_checks.hpp).
  boost::asio::awaitable<ApiResponse> serve_health(Url url);
  std::vector<std::string> health_checks(std::string_view endpoint) const;
  // nullopt when the check passes, else why not.
  boost::asio::awaitable<std::optional<std::string>> run_health_check(std::string endpoint,
                                                                      std::string name);
  // The resource a /api or /apis path names (its group, version, namespace, name, subresource
  // and /watch/ prefix set in `route`); false when it names none that is served (404).
  bool find_resource_route(const ApiRequest& request, const Url& url, Route& route) const;
  boost::asio::awaitable<ApiResponse> handle_resource(const ApiRequest& request, const Url& url,
                                                      Route& route);
  // One per verb, and per subresource with its own handling.
  boost::asio::awaitable<ApiResponse> serve_read(const Url& url, Route& route);
  boost::asio::awaitable<ApiResponse> serve_create(const ApiRequest& request, const Url& url,
                                                   Route& route);
  boost::asio::awaitable<ApiResponse> serve_update(const ApiRequest& request, const Url& url,
                                                   Route& route);
  boost::asio::awaitable<ApiResponse> serve_patch(const ApiRequest& request, const Url& url,
                                                  Route& route);
  boost::asio::awaitable<ApiResponse> serve_delete(const ApiRequest& request, const Url& url,
                                                   Route& route);
  boost::asio::awaitable<ApiResponse> serve_binding(const ApiRequest& request, const Url& url,
                                                    Route& route);
  // A binding read from its body: its write options, then the pod `route` names bound.
  boost::asio::awaitable<ApiResponse> bind_pod(const ApiRequest& request, const Url& url,
                                               Route& route, boost::json::object body);
  boost::asio::awaitable<ApiResponse> serve_eviction(const ApiRequest& request, const Url& url,
                                                     Route& route);
  boost::asio::awaitable<ApiResponse> serve_token_request(const ApiRequest& request,
                                                          Route& route);
  static ApiResponse render(const Route& route,
                            apimachinery::ApiResult<boost::json::object> result,
                            unsigned ok_status, const registry::WriteQuery* write = nullptr,
                            std::int64_t written_revision = 0);
  boost::asio::awaitable<ApiResponse> serve_scale(const ApiRequest& request, const Url& url,
                                                  Route& route);
  // pods/log, exec, attach, portforward, proxy and services/nodes proxy: 503 saying no kubelet
  // serves them (400 for a pod not yet on a node, as kube answers), 404 for a missing object.
  // A connect (all but log) is judged by admission first, on its options, as kube does.
  boost::asio::awaitable<ApiResponse> serve_without_kubelet(const Url& url, Route& route,
                                                            const kinds::Subresource& sub);
  boost::asio::awaitable<ApiResponse> serve_watch(const Url& url, const Route& route);
  // A page of a list the cache answered (registry/cached_reads.hpp), its items written from the
  // cache's buffers: the continue token when more remain; the Table or metadata-only rendering
  // when asked for.
  static ApiResponse list_page(const Route& route, watch::CacheList&& list);
  // An object the cache answered, as JSON, a Table or its metadata.
  static ApiResponse object_page(const Route& route,
                                 const std::shared_ptr<const watch::CachedObject>& object);
  std::shared_ptr<watch::Cacher> cacher_for(const kinds::ResourceInfo& info) const;
  void register_cacher_metrics();

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<Metrics> metrics_;
  std::string server_address_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  WatchOptions watch_options_;
  ComputeOptions compute_;
  std::atomic<bool> ready_{false};
  std::string storage_check_name_ = "storage";
  std::chrono::milliseconds storage_health_timeout_{2000};
  std::chrono::milliseconds storage_ready_timeout_{2000};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> refusing_watches_{false};
  OpenApiDocuments openapi_;
  auth::AccessOptions access_;
  std::shared_ptr<RequestLimits> limits_;
  std::shared_ptr<flowcontrol::PriorityAndFairness> apf_;
  std::shared_ptr<const aggregator::ApiServiceProxy> proxy_;
  std::shared_ptr<AuditLog> audit_;
};

// One request on its way through the filter chain.
struct ApiHandler::Exchange {
  const ApiRequest& request;
  const Url& url;
  AuditEvent* audit;  // null: not audited
  Route route;        // route.user: whom the request acts as, once identified
  RequestLimits::Lease inflight;
  // Under API Priority and Fairness: the FlowSchema and priority level the request went to
  // (their UIDs are response headers).
  std::optional<flowcontrol::Classification> classification;
  bool get() const { return request.method == "GET" || request.method == "HEAD"; }
};

// A resource request's authorization and, when auditing, its audit record (kube's verb and
// objectRef, and the decision). Attributes its head was already allowed (`admitted`) are not
// asked again.
boost::asio::awaitable<std::optional<apimachinery::ApiError>> authorize_and_audit(
    const auth::AccessOptions& access, AuditEvent* audit, std::string api_version,
    auth::RequestAttributes attributes, const AdmittedUser* admitted);

// Whether the request's head was allowed exactly `attributes` (ApiHandler::admit_head).
inline bool allowed_on_head(const AdmittedUser* admitted,
                            const auth::RequestAttributes& attributes) {
  return admitted != nullptr && admitted->allowed && *admitted->allowed == attributes;
}

}  // namespace kwatch::server
