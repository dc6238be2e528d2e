#include "server/access.hpp"

#include "registry/scheme.hpp"
#include "server/cacher_registry.hpp"
#include "server/task_failure.hpp"
#include "server/token_file.hpp"
#include "storage/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/json/array.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace kwatch::server {

namespace asio = boost::asio;
namespace json = boost::json;
using registry::ApiError;
using registry::Errc;

namespace {

constexpr const char* kRbacResources[] = {"roles", "clusterroles", "rolebindings",
                                          "clusterrolebindings"};

}  // namespace

RbacPolicySource::RbacPolicySource(std::shared_ptr<registry::Scheme> scheme,
                                   std::shared_ptr<CacherRegistry> cachers)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)) {}

void RbacPolicySource::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  asio::co_spawn(strand, [self = shared_from_this()] { return self->run(); }, [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  for (const char* resource : kRbacResources) {
    asio::co_spawn(strand, [self = shared_from_this(), resource] { return self->watch_one(resource); },
                   [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  }
}

asio::awaitable<void> RbacPolicySource::watch_one(std::string resource) {
  const registry::ResourceInfo* info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
  auto cacher = cachers_->find(*info);
  asio::steady_timer retry(co_await asio::this_coro::executor);
  while (!stopped_ && cacher) {
    watch::WatchRequest request;
    request.prefix = info->key_prefix();
    request.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    auto session = co_await cacher->watch(std::move(request));
    if (!session) {
      retry.expires_after(std::chrono::milliseconds(100));
      co_await retry.async_wait(asio::use_awaitable);
      continue;
    }
    std::vector<watch::WatchFrame> frames;
    for (;;) {
      dirty_ = true;
      auto next = co_await (*session)->next(frames);
      if (!next || stopped_) break;
    }
  }
}

asio::awaitable<void> RbacPolicySource::run() {
  // Changes come in bursts (kubectl apply of many bindings): rebuild at most every 100 ms.
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!stopped_) {
    if (dirty_.exchange(false)) rebuild();
    tick.expires_after(std::chrono::milliseconds(100));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

void RbacPolicySource::rebuild() {
  std::vector<json::object> lists[4];
  for (int i = 0; i < 4; ++i) {
    const registry::ResourceInfo* info =
        scheme_->find("rbac.authorization.k8s.io", "v1", kRbacResources[i]);
    auto cacher = cachers_->find(*info);
    if (!cacher || !cacher->ready()) {
      dirty_ = true;  // try again at the next tick
      return;
    }
    for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = storage::parse_json(object->json);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  auto policy = registry::RbacPolicy::build(lists[0], lists[1], lists[2], lists[3]);
  std::atomic_store(&policy_, std::move(policy));
}

namespace {

std::string string_at(const json::object* obj, std::string_view key) {
  if (obj == nullptr) return {};
  const json::value* v = obj->if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

const json::object* object_at(const json::object* obj, std::string_view key) {
  if (obj == nullptr) return nullptr;
  const json::value* v = obj->if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

json::object review_metadata() { return json::object{{"creationTimestamp", nullptr}}; }

}  // namespace

json::object self_subject_access_review(const AccessOptions& options,
                                        const registry::UserInfo& user, json::object body) {
  const json::object* spec = object_at(&body, "spec");
  const json::object* res = object_at(spec, "resourceAttributes");
  const json::object* non = object_at(spec, "nonResourceAttributes");
  registry::RequestAttributes a;
  a.user = user;
  if (res != nullptr) {
    a.namespace_ = string_at(res, "namespace");
    a.verb = string_at(res, "verb");
    a.api_group = string_at(res, "group");
    a.resource = string_at(res, "resource");
    a.subresource = string_at(res, "subresource");
    a.name = string_at(res, "name");
  } else {
    a.resource_request = false;
    a.path = string_at(non, "path");
    a.verb = string_at(non, "verb");
  }
  json::object status{{"allowed", true}};
  if (options.rbac) {
    auto policy = options.rbac->current();
    registry::Decision d = policy ? policy->authorize(a) : registry::Decision{};
    status["allowed"] = d.allowed;
    if (!d.reason.empty()) status["reason"] = d.reason;
  }
  body["apiVersion"] = "authorization.k8s.io/v1";
  body["kind"] = "SelfSubjectAccessReview";
  body["metadata"] = review_metadata();
  body["status"] = std::move(status);
  return body;
}

json::object self_subject_rules_review(const AccessOptions& options,
                                       const registry::UserInfo& user, json::object body) {
  const std::string ns = string_at(object_at(&body, "spec"), "namespace");
  json::object status;
  if (!options.rbac) {
    // AlwaysAllow: everything, as kube's AlwaysAllow authorizer lists it.
    status["resourceRules"] = json::array{json::object{
        {"verbs", json::array{"*"}}, {"apiGroups", json::array{"*"}}, {"resources", json::array{"*"}}}};
    status["nonResourceRules"] = json::array{
        json::object{{"verbs", json::array{"*"}}, {"nonResourceURLs", json::array{"*"}}}};
    status["incomplete"] = false;
  } else if (auto policy = options.rbac->current()) {
    auto rules = policy->rules_for(user, ns);
    json::array resource_rules(rules.resource_rules.begin(), rules.resource_rules.end());
    json::array non_resource_rules(rules.non_resource_rules.begin(), rules.non_resource_rules.end());
    status["resourceRules"] = std::move(resource_rules);
    status["nonResourceRules"] = std::move(non_resource_rules);
    status["incomplete"] = rules.incomplete;
    if (!rules.evaluation_error.empty()) status["evaluationError"] = rules.evaluation_error;
  } else {
    status["resourceRules"] = json::array();
    status["nonResourceRules"] = json::array();
    status["incomplete"] = true;
  }
  body["apiVersion"] = "authorization.k8s.io/v1";
  body["kind"] = "SelfSubjectRulesReview";
  body["metadata"] = review_metadata();
  body["status"] = std::move(status);
  return body;
}

json::object self_subject_review(const registry::UserInfo& user) {
  json::object info{{"username", user.name}};
  if (!user.uid.empty()) info["uid"] = user.uid;
  json::array groups;
  for (const auto& g : user.groups) groups.emplace_back(g);
  info["groups"] = std::move(groups);
  return json::object{{"apiVersion", "authentication.k8s.io/v1"},
                      {"kind", "SelfSubjectReview"},
                      {"metadata", review_metadata()},
                      {"status", json::object{{"userInfo", std::move(info)}}}};
}

namespace {

// Liveness and readiness probes (load balancers, kubelets, container runtimes) carry no
// credentials: they stay anonymous with --anonymous-auth=false, as kube's structured
// authentication configuration is advised to allow (anonymous.conditions /healthz, /livez,
// /readyz). They answer "ok" or which checks fail, nothing else.
bool is_health_probe(std::string_view target) {
  target = target.substr(0, target.find('?'));
  for (std::string_view probe : {"/healthz", "/livez", "/readyz"}) {
    if (target == probe || (target.starts_with(probe) && target[probe.size()] == '/')) return true;
  }
  return false;
}

}  // namespace

registry::ApiResult<registry::UserInfo> authenticate(const AccessOptions& options,
                                                     const ApiRequest& request) {
  // kube-apiserver's order: a client certificate, then a bearer token. A credential that fails
  // does not fall back to anonymous: with no other credential that succeeds, it is a 401.
  bool failed = false;
  if (const ClientCertificate* cert = request.client_certificate.get()) {
    if (!cert->error.empty()) {
      failed = true;
    } else if (!cert->user.empty()) {  // no CN: not a user, as in kube
      registry::UserInfo user{cert->user, "", cert->groups};
      user.groups.push_back("system:authenticated");
      return user;
    }
  }
  // With no token authenticator configured, a token is not a credential anyone checks: the
  // request is as if it had none, as in kube-apiserver.
  if (!request.authorization.empty() && options.tokens) {
    auto token = bearer_token(request.authorization);
    if (token) {
      if (auto user = options.tokens->authenticate(*token)) return std::move(*user);
    }
    return ApiError(Errc::unauthorized, "Unauthorized");
  }
  if (failed) return ApiError(Errc::unauthorized, "Unauthorized");
  if (options.anonymous || is_health_probe(request.target)) {
    return registry::UserInfo{"system:anonymous", "", {"system:unauthenticated"}};
  }
  return ApiError(Errc::unauthorized, "Unauthorized");
}

std::optional<ApiError> authorize(const AccessOptions& options,
                                  const registry::RequestAttributes& a) {
  if (!options.rbac) return std::nullopt;
  auto policy = options.rbac->current();
  if (policy && policy->authorize(a).allowed) return std::nullopt;
  std::string user = "User \"" + a.user.name + "\"";
  if (!a.resource_request) {
    return ApiError(Errc::forbidden,
                    "forbidden: " + user + " cannot " + a.verb + " path \"" + a.path + "\"");
  }
  std::string resource = a.resource + (a.subresource.empty() ? "" : "/" + a.subresource);
  std::string what = a.resource + (a.api_group.empty() ? "" : "." + a.api_group);
  if (!a.name.empty()) what += " \"" + a.name + "\"";
  std::string where = a.namespace_.empty() ? "at the cluster scope"
                                           : "in the namespace \"" + a.namespace_ + "\"";
  ApiError e(Errc::forbidden, what + " is forbidden: " + user + " cannot " + a.verb +
                                  " resource \"" + resource + "\" in API group \"" + a.api_group +
                                  "\" " + where);
  e.name = a.name;
  e.group = a.api_group;
  e.kind = a.resource;
  return e;
}

}  // namespace kwatch::server
