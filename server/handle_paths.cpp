// The paths outside the API: health checks (/healthz, /livez, /readyz and their named checks),
// the index of paths, version, metrics, OpenAPI v2 and v3, and the issuer's discovery documents.

#include "server/api_handler.hpp"

#include "auth/service_account_tokens.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "server/health_checks.hpp"
#include "server/openapi_v2.hpp"

#include "aggregator/api_service_proxy.hpp"
#include "server/responses.hpp"
#include "server/url.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>

#include <chrono>
#include <set>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;

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
  if (auto dump = serve_priority_and_fairness_dump(ex)) co_return std::move(*dump);
  if (seg[0] == "metrics" && seg.size() == 1) {
    co_return text_response(200, metrics_->render(), "text/plain; version=0.0.4");
  }
  if (seg[0] == "openapi" && seg.size() >= 2 && seg[1] == "v3" && get) {
    std::string path;
    for (std::size_t i = 2; i < seg.size(); ++i) path += (i > 2 ? "/" : "") + seg[i];
    // A remote APIService's document is its extension server's own, as kube passes it on.
    if (proxy_ && seg.size() == 5 && seg[2] == "apis") {
      if (auto remote = proxy_->find(seg[3], seg[4])) co_return co_await pass_to(*remote, ex);
    }
    auto doc = co_await openapi_document(path);
    if (!doc) co_return not_found_path();
    ApiResponse response;
    response.body = std::move(*doc);
    if (proxy_ && path.empty()) add_remote_openapi_paths(response.body, proxy_->remote());
    co_return response;
  }
  if (seg[0] == "openapi" && seg.size() == 2 && seg[1] == "v2" && get) {
    // kubectl asks for protobuf; anything else gets JSON.
    const bool protobuf = ex.request.accept.find("protobuf") != std::string::npos;
    std::string which(protobuf ? OpenApiDocuments::kV2Protobuf : OpenApiDocuments::kV2Json);
    auto doc = co_await openapi_document(std::move(which));
    ApiResponse response;
    response.body = std::move(doc).value_or("");
    if (protobuf) response.content_type = std::string(kOpenApiV2ProtobufType);
    co_return response;
  }
  co_return not_found_path();
}

// Building the documents takes a CPU for a few hundred milliseconds after the served kinds
// change (every kind's schema, descriptions and operations): on the compute executor when there
// is one, never holding an I/O thread other connections need.
asio::awaitable<std::optional<std::string>> ApiHandler::openapi_document(std::string path) {
  if (!compute_.executor) co_return co_await build_openapi_document(std::move(path));
  auto built = co_await asio::co_spawn(compute_.executor, build_openapi_document(std::move(path)),
                                       asio::use_awaitable);
  co_return built;
}

asio::awaitable<std::optional<std::string>> ApiHandler::build_openapi_document(std::string path) {
  // The v2 document has the remote APIServices' specs merged in (OpenApiDocuments::get).
  const bool v2 = path == OpenApiDocuments::kV2Json || path == OpenApiDocuments::kV2Protobuf;
  co_return openapi_.get(*scheme_, path,
                         proxy_ && v2 ? proxy_->remote()
                                      : std::vector<aggregator::RemoteApiService>());
}

}  // namespace kwatch::server
