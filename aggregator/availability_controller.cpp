#include "aggregator/availability_controller.hpp"

#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"
#include "registry/service_endpoints.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"
#include "base/task_failure.hpp"
#include "base/timestamps.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <spdlog/spdlog.h>

namespace kwatch::aggregator {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

Availability condition(std::string status, std::string reason, std::string message) {
  return {std::move(status), std::move(reason), std::move(message)};
}

}  // namespace

AvailabilityController::AvailabilityController(
    std::shared_ptr<const kinds::Scheme> scheme,
    std::shared_ptr<const registry::CacherRegistry> cachers,
    std::shared_ptr<registry::ResourceStore> store, std::shared_ptr<const ApiServiceProxy> proxy,
    std::chrono::milliseconds interval)
    : scheme_(std::move(scheme)),
      cachers_(std::move(cachers)),
      store_(std::move(store)),
      proxy_(std::move(proxy)),
      interval_(interval) {}

void AvailabilityController::start(asio::any_io_executor executor) {
  asio::co_spawn(executor, [self = shared_from_this()] { return self->run(); },
                 [](std::exception_ptr e) { base::log_task_failure(e, "APIService availability"); });
}

namespace {

// kube's availability controller makes this many discovery GETs at once.
constexpr std::size_t kDiscoveryAttempts = 5;

// One discovery GET of `target`'s group/version, as the aggregator's own user: "" when it
// passed (the APIResourceList kept for discovery), else the failure as kube words it.
asio::awaitable<std::string> discovery_attempt(std::shared_ptr<const ApiServiceProxy> proxy,
                                               RemoteApiService target) {
  client::ForwardedRequest request;
  request.method = "GET";
  request.target = target.name == "v1." ? "/api/" + target.version
                                        : "/apis/" + target.group + "/" + target.version;
  request.headers.emplace_back("Accept", "application/json");
  apimachinery::UserInfo aggregator{"system:kube-aggregator", "", {"system:masters"}};
  const std::string url = "https://" + target.service + "." + target.ns + ".svc:" +
                          std::to_string(target.port) + request.target;
  auto answer = co_await proxy->forward_discovery_check(target, aggregator, std::move(request));
  if (!answer) {
    const client::ApiError& e = answer.error();
    // A Service that cannot be resolved is named as kube names it; else the request's failure.
    if (e.reason == kUnresolved) co_return e.message;
    co_return "failing or missing response from " + url + ": " + e.message;
  }
  const unsigned status = (*answer)->status;
  if (status >= 200 && status <= 299) {
    // The answer is the extension's APIResourceList: kept for discovery (at most 4 MiB).
    std::string body;
    while (body.size() <= (4u << 20)) {
      auto piece = co_await (*answer)->next();
      if (!piece || !*piece) break;
      body += **piece;
    }
    auto parsed = apimachinery::parse_json(body);
    if (parsed && parsed->is_object()) {
      proxy->remember_resources(target.name, std::move(parsed->get_object()));
    }
  }
  (*answer)->close();
  if (status < 200 || status > 299) {
    co_return "failing or missing response from " + url + ": bad status from " + url + ": " +
        std::to_string(status);
  }
  co_return std::string();
}

// The most of an extension's /openapi/v2 read (the proxy buffers answers of up to 16 MiB).
constexpr std::size_t kMaxOpenApiBytes = 16u << 20;

// Reads `target`'s /openapi/v2 as kube-aggregator's OpenAPI controller does, over the proxy's
// verified connection as the aggregator's own user, and keeps what it says of the target's group:
// its paths under /apis/<group>/ and the definitions (RemoteApiService::openapi_v2). A failure
// keeps what was read before.
asio::awaitable<void> read_openapi_v2(std::shared_ptr<const ApiServiceProxy> proxy,
                                      RemoteApiService target) {
  client::ForwardedRequest request;
  request.method = "GET";
  request.target = "/openapi/v2";
  request.headers.emplace_back("Accept", "application/json");
  apimachinery::UserInfo aggregator{"system:kube-aggregator", "", {"system:masters"}};
  auto answer = co_await proxy->forward(target, aggregator, std::move(request));
  if (!answer) co_return;
  std::string body;
  bool whole = (*answer)->status == 200;
  while (whole) {
    auto piece = co_await (*answer)->next();
    if (!piece) whole = false;
    if (!piece || !*piece) break;
    body += **piece;
    if (body.size() > kMaxOpenApiBytes) whole = false;
  }
  (*answer)->close();
  if (!whole) co_return;
  auto parsed = apimachinery::parse_json(body);
  if (!parsed || !parsed->is_object()) co_return;
  const json::object* definitions = object_member(parsed->get_object(), "definitions");
  const json::object* paths = object_member(parsed->get_object(), "paths");
  json::object kept_paths;
  const std::string prefix = "/apis/" + target.group + "/";
  if (paths != nullptr) {
    for (const auto& [path, item] : *paths) {
      if (std::string_view(path).starts_with(prefix)) kept_paths.emplace(path, item);
    }
  }
  proxy->remember_openapi_v2(
      target.name, json::object{{"definitions", definitions ? *definitions : json::object{}},
                                {"paths", std::move(kept_paths)}});
}

}  // namespace

asio::awaitable<Availability> AvailabilityController::check(const RemoteApiService& target) const {
  const std::string service_text =
      "service/" + target.service + " in " + go_quote(target.ns);
  auto service = registry::cached_core_object(*scheme_, cachers_.get(), "services", target.ns,
                                              target.service);
  if (!service || !service->is_object()) {
    co_return condition("False", "ServiceNotFound", service_text + " is not present");
  }
  const json::object* spec = object_member(service->get_object(), "spec");
  const std::string type = string_at(spec, "type");
  if (type.empty() || type == "ClusterIP") {
    std::string port_name;
    bool listening = false;
    if (const json::array* ports = apimachinery::array_member(spec, "ports")) {
      for (const auto& p : *ports) {
        const json::object* po = p.if_object();
        const json::value* n = po != nullptr ? po->if_contains("port") : nullptr;
        if (n != nullptr && n->is_int64() && n->get_int64() == target.port) {
          listening = true;
          port_name = string_at(po, "name");
          break;
        }
      }
    }
    if (!listening) {
      co_return condition("False", "ServicePortError",
                          service_text + " is not listening on port " + std::to_string(target.port));
    }
    auto endpoints = registry::cached_core_object(*scheme_, cachers_.get(), "endpoints",
                                                  target.ns, target.service);
    if (!endpoints || !endpoints->is_object()) {
      co_return condition("False", "EndpointsNotFound",
                          "cannot find endpoints for " + service_text);
    }
    bool found = false;
    if (const json::array* subsets =
            apimachinery::array_member(&endpoints->get_object(), "subsets")) {
      for (const auto& s : *subsets) {
        const json::object* so = s.if_object();
        const json::array* addresses = apimachinery::array_member(so, "addresses");
        if (addresses == nullptr || addresses->empty()) continue;
        if (const json::array* ports = apimachinery::array_member(so, "ports")) {
          for (const auto& p : *ports) found = found || string_at(p.if_object(), "name") == port_name;
        }
      }
    }
    if (!found) {
      co_return condition("False", "MissingEndpoints",
                          "endpoints for " + service_text +
                              " have no addresses with port name " + go_quote(port_name));
    }
  }
  // The discovery check, as kube's: kDiscoveryAttempts GETs at once, one that passes is enough;
  // else the last failure to arrive. The channel holds every answer, so that attempts still
  // running when one has passed end without anyone waiting for them; a concurrent one, since
  // the attempts may finish on several threads at once.
  const auto executor = co_await asio::this_coro::executor;
  using Results =
      asio::experimental::concurrent_channel<void(boost::system::error_code, std::string)>;
  auto results = std::make_shared<Results>(executor, kDiscoveryAttempts);
  for (std::size_t i = 0; i < kDiscoveryAttempts; ++i) {
    asio::co_spawn(
        executor,
        [proxy = proxy_, target, results]() -> asio::awaitable<void> {
          std::string failure;
          try {
            failure = co_await discovery_attempt(proxy, target);
          } catch (const std::exception& e) {
            // An answer all the same: the check must not wait for it.
            failure = *e.what() != '\0' ? e.what() : "the discovery check failed";
          }
          results->try_send(boost::system::error_code{}, std::move(failure));
        },
        [](std::exception_ptr e) { base::log_task_failure(e, "APIService discovery check"); });
  }
  std::string last;
  for (std::size_t i = 0; i < kDiscoveryAttempts; ++i) {
    std::string failure = co_await results->async_receive(asio::use_awaitable);
    if (failure.empty()) {
      // Read beside the checks: a slow extension delays no APIService's condition.
      if (proxy_->claim_openapi_v2_read(target.name)) {
        asio::co_spawn(executor, read_openapi_v2(proxy_, target), [](std::exception_ptr e) {
          base::log_task_failure(e, "reading an extension's OpenAPI v2");
        });
      }
      co_return condition("True", "Passed", "all checks passed");
    }
    last = std::move(failure);
  }
  co_return condition("False", "FailedDiscoveryCheck", last);
}

asio::awaitable<void> AvailabilityController::write(const RemoteApiService& target,
                                                    const Availability& now) {
  auto info = scheme_->find("apiregistration.k8s.io", "v1", "apiservices");
  if (!info) co_return;
  std::string cluster, name = target.name, rv;
  auto current = co_await store_->get(*info, std::move(cluster), std::move(name), std::move(rv));
  if (!current) co_return;
  json::object updated = std::move(*current);
  json::value& status = updated["status"];
  if (!status.is_object()) status = json::object();
  json::value& conditions = status.get_object()["conditions"];
  if (!conditions.is_array()) conditions = json::array();
  json::object* available = nullptr;
  for (auto& c : conditions.get_array()) {
    if (c.is_object() && string_at(&c.get_object(), "type") == "Available") {
      available = &c.get_object();
    }
  }
  if (available != nullptr && string_at(available, "status") == now.status &&
      string_at(available, "reason") == now.reason &&
      string_at(available, "message") == now.message) {
    co_return;  // as it is: nothing to write
  }
  if (available == nullptr) {
    conditions.get_array().push_back(json::object{{"type", "Available"}});
    available = &conditions.get_array().back().get_object();
  }
  if (string_at(available, "status") != now.status) {
    (*available)["lastTransitionTime"] = base::now_rfc3339();
  }
  (*available)["status"] = now.status;
  (*available)["reason"] = now.reason;
  (*available)["message"] = now.message;
  registry::WriteQuery query;
  query.subresource = "status";
  query.field_manager = "kube-apiserver";
  std::string ns;
  auto r = co_await store_->update(*info, std::move(ns), target.name, std::move(updated),
                                   std::move(query));
  if (!r && r.error().code != base::Errc::conflict && r.error().code != base::Errc::not_found) {
    spdlog::warn("cannot write the status of APIService {}: {}", target.name, r.error().message);
  } else if (r) {
    spdlog::info("APIService {}: Available={} ({})", target.name, now.status, now.reason);
  }
}

asio::awaitable<void> AvailabilityController::run() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopped_) {
    for (const auto& target : proxy_->remote()) {
      if (stopped_) break;
      Availability now = co_await check(target);
      co_await write(target, now);
      if (observer_) {
        const bool available = now.status == "True";
        observer_(target.name, available, available || !target.available ? "" : now.reason);
      }
    }
    timer.expires_after(interval_);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace kwatch::aggregator
