#include "server/api_handler.hpp"

#include "apimachinery/continue_token.hpp"
#include "registry/eviction.hpp"
#include "apimachinery/field_selector.hpp"
#include "apimachinery/json_body.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/merge_patch.hpp"
#include "apimachinery/label_selector.hpp"
#include "schema/managed_fields.hpp"
#include "schema/protobuf_decoder.hpp"
#include "auth/rbac_escalation.hpp"
#include "auth/rbac_policy_source.hpp"
#include "auth/reviews.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "kinds/subresources.hpp"
#include "apimachinery/yaml_body.hpp"
#include "server/audit_log.hpp"
#include "base/uuid.hpp"
#include "registry/cached_reads.hpp"
#include "registry/cacher_registry.hpp"
#include "server/discovery.hpp"
#include "server/health_checks.hpp"
#include "server/media_type.hpp"
#include "server/openapi_v2.hpp"
#include "registry/selector_predicate.hpp"
#include "auth/service_account_tokens.hpp"
#include "server/table.hpp"
#include "server/url.hpp"
#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <chrono>
#include <random>
#include <algorithm>
#include <set>

namespace kwatch::server {

using auth::AccessOptions;
using auth::authenticate;
using auth::authorize;
using auth::impersonate;
using registry::CacherRegistry;
using registry::SelectorPredicate;
namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::status_code;
using apimachinery::status_object;
using base::Errc;
using kinds::ResourceInfo;

struct ApiHandler::Route {
  std::shared_ptr<const ResourceInfo> info;  // held for the request (a watch: its stream)
  std::string ns;
  std::string name;
  std::string subresource;
  bool watch_prefix = false;
  IncludeObject table_include = IncludeObject::metadata;  // rows of a Table answer
  std::string verb;  // for metrics: get, list, watch, create, update, patch, delete, ...
  auth::UserInfo user;
};

namespace {

template <class Json>
ApiResponse serialized_response(unsigned status, const Json& body) {
  ApiResponse r;
  r.status = status;
  r.body = json::serialize(body);
  r.body.push_back('\n');
  return r;
}

// metadata.resourceVersion of an object as a number (0 when absent or not a number).
std::int64_t resource_version_of(const json::object& object) {
  const auto* metadata = object.if_contains("metadata");
  const auto* rv = metadata && metadata->is_object() ? metadata->get_object().if_contains("resourceVersion")
                                                     : nullptr;
  if (rv == nullptr || !rv->is_string()) return 0;
  std::int64_t out = 0;
  const auto& text = rv->get_string();
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() ? out : 0;
}

// Objects are serialized as they are (a json::value made of one would be a copy).
ApiResponse json_response(unsigned status, const json::object& body) {
  return serialized_response(status, body);
}

ApiResponse error_response(const ApiError& error) {
  ApiResponse r = json_response(status_code(error.code).http, status_object(error));
  r.error = std::make_shared<const ApiError>(error);
  if (error.retry_after_seconds > 0) {
    r.headers["Retry-After"] = std::to_string(error.retry_after_seconds);
  }
  return r;
}

ApiResponse text_response(unsigned status, std::string body, std::string type = "text/plain") {
  ApiResponse r;
  r.status = status;
  r.content_type = std::move(type);
  r.body = std::move(body);
  return r;
}

ApiResponse not_found_path() {
  return error_response({Errc::not_found, "the server could not find the requested resource", {}});
}

ApiResponse method_not_allowed(const std::string& method) {
  (void)method;
  return error_response({Errc::method_not_allowed,
                         "the server does not allow this method on the requested resource",
                         {}});
}

// A boolean query parameter as kube's parameter codec reads it: absent, "0" or any case of
// "false" is false; anything else (an empty value too) is true.
bool truthy(const std::optional<std::string>& v) {
  if (!v || *v == "0") return false;
  return !(v->size() == 5 && std::equal(v->begin(), v->end(), "false", [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  }));
}

// The media type without parameters, lowercased.
std::string media_type(std::string_view content_type) {
  std::string out(content_type.substr(0, content_type.find(';')));
  while (!out.empty() && out.back() == ' ') out.pop_back();
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A request's object is allocated from an arena of its own, released with the last object made
// from it (the response).
ApiResult<json::object> parse_object(const ApiRequest& request) {
  const std::string type = media_type(request.content_type);
  if (type == schema::kProtobufMediaType) return schema::decode_protobuf_object(request.body);
  if (!type.empty() && type != "application/json" && type != "*/*") {
    return apimachinery::api_error(Errc::unsupported_media_type,
                               "the body of the request was in an unknown format - accepted "
                               "media types include: application/json, "
                               "application/vnd.kubernetes.protobuf");
  }
  auto v = apimachinery::parse_json_body(
      request.body, json::make_shared_resource<json::monotonic_resource>(request.body.size() * 2));
  if (!v) return v.error();
  if (!v->is_object()) {
    return apimachinery::api_error(Errc::bad_request,
                               "couldn't get version/kind; json parse error: the body is not a "
                               "JSON object");
  }
  return std::move(v->get_object());
}

ApiResult<registry::WriteQuery> write_query(const Url& url, const std::string& subresource) {
  registry::WriteQuery q;
  q.subresource = subresource;
  for (auto [it, end] = url.query.equal_range("dryRun"); it != end; ++it) {
    if (it->second == "All") {
      q.dry_run = true;
    } else if (!it->second.empty()) {
      return apimachinery::api_error(Errc::bad_request, "Invalid dryRun value: " + it->second +
                                                         "; supported values: All");
    }
  }
  const std::string fv = url.param("fieldValidation").value_or("");
  if (fv == "Ignore") {
    q.field_validation = registry::FieldValidation::ignore;
  } else if (fv == "Strict") {
    q.field_validation = registry::FieldValidation::strict;
  } else if (fv == "Warn" || fv.empty()) {
    q.field_validation = registry::FieldValidation::warn;
  } else {
    return apimachinery::api_error(Errc::bad_request,
                               "fieldValidation must be one of Ignore, Warn or Strict, got " + fv);
  }
  q.warnings = std::make_shared<std::vector<std::string>>();
  return q;
}

// Subresources of pods kwatch serves: binding (what a scheduler posts), eviction (`kubectl
// drain`), ephemeralcontainers
// (`kubectl debug`), and those a kubelet would serve, answered with why they cannot be.
bool kubelet_subresource(std::string_view sub) {
  return sub == "log" || sub == "exec" || sub == "attach" || sub == "portforward" ||
         sub == "proxy";
}

// Who a write is recorded under (fieldManager, else the User-Agent's product) and, for apply
// patches, `force`; 422 for what kube's options validation refuses. `options` names the
// request's options kind in errors.
std::optional<ApiError> set_field_manager(registry::WriteQuery& q, const Url& url,
                                          const ApiRequest& request, const std::string& options,
                                          bool apply) {
  const std::optional<std::string> manager = url.param("fieldManager");
  q.field_manager = manager ? *manager : schema::manager_from_user_agent(request.user_agent);
  if (auto e = schema::check_field_manager(manager.value_or(""), apply, options)) return e;
  if (auto force = url.param("force")) {
    if (!apply) {
      ApiError e(Errc::invalid,
                 options + ".meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified "
                           "for non-apply patch",
                 {{"FieldValueForbidden", "Forbidden: may not be specified for non-apply patch",
                   "force"}});
      e.group = "meta.k8s.io";
      e.kind = options;
      return e;
    }
    // Go's strconv.ParseBool, as kube decodes the parameter (Python clients send "True").
    static constexpr std::string_view kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
    static constexpr std::string_view kFalse[] = {"0", "f", "F", "FALSE", "false", "False"};
    if (std::find(std::begin(kTrue), std::end(kTrue), *force) != std::end(kTrue)) {
      q.force = true;
    } else if (std::find(std::begin(kFalse), std::end(kFalse), *force) == std::end(kFalse)) {
      return apimachinery::api_error(Errc::bad_request, "invalid value for force: " + *force);
    }
  }
  return std::nullopt;
}

// The list and watch parameters as sent; registry/list_query.hpp checks them.
registry::ListQuery list_query(const Url& url) {
  registry::ListQuery q;
  q.label_selector = url.param("labelSelector").value_or("");
  q.field_selector = url.param("fieldSelector").value_or("");
  q.limit = url.param("limit").value_or("");
  q.continue_token = url.param("continue").value_or("");
  q.resource_version = url.param("resourceVersion").value_or("");
  q.resource_version_match = url.param("resourceVersionMatch").value_or("");
  q.send_initial_events = url.param("sendInitialEvents").value_or("");
  // A bare `allowWatchBookmarks` asks for them too.
  if (auto b = url.param("allowWatchBookmarks")) q.allow_watch_bookmarks = b->empty() ? "true" : *b;
  q.timeout_seconds = url.param("timeoutSeconds").value_or("");
  return q;
}

// A DeleteOptions that kube's ValidateDeleteOptions refuses: 422 naming the field.
apimachinery::ApiError invalid_delete_options(std::string cause_type, std::string message) {
  apimachinery::ApiError e(Errc::invalid,
                       "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: " + message,
                       {{std::move(cause_type), std::move(message), "propagationPolicy"}});
  e.group = "meta.k8s.io";
  e.kind = "DeleteOptions";
  return e;
}

// A JSON value's type as Go's decoder names it in its errors.
std::string_view json_type_name(const json::value& v) {
  if (v.is_string()) return "string";
  if (v.is_bool()) return "bool";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  return "number";
}

// The fields of a DeleteOptions object (a DELETE's body, an Eviction's deleteOptions) into `q`;
// `propagation` is left for check_propagation. A value of the wrong type is a 400 in the words of
// Go's decoder; null is unset.
std::optional<ApiError> read_delete_options(const json::object& opts, registry::DeleteQuery& q,
                                            std::optional<std::string>& propagation) {
  auto wrong = [](const json::value& v, std::string_view field, std::string_view go_type) {
    return apimachinery::api_error(Errc::bad_request,
                               "json: cannot unmarshal " + std::string(json_type_name(v)) +
                                   " into Go struct field DeleteOptions." + std::string(field) +
                                   " of type " + std::string(go_type));
  };
  auto member = [&](const json::object& o, std::string_view key) -> const json::value* {
    const json::value* v = o.if_contains(key);
    return v != nullptr && !v->is_null() ? v : nullptr;
  };
  if (const json::value* pre = member(opts, "preconditions")) {
    if (!pre->is_object()) return wrong(*pre, "preconditions", "v1.Preconditions");
    if (const json::value* uid = member(pre->get_object(), "uid")) {
      if (!uid->is_string()) return wrong(*uid, "preconditions.uid", "types.UID");
      q.uid = std::string(uid->get_string());
    }
    if (const json::value* rv = member(pre->get_object(), "resourceVersion")) {
      if (!rv->is_string()) return wrong(*rv, "preconditions.resourceVersion", "string");
      q.resource_version = std::string(rv->get_string());
    }
  }
  if (const json::value* ignore =
          member(opts, "ignoreStoreReadErrorWithClusterBreakingPotential")) {
    if (!ignore->is_bool()) {
      return wrong(*ignore, "ignoreStoreReadErrorWithClusterBreakingPotential", "bool");
    }
    if (ignore->get_bool()) q.ignore_read_errors = true;
  }
  if (const json::value* dry = member(opts, "dryRun")) {
    if (!dry->is_array()) return wrong(*dry, "dryRun", "[]string");
    for (const auto& d : dry->get_array()) {
      if (!d.is_string()) return wrong(d, "dryRun", "string");
      if (d.get_string() == "All") {
        q.dry_run = true;
      } else {
        return apimachinery::api_error(Errc::bad_request,
                                   "Invalid dryRun value: " + std::string(d.get_string()) +
                                       "; supported values: All");
      }
    }
  }
  if (const json::value* p = member(opts, "propagationPolicy")) {
    if (!p->is_string()) return wrong(*p, "propagationPolicy", "v1.DeletionPropagation");
    propagation = std::string(p->get_string());
  }
  if (const json::value* o = member(opts, "orphanDependents")) {
    if (!o->is_bool()) return wrong(*o, "orphanDependents", "bool");
    q.orphan_dependents = o->get_bool();
  }
  if (const json::value* g = member(opts, "gracePeriodSeconds")) {
    if (!g->is_int64()) return wrong(*g, "gracePeriodSeconds", "int64");
    q.grace_period_seconds = g->get_int64();
  }
  return std::nullopt;
}

// The propagation policy, as kube's ValidateDeleteOptions checks it.
std::optional<ApiError> check_propagation(registry::DeleteQuery& q,
                                          const std::optional<std::string>& propagation) {
  if (!propagation) return std::nullopt;
  q.propagation = registry::parse_propagation(*propagation);
  if (!q.propagation) {
    return invalid_delete_options(
        "FieldValueNotSupported",
        "Unsupported value: \"" + *propagation +
            "\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
  }
  if (q.orphan_dependents) {
    return invalid_delete_options(
        "FieldValueInvalid", "Invalid value: \"" + *propagation +
                                 "\": orphanDependents and deletionPropagation cannot be both set");
  }
  return std::nullopt;
}

ApiResult<registry::DeleteQuery> delete_query(const ApiRequest& request, const Url& url) {
  registry::DeleteQuery q;
  auto w = write_query(url, "");
  if (!w) return w.error();
  q.dry_run = w->dry_run;
  q.ignore_read_errors = truthy(url.param("ignoreStoreReadErrorWithClusterBreakingPotential"));
  // DeleteOptions come as query parameters, as a body, or both (the body wins).
  std::optional<std::string> propagation = url.param("propagationPolicy");
  if (auto o = url.param("orphanDependents")) q.orphan_dependents = truthy(o);
  if (auto g = url.param("gracePeriodSeconds")) {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(g->data(), g->data() + g->size(), n);
    if (ec != std::errc() || end != g->data() + g->size()) {
      return apimachinery::api_error(Errc::bad_request, "invalid gracePeriodSeconds: " + *g);
    }
    q.grace_period_seconds = n;
  }
  if (!request.body.empty()) {
    auto parsed = parse_object(request);  // JSON, or protobuf as typed Go clients send it
    if (!parsed) return parsed.error();
    if (auto e = read_delete_options(*parsed, q, propagation)) return *e;
  }
  if (auto e = check_propagation(q, propagation)) return *e;
  return q;
}

// Duplicate members of a JSON body matter only when fieldValidation reports them.
void find_duplicates(const ApiRequest& request, const json::object& body,
                     registry::WriteQuery& query) {
  if (query.field_validation == registry::FieldValidation::ignore) return;
  if (media_type(request.content_type) == schema::kProtobufMediaType) return;
  query.duplicate_fields = apimachinery::duplicate_fields(request.body, body);
}

// The verb of a request that names no resource, as kube's authorizer sees it.
std::string lowercase_verb(const std::string& method) {
  if (method == "HEAD") return "get";
  std::string out = method;
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// kube's verb for a request of a resource, from its method and the path's shape.
std::string resource_verb(const std::string& method, bool named, bool watch) {
  if (method == "GET" || method == "HEAD") return watch ? "watch" : named ? "get" : "list";
  if (method == "POST") return "create";
  if (method == "PUT") return "update";
  if (method == "PATCH") return "patch";
  if (method == "DELETE") return named ? "delete" : "deletecollection";
  return lowercase_verb(method);
}

// kube's RequestInfo for a resource request: the verb from the method and the shape of the
// path (a name or not, a watch or not).
auth::RequestAttributes resource_attributes(const ApiRequest& request, const Url& url,
                                                const ResourceInfo& info, const std::string& ns,
                                                const std::string& name,
                                                const std::string& subresource, bool watch_prefix,
                                                const auth::UserInfo& user) {
  auth::RequestAttributes a;
  a.user = user;
  a.api_group = info.group;
  a.resource = info.resource;
  a.subresource = subresource;
  a.namespace_ = info.namespaced ? ns : std::string();
  a.name = name;
  const bool named = !name.empty();
  const std::string& m = request.method;
  const bool watch = watch_prefix || truthy(url.param("watch"));
  // The namespace of a namespace is itself (kube's RequestInfo): `view` bound in `team` may get
  // the namespace `team`.
  if (info.group.empty() && info.resource == "namespaces" && named) a.namespace_ = name;
  a.verb = resource_verb(m, named, watch);
  // A list or watch of one name (fieldSelector=metadata.name=x, as `kubectl get x -w` sends) is
  // authorized for that name, so resourceNames grants cover it.
  if ((a.verb == "list" || a.verb == "watch") && !named) {
    if (auto selector = url.param("fieldSelector")) {
      auto parsed = apimachinery::parse_field_selector(*selector);
      auto exact = parsed ? parsed->exact_value("metadata.name") : std::nullopt;
      if (exact && !exact->empty() && *exact != "." && *exact != ".." &&
          exact->find_first_of("/%") == std::string::npos) {
        a.name = *exact;
      }
    }
  }
  return a;
}

// kubectl asks for aggregated discovery first and takes the legacy documents otherwise.
bool wants_aggregated_discovery(const ApiRequest& request) {
  return request.accept.find("as=APIGroupDiscoveryList") != std::string::npos &&
         request.accept.find("g=apidiscovery.k8s.io") != std::string::npos &&
         request.accept.find("v=v2;") != std::string::npos;
}

// kube's 406 when no representation the client accepts can be made.
ApiError not_acceptable() {
  return {Errc::not_acceptable, "only the following media types are accepted: " +
                                    std::string(kAcceptedMediaTypes)};
}

// A JSON answer (a cached list's items included) as YAML.
void as_yaml(ApiResponse& response) {
  if (response.content_type.rfind("application/json", 0) != 0) return;
  std::string text = std::move(response.body);
  bool first = true;
  for (const auto& item : response.items) {
    if (!first) text.push_back(',');
    first = false;
    text += item->json;
  }
  text += response.tail;
  response.items.clear();
  response.tail.clear();
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  boost::system::error_code ec;
  auto parsed = json::parse(text, ec, {}, options);
  if (ec) {
    response.body = std::move(text);
    return;
  }
  response.body = to_yaml(parsed);
  response.content_type = "application/yaml";
}

bool wants_table(const ApiRequest& request) {
  return request.accept.find("as=Table") != std::string::npos;
}

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
  if (resource == "selfsubjectreviews") co_return json_response(201, self_subject_review(user));
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
    ApiResponse response = json_response(200, config ? access_.service_accounts->openid_configuration()
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
  // A pointer, not a defaulted reference: GCC 12 destroys a default argument's temporary twice
  // when the call holds a co_await.
  auto render = [&](ApiResult<json::object> r, unsigned ok_status,
                    const registry::WriteQuery* write = nullptr) -> ApiResponse {
    ApiResponse response;
    if (!r) {
      response = error_response(r.error());
    } else if (wants_table(request) && (m == "GET" || m == "HEAD")) {
      response = json_response(
          ok_status, to_table(info, *r, std::chrono::system_clock::now(), route.table_include));
    } else {
      response = json_response(ok_status, *r);
    }
    if (write != nullptr && write->warnings) response.warnings = std::move(*write->warnings);
    if (r && m != "GET" && m != "HEAD") response.written_revision = resource_version_of(*r);
    return response;
  };

  if (route.subresource == "scale") co_return co_await serve_scale(request, url, route);
  if (kubelet_subresource(route.subresource)) co_return co_await serve_without_kubelet(route);
  if (route.subresource == "binding") {
    route.verb = "create";
    if (request.method != "POST") co_return method_not_allowed(request.method);
    auto q = write_query(url, route.subresource);
    if (!q) co_return error_response(q.error());
    if (auto e = set_field_manager(*q, url, request, "CreateOptions", false)) {
      co_return error_response(*e);
    }
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    auto r = co_await store_->bind(info, route.ns, route.name, std::move(*body), *q);
    if (!r) co_return error_response(r.error());
    co_return json_response(201, apimachinery::success_status({}, 201));
  }
  if (route.subresource == "eviction") {
    route.verb = "create";
    if (request.method != "POST") co_return method_not_allowed(request.method);
    auto q = write_query(url, route.subresource);
    if (!q) co_return error_response(q.error());
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    registry::DeleteQuery del;
    std::optional<std::string> propagation;
    if (const json::value* opts = body->if_contains("deleteOptions"); opts && opts->is_object()) {
      if (auto e = read_delete_options(opts->get_object(), del, propagation)) {
        co_return error_response(*e);
      }
    }
    if (auto e = check_propagation(del, propagation)) co_return error_response(*e);
    del.dry_run = del.dry_run || q->dry_run;  // the request's dryRun reaches the delete
    auto r = co_await registry::evict_pod(*store_, *scheme_, route.ns, route.name, *body,
                                          std::move(del));
    if (!r) co_return error_response(r.error());
    co_return json_response(201, apimachinery::success_status({}, 201));
  }
  if (route.subresource == "token") {
    route.verb = "create";
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    auto out = co_await token_request(access_, route.ns, route.name, std::move(*body));
    co_return out ? json_response(201, *out) : error_response(out.error());
  }
  if (m == "GET" || m == "HEAD") {
    if (!named) {
      const bool watch = route.watch_prefix || truthy(url.param("watch"));
      if (watch) {
        route.verb = "watch";
        co_return co_await serve_watch(request, url, route);
      }
      route.verb = "list";
      auto q = registry::compile_list_query(info, list_query(url));
      if (!q) co_return error_response(q.error());
      if (cachers_) {
        auto cached = co_await registry::list_from_cache(*cachers_, info, route.ns, *q);
        if (cached && *cached) co_return list_page(request, route, std::move(**cached));
        if (cached) co_return error_response(cached->error());
      }
      co_return render(co_await store_->list(info, route.ns, std::move(*q)), 200);
    }
    if (route.watch_prefix || truthy(url.param("watch"))) {
      route.verb = "watch";
      co_return co_await serve_watch(request, url, route);
    }
    route.verb = "get";
    if (cachers_) {
      std::optional<std::string> rv = url.param("resourceVersion");
      auto cached = co_await registry::get_from_cache(*cachers_, info, route.ns, route.name,
                                                      std::move(rv));
      if (cached && *cached) co_return object_page(request, route, ***cached);
      if (cached) co_return error_response(cached->error());
    }
    co_return render(co_await store_->get(info, route.ns, route.name,
                                          url.param("resourceVersion").value_or("")),
                     200);
  }
  if (m == "POST") {
    route.verb = "create";
    if (named) co_return method_not_allowed(m);
    auto q = write_query(url, "");
    if (!q) co_return error_response(q.error());
    if (auto e = set_field_manager(*q, url, request, "CreateOptions", false)) {
      co_return error_response(*e);
    }
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    if (auto e = co_await admit_rbac_write(info, route, *q)) co_return error_response(*e);
    find_duplicates(request, *body, *q);
    co_return render(co_await store_->create(info, route.ns, std::move(*body), *q), 201, &*q);
  }
  if (m == "PUT") {
    route.verb = "update";
    if (!named) co_return method_not_allowed(m);
    auto q = write_query(url, route.subresource);
    if (!q) co_return error_response(q.error());
    if (auto e = set_field_manager(*q, url, request, "UpdateOptions", false)) {
      co_return error_response(*e);
    }
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    if (auto e = co_await admit_rbac_write(info, route, *q)) co_return error_response(*e);
    find_duplicates(request, *body, *q);
    co_return render(
        co_await store_->update(info, route.ns, route.name, std::move(*body), *q), 200, &*q);
  }
  if (m == "PATCH") {
    route.verb = "patch";
    if (!named) co_return method_not_allowed(m);
    const std::string type = media_type(request.content_type);
    registry::PatchType patch_type;
    if (type == "application/json-patch+json") {
      patch_type = registry::PatchType::json;
    } else if (type == "application/merge-patch+json") {
      patch_type = registry::PatchType::merge;
    } else if (type == "application/strategic-merge-patch+json") {
      patch_type = registry::PatchType::strategic_merge;
    } else if (type == "application/apply-patch+yaml" || type == "application/apply-patch+json") {
      patch_type = registry::PatchType::apply;
    } else {
      co_return error_response({Errc::unsupported_media_type,
                                "the body of the request was in an unknown format - accepted "
                                "media types include: application/json-patch+json, "
                                "application/merge-patch+json, "
                                "application/strategic-merge-patch+json, "
                                "application/apply-patch+yaml",
                                {}});
    }
    auto q = write_query(url, route.subresource);
    if (!q) co_return error_response(q.error());
    const bool apply = patch_type == registry::PatchType::apply;
    if (auto e = set_field_manager(*q, url, request, "PatchOptions", apply)) {
      co_return error_response(*e);
    }
    auto patch = apply ? apimachinery::parse_yaml_body(request.body)
                       : apimachinery::parse_json_body(request.body);
    if (!patch) co_return error_response(patch.error());
    if (apply && !patch->is_object()) {
      co_return error_response(apimachinery::api_error(Errc::bad_request,
                                                   "error decoding YAML: the apply patch is not a map"));
    }
    if (auto e = co_await admit_rbac_write(info, route, *q)) co_return error_response(*e);
    if (apply) {
      bool created = false;
      auto r = co_await store_->apply(info, route.ns, route.name, std::move(patch->get_object()),
                                      *q, &created);
      co_return render(std::move(r), created ? 201 : 200, &*q);
    }
    co_return render(co_await store_->patch(info, route.ns, route.name, patch_type,
                                            std::move(*patch), *q),
                     200, &*q);
  }
  if (m == "DELETE") {
    auto q = delete_query(request, url);
    if (!q) co_return error_response(q.error());
    if (named) {
      route.verb = "delete";
      co_return render(co_await store_->remove(info, route.ns, route.name, *q), 200);
    }
    route.verb = "deletecollection";
    auto lq = registry::compile_list_query(info, list_query(url));
    if (!lq) co_return error_response(lq.error());
    co_return render(co_await store_->remove_collection(info, route.ns, std::move(*lq), *q), 200);
  }
  route.verb = "unknown";
  co_return method_not_allowed(m);
}

asio::awaitable<std::optional<ApiError>> ApiHandler::admit_rbac_write(const ResourceInfo& info,
                                                                      const Route& route,
                                                                      registry::WriteQuery& query) {
  if (!access_.rbac || !auth::is_rbac_resource(info.group, info.resource)) {
    co_return std::nullopt;
  }
  if (auth::is_superuser(route.user)) {
    co_return std::nullopt;  // kube's EscalationAllowed: no policy needed
  }
  auto policy = co_await access_.rbac->consistent();
  if (!policy) co_return policy.error();
  auto admission = std::make_shared<const auth::RbacAdmission>(
      std::move(*policy), route.user, info.resource, info.namespaced ? route.ns : std::string(),
      route.name);
  query.admit = [admission](const json::object* old, const json::object& next) {
    return admission->admit(old, next);
  };
  co_return std::nullopt;
}

asio::awaitable<ApiResponse> ApiHandler::serve_without_kubelet(Route& route) {
  // Streams, logs and proxies come from the kubelet of the pod's node (or the node's, or the
  // service's endpoints); kwatch is an API server without kubelets behind it.
  const ResourceInfo& info = *route.info;
  route.verb = "get";
  std::string empty_version;
  auto obj = co_await store_->get(info, route.ns, route.name, empty_version);
  if (!obj) co_return error_response(obj.error());
  std::string node;
  if (info.resource == "pods") {
    const json::value* n = apimachinery::find_field(*obj, "spec.nodeName");
    node = n != nullptr && n->is_string() ? std::string(n->get_string()) : std::string();
    if (node.empty()) {
      co_return error_response(apimachinery::api_error(
          Errc::bad_request, "pod " + route.name + " does not have a host assigned"));
    }
  } else if (info.resource == "nodes") {
    node = route.name;
  }
  std::string message = "kwatch serves the Kubernetes API without kubelets: " + info.resource +
                         "/" + route.subresource + " of \"" + route.name + "\" cannot be served";
  if (!node.empty()) message += " (no kubelet answers for node \"" + node + "\")";
  ApiError e(Errc::unavailable, std::move(message));
  e.name = route.name;
  e.kind = info.resource;
  co_return error_response(e);
}

asio::awaitable<ApiResponse> ApiHandler::serve_scale(const ApiRequest& request, const Url& url,
                                                     Route& route) {
  const ResourceInfo& info = *route.info;
  const std::string& m = request.method;
  registry::ResourceStore::ScaleFn mutate;
  if (m == "GET" || m == "HEAD") {
    route.verb = "get";
  } else if (m == "PUT") {
    route.verb = "update";
    auto body = parse_object(request);
    if (!body) co_return error_response(body.error());
    auto shared = std::make_shared<json::object>(std::move(*body));
    mutate = [shared](json::object) -> ApiResult<json::object> { return *shared; };
  } else if (m == "PATCH") {
    route.verb = "patch";
    const std::string type = media_type(request.content_type);
    auto patch = apimachinery::parse_json_body(request.body);
    if (!patch) co_return error_response(patch.error());
    auto shared = std::make_shared<json::value>(std::move(*patch));
    if (type == "application/json-patch+json") {
      mutate = [shared](json::object scale) -> ApiResult<json::object> {
        auto r = apimachinery::apply_json_patch(json::value(std::move(scale)), *shared);
        if (!r) return r.error();
        if (!r->is_object()) return ApiError(Errc::bad_request, "patched Scale is not an object");
        return std::move(r->get_object());
      };
    } else if (type == "application/merge-patch+json" ||
               type == "application/strategic-merge-patch+json") {
      // A Scale has no lists: a strategic merge patch of it is a merge patch.
      mutate = [shared](json::object scale) -> ApiResult<json::object> {
        json::value r = apimachinery::apply_merge_patch(json::value(std::move(scale)), *shared);
        if (!r.is_object()) return ApiError(Errc::bad_request, "patched Scale is not an object");
        return std::move(r.get_object());
      };
    } else {
      co_return error_response({Errc::unsupported_media_type,
                                "the body of the request was in an unknown format - accepted "
                                "media types include: application/json-patch+json, "
                                "application/merge-patch+json, "
                                "application/strategic-merge-patch+json", {}});
    }
  } else {
    route.verb = "unknown";
    co_return method_not_allowed(m);
  }
  auto q = write_query(url, "");
  if (!q) co_return error_response(q.error());
  if (auto e = set_field_manager(*q, url, request, m == "PUT" ? "UpdateOptions" : "PatchOptions",
                                 false)) {
    co_return error_response(*e);
  }
  auto r = co_await store_->scale(info, route.ns, route.name, std::move(mutate), *q);
  if (!r) co_return error_response(r.error());
  co_return json_response(200, *r);
}

// ---- The watch cache: watches, and lists and gets served from memory. ----

namespace {

// A watch asked of a server that is shutting down: to be asked again, of another replica.
ApiError shutting_down() {
  ApiError e(Errc::too_many_requests, "the server is shutting down, please try again later");
  e.retry_after_seconds = 1;
  return e;
}

std::string escape_json(std::string_view s) { return json::serialize(json::string(s)); }

// `{"kind":"<K>List",...,"items":[` and `]}`: the frame around a list of cached objects.
std::pair<std::string, std::string> list_frame(const ResourceInfo& info, const watch::CacheList& list,
                                               const std::string& continue_token) {
  std::string head = R"({"kind":)" + escape_json(info.list_kind()) + R"(,"apiVersion":)" +
                     escape_json(info.api_version()) + R"(,"metadata":{"resourceVersion":")" +
                     std::to_string(list.resource_version) + '"';
  if (!continue_token.empty()) {
    head += R"(,"continue":)" + escape_json(continue_token);
    if (list.remaining > 0) head += R"(,"remainingItemCount":)" + std::to_string(list.remaining);
  }
  head += R"(},"items":[)";
  return {std::move(head), "]}\n"};
}

// The whole list as one string (for conversions that need to parse it).
std::string render_list(const std::string& head, const watch::CacheList& list,
                        const std::string& tail) {
  std::size_t size = head.size() + tail.size();
  for (const auto& o : list.objects) size += o->json.size() + 1;
  std::string out;
  out.reserve(size);
  out += head;
  bool first = true;
  for (const auto& o : list.objects) {
    if (!first) out.push_back(',');
    first = false;
    out += o->json;
  }
  out += tail;
  return out;
}

// A cached JSON object or list as kubectl's Table.
std::string table_of(const ResourceInfo& info, std::string_view json_text, IncludeObject include) {
  boost::system::error_code ec;
  // A list nests its items two levels below its top.
  json::parse_options options;
  options.max_depth = apimachinery::kMaxJsonDepth + 2;
  auto parsed = json::parse(json_text, ec, {}, options);
  if (ec || !parsed.is_object()) return std::string(json_text);
  return json::serialize(
      to_table(info, parsed.get_object(), std::chrono::system_clock::now(), include));
}

// A custom resource's cached object (its storage version) as the watched version: conversion
// strategy None rewrites apiVersion only.
std::function<watch::ObjectPtr(const watch::ObjectPtr&)> version_converter(const ResourceInfo& info) {
  return [api_version = info.api_version(),
          to_served = info.hooks.to_served](const watch::ObjectPtr& object) -> watch::ObjectPtr {
    json::parse_options options;
    options.max_depth = apimachinery::kMaxJsonDepth;
    boost::system::error_code ec;
    auto parsed = json::parse(object->json, ec, {}, options);
    if (ec || !parsed.is_object()) return object;
    if (to_served) to_served(parsed.get_object());
    parsed.get_object()["apiVersion"] = api_version;
    return object->with_json(json::serialize(parsed));
  };
}

// Each watched object as a one-row Table, as kube-apiserver streams them to `kubectl get -w`:
// column definitions with the first event only, so that kubectl prints its header once.
// The stream outlives the request: it holds the description it prints with.
std::function<watch::ObjectPtr(const watch::ObjectPtr&)> table_converter(
    std::shared_ptr<const ResourceInfo> held, IncludeObject include) {
  auto first = std::make_shared<bool>(true);
  return [held = std::move(held), first, include](const watch::ObjectPtr& object)
             -> watch::ObjectPtr {
    const ResourceInfo& info = *held;
    json::parse_options options;
    options.max_depth = apimachinery::kMaxJsonDepth;
    boost::system::error_code ec;
    auto parsed = json::parse(object->json, ec, {}, options);
    if (ec || !parsed.is_object()) return object;
    if (info.hooks.to_served) info.hooks.to_served(parsed.get_object());
    json::object table =
        to_table(info, parsed.get_object(), std::chrono::system_clock::now(), include);
    if (!*first) table["columnDefinitions"] = json::array();
    *first = false;
    watch::CachedObject::Parts parts;
    parts.key = object->key;
    parts.resource_version = object->resource_version;
    const std::string text = json::serialize(table);
    parts.json = text;
    return watch::CachedObject::make(parts);
  };
}

std::string status_line(const ApiError& error) {
  return std::string(watch::frame_prefix(watch::EventType::error)) +
         json::serialize(status_object(error)) + std::string(watch::kFrameSuffix);
}

}  // namespace

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

asio::awaitable<ApiResponse> ApiHandler::serve_watch(const ApiRequest& request, const Url& url,
                                                     const Route& route) {
  const ResourceInfo& info = *route.info;
  if (refusing_watches_ || !cachers_) {
    co_return error_response(refusing_watches_ ? shutting_down()
                                               : ApiError(Errc::bad_request,
                                                          "watch is not supported for " +
                                                              info.resource));
  }
  // Without timeoutSeconds a watch lasts between one and two --min-request-timeout, so that
  // watchers started together do not all come back together.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double factor = 1.0 + std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto default_lifetime = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      watch_options_.min_request_timeout * factor);
  auto session = co_await registry::watch_cache(*cachers_, info, route.ns, route.name,
                                                list_query(url), default_lifetime,
                                                request.watch_executor);
  if (!session) {
    if (refusing_watches_) co_return error_response(shutting_down());
    if (session.error().code != Errc::gone) co_return error_response(session.error());
    // Accepted, then one ERROR event: what client-go's reflector expects for a stale version.
    ApiResponse r;
    r.streaming = true;
    r.body = status_line(session.error());
    co_return r;
  }
  ApiResponse r;
  r.streaming = true;
  r.watch = std::move(*session);
  if (wants_table(request)) {
    r.convert = table_converter(route.info, route.table_include);
  } else if (registry::serves_other_version(info)) {
    r.convert = version_converter(info);
  }
  co_return r;
}

ApiResponse ApiHandler::list_page(const ApiRequest& request, const Route& route,
                                  watch::CacheList&& list) {
  const ResourceInfo& info = *route.info;
  std::string token;
  if (list.more && !list.objects.empty()) {
    token = apimachinery::encode_continue(
        list.resource_version,
        std::string(list.objects.back()->key.substr(info.key_prefix().size())) + '\0');
  }
  ApiResponse r;
  auto [head, tail] = list_frame(info, list, token);
  if (wants_table(request)) {
    r.body = table_of(info, render_list(head, list, tail), route.table_include);
  } else {
    r.body = std::move(head);
    r.items = std::move(list.objects);
    r.tail = std::move(tail);
  }
  return r;
}

ApiResponse ApiHandler::object_page(const ApiRequest& request, const Route& route,
                                    const watch::CachedObject& object) {
  ApiResponse r;
  r.body = wants_table(request) ? table_of(*route.info, object.json, route.table_include)
                                : std::string(object.json) + "\n";
  return r;
}

}  // namespace kwatch::server
