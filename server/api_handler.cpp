#include "server/api_handler.hpp"

#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "auth/reviews.hpp"
#include "auth/service_account_tokens.hpp"
#include "base/uuid.hpp"
#include "kinds/scheme.hpp"
#include "kinds/subresources.hpp"
#include "registry/cacher_registry.hpp"
#include "server/audit_log.hpp"
#include "server/discovery.hpp"
#include "server/health_checks.hpp"
#include "server/media_type.hpp"
#include "server/openapi_v2.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/url.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <algorithm>
#include <chrono>
#include <set>

namespace kwatch::server {

using auth::AccessOptions;
using auth::authenticate;
using auth::authorize;
using auth::impersonate;
using registry::CacherRegistry;
namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::status_code;
using apimachinery::status_object;
using base::Errc;
using kinds::ResourceInfo;

namespace {

// A resource request's authorization and, when auditing, its audit record (kube's verb and
// objectRef, and the decision): the attributes are computed once, for whichever needs them.
std::optional<ApiError> authorize_and_audit(const AccessOptions& access, AuditEvent* audit,
                                            const std::string& api_version,
                                            auth::RequestAttributes attributes) {
  std::optional<ApiError> denied;
  if (access.rbac) denied = authorize(access, attributes);
  if (audit != nullptr) {
    audit->resource_request = true;
    audit->api_version = api_version;
    audit->decision = denied ? "forbid" : "allow";
    audit->attributes = std::move(attributes);
  }
  return denied;
}

}  // namespace

ApiHandler::ApiHandler(std::shared_ptr<kinds::Scheme> scheme,
                       std::shared_ptr<registry::ResourceStore> store,
                       std::shared_ptr<Metrics> metrics, std::string server_address,
                       std::shared_ptr<CacherRegistry> cachers, WatchOptions watch_options,
                       ComputeOptions compute)
    : scheme_(std::move(scheme)),
      store_(std::move(store)),
      metrics_(std::move(metrics)),
      server_address_(std::move(server_address)),
      cachers_(std::move(cachers)),
      watch_options_(watch_options),
      compute_(std::move(compute)) {
  register_cacher_metrics();
  metrics_->help("apiserver_request_total", "counter",
                 "Requests by verb, resource and HTTP code.");
  metrics_->help("apiserver_request_duration_seconds", "histogram",
                 "Request latency by verb and resource.");
}

asio::awaitable<bool> ApiHandler::admit_head(ApiRequest& request) {
  auto authenticated = co_await authenticate(access_, request.credentials, is_health_probe(request.target));
  if (!authenticated) co_return false;
  auto user = impersonate(access_, *authenticated, request.impersonation);
  if (!user) co_return false;
  // Authorized on its head too: a resource's route and verb, a review's resource and a
  // path's verb need no body. What serve() then decides is the same (it authorizes again).
  if (access_.rbac) {
    if (auto url = parse_url(request.target)) {
      const auto& seg = url->segments;
      Route route;
      std::optional<ApiError> denied;
      if (find_resource_route(request, *url, route)) {
        denied = authorize(access_, resource_attributes(request, *url, *route.info, route.ns,
                                                        route.name, route.subresource,
                                                        route.watch_prefix, *user));
      } else if (request.method == "POST" && seg.size() >= 4 && seg[0] == "apis" &&
                 seg[2] == "v1" &&
                 (seg[1] == "authorization.k8s.io" || seg[1] == "authentication.k8s.io")) {
        // The reviews (TokenReview, the access reviews, the self reviews): a create of them.
        auth::RequestAttributes a;
        a.user = *user;
        a.verb = "create";
        a.api_group = seg[1];
        a.resource = seg.back();
        if (seg.size() == 6 && seg[3] == "namespaces") a.namespace_ = seg[4];
        denied = authorize(access_, a);
      } else if (!is_health_probe(url->path) && seg.size() > 0 && seg[0] != "api" &&
                 seg[0] != "apis") {
        auth::RequestAttributes a;
        a.user = *user;
        a.resource_request = false;
        a.verb = lowercase_verb(request.method);
        a.path = url->path;
        denied = authorize(access_, a);
      }
      if (denied) co_return false;
    }
  }
  request.admitted = std::make_shared<AdmittedUser>(
      AdmittedUser{std::move(*authenticated), std::move(*user)});
  co_return true;
}

asio::awaitable<ApiResponse> ApiHandler::handle(ApiRequest request) {
  if (!audit_) return serve(std::move(request), nullptr);
  return serve_audited(std::move(request));
}

void ApiHandler::set_audit(std::shared_ptr<AuditLog> audit) {
  audit_ = std::move(audit);
  if (!audit_) return;
  metrics_->help("apiserver_audit_event_total", "counter", "Audit events generated.");
  metrics_->help("apiserver_audit_error_total", "counter",
                 "Audit events lost: dropped with the queue full, or failed to be written.");
  metrics_->gauge_fn("apiserver_audit_event_total", {},
                     [log = audit_] { return static_cast<double>(log->events()); });
  metrics_->gauge_fn("apiserver_audit_error_total", {{"plugin", "log"}},
                     [log = audit_] { return static_cast<double>(log->errors()); });
}

// kube-apiserver's checks where kwatch has the same thing to check: ping, the storage (`etcd` on
// etcd), start-up work done (namespaces, the kubernetes Service, the RBAC bootstrap policy), and
// for readiness the watch caches and the shutdown.
std::vector<std::string> ApiHandler::health_checks(std::string_view endpoint) const {
  std::vector<std::string> names{"ping", storage_check_name_, "poststarthook/bootstrap"};
  if (endpoint == "readyz") {
    names.emplace_back("watch-caches");
    names.emplace_back("shutdown");
  }
  return names;
}

asio::awaitable<std::optional<std::string>> ApiHandler::run_health_check(std::string endpoint,
                                                                        std::string name) {
  if (name == storage_check_name_) {
    auto ping = co_await store_->ping(endpoint == "readyz" ? storage_ready_timeout_
                                                           : storage_health_timeout_);
    if (!ping) co_return ping.error().message;
  } else if (name == "poststarthook/bootstrap") {
    if (!ready_) co_return std::string("not finished");
  } else if (name == "watch-caches") {
    std::string waiting;
    if (cachers_) {
      for (const auto& [resource, cacher] : cachers_->all()) {
        if (!cacher->ready()) waiting += (waiting.empty() ? "" : ", ") + resource;
      }
    }
    if (!waiting.empty()) co_return "not ready: " + waiting;
  } else if (name == "shutdown") {
    if (shutting_down_) co_return std::string("process is shutting down");
  }
  co_return std::nullopt;
}

asio::awaitable<ApiResponse> ApiHandler::serve_health(Url url) {
  const std::string endpoint = url.segments[0];
  const auto names = health_checks(endpoint);
  HealthAnswer answer;
  if (url.segments.size() > 1) {
    std::string name = url.segments[1];
    for (std::size_t i = 2; i < url.segments.size(); ++i) name += "/" + url.segments[i];
    if (std::find(names.begin(), names.end(), name) == names.end()) co_return not_found_path();
    answer = render_single_check(co_await run_health_check(endpoint, name));
  } else {
    std::set<std::string> excluded;
    for (auto [it, end] = url.query.equal_range("exclude"); it != end; ++it) excluded.insert(it->second);
    std::vector<HealthCheckOutcome> outcomes;
    for (const auto& name : names) {
      HealthCheckOutcome outcome{name, excluded.erase(name) > 0, std::nullopt};
      if (!outcome.excluded) outcome.failure = co_await run_health_check(endpoint, name);
      outcomes.push_back(std::move(outcome));
    }
    answer = render_health(endpoint, outcomes, excluded, url.query.count("verbose") > 0);
  }
  ApiResponse response = text_response(answer.status, std::move(answer.body),
                                       "text/plain; charset=utf-8");
  response.headers["X-Content-Type-Options"] = "nosniff";
  co_return response;
}

asio::awaitable<ApiResponse> ApiHandler::serve_audited(ApiRequest request) {
  AuditEvent event;
  event.received = std::chrono::system_clock::now();
  event.audit_id = base::new_uuid();
  event.request_uri = request.target;
  event.method = request.method;
  event.user_agent = request.user_agent;
  event.source_ip = request.remote_address;
  AuditEvent* audit = &event;
  ApiResponse response = co_await serve(std::move(request), audit);
  event.code = response.status;
  if (response.status >= 400) {
    // kube copies an error's Status fields into responseStatus at level Metadata.
    if (response.error) {
      event.status = "Failure";
      event.reason = std::string(status_code(response.error->code).reason);
      event.message = apimachinery::to_valid_utf8(response.error->message);
    }
  }
  response.headers["Audit-Id"] = event.audit_id;
  event.stage_time = std::chrono::system_clock::now();
  if (response.streaming) {
    audit_->record(event, AuditEvent::Stage::response_started);
    response.on_sent = audit_on_completion(audit_, std::move(event));
  } else {
    audit_->record(std::move(event), AuditEvent::Stage::response_complete);
  }
  co_return response;
}

// One request on its way through the filter chain.
struct ApiHandler::Exchange {
  const ApiRequest& request;
  const Url& url;
  AuditEvent* audit;  // null: not audited
  Route route;        // route.user: whom the request acts as, once identified
  RequestLimits::Lease inflight;
  bool get() const { return request.method == "GET" || request.method == "HEAD"; }
};

// The filter chain, in kube's order: authentication, impersonation, the in-flight limits,
// authorization of a path (a resource is authorized once its route is known), then the
// endpoint; last, the request's metrics and what its response holds.
asio::awaitable<ApiResponse> ApiHandler::serve(ApiRequest request, AuditEvent* audit) {
  const auto start = std::chrono::steady_clock::now();
  auto url = parse_url(request.target);
  if (!url) co_return error_response({Errc::bad_request, "malformed request URL", {}});
  Exchange exchange{request, *url, audit, {}, {}};
  if (auto refused = co_await identify(exchange)) co_return error_response(*refused);
  if (auto refused = co_await take_seat(exchange)) co_return error_response(*refused);
  if (auto refused = authorize_path(exchange)) co_return error_response(*refused);
  ApiResponse response = co_await dispatch(exchange);
  account(exchange, response, std::chrono::steady_clock::now() - start);
  co_return response;
}

// Who is asking (decided from the head already when the body was read after it), and whom
// they act as; the audit record names both, allowed or not.
asio::awaitable<std::optional<ApiError>> ApiHandler::identify(Exchange& ex) {
  const ApiRequest& request = ex.request;
  ApiResult<auth::UserInfo> authenticated = auth::UserInfo();
  if (request.admitted) {
    authenticated = std::move(request.admitted->authenticated);
  } else {
    authenticated =
        co_await authenticate(access_, request.credentials, is_health_probe(request.target));
  }
  if (!authenticated) co_return authenticated.error();
  if (ex.audit) {
    ex.audit->user = *authenticated;
    if (!request.impersonation.user.empty()) {
      ex.audit->impersonated_user = auth::UserInfo{
          request.impersonation.user, request.impersonation.uid, request.impersonation.groups};
    }
  }
  auto user = request.admitted ? ApiResult<auth::UserInfo>(std::move(request.admitted->user))
                               : impersonate(access_, *authenticated, request.impersonation);
  if (!user) {
    if (ex.audit) ex.audit->decision = "forbid";
    co_return user.error();
  }
  if (ex.audit && ex.audit->impersonated_user) ex.audit->impersonated_user = *user;
  ex.route.user = std::move(*user);
  co_return std::nullopt;
}

// Overload: a seat per request in flight (probes exempt, so health checks answer under load).
// Writes may wait in the queue for a seat; reads are refused at once, as in kube.
asio::awaitable<std::optional<ApiError>> ApiHandler::take_seat(Exchange& ex) {
  if (!limits_ || is_health_probe(ex.url.path)) co_return std::nullopt;
  const bool mutating = !(ex.get() || ex.request.method == "OPTIONS");
  // No co_await inside a conditional expression: GCC 12 miscompiles that in coroutines.
  apimachinery::ApiResult<RequestLimits::Lease> seat = RequestLimits::Lease();
  if (mutating) {
    auth::UserInfo who = ex.route.user;
    seat = co_await limits_->admit_mutating(std::move(who));
  } else {
    seat = limits_->admit(ex.route.user, false);
  }
  if (!seat) co_return seat.error();
  ex.inflight = std::move(*seat);
  co_return std::nullopt;
}

// A path that names no resource, authorized as kube's non-resource requests. Health probes are
// always allowed, as kube-apiserver's default --authorization-always-allow-paths: a load
// balancer must see /readyz before the bootstrap RBAC policy exists (first start) or is loaded.
std::optional<ApiError> ApiHandler::authorize_path(Exchange& ex) {
  const auto& seg = ex.url.segments;
  const bool resource_path = !seg.empty() && (seg[0] == "api" || seg[0] == "apis") &&
                             seg.size() > (seg[0] == "api" ? 2u : 3u);
  if (resource_path) return std::nullopt;
  if (access_.rbac && !is_health_probe(ex.url.path)) {
    auth::RequestAttributes a;
    a.user = ex.route.user;
    a.resource_request = false;
    a.verb = lowercase_verb(ex.request.method);
    a.path = ex.url.path;
    if (auto denied = authorize(access_, a)) {
      if (ex.audit) ex.audit->decision = "forbid";
      return denied;
    }
  }
  if (ex.audit) ex.audit->decision = "allow";
  return std::nullopt;
}

// The endpoint a request is for: the reviews, the paths outside the API, discovery and the
// resources. (A request for an aggregated API would be sent on from here.)
asio::awaitable<ApiResponse> ApiHandler::dispatch(Exchange& ex) {
  const auto& seg = ex.url.segments;
  if (auto review = co_await serve_review(ex)) co_return std::move(*review);
  if (!seg.empty() && (seg[0] == "api" || seg[0] == "apis")) co_return co_await serve_api(ex);
  co_return co_await serve_path(ex);
}

// The review endpoints: authorized like any create. kube's system:basic-user role grants the
// self reviews to every authenticated user (not to anonymous ones); system:auth-delegator
// grants the reviews about others. nullopt: the request is not a review.
asio::awaitable<std::optional<ApiResponse>> ApiHandler::serve_review(Exchange& ex) {
  const auto& seg = ex.url.segments;
  if (ex.request.method != "POST" || seg.size() < 4 || seg[0] != "apis" || seg[2] != "v1") {
    co_return std::nullopt;
  }
  const bool authorization = seg[1] == "authorization.k8s.io";
  const bool authentication = seg[1] == "authentication.k8s.io";
  const bool self = seg.size() == 4 &&
                    ((authorization && (seg[3] == "selfsubjectaccessreviews" ||
                                        seg[3] == "selfsubjectrulesreviews")) ||
                     (authentication && seg[3] == "selfsubjectreviews"));
  const bool local = seg.size() == 6 && seg[3] == "namespaces" &&
                     seg[5] == "localsubjectaccessreviews";
  const bool others = (authorization && ((seg.size() == 4 && seg[3] == "subjectaccessreviews") ||
                                         local)) ||
                      (authentication && seg.size() == 4 && seg[3] == "tokenreviews");
  if (!self && !others) co_return std::nullopt;
  const std::string& resource = seg.back();
  auth::RequestAttributes a;
  a.user = ex.route.user;
  a.verb = "create";
  a.api_group = seg[1];
  a.resource = resource;
  if (local) a.namespace_ = seg[4];
  if (auto denied = authorize_and_audit(access_, ex.audit, seg[2], std::move(a))) {
    co_return error_response(*denied);
  }
  auto body = parse_object(ex.request);
  if (!body) co_return error_response(body.error());
  const auth::UserInfo& user = ex.route.user;
  if (resource == "selfsubjectaccessreviews") {
    co_return json_response(201, self_subject_access_review(access_, user, std::move(*body)));
  }
  if (resource == "selfsubjectrulesreviews") {
    co_return json_response(201, self_subject_rules_review(access_, user, std::move(*body)));
  }
  if (resource == "selfsubjectreviews") co_return json_response(201, auth::self_subject_review(user));
  ApiResult<json::object> out = json::object{};
  if (resource == "tokenreviews") {
    out = co_await token_review(access_, std::move(*body));
  } else {
    out = subject_access_review(access_, std::move(*body), local ? seg[4] : "");
  }
  co_return out ? json_response(201, *out) : error_response(out.error());
}

// The paths outside /api and /apis: the root's list, health, the ServiceAccount issuer's
// discovery documents, version, metrics and OpenAPI.
asio::awaitable<ApiResponse> ApiHandler::serve_path(Exchange& ex) {
  const auto& seg = ex.url.segments;
  const bool get = ex.get();
  if (seg.empty()) {
    co_return json_response(
        200, json::object{{"paths", json::array{"/api", "/api/v1", "/apis", "/healthz", "/livez",
                                                "/metrics", "/openapi/v2", "/openapi/v3",
                                                "/readyz", "/version"}}});
  }
  if (seg[0] == "healthz" || seg[0] == "livez" || seg[0] == "readyz") {
    co_return co_await serve_health(ex.url);
  }
  if (get && access_.service_accounts &&
      ((seg.size() == 2 && seg[0] == ".well-known" && seg[1] == "openid-configuration") ||
       (seg.size() == 3 && seg[0] == "openid" && seg[1] == "v1" && seg[2] == "jwks"))) {
    // system:service-account-issuer-discovery.
    const bool config = seg[0] == ".well-known";
    ApiResponse response =
        json_response(200, config ? access_.service_accounts->openid_configuration()
                                  : access_.service_accounts->jwks());
    if (!config) response.content_type = "application/jwk-set+json";
    co_return response;
  }
  if (seg[0] == "version" && seg.size() == 1) co_return json_response(200, version_info());
  if (seg[0] == "metrics" && seg.size() == 1) {
    co_return text_response(200, metrics_->render(), "text/plain; version=0.0.4");
  }
  if (seg[0] == "openapi" && seg.size() >= 2 && seg[1] == "v3" && get) {
    std::string path;
    for (std::size_t i = 2; i < seg.size(); ++i) path += (i > 2 ? "/" : "") + seg[i];
    auto doc = openapi_.get(*scheme_, path);
    if (!doc) co_return not_found_path();
    ApiResponse response;
    response.body = std::move(*doc);
    co_return response;
  }
  if (seg[0] == "openapi" && seg.size() == 2 && seg[1] == "v2" && get) {
    // kubectl asks for protobuf; anything else gets JSON.
    const bool protobuf = ex.request.accept.find("protobuf") != std::string::npos;
    auto doc = openapi_.get(*scheme_, protobuf ? OpenApiDocuments::kV2Protobuf
                                               : OpenApiDocuments::kV2Json);
    ApiResponse response;
    response.body = std::move(doc).value_or("");
    if (protobuf) response.content_type = std::string(kOpenApiV2ProtobufType);
    co_return response;
  }
  co_return not_found_path();
}

// /api and /apis: discovery, then the resources, in JSON or (asked for) YAML.
asio::awaitable<ApiResponse> ApiHandler::serve_api(Exchange& ex) {
  const ApiRequest& request = ex.request;
  const auto& seg = ex.url.segments;
  const std::optional<Representation> representation = negotiate(request.accept, false);
  if (!representation) co_return error_response(not_acceptable());
  const bool core = seg[0] == "api";
  const std::size_t gv_len = core ? 2 : 3;
  const bool get = ex.get();
  ApiResponse response;
  if (seg.size() == 1 && get && wants_aggregated_discovery(request)) {
    response = json_response(200, aggregated_discovery(*scheme_, core));
    response.content_type = std::string(kAggregatedDiscoveryType);
  } else if (seg.size() == 1) {
    response = get ? json_response(200, core ? api_versions(server_address_)
                                             : api_group_list(*scheme_))
                   : method_not_allowed(request.method);
  } else if (!core && seg.size() == 2) {
    auto g = api_group(*scheme_, seg[1]);
    response = g ? json_response(200, *g) : not_found_path();
  } else if (seg.size() == gv_len) {
    auto list = core ? api_resource_list(*scheme_, "", seg[1])
                     : api_resource_list(*scheme_, seg[1], seg[2]);
    response = list ? json_response(200, *list) : not_found_path();
  } else {
    response = co_await serve_resource(ex);
  }
  if (*representation == Representation::yaml) {
    if (response.streaming) {
      response = error_response(not_acceptable());  // a watch has no YAML form
    } else {
      as_yaml(response);
    }
  }
  co_return response;
}

// A resource: routed, authorized, then served (on the compute executor when its body is
// expensive to handle); a watch also takes one of its user's watch slots.
asio::awaitable<ApiResponse> ApiHandler::serve_resource(Exchange& ex) {
  const ApiRequest& request = ex.request;
  Route& route = ex.route;
  if (!find_resource_route(request, ex.url, route)) co_return not_found_path();
  if (access_.rbac || ex.audit) {
    if (auto denied = authorize_and_audit(
            access_, ex.audit, route.info->version,
            resource_attributes(request, ex.url, *route.info, route.ns, route.name,
                                route.subresource, route.watch_prefix, route.user))) {
      co_return error_response(*denied);
    }
  }
  if (request.body_withheld) {
    // Refused on its head a moment ago, allowed now (its grants changed meanwhile): its body
    // was never read, so it is still refused.
    co_return error_response(
        ApiError(Errc::forbidden, "the request was refused before its body was read"));
  }
  ApiResponse response;
  if (compute_.executor &&
      (request.method == "PATCH" || request.body.size() >= compute_.large_body_bytes)) {
    // Awaited here, so the request, URL and route outlive the spawned coroutine.
    response = co_await asio::co_spawn(compute_.executor, handle_resource(request, ex.url, route),
                                       asio::use_awaitable);
  } else {
    response = co_await handle_resource(request, ex.url, route);
  }
  if (response.streaming && limits_) {
    // A watch holds one of its user's watch slots until its stream ends.
    auto slot = limits_->admit_watch(route.user);
    if (slot) {
      response.lease = std::move(*slot);
    } else {
      response = error_response(slot.error());  // the session unregisters as it goes
    }
  }
  co_return response;
}

// The request's metrics; a write keeps seats for the fan-out of its event until delivery has
// caught up with it; a request holds its seat until its response is written, as in kube (a
// watch gave its up when it started streaming).
void ApiHandler::account(Exchange& ex, ApiResponse& response,
                         std::chrono::steady_clock::duration elapsed) {
  const Route& route = ex.route;
  const std::string resource = route.info ? route.info->resource : "";
  // Label values stay bounded whatever a client sends: an invented method counts as "other".
  static const std::set<std::string, std::less<>> kMethods{
      "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"};
  const std::string verb = !route.verb.empty()                 ? route.verb
                           : kMethods.count(ex.request.method) ? ex.request.method
                                                               : "other";
  metrics_->inc("apiserver_request_total",
                {{"verb", verb}, {"resource", resource}, {"code", std::to_string(response.status)}});
  if (route.info != nullptr) {
    metrics_->observe("apiserver_request_duration_seconds", {{"verb", verb}, {"resource", resource}},
                      std::chrono::duration<double>(elapsed).count());
  }
  if (response.written_revision > 0 && route.info != nullptr && limits_) {
    if (auto cacher = cacher_for(*route.info)) {
      cacher->hold_until_delivered(
          response.written_revision,
          limits_->charge_fanout(route.user, cacher->counters().watchers.load()));
    }
  }
  if (!response.streaming) response.lease = std::move(ex.inflight);
}

bool ApiHandler::find_resource_route(const ApiRequest& request, const Url& url,
                                     Route& route) const {
  const auto& seg = url.segments;
  if (seg.empty() || (seg[0] != "api" && seg[0] != "apis")) return false;
  const bool core = seg[0] == "api";
  const std::size_t gv_len = core ? 2 : 3;
  if (seg.size() <= gv_len) return false;
  const std::string group = core ? "" : seg[1];
  const std::string version = core ? seg[1] : seg[2];
  std::vector<std::string> rest(seg.begin() + static_cast<long>(gv_len), seg.end());
  if (!rest.empty() && rest[0] == "watch") {
    route.watch_prefix = true;
    rest.erase(rest.begin());
  }
  const bool namespace_sub =
      rest.size() == 3 && rest[0] == "namespaces" && (rest[2] == "status" || rest[2] == "finalize");
  if (rest.size() >= 3 && rest[0] == "namespaces" && !namespace_sub) {
    route.ns = rest[1];
    rest.erase(rest.begin(), rest.begin() + 2);
  }
  if (rest.empty() || rest.size() > 3) return false;
  route.info = scheme_->find(group, version, rest[0]);
  if (rest.size() >= 2) route.name = rest[1];
  if (rest.size() == 3) route.subresource = rest[2];
  if (route.info == nullptr || (!route.ns.empty() && !route.info->namespaced)) return false;
  if (route.subresource.empty()) return true;
  // The paths discovery lists, and no others.
  const kinds::Subresource* sub = kinds::find_subresource(*route.info, route.subresource);
  if (sub == nullptr) return false;
  if (!sub->only_its_verbs) return true;
  const std::string verb = resource_verb(request.method, true, false);
  return std::find(sub->verbs.begin(), sub->verbs.end(), verb) != sub->verbs.end();
}

// A resource request, routed: the subresources with their own handling, then one handler per
// verb.
asio::awaitable<ApiResponse> ApiHandler::handle_resource(const ApiRequest& request,
                                                         const Url& url, Route& route) {
  const ResourceInfo& info = *route.info;
  const std::string& m = request.method;
  const bool named = !route.name.empty();
  // A namespaced resource addressed without a namespace may only be read across namespaces.
  if (info.namespaced && route.ns.empty() && (named || (m != "GET" && m != "HEAD"))) {
    route.verb = "unknown";
    co_return method_not_allowed(m);
  }
  if (wants_table(request)) {
    const std::string include = url.param("includeObject").value_or("");
    auto parsed = parse_include_object(include);
    if (!parsed) {
      co_return error_response(apimachinery::api_error(
          Errc::bad_request, "includeObject: Unsupported value: \"" + include +
                                 "\": supported values: \"Metadata\", \"None\", \"Object\""));
    }
    route.table_include = *parsed;
  }
  if (route.subresource == "scale") co_return co_await serve_scale(request, url, route);
  const kinds::Subresource* sub =
      route.subresource.empty() ? nullptr : kinds::find_subresource(info, route.subresource);
  if (sub != nullptr && sub->needs_kubelet) co_return co_await serve_without_kubelet(route, *sub);
  if (route.subresource == "binding") co_return co_await serve_binding(request, url, route);
  if (route.subresource == "eviction") co_return co_await serve_eviction(request, url, route);
  if (route.subresource == "token") co_return co_await serve_token_request(request, route);
  if (m == "GET" || m == "HEAD") co_return co_await serve_read(request, url, route);
  if (m == "POST") co_return co_await serve_create(request, url, route);
  if (m == "PUT") co_return co_await serve_update(request, url, route);
  if (m == "PATCH") co_return co_await serve_patch(request, url, route);
  if (m == "DELETE") co_return co_await serve_delete(request, url, route);
  route.verb = "unknown";
  co_return method_not_allowed(m);
}


std::shared_ptr<watch::Cacher> ApiHandler::cacher_for(const ResourceInfo& info) const {
  return cachers_ ? cachers_->find(info) : nullptr;
}

void ApiHandler::register_cacher_metrics() {
  metrics_->help("kwatch_watchers", "gauge", "Watchers registered with the watch cache.");
  metrics_->help("kwatch_watch_events_dispatched_total", "counter",
                 "Events handed to watchers by the dispatcher.");
  metrics_->help("kwatch_watchers_terminated_total", "counter",
                 "Watchers ended because their next event left the event window while parked.");
  metrics_->help("kwatch_watchers_parked_total", "counter",
                 "Times a watcher whose queue was full was parked to read on from the event window.");
  metrics_->help("kwatch_watch_cache_capacity", "gauge", "Capacity of the event window.");
  metrics_->help("kwatch_watch_cache_events", "gauge", "Events held in the event window.");
  metrics_->help("kwatch_watch_cache_objects", "gauge", "Objects held in the watch cache.");
  metrics_->help("kwatch_watch_cache_resource_version", "gauge",
                 "Resource version the watch cache has reached.");
  metrics_->help("kwatch_reflector_relists_total", "counter",
                 "Times the reflector re-listed storage.");
  metrics_->help("kwatch_cache_ready", "gauge", "1 when the watch cache serves requests.");
  if (!cachers_) return;
  for (const auto& [resource, cacher] : cachers_->all()) add_cacher_metrics(*metrics_, resource, cacher);
  // Custom resources get their caches later.
  cachers_->on_added([metrics = metrics_](const std::string& resource,
                                          const std::shared_ptr<watch::Cacher>& c) {
    add_cacher_metrics(*metrics, resource, c);
  });
}

void add_cacher_metrics(Metrics& metrics, const std::string& resource,
                        const std::shared_ptr<watch::Cacher>& cacher) {
  const Metrics::Labels r{{"resource", resource}};
  std::weak_ptr<watch::Cacher> weak = cacher;
  auto gauge = [&](const std::string& name, std::function<double(watch::Cacher&)> fn,
                   Metrics::Labels labels) {
    metrics.gauge_fn(name, labels, [weak, fn] {
      auto c = weak.lock();
      return c ? fn(*c) : 0.0;
    });
  };
  gauge("kwatch_watchers", [](watch::Cacher& c) { return double(c.counters().watchers.load()); }, r);
  gauge("kwatch_watch_events_dispatched_total",
        [](watch::Cacher& c) { return double(c.counters().events_dispatched.load()); }, r);
  gauge("kwatch_watchers_terminated_total",
        [](watch::Cacher& c) { return double(c.counters().watchers_terminated.load()); },
        {{"resource", resource}, {"reason", "slow"}});
  gauge("kwatch_watchers_parked_total",
        [](watch::Cacher& c) { return double(c.counters().watchers_parked.load()); }, r);
  gauge("kwatch_reflector_relists_total",
        [](watch::Cacher& c) { return double(c.counters().relists.load()); }, r);
  gauge("kwatch_watch_cache_capacity", [](watch::Cacher& c) { return double(c.stats().capacity); }, r);
  gauge("kwatch_watch_cache_events", [](watch::Cacher& c) { return double(c.stats().events); }, r);
  gauge("kwatch_watch_cache_objects", [](watch::Cacher& c) { return double(c.stats().objects); }, r);
  gauge("kwatch_watch_cache_resource_version",
        [](watch::Cacher& c) { return double(c.stats().resource_version); }, r);
  gauge("kwatch_cache_ready", [](watch::Cacher& c) { return c.ready() ? 1.0 : 0.0; }, r);
}

}  // namespace kwatch::server
