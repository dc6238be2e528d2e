// The subresources with handling of their own: pods/binding, pods/eviction,
// serviceaccounts/token, scale, and those a kubelet would serve.
#include "server/api_handler.hpp"

#include "apimachinery/json_body.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/json_path.hpp"
#include "apimachinery/merge_patch.hpp"
#include "apimachinery/status.hpp"
#include "auth/reviews.hpp"
#include "kinds/scheme.hpp"
#include "kinds/subresources.hpp"
#include "registry/eviction.hpp"
#include "registry/resource_store.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"

#include <boost/json/serialize.hpp>

#include <charconv>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using kinds::ResourceInfo;

// pods/binding: puts a pod on a node, as the scheduler does.
asio::awaitable<ApiResponse> ApiHandler::serve_binding(const ApiRequest& request, const Url& url,
                                                       Route& route) {
  route.verb = "create";
  if (request.method != "POST") co_return method_not_allowed(request.method);
  auto body = parse_object(request, "Binding");
  if (!body) co_return error_response(body.error());
  co_return co_await bind_pod(request, url, route, std::move(*body));
}

asio::awaitable<ApiResponse> ApiHandler::bind_pod(const ApiRequest& request, const Url& url,
                                                  Route& route, json::object body) {
  auto q = write_query(url, "binding", route.user);
  if (!q) co_return error_response(q.error());
  if (auto e = set_field_manager(*q, url, request, "CreateOptions", false)) {
    co_return error_response(*e);
  }
  auto r = co_await store_->bind(*route.info, route.ns, route.name, std::move(body), *q);
  if (!r) co_return error_response(r.error());
  co_return json_response(201, apimachinery::success_status({}, 201));
}

asio::awaitable<std::optional<ApiResponse>> ApiHandler::serve_legacy_binding(Exchange& ex) {
  const auto& seg = ex.url.segments;
  if (seg.size() != 5 || seg[0] != "api" || seg[1] != "v1" || seg[2] != "namespaces" ||
      seg[4] != "bindings") {
    co_return std::nullopt;
  }
  Route& route = ex.route;
  route.verb = "create";
  if (ex.request.method != "POST") co_return method_not_allowed(ex.request.method);
  route.ns = seg[3];
  auth::RequestAttributes a;
  a.user = route.user;
  a.verb = "create";
  a.api_version = "v1";
  a.resource = "bindings";
  a.namespace_ = route.ns;
  std::string version = "v1";
  auto denied = co_await authorize_and_audit(access_, ex.audit, std::move(version), std::move(a),
                                             ex.request.admitted.get());
  if (denied) co_return error_response(*denied);
  auto body = parse_object(ex.request, "Binding");
  if (!body) co_return error_response(body.error());
  // The binding names the pod, as a pod's /binding is named by its URL.
  const json::value* meta = body->if_contains("metadata");
  const json::value* name = meta != nullptr && meta->is_object() ? meta->get_object().if_contains("name")
                                                                  : nullptr;
  if (name == nullptr || !name->is_string() || name->get_string().empty()) {
    co_return error_response(apimachinery::api_error(
        Errc::bad_request, "name is required in the binding (the pod to bind)"));
  }
  route.name = std::string(name->get_string());
  route.info = scheme_->find("", "v1", "pods");
  route.subresource = "binding";
  co_return co_await bind_pod(ex.request, ex.url, route, std::move(*body));
}

// pods/eviction: a delete the disruption budgets allow (registry/eviction.hpp).
asio::awaitable<ApiResponse> ApiHandler::serve_eviction(const ApiRequest& request, const Url& url,
                                                        Route& route) {
  route.verb = "create";
  if (request.method != "POST") co_return method_not_allowed(request.method);
  auto q = write_query(url, route.subresource, route.user);
  if (!q) co_return error_response(q.error());
  auto body = parse_object(request, "Eviction");
  if (!body) co_return error_response(body.error());
  registry::DeleteQuery del;
  del.user = q->user;
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

// serviceaccounts/token: a TokenRequest (auth/reviews.hpp).
asio::awaitable<ApiResponse> ApiHandler::serve_token_request(const ApiRequest& request,
                                                             Route& route) {
  route.verb = "create";
  auto body = parse_object(request, "TokenRequest");
  if (!body) co_return error_response(body.error());
  auto out = co_await token_request(access_, route.ns, route.name, std::move(*body));
  co_return out ? json_response(201, *out) : error_response(out.error());
}

namespace {

// A connect's options from its query, as kube decodes them (PodExecOptions, PodAttachOptions,
// PodPortForwardOptions, the proxies' options): the fields Go's JSON would write.
json::object connect_options(const Url& url, const kinds::Subresource& sub,
                             const ResourceInfo& info) {
  json::object o;
  o["kind"] = sub.kind;
  o["apiVersion"] = info.group.empty() ? info.version : info.group + "/" + info.version;
  const auto flag = [&](const char* name) {
    const auto v = url.param(name);
    if (v && (*v == "true" || *v == "1")) o[name] = true;
  };
  const auto all = [&](const char* name) {
    json::array values;
    const auto [from, to] = url.query.equal_range(name);
    for (auto it = from; it != to; ++it) values.emplace_back(it->second);
    return values;
  };
  if (sub.name == "exec" || sub.name == "attach") {
    for (const char* name : {"stdin", "stdout", "stderr", "tty"}) flag(name);
    if (auto c = url.param("container"); c && !c->empty()) o["container"] = *c;
    if (sub.name == "exec") o["command"] = all("command");
  } else if (sub.name == "portforward") {
    json::array ports;
    for (const auto& p : all("ports")) {
      std::int64_t n = 0;
      const std::string_view text = p.as_string();
      if (std::from_chars(text.data(), text.data() + text.size(), n).ec == std::errc()) {
        ports.emplace_back(n);
      }
    }
    if (!ports.empty()) o["ports"] = std::move(ports);
  } else if (auto p = url.param("path"); p && !p->empty()) {
    o["path"] = *p;
  }
  return o;
}

}  // namespace

asio::awaitable<ApiResponse> ApiHandler::serve_without_kubelet(const Url& url, Route& route,
                                                               const kinds::Subresource& sub) {
  // Streams, logs and proxies come from the kubelet of the pod's node (or the node's, or the
  // service's endpoints); kwatch is an API server without kubelets behind it.
  const ResourceInfo& info = *route.info;
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> audit_annotations;
  if (kinds::is_connect(sub)) {
    // As kube's ConnectResource: no dry run; admission on the options before anything is
    // looked up (so a policy's refusal comes before a missing pod's 404).
    if (url.query.contains("dryRun")) {
      co_return error_response(apimachinery::api_error(Errc::bad_request, "dryRun is not supported"));
    }
    json::object options = connect_options(url, sub, info);
    const std::string object_ns = info.namespaced ? route.ns : std::string();
    registry::AdmissionAttributes a{info,           object_ns,
                                    route.name,     route.subresource,
                                    registry::AdmissionOperation::connect,
                                    false,          &route.user,
                                    nullptr,        &warnings,
                                    &audit_annotations};
    registry::Admission& admission = store_->admission();
    std::optional<ApiError> refused;
    if (admission.mutates(a)) refused = co_await admission.mutate(a, &options);
    if (!refused && admission.validates(a)) refused = co_await admission.validate(a, &options);
    if (refused) {
      ApiResponse response = error_response(*refused);
      response.warnings = std::move(warnings);
      response.audit_annotations = std::move(audit_annotations);
      co_return response;
    }
  }
  route.verb = "get";
  std::string empty_version;
  auto obj = co_await store_->get(info, route.ns, route.name, empty_version);
  if (!obj) co_return error_response(obj.error());
  std::string node;
  if (!sub.node_field.empty()) {
    const json::value* n = apimachinery::find_field(*obj, sub.node_field);
    node = n != nullptr && n->is_string() ? std::string(n->get_string()) : std::string();
    if (node.empty()) {
      co_return error_response(apimachinery::api_error(
          Errc::bad_request, info.singular + " " + route.name + " does not have a host assigned"));
    }
  }
  std::string message = "kwatch serves the Kubernetes API without kubelets: " + info.resource +
                         "/" + route.subresource + " of \"" + route.name + "\" cannot be served";
  if (!node.empty()) message += " (no kubelet answers for node \"" + node + "\")";
  ApiError e(Errc::unavailable, std::move(message));
  e.name = route.name;
  e.kind = info.resource;
  ApiResponse response = error_response(e);
  response.warnings = std::move(warnings);
  response.audit_annotations = std::move(audit_annotations);
  co_return response;
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
    auto body = parse_object(request, "Scale");
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
  auto q = write_query(url, "", route.user);
  if (!q) co_return error_response(q.error());
  if (auto e = set_field_manager(*q, url, request, m == "PUT" ? "UpdateOptions" : "PatchOptions",
                                 false)) {
    co_return error_response(*e);
  }
  auto r = co_await store_->scale(info, route.ns, route.name, std::move(mutate), *q);
  // A Scale has no columns of its own here: asked for a Table, it is answered as it is.
  if (route.form.transform == Transform::table) route.form.transform = Transform::none;
  co_return render(route, std::move(r), 200);
}

}  // namespace kwatch::server
