#include "server/access.hpp"

#include "watch/cache_follower.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "base/task_failure.hpp"
#include "auth/service_account_tokens.hpp"
#include "auth/token_file.hpp"
#include "registry/resource_store.hpp"
#include "base/timestamps.hpp"
#include "base/uuid.hpp"
#include "apimachinery/stored_json.hpp"
#include "storage/storage.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <algorithm>
#include <limits>
#include <boost/json/array.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace kwatch::server {

using auth::bearer_token;
using auth::ServiceAccountClaims;
using auth::ServiceAccountTokens;
using base::log_task_failure;
using registry::CacherRegistry;
using watch::CacheFollower;
using watch::follow_cache;
namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;

namespace {

constexpr const char* kRbacResources[] = {"roles", "clusterroles", "rolebindings",
                                          "clusterrolebindings"};

}  // namespace

RbacPolicySource::RbacPolicySource(std::shared_ptr<kinds::Scheme> scheme,
                                   std::shared_ptr<CacherRegistry> cachers,
                                   std::shared_ptr<storage::Storage> storage)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)), storage_(std::move(storage)) {}

void RbacPolicySource::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  asio::co_spawn(strand, [self = shared_from_this()] { return self->run(); }, [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  for (const char* resource : kRbacResources) {
    asio::co_spawn(strand, [self = shared_from_this(), resource] { return self->watch_one(resource); },
                   [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  }
}

asio::awaitable<void> RbacPolicySource::watch_one(std::string resource) {
  // Any change marks the policy for the next rebuild.
  auto info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
  CacheFollower follower;
  follower.cacher = cachers_->find(*info);
  if (!follower.cacher) co_return;
  follower.prefix = info->key_prefix();
  follower.keep_going = [this] { return !stopped_; };
  follower.on_start = [this]() -> asio::awaitable<void> {
    dirty_ = true;
    co_return;
  };
  follower.on_frames = [this](const std::vector<watch::WatchFrame>&) -> asio::awaitable<void> {
    dirty_ = true;
    co_return;
  };
  co_await follow_cache(std::move(follower));
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

std::shared_ptr<const auth::RbacPolicy> RbacPolicySource::rebuild() {
  std::vector<json::object> lists[4];
  std::int64_t covered = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < 4; ++i) {
    auto info =
        scheme_->find("rbac.authorization.k8s.io", "v1", kRbacResources[i]);
    auto cacher = cachers_->find(*info);
    if (!cacher || !cacher->ready()) {
      dirty_ = true;  // try again at the next tick
      return nullptr;
    }
    // Read before the list: the list holds at least everything up to it.
    covered = std::min(covered, cacher->resource_version());
    for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(object->json);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  auto policy = auth::RbacPolicy::build(lists[0], lists[1], lists[2], lists[3]);
  std::lock_guard lock(publish_mutex_);
  if (covered >= covered_.load() || !std::atomic_load(&policy_)) {
    std::atomic_store(&policy_, policy);
    covered_ = covered;
  }
  return policy;
}

asio::awaitable<ApiResult<std::shared_ptr<const auth::RbacPolicy>>>
RbacPolicySource::consistent() {
  auto unavailable = [](std::string why) {
    ApiError e(Errc::unavailable, std::move(why));
    e.retry_after_seconds = 1;
    return e;
  };
  auto policy = current();
  if (!policy) co_return unavailable("the RBAC policy is not loaded yet");
  auto revision = co_await storage_->current_revision();
  if (!revision) co_return unavailable("cannot read the RBAC policy: " + revision.error().message());
  if (covered_.load() >= *revision) co_return policy;
  bool caught_up = true;
  for (const char* resource : kRbacResources) {
    auto info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
    auto cacher = cachers_->find(*info);
    // Storage whose progress may run ahead of its events (etcd < 3.4.25) cannot prove a quiet
    // cache current: such a cache is not waited for.
    if (!cacher || !cacher->progress_ordered()) {
      caught_up = false;
      break;
    }
    auto fresh = co_await cacher->wait_until_fresh(*revision);
    if (!fresh) {
      caught_up = false;
      break;
    }
  }
  if (caught_up) {
    if (auto rebuilt = rebuild()) co_return rebuilt;
  }
  co_return co_await build_from_storage(*revision);
}

asio::awaitable<ApiResult<std::shared_ptr<const auth::RbacPolicy>>>
RbacPolicySource::build_from_storage(std::int64_t revision) {
  std::vector<json::object> lists[4];
  for (int i = 0; i < 4; ++i) {
    auto info =
        scheme_->find("rbac.authorization.k8s.io", "v1", kRbacResources[i]);
    storage::ListOptions options;
    options.prefix = info->key_prefix();
    options.revision = revision;
    auto listed = co_await storage_->list(std::move(options));
    if (!listed) {
      ApiError e(Errc::unavailable, "cannot read the RBAC policy: " + listed.error().message());
      e.retry_after_seconds = 1;
      co_return e;
    }
    for (const auto& kv : listed->kvs) {
      if (!kv.read_error.empty()) continue;  // what no provider opens grants nothing
      auto v = apimachinery::parse_json(kv.value);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  co_return auth::RbacPolicy::build(lists[0], lists[1], lists[2], lists[3]);
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
                                        const auth::UserInfo& user, json::object body) {
  const json::object* spec = object_at(&body, "spec");
  const json::object* res = object_at(spec, "resourceAttributes");
  const json::object* non = object_at(spec, "nonResourceAttributes");
  auth::RequestAttributes a;
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
    auth::Decision d = policy ? policy->authorize(a) : auth::Decision{};
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
                                       const auth::UserInfo& user, json::object body) {
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

ApiResult<json::object> subject_access_review(const AccessOptions& options, json::object body,
                                              std::string_view local_namespace) {
  const bool local = !local_namespace.empty();
  const std::string kind = local ? "LocalSubjectAccessReview" : "SubjectAccessReview";
  const json::object* spec = object_at(&body, "spec");
  auth::UserInfo user;
  user.name = string_at(spec, "user");
  user.uid = string_at(spec, "uid");
  if (const json::value* groups = spec != nullptr ? spec->if_contains("groups") : nullptr) {
    if (const json::array* list = groups->if_array()) {
      for (const auto& g : *list) {
        if (g.is_string()) user.groups.emplace_back(g.get_string());
      }
    }
  }
  const json::object* res = object_at(spec, "resourceAttributes");
  const json::object* non = object_at(spec, "nonResourceAttributes");
  std::vector<apimachinery::Cause> causes;
  if (user.name.empty() && user.groups.empty()) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: \"\": at least one of user or group must be specified",
                      "spec.user"});
  }
  if ((res == nullptr) == (non == nullptr)) {
    causes.push_back({"FieldValueInvalid",
                      "Invalid value: \"null\": exactly one of nonResourceAttributes or "
                      "resourceAttributes must be specified",
                      "spec.resourceAttributes"});
  }
  if (!causes.empty()) {
    return apimachinery::invalid_error("authorization.k8s.io", kind, "", std::move(causes));
  }
  if (local) {
    json::object& r = body["spec"].as_object()["resourceAttributes"].as_object();
    const std::string ns = string_at(&r, "namespace");
    if (ns.empty()) {
      r["namespace"] = local_namespace;
    } else if (ns != local_namespace) {
      return ApiError(Errc::bad_request,
                      "spec.resourceAttributes.namespace must match namespace: " +
                          std::string(local_namespace));
    }
  }
  json::object out = self_subject_access_review(options, user, std::move(body));
  out["kind"] = kind;
  if (local) out["metadata"].as_object()["namespace"] = local_namespace;
  return out;
}

json::object self_subject_review(const auth::UserInfo& user) {
  json::object info{{"username", user.name}};
  if (!user.uid.empty()) info["uid"] = user.uid;
  json::array groups;
  for (const auto& g : user.groups) groups.emplace_back(g);
  info["groups"] = std::move(groups);
  if (!user.extra.empty()) {
    json::object extra;
    for (const auto& [key, values] : user.extra) {
      json::array list;
      for (const auto& v : values) list.emplace_back(v);
      extra[key] = std::move(list);
    }
    info["extra"] = std::move(extra);
  }
  return json::object{{"apiVersion", "authentication.k8s.io/v1"},
                      {"kind", "SelfSubjectReview"},
                      {"metadata", review_metadata()},
                      {"status", json::object{{"userInfo", std::move(info)}}}};
}

// Liveness and readiness probes (load balancers, kubelets, container runtimes) carry no
// credentials: they stay anonymous with --anonymous-auth=false, as kube's structured
// authentication configuration is advised to allow (anonymous.conditions /healthz, /livez,
// /readyz). They answer "ok" or which checks fail, never why.
bool is_health_probe(std::string_view target) {
  target = target.substr(0, target.find('?'));
  // Only the endpoints themselves, as kube's --authorization-always-allow-paths: a single check
  // (/readyz/etcd) tells why it fails and is authorized like any other path.
  return target == "/healthz" || target == "/livez" || target == "/readyz";
}

namespace {

// The uid of an object the token names, if it exists and is not being deleted: from the watch
// cache, or from storage when the cache has not seen it yet (an account created a moment ago).
asio::awaitable<std::optional<std::string>> live_uid(const AccessOptions& options,
                                                     std::string resource, std::string ns,
                                                     std::string name) {
  auto info = options.scheme->find("", "v1", resource);
  if (info == nullptr) co_return std::nullopt;
  std::optional<json::object> object;
  if (auto cacher = options.cachers ? options.cachers->find(*info) : nullptr) {
    if (auto cached = cacher->get(info->key(ns, name))) {
      auto v = apimachinery::parse_json(cached->json);
      if (v && v->is_object()) object = std::move(v->get_object());
    }
  }
  if (!object && options.store) {
    std::string no_version;
    auto read = co_await options.store->get(*info, ns, name, no_version);
    if (read) object = std::move(*read);
  }
  if (!object) co_return std::nullopt;
  const json::object* meta = object_at(&*object, "metadata");
  if (meta == nullptr || meta->contains("deletionTimestamp")) co_return std::nullopt;
  co_return string_at(meta, "uid");
}

// Why a verified ServiceAccount token no longer names a live account (or bound object), in
// kube's words; "" when it does.
asio::awaitable<std::string> stale_reason(const AccessOptions& options,
                                          const ServiceAccountClaims& c) {
  std::string resource = "serviceaccounts";
  auto uid = co_await live_uid(options, resource, c.namespace_, c.name);
  if (!uid) co_return "service account " + c.namespace_ + "/" + c.name + " has been deleted";
  if (*uid != c.uid) {
    co_return "service account UID (" + *uid + ") does not match claim (" + c.uid + ")";
  }
  if (c.bound_kind.empty()) co_return "";
  std::string lower = c.bound_kind == "Pod" ? "pod" : c.bound_kind == "Secret" ? "secret" : "node";
  std::string bound_resource = lower + "s";
  std::string bound_ns = c.bound_kind == "Node" ? "" : c.namespace_;
  auto bound = co_await live_uid(options, bound_resource, bound_ns, c.bound_name);
  std::string where = bound_ns.empty() ? c.bound_name : bound_ns + "/" + c.bound_name;
  if (!bound) co_return lower + " " + where + " has been deleted";
  if (*bound != c.bound_uid) {
    co_return lower + " UID (" + *bound + ") does not match claim (" + c.bound_uid + ")";
  }
  co_return "";
}

}  // namespace

asio::awaitable<std::optional<TokenReviewResult>> authenticate_token(
    const AccessOptions& options, std::string token, std::vector<std::string> audiences) {
  if (!options.tokens && !options.service_accounts) co_return std::nullopt;
  TokenReviewResult out;
  // Static tokens are for the API's own audiences only, as kube treats them: a review asking
  // for audiences none of which is the API's does not authenticate them.
  if (options.tokens) {
    const std::vector<std::string> api = options.service_accounts
                                             ? options.service_accounts->api_audiences()
                                             : std::vector<std::string>{};
    std::vector<std::string> matched;
    if (audiences.empty()) {
      matched = api;
    } else {
      for (const auto& a : audiences) {
        if (std::find(api.begin(), api.end(), a) != api.end()) matched.push_back(a);
      }
    }
    const bool for_the_api = audiences.empty() || !matched.empty();
    if (auto user = for_the_api ? options.tokens->authenticate(token) : std::nullopt) {
      out.authenticated = true;
      out.user = std::move(*user);
      out.audiences = std::move(matched);
      co_return out;
    }
  }
  if (options.service_accounts) {
    if (auto checked = options.service_accounts->verify(token, audiences)) {
      if (!checked->ok) {
        out.error = "[invalid bearer token, " + checked->error + "]";
        co_return out;
      }
      const ServiceAccountClaims& c = checked->claims;
      if (auto stale = co_await stale_reason(options, c); !stale.empty()) {
        out.error = "[invalid bearer token, " + stale + "]";
        co_return out;
      }
      out.authenticated = true;
      out.user.name = "system:serviceaccount:" + c.namespace_ + ":" + c.name;
      out.user.uid = c.uid;
      out.user.groups = {"system:serviceaccounts", "system:serviceaccounts:" + c.namespace_,
                         "system:authenticated"};
      out.audiences = c.audiences;
      co_return out;
    }
  }
  out.error = "[invalid bearer token]";
  co_return out;
}

asio::awaitable<apimachinery::ApiResult<auth::UserInfo>> authenticate(
    const AccessOptions& options, const ApiRequest& request) {
  // kube-apiserver's order: a client certificate, then a bearer token. A credential that fails
  // does not fall back to anonymous: with no other credential that succeeds, it is a 401.
  bool failed = false;
  if (const ClientCertificate* cert = request.client_certificate.get()) {
    if (!cert->error.empty()) {
      failed = true;
    } else if (!cert->user.empty()) {  // no CN: not a user, as in kube
      auth::UserInfo user{cert->user, "", cert->groups};
      user.groups.push_back("system:authenticated");
      co_return user;
    }
  }
  // With no token authenticator configured, a token is not a credential anyone checks: the
  // request is as if it had none, as in kube-apiserver.
  if (!request.authorization.empty() && (options.tokens || options.service_accounts)) {
    if (auto token = bearer_token(request.authorization)) {
      std::string text(*token);
      std::vector<std::string> api_audiences;
      auto result = co_await authenticate_token(options, text, api_audiences);
      if (result && result->authenticated) co_return std::move(result->user);
    }
    co_return ApiError(Errc::unauthorized, "Unauthorized");
  }
  if (failed) co_return ApiError(Errc::unauthorized, "Unauthorized");
  if (options.anonymous || is_health_probe(request.target)) {
    co_return auth::UserInfo{"system:anonymous", "", {"system:unauthenticated"}};
  }
  co_return ApiError(Errc::unauthorized, "Unauthorized");
}

asio::awaitable<ApiResult<json::object>> token_review(const AccessOptions& options,
                                                     json::object body) {
  const json::object* spec = object_at(&body, "spec");
  std::string token = string_at(spec, "token");
  if (token.empty()) {
    co_return ApiError(Errc::bad_request, "token is required for TokenReview in authentication");
  }
  std::vector<std::string> audiences;
  if (const json::value* a = spec->if_contains("audiences")) {
    if (const json::array* list = a->if_array()) {
      for (const auto& v : *list) {
        if (v.is_string()) audiences.emplace_back(v.get_string());
      }
    }
  }
  auto result = co_await authenticate_token(options, token, audiences);
  json::object status{{"user", json::object{}}};
  if (!result) {
    status["authenticated"] = false;
    status["error"] = "[invalid bearer token]";
  } else if (result->authenticated) {
    status["authenticated"] = true;
    json::object user{{"username", result->user.name}};
    if (!result->user.uid.empty()) user["uid"] = result->user.uid;
    json::array groups;
    for (const auto& g : result->user.groups) groups.emplace_back(g);
    user["groups"] = std::move(groups);
    status["user"] = std::move(user);
    json::array matched;
    for (const auto& a : result->audiences) matched.emplace_back(a);
    status["audiences"] = std::move(matched);
  } else {
    status["authenticated"] = false;
    status["error"] = result->error;
  }
  body["apiVersion"] = "authentication.k8s.io/v1";
  body["kind"] = "TokenReview";
  body["metadata"] = review_metadata();
  body["status"] = std::move(status);
  co_return body;
}

asio::awaitable<ApiResult<json::object>> token_request(const AccessOptions& options,
                                                      std::string ns, std::string name,
                                                      json::object body) {
  const ServiceAccountTokens* tokens = options.service_accounts.get();
  if (tokens == nullptr || !tokens->can_sign()) {
    co_return ApiError(Errc::not_found,
                       "the server could not find the requested resource (serviceaccounts/token)");
  }
  const json::object* spec = object_at(&body, "spec");
  std::int64_t seconds = 3600;  // kube's default
  if (const json::value* e = spec != nullptr ? spec->if_contains("expirationSeconds") : nullptr) {
    if (e->is_int64()) {
      seconds = e->get_int64();
    } else if (e->is_uint64()) {
      seconds = std::numeric_limits<std::int64_t>::max();
    } else if (!e->is_null()) {
      co_return ApiError(Errc::bad_request, "spec.expirationSeconds must be an integer");
    }
  }
  auto invalid = [&](const std::string& field, const std::string& detail) {
    const std::string message = "Invalid value: " + std::to_string(seconds) + ": " + detail;
    return ApiError(Errc::invalid,
                    "TokenRequest.authentication.k8s.io \"" + name + "\" is invalid: " + field +
                        ": " + message,
                    {{"FieldValueInvalid", message, field}});
  };
  if (seconds < 600) {
    co_return invalid("spec.expirationSeconds", "may not specify a duration less than 10 minutes");
  }
  if (seconds > (std::int64_t{1} << 32)) {
    co_return invalid("spec.expirationSeconds", "may not specify a duration larger than 2^32 seconds");
  }
  // Longer than the server allows: shortened, as kube does (the client reads the expiry back).
  if (options.max_token_seconds > 0) seconds = std::min(seconds, options.max_token_seconds);
  std::vector<std::string> audiences;
  if (const json::value* a = spec != nullptr ? spec->if_contains("audiences") : nullptr) {
    if (const json::array* list = a->if_array()) {
      for (const auto& v : *list) {
        if (v.is_string() && !v.get_string().empty()) audiences.emplace_back(v.get_string());
      }
    }
  }
  if (audiences.empty()) audiences = tokens->api_audiences();

  auto sa_info = options.scheme->find("", "v1", "serviceaccounts");
  std::string no_version;
  auto account = co_await options.store->get(*sa_info, ns, name, no_version);
  if (!account) co_return account.error();
  ServiceAccountClaims claims;
  claims.namespace_ = ns;
  claims.name = name;
  claims.uid = string_at(object_at(&*account, "metadata"), "uid");
  if (const json::object* ref = object_at(spec, "boundObjectRef")) {
    const std::string kind = string_at(ref, "kind");
    const std::string api_version = string_at(ref, "apiVersion");
    if ((kind != "Pod" && kind != "Secret" && kind != "Node") || api_version != "v1") {
      co_return ApiError(Errc::bad_request, "cannot bind token for object of kind \"" + kind +
                                                "\" (" + api_version + ")");
    }
    std::string resource = kind == "Pod" ? "pods" : kind == "Secret" ? "secrets" : "nodes";
    std::string bound_ns = kind == "Node" ? "" : ns;
    std::string bound_name = string_at(ref, "name");
    auto info = options.scheme->find("", "v1", resource);
    auto bound = co_await options.store->get(*info, bound_ns, bound_name, no_version);
    if (!bound) co_return bound.error();
    if (kind == "Pod") {
      // A pod's token is its own account's: another account's would outlive nothing it owns.
      std::string runs_as = string_at(object_at(&*bound, "spec"), "serviceAccountName");
      if (runs_as.empty()) runs_as = "default";  // what kube's admission gives such a pod
      if (runs_as != name) {
        co_return ApiError(Errc::bad_request, "cannot bind token for serviceaccount \"" + name +
                                                  "\" to pod running with different "
                                                  "serviceaccount name.");
      }
    }
    const std::string uid = string_at(object_at(&*bound, "metadata"), "uid");
    const std::string want = string_at(ref, "uid");
    if (!want.empty() && want != uid) {
      ApiError e(Errc::conflict,
                 "Operation cannot be fulfilled on " + resource + " \"" + bound_name +
                     "\": the UID in the bound object reference (" + want +
                     ") does not match the UID in record. The object might have been deleted "
                     "and then recreated");
      e.name = bound_name;
      e.kind = resource;
      co_return e;
    }
    claims.bound_kind = kind;
    claims.bound_name = bound_name;
    claims.bound_uid = uid;
    json::object& out_ref = body["spec"].as_object()["boundObjectRef"].as_object();
    out_ref["uid"] = uid;
  }
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  claims.audiences = audiences;
  claims.issued_at = now;
  claims.expires_at = now + seconds;
  claims.id = base::new_uuid();
  std::string token = tokens->issue(claims);
  if (token.empty()) co_return ApiError(Errc::internal, "failed to sign the token");

  json::array audience_list;
  for (const auto& a : audiences) audience_list.emplace_back(a);
  json::object& out_spec = body["spec"].is_object() ? body["spec"].as_object()
                                                    : body["spec"].emplace_object();
  out_spec["audiences"] = std::move(audience_list);
  out_spec["expirationSeconds"] = seconds;
  if (!out_spec.contains("boundObjectRef")) out_spec["boundObjectRef"] = nullptr;
  body["apiVersion"] = "authentication.k8s.io/v1";
  body["kind"] = "TokenRequest";
  body["metadata"] = json::object{{"name", name}, {"namespace", ns},
                                  {"creationTimestamp", base::rfc3339(now)}};
  body["status"] = json::object{{"token", std::move(token)},
                                {"expirationTimestamp", base::rfc3339(now + seconds)}};
  co_return body;
}

ApiResult<auth::UserInfo> impersonate(const AccessOptions& options,
                                          const auth::UserInfo& user,
                                          const ApiRequest& request) {
  if (request.impersonate_user.empty()) {
    if (request.impersonate_groups.empty() && request.impersonate_uid.empty() &&
        request.impersonate_extra.empty()) {
      return user;
    }
    return ApiError(Errc::bad_request,
                    "requested impersonation of groups, extras or a uid without impersonating a "
                    "user");
  }
  // Each identity asked for must be one the caller may impersonate.
  auto check = [&](std::string resource, std::string api_group, std::string ns,
                   std::string name) -> std::optional<ApiError> {
    auth::RequestAttributes a;
    a.user = user;
    a.verb = "impersonate";
    a.resource = std::move(resource);
    a.api_group = std::move(api_group);
    a.namespace_ = std::move(ns);
    a.name = std::move(name);
    return authorize(options, a);
  };
  auth::UserInfo out;
  out.name = request.impersonate_user;
  constexpr std::string_view kServiceAccount = "system:serviceaccount:";
  std::optional<ApiError> denied;
  if (out.name.starts_with(kServiceAccount) &&
      out.name.find(':', kServiceAccount.size()) != std::string::npos) {
    const std::string rest = out.name.substr(kServiceAccount.size());
    const std::string ns = rest.substr(0, rest.find(':'));
    denied = check("serviceaccounts", "", ns, rest.substr(rest.find(':') + 1));
    out.groups = {"system:serviceaccounts", "system:serviceaccounts:" + ns};
  } else {
    denied = check("users", "", "", out.name);
  }
  if (denied) return *denied;
  for (const auto& group : request.impersonate_groups) {
    if (auto no = check("groups", "", "", group)) return *no;
    out.groups.push_back(group);
  }
  if (!request.impersonate_uid.empty()) {
    if (auto no = check("uids", "authentication.k8s.io", "", request.impersonate_uid)) return *no;
    out.uid = request.impersonate_uid;
  }
  for (const auto& [key, value] : request.impersonate_extra) {
    // kube: impersonate on userextras/<key> named by the value.
    auth::RequestAttributes a;
    a.user = user;
    a.verb = "impersonate";
    a.api_group = "authentication.k8s.io";
    a.resource = "userextras";
    a.subresource = key;
    a.name = value;
    if (auto no = authorize(options, a)) return *no;
    out.extra[key].push_back(value);
  }
  const char* implied = out.name == "system:anonymous" ? "system:unauthenticated"
                                                        : "system:authenticated";
  if (std::find(out.groups.begin(), out.groups.end(), implied) == out.groups.end()) {
    out.groups.emplace_back(implied);
  }
  return out;
}

std::optional<ApiError> authorize(const AccessOptions& options,
                                  const auth::RequestAttributes& a) {
  if (!options.rbac) return std::nullopt;
  // kube's superuser authorizer runs before RBAC: system:masters needs no policy.
  if (auth::is_superuser(a.user)) return std::nullopt;
  auto policy = options.rbac->current();
  if (!policy) {
    // Not a decision: a client told 403 now (a leader renewing its lock) would give up.
    ApiError e(Errc::unavailable, "the authorization policy is not loaded yet, try again");
    e.retry_after_seconds = 1;
    return e;
  }
  if (policy->authorize(a).allowed) return std::nullopt;
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
