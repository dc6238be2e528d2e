// GET /api/v1/componentstatuses[/<name>]: the deprecated health summary `kubectl get cs` shows,
// answered, never stored, as kube-apiserver answers it: `etcd-0` from a storage check ("ok"),
// `scheduler` from a probe of https://127.0.0.1:10259/healthz (kube's address; a kube-scheduler
// run against kwatch on its host answers it), and `controller-manager`, whose controllers run
// inside kwatch, healthy while kwatch serves. Read-only (get, list), with kube's deprecation
// warning, selectors and printer columns.

#include "server/api_handler.hpp"

#include "apimachinery/field_selector.hpp"
#include "apimachinery/label_selector.hpp"
#include "auth/rbac_authorizer.hpp"
#include "client/http_client.hpp"
#include "client/kubeconfig.hpp"
#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"
#include "server/responses.hpp"
#include "server/table.hpp"
#include "server/url.hpp"

#include <boost/asio/this_coro.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using base::Errc;

namespace {

constexpr std::string_view kDeprecation = "v1 ComponentStatus is deprecated in v1.19+";
constexpr std::string_view kSchedulerHealth = "https://127.0.0.1:10259/healthz";
// kube's probe timeout for the components.
constexpr auto kProbeTimeout = std::chrono::seconds(20);

struct Health {
  std::string status;  // True, False, Unknown
  std::string message;
  std::string error;
};

json::object component(const std::string& name, const Health& h) {
  json::object condition{{"type", "Healthy"}, {"status", h.status}};
  if (!h.message.empty()) condition["message"] = h.message;
  if (!h.error.empty()) condition["error"] = h.error;
  return json::object{{"kind", "ComponentStatus"},
                      {"apiVersion", "v1"},
                      {"metadata", json::object{{"name", name}}},
                      {"conditions", json::array{std::move(condition)}}};
}

// kube's printer for ComponentStatus: Name, Status (Healthy when its Healthy condition is True,
// else Unhealthy), Message, Error.
const kinds::ResourceInfo& component_status_info() {
  static const kinds::ResourceInfo info = [] {
    kinds::ResourceInfo r;
    r.version = "v1";
    r.kind = "ComponentStatus";
    r.resource = "componentstatuses";
    r.singular = "componentstatus";
    auto condition_text = [](std::string key) {
      return [key](const json::object& o, std::chrono::system_clock::time_point) {
        const json::value* conditions = o.if_contains("conditions");
        if (conditions != nullptr && conditions->is_array()) {
          for (const auto& c : conditions->get_array()) {
            const json::object* co = c.if_object();
            if (co == nullptr) continue;
            const json::value* type = co->if_contains("type");
            if (type == nullptr || *type != "Healthy") continue;
            if (key == "status") {
              const json::value* s = co->if_contains("status");
              return json::value(s != nullptr && *s == "True" ? "Healthy" : "Unhealthy");
            }
            const json::value* v = co->if_contains(key);
            return v != nullptr && v->is_string() ? *v : json::value("");
          }
        }
        return json::value(key == "status" ? "Unhealthy" : "");
      };
    };
    kinds::PrinterColumn name;
    name.name = "Name";
    name.type = "string";
    name.format = "name";
    name.json_path = ".metadata.name";
    r.printer_columns.push_back(name);
    for (auto [title, key] : {std::pair{"Status", "status"}, std::pair{"Message", "message"},
                              std::pair{"Error", "error"}}) {
      kinds::PrinterColumn c;
      c.name = title;
      c.type = "string";
      c.cell = condition_text(key);
      r.printer_columns.push_back(std::move(c));
    }
    return r;
  }();
  return info;
}

}  // namespace

asio::awaitable<ApiResponse> ApiHandler::serve_component_statuses(Exchange& ex) {
  const auto& seg = ex.url.segments;
  if (seg.size() > 4) co_return not_found_path();
  const std::string name = seg.size() == 4 ? seg[3] : std::string();
  const bool watch = ex.url.param("watch").value_or("") == "true" ||
                     ex.url.param("watch").value_or("") == "1";
  if (auth::authorizes(access_) || ex.audit) {
    auth::RequestAttributes a;
    a.user = ex.route.user;
    a.verb = !name.empty() ? "get" : watch ? "watch" : "list";
    a.api_version = "v1";
    a.resource = "componentstatuses";
    a.name = name;
    auto denied = co_await authorize_and_audit(access_, ex.audit, "v1", std::move(a),
                                               ex.request.admitted.get());
    if (denied) co_return error_response(*denied);
  }
  if (!ex.get() || watch) co_return method_not_allowed(watch ? "WATCH" : ex.request.method);

  // The components, each checked now.
  std::vector<std::pair<std::string, Health>> components;
  auto wanted = [&](std::string_view n) { return name.empty() || name == n; };
  if (wanted("controller-manager")) components.push_back({"controller-manager", {"True", "ok", ""}});
  if (wanted("etcd-0")) {
    auto ping = co_await store_->ping(storage_health_timeout_);
    components.push_back({"etcd-0", ping ? Health{"True", "ok", ""}
                                         : Health{"False", "", ping.error().message}});
  }
  if (wanted("scheduler")) {
    client::ClientConfig config;
    config.server = "https://127.0.0.1:10259";
    config.insecure_skip_tls_verify = true;
    client::HttpClient::Options options;
    options.request_timeout = kProbeTimeout;
    options.max_response_bytes = 64 * 1024;
    auto probe = client::HttpClient::create(co_await asio::this_coro::executor, config, options);
    Health h{"Unknown", "", ""};
    if (!probe) {
      h.error = probe.error();
    } else {
      auto r = co_await (*probe)->request("GET", "/healthz");
      if (r) {
        h = Health{"True", r->body, ""};
      } else if (r.error().kind == client::ApiError::Kind::status) {
        // An answer that is not 2xx: kube's probe fails with the body as the message.
        h = Health{"False", r.error().message, ""};
      } else {
        // No answer at all: kube's probe reports the error, status Unknown, in Go's words
        // for a port nobody listens on.
        const bool refused = r.error().message.find("Connection refused") != std::string::npos;
        h.error = "Get \"" + std::string(kSchedulerHealth) + "\": " +
                  (refused ? "dial tcp 127.0.0.1:10259: connect: connection refused"
                           : r.error().message);
      }
    }
    components.push_back({"scheduler", std::move(h)});
  }
  if (!name.empty() && components.empty()) {
    // kube's REST answers an unknown name with a plain error: a 500.
    co_return error_response(ApiError(Errc::internal, "Internal error occurred: Component not found: " + name));
  }

  ApiResponse response;
  json::object answer;
  if (!name.empty()) {
    answer = component(components.front().first, components.front().second);
  } else {
    // kube filters by the selectors though none of these objects has labels.
    auto labels = apimachinery::parse_label_selector(ex.url.param("labelSelector").value_or(""));
    if (!labels) co_return error_response(labels.error());
    auto fields = apimachinery::parse_field_selector(ex.url.param("fieldSelector").value_or(""));
    if (!fields) co_return error_response(fields.error());
    std::sort(components.begin(), components.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    json::array items;
    for (const auto& [n, h] : components) {
      const std::string& component_name = n;
      const bool selected =
          labels->matches(nullptr) && fields->matches([&](std::string_view f) -> std::optional<std::string> {
            if (f == "metadata.name") return component_name;
            if (f == "metadata.namespace") return std::string();
            return std::nullopt;
          });
      if (selected) items.push_back(component(n, h));
    }
    answer = json::object{{"kind", "ComponentStatusList"},
                          {"apiVersion", "v1"},
                          {"metadata", json::object()},
                          {"items", std::move(items)}};
  }
  if (ex.route.form.transform == Transform::table) {
    json::object table = to_table(component_status_info(), answer, std::chrono::system_clock::now(),
                                  ex.route.table_include);
    table["apiVersion"] = "meta.k8s.io/" + std::string(ex.route.form.meta_version);
    response = json_response(200, table);
  } else if (ex.route.form.transform != Transform::none) {
    co_return error_response(not_acceptable());
  } else {
    response = json_response(200, answer);
  }
  response.warnings.push_back(std::string(kDeprecation));
  co_return response;
}

}  // namespace kwatch::server
