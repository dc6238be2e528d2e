#include "server/api_handler.hpp"

#include "aggregator/api_service_proxy.hpp"

#include "apimachinery/status.hpp"
#include "auth/reviews.hpp"
#include "kinds/scheme.hpp"
#include "kinds/subresources.hpp"
#include "registry/cacher_registry.hpp"
#include "server/audit_log.hpp"
#include "server/discovery.hpp"
#include "server/media_type.hpp"
#include "server/openapi_v2.hpp"
#include "server/request_info.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"
#include "server/url.hpp"
#include "schema/protobuf_decoder.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

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

// A resource request's authorization and, when auditing, its audit record (kube's verb and
// objectRef, and the decision): the attributes are computed once, for whichever needs them.
asio::awaitable<std::optional<ApiError>> authorize_and_audit(const AccessOptions& access,
                                                             AuditEvent* audit,
                                                             std::string api_version,
                                                             auth::RequestAttributes attributes,
                                                             const AdmittedUser* admitted) {
  std::optional<ApiError> denied;
  if (auth::authorizes(access) && !allowed_on_head(admitted, attributes)) {
    denied = co_await authorize(access, attributes);
  }
  if (audit != nullptr) {
    audit->resource_request = true;
    audit->api_version = std::move(api_version);
    audit->decision = denied ? "forbid" : "allow";
    audit->attributes = std::move(attributes);
  }
  co_return denied;
}

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

// The endpoint a request is for: the reviews, a remote APIService's group/version (passed on),
// the paths outside the API, discovery and the resources.
asio::awaitable<ApiResponse> ApiHandler::dispatch(Exchange& ex) {
  const auto& seg = ex.url.segments;
  if (auto review = co_await serve_review(ex)) co_return std::move(*review);
  if (auto binding = co_await serve_legacy_binding(ex)) co_return std::move(*binding);
  if (auto remote = aggregated_target(ex)) co_return co_await serve_aggregated(ex, *remote);
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
  a.api_version = seg[2];
  a.resource = resource;
  if (local) a.namespace_ = seg[4];
  std::string version = seg[2];
  auto denied = co_await authorize_and_audit(access_, ex.audit, std::move(version), std::move(a),
                                             ex.request.admitted.get());
  if (denied) co_return error_response(*denied);
  auto body = parse_object(ex.request, review_kind(resource));
  if (!body) co_return error_response(body.error());
  const auth::UserInfo& user = ex.route.user;
  if (resource == "selfsubjectaccessreviews") {
    json::object review = self_subject_access_review(access_, user, std::move(*body));
    co_await auth::complete_access_review(access_, &user, review);
    co_return json_response(201, review);
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
    if (out) co_await auth::complete_access_review(access_, nullptr, *out);
  }
  co_return out ? json_response(201, *out) : error_response(out.error());
}

// /api and /apis: discovery, then the resources, in JSON or (asked for) YAML.
asio::awaitable<ApiResponse> ApiHandler::serve_api(Exchange& ex) {
  const ApiRequest& request = ex.request;
  const auto& seg = ex.url.segments;
  const bool core = seg[0] == "api";
  const std::size_t gv_len = core ? 2 : 3;
  // A resource's answer may be turned into a Table or its metadata (negotiate_output);
  // discovery has one form.
  std::optional<OutputForm> form;
  // A protobuf answer is made for objects of built-in kinds, their lists, Statuses and watches
  // (not over WebSocket); a custom resource or another server's stream falls back to the next
  // form the client accepts. A write is done before its answer is encoded, so it is answered in
  // protobuf only when the client accepts another form too (Go's clients accept JSON as well):
  // otherwise it is refused with 406 before anything is written, as before. A CBOR answer is
  // made likewise (after the endpoint, from its JSON), for every kind; only an answer that is not
  // JSON (another server's) falls back.
  std::optional<OutputForm> fallback;
  const auto binary = [](const std::optional<OutputForm>& f) {
    return f && (f->representation == Representation::protobuf ||
                 f->representation == Representation::cbor);
  };
  if (seg.size() > gv_len) {
    form = negotiate_output(request.accept, false, !request.websocket);
    if (binary(form)) {
      fallback = negotiate_output(request.accept, false, false);
      // Every JSON answer has a CBOR form; not every one a protobuf form.
      if (!fallback && !ex.get() && form->representation == Representation::protobuf) {
        form = std::nullopt;
      }
      ex.route.form = fallback.value_or(OutputForm{});  // what is served before encoding
    }
  } else if (auto representation = negotiate(request.accept, false)) {
    form = OutputForm{*representation};
  }
  if (!form) co_return error_response(not_acceptable());
  if (!binary(form)) ex.route.form = *form;
  const bool get = ex.get();
  ApiResponse response;
  // Remote APIServices' groups join discovery (the group/version documents below them are the
  // extension servers' own: serve_aggregated).
  const std::vector<aggregator::RemoteApiService> remote =
      proxy_ && !core && seg.size() <= 2 ? proxy_->remote()
                                          : std::vector<aggregator::RemoteApiService>();
  if (seg.size() == 1 && get && wants_aggregated_discovery(request)) {
    json::object doc = aggregated_discovery(*scheme_, core);
    if (!remote.empty()) {
      add_remote_discovery(doc, remote);
      order_discovery(doc, *scheme_, remote);
    }
    response = json_response(200, doc);
    response.content_type = std::string(kAggregatedDiscoveryType);
  } else if (seg.size() == 1) {
    if (!get) {
      response = method_not_allowed(request.method);
    } else if (core) {
      response = json_response(200, api_versions(server_address_));
    } else {
      json::object doc = api_group_list(*scheme_);
      if (!remote.empty()) {
        add_remote_groups(doc, remote);
        order_discovery(doc, *scheme_, remote);
      }
      response = json_response(200, doc);
    }
  } else if (!core && seg.size() == 2) {
    auto g = api_group(*scheme_, seg[1]);
    if (!g) g = remote_api_group(seg[1], remote);
    response = g ? json_response(200, *g) : not_found_path();
  } else if (seg.size() == gv_len) {
    auto list = core ? api_resource_list(*scheme_, "", seg[1])
                     : api_resource_list(*scheme_, seg[1], seg[2]);
    response = list ? json_response(200, *list) : not_found_path();
  } else {
    response = co_await serve_resource(ex);
  }
  if (form->representation == Representation::protobuf && response.streaming &&
      !response.body_source && ex.route.info &&
      schema::has_protobuf_form(ex.route.info->api_version(), ex.route.info->kind) &&
      as_protobuf_watch_events(response.body, *ex.route.info)) {
    response.protobuf_watch = ex.route.info;
  } else if (form->representation == Representation::protobuf && !as_protobuf(response) &&
             response.status < 400) {
    // Not one built-in object: the next form the client accepts, or kube's 406.
    if (!fallback) co_return error_response(not_acceptable());
    form = fallback;
  } else if (form->representation == Representation::cbor && response.streaming &&
             !response.body_source && ex.route.info &&
             as_cbor_watch_events(response.body, *ex.route.info)) {
    response.cbor_watch = ex.route.info;
  } else if (form->representation == Representation::cbor &&
             (response.streaming || !as_cbor(response)) && response.status < 400) {
    // Another server's stream or answer: the next form the client accepts, or kube's 406.
    if (!fallback) co_return error_response(not_acceptable());
    form = fallback;
  }
  if (form->representation == Representation::yaml) {
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
  const auto& seg = ex.url.segments;
  if (seg.size() >= 3 && seg[0] == "api" && seg[1] == "v1" && seg[2] == "componentstatuses") {
    co_return co_await serve_component_statuses(ex);
  }
  if (!find_resource_route(request, ex.url, route)) co_return not_found_path();
  if (auth::authorizes(access_) || ex.audit) {
    auth::RequestAttributes a = resource_attributes(request, ex.url, *route.info, route.ns,
                                                    route.name, route.subresource,
                                                    route.watch_prefix, route.user);
    std::string version = route.info->version;
    auto denied = co_await authorize_and_audit(access_, ex.audit, std::move(version),
                                               std::move(a), request.admitted.get());
    if (denied) co_return error_response(*denied);
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

bool ApiHandler::find_resource_route(const ApiRequest& request, const Url& url,
                                     Route& route) const {
  auto parsed = parse_request_info(url.segments);
  if (!parsed) return false;
  route.watch_prefix = parsed->watch_prefix;
  route.ns = std::move(parsed->ns);
  route.name = std::move(parsed->name);
  route.subresource = std::move(parsed->subresource);
  route.info = scheme_->find(parsed->group, parsed->version, parsed->resource);
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
  if (route.form.transform == Transform::table) {
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
  if (sub != nullptr && sub->needs_kubelet) co_return co_await serve_without_kubelet(url, route, *sub);
  if (route.subresource == "binding") co_return co_await serve_binding(request, url, route);
  if (route.subresource == "eviction") co_return co_await serve_eviction(request, url, route);
  if (route.subresource == "token") co_return co_await serve_token_request(request, route);
  if (m == "GET" || m == "HEAD") co_return co_await serve_read(url, route);
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
