// The filter chain every request crosses, in kube's order: who it is (authentication, then
// impersonation), a seat (API Priority and Fairness, priority_and_fairness_filter.cpp; with it
// off, the in-flight limits), authorization of the path, then the
// endpoint (`dispatch`, api_handler.cpp), then accounting (metrics, the audit record). A
// request's head goes through `admit_head` first, before its body is read.

#include "server/api_handler.hpp"

#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/uuid.hpp"
#include "server/audit_log.hpp"
#include "server/health_checks.hpp"
#include "server/media_type.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/url.hpp"
#include "watch/cacher.hpp"

#include <chrono>
#include <set>

namespace kwatch::server {

using auth::authenticate;
using auth::authorize;
using auth::impersonate;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::status_code;
using base::Errc;
namespace asio = boost::asio;

asio::awaitable<bool> ApiHandler::admit_head(ApiRequest& request) {
  auto authenticated = co_await authenticate(access_, request.credentials, is_health_probe(request.target));
  if (!authenticated) co_return false;
  auto user = co_await impersonate(access_, *authenticated, request.impersonation);
  if (!user) co_return false;
  // Authorized on its head, as kube's filter authorizes before a handler reads the body: a
  // resource's route and verb, a review's resource and a path's verb need no body. What it was
  // allowed is kept, and not asked again when the request is served.
  std::optional<auth::RequestAttributes> allowed;
  if (auth::authorizes(access_)) {
    if (auto url = parse_url(request.target)) {
      const auto& seg = url->segments;
      Route route;
      std::optional<ApiError> denied;
      if (find_resource_route(request, *url, route)) {
        const auth::RequestAttributes a =
            resource_attributes(request, *url, *route.info, route.ns, route.name,
                                route.subresource, route.watch_prefix, *user);
        denied = co_await authorize(access_, a);
        allowed = a;
      } else if (request.method == "POST" && seg.size() >= 4 && seg[0] == "apis" &&
                 seg[2] == "v1" &&
                 (seg[1] == "authorization.k8s.io" || seg[1] == "authentication.k8s.io")) {
        // The reviews (TokenReview, the access reviews, the self reviews): a create of them.
        auth::RequestAttributes a;
        a.user = *user;
        a.verb = "create";
        a.api_group = seg[1];
        a.resource = seg.back();
        a.api_version = seg[2];
        if (seg.size() == 6 && seg[3] == "namespaces") a.namespace_ = seg[4];
        denied = co_await authorize(access_, a);
        allowed = a;
      } else if (!is_health_probe(url->path) && seg.size() > 0 && seg[0] != "api" &&
                 seg[0] != "apis") {
        auth::RequestAttributes a;
        a.user = *user;
        a.resource_request = false;
        a.verb = lowercase_verb(request.method);
        a.path = url->path;
        denied = co_await authorize(access_, a);
        allowed = a;
      }
      if (denied) co_return false;
    }
  }
  request.admitted = std::make_shared<AdmittedUser>(
      AdmittedUser{std::move(*authenticated), std::move(*user), std::move(allowed)});
  co_return true;
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
  event.annotations = std::move(response.audit_annotations);
  if (response.status >= 400) {
    // kube copies an error's Status fields into responseStatus at level Metadata.
    if (response.error) {
      event.status = "Failure";
      event.reason = response.error->reason.empty()
                         ? std::string(status_code(response.error->code).reason)
                         : response.error->reason;
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


// The filter chain, in kube's order: authentication, impersonation, the in-flight limits,
// authorization of a path (a resource is authorized once its route is known), then the
// endpoint; last, the request's metrics and what its response holds.
asio::awaitable<ApiResponse> ApiHandler::serve(ApiRequest request, AuditEvent* audit) {
  const auto start = std::chrono::steady_clock::now();
  // A refusal before the endpoint is a Status in the form the client negotiates, as kube's
  // filters answer (client-go's protobuf and CBOR clients read a Status in their form).
  auto refusal = [&request](const apimachinery::ApiError& error) {
    ApiResponse r = error_response(error);
    const auto form = negotiate_output(request.accept, false, true);
    if (form && form->representation == Representation::protobuf) as_protobuf(r);
    if (form && form->representation == Representation::cbor) as_cbor(r);
    return r;
  };
  auto url = parse_url(request.target);
  if (!url) co_return refusal({Errc::bad_request, "malformed request URL", {}});
  Exchange exchange{request, *url, audit, {}, {}, {}};
  ApiResponse response;
  if (auto refused = co_await identify(exchange)) {
    response = refusal(*refused);
  } else if (auto unseated = co_await take_seat(exchange)) {
    response = refusal(*unseated);
  } else if (auto forbidden = co_await authorize_path(exchange)) {
    response = refusal(*forbidden);
  } else {
    response = co_await dispatch(exchange);
    account(exchange, response, std::chrono::steady_clock::now() - start);
  }
  if (exchange.classification) {
    // kube names the matched objects by UID only, so that their names are not shown.
    response.headers["X-Kubernetes-PF-FlowSchema-UID"] = exchange.classification->flow_schema_uid;
    response.headers["X-Kubernetes-PF-PriorityLevel-UID"] =
        exchange.classification->priority_level_uid;
    response.low_cpu_priority = exchange.classification->low_cpu_priority;
  }
  const std::optional<std::string> pretty = exchange.url.param("pretty");
  if (wants_pretty(pretty ? std::optional<std::string_view>(*pretty) : std::nullopt,
                   exchange.request.user_agent)) {
    as_indented(response);
  }
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
  // No co_await inside a conditional expression: GCC 12 miscompiles that in coroutines.
  ApiResult<auth::UserInfo> user = auth::UserInfo();
  if (request.admitted) {
    user = std::move(request.admitted->user);
  } else {
    user = co_await impersonate(access_, *authenticated, request.impersonation);
  }
  if (!user) {
    if (ex.audit) ex.audit->decision = "forbid";
    co_return user.error();
  }
  if (ex.audit && ex.audit->impersonated_user) ex.audit->impersonated_user = *user;
  ex.route.user = std::move(*user);
  co_return std::nullopt;
}


// Overload: with API Priority and Fairness, the request's priority level's seats (probes go to
// the exempt level through kube's `probes` FlowSchema). Without it, a seat per request in flight
// (probes exempt, so health checks answer under load); writes may wait in the queue for a seat,
// reads are refused at once, as kube's max-in-flight filter does.
asio::awaitable<std::optional<ApiError>> ApiHandler::take_seat(Exchange& ex) {
  if (apf_) co_return co_await take_fair_seat(ex);
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
asio::awaitable<std::optional<ApiError>> ApiHandler::authorize_path(Exchange& ex) {
  const auto& seg = ex.url.segments;
  const bool resource_path = !seg.empty() && (seg[0] == "api" || seg[0] == "apis") &&
                             seg.size() > (seg[0] == "api" ? 2u : 3u);
  if (resource_path) co_return std::nullopt;
  if (auth::authorizes(access_) && !is_health_probe(ex.url.path)) {
    auth::RequestAttributes a;
    a.user = ex.route.user;
    a.resource_request = false;
    a.verb = lowercase_verb(ex.request.method);
    a.path = ex.url.path;
    std::optional<ApiError> denied;
    if (!allowed_on_head(ex.request.admitted.get(), a)) denied = co_await authorize(access_, a);
    if (denied) {
      if (ex.audit) ex.audit->decision = "forbid";
      co_return denied;
    }
  }
  if (ex.audit) ex.audit->decision = "allow";
  co_return std::nullopt;
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
  if (response.written_revision > 0 && route.info != nullptr && apf_ && ex.inflight) {
    // The write's seats (its fan-out's included) stay taken until delivery has caught up.
    if (auto cacher = cacher_for(*route.info)) {
      cacher->hold_until_delivered(response.written_revision, ex.inflight);
    }
  } else if (response.written_revision > 0 && route.info != nullptr && limits_) {
    if (auto cacher = cacher_for(*route.info)) {
      cacher->hold_until_delivered(
          response.written_revision,
          limits_->charge_fanout(route.user, cacher->counters().watchers.load()));
    }
  }
  if (!response.streaming) response.lease = std::move(ex.inflight);
}

}  // namespace kwatch::server
