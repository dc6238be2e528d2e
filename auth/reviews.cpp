#include "auth/reviews.hpp"

#include "apimachinery/json_members.hpp"
#include "auth/rbac_policy_source.hpp"
#include "auth/service_account_tokens.hpp"
#include "base/timestamps.hpp"
#include "base/uuid.hpp"
#include "kinds/scheme.hpp"
#include "registry/resource_store.hpp"

#include <boost/json/array.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

namespace kwatch::auth {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;

namespace {

using apimachinery::object_member;
using apimachinery::string_at;

json::object review_metadata() { return json::object{{"creationTimestamp", nullptr}}; }

}  // namespace

// What an access review's spec asks about, for `user`.
RequestAttributes review_attributes(const UserInfo& user, const json::object* spec) {
  const json::object* res = object_member(spec, "resourceAttributes");
  const json::object* non = object_member(spec, "nonResourceAttributes");
  RequestAttributes a;
  a.user = user;
  if (res != nullptr) {
    a.namespace_ = string_at(res, "namespace");
    a.verb = string_at(res, "verb");
    a.api_group = string_at(res, "group");
    a.api_version = string_at(res, "version");
    a.resource = string_at(res, "resource");
    a.subresource = string_at(res, "subresource");
    a.name = string_at(res, "name");
  } else {
    a.resource_request = false;
    a.path = string_at(non, "path");
    a.verb = string_at(non, "verb");
  }
  return a;
}

// The user a SubjectAccessReview's spec names.
UserInfo spec_user(const json::object* spec) {
  UserInfo user;
  user.name = string_at(spec, "user");
  user.uid = string_at(spec, "uid");
  if (spec != nullptr) user.groups = apimachinery::strings_at(*spec, "groups");
  return user;
}

json::object self_subject_access_review(const AccessOptions& options,
                                        const UserInfo& user, json::object body) {
  const RequestAttributes a = review_attributes(user, object_member(&body, "spec"));
  json::object status{{"allowed", true}};
  if (options.rbac) {
    auto policy = options.rbac->current();
    Decision d = policy ? policy->authorize(a) : Decision{};
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
                                       const UserInfo& user, json::object body) {
  const std::string ns = string_at(object_member(&body, "spec"), "namespace");
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
    // A delegated authorizer lists no rules (kube's webhook authorizer: incomplete).
    status["incomplete"] = rules.incomplete || options.delegated_authorization != nullptr;
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
  const json::object* spec = object_member(&body, "spec");
  const UserInfo user = spec_user(spec);
  const json::object* res = object_member(spec, "resourceAttributes");
  const json::object* non = object_member(spec, "nonResourceAttributes");
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

asio::awaitable<void> complete_access_review(const AccessOptions& options,
                                             const UserInfo* caller, json::object& review) {
  if (!options.delegated_authorization) co_return;
  json::value* status = review.if_contains("status");
  if (status == nullptr || !status->is_object()) co_return;
  const json::value* allowed = status->as_object().if_contains("allowed");
  if (allowed != nullptr && allowed->is_bool() && allowed->get_bool()) co_return;
  const json::object* spec = object_member(&review, "spec");
  const UserInfo user = caller != nullptr ? *caller : spec_user(spec);
  if (is_superuser(user)) co_return;
  const RequestAttributes a = review_attributes(user, spec);
  const DelegatedDecision d = co_await options.delegated_authorization->authorize(a);
  json::object& out = status->as_object();
  if (!d.error.empty()) {
    out["evaluationError"] = d.error;
    co_return;
  }
  if (d.busy) {
    out["evaluationError"] = "too many access reviews in flight";
    co_return;
  }
  out["allowed"] = d.allowed;
  if (d.denied) out["denied"] = true;
  if (!d.reason.empty()) out["reason"] = d.reason;
}

json::object self_subject_review(const UserInfo& user) {
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

asio::awaitable<ApiResult<json::object>> token_review(const AccessOptions& options,
                                                     json::object body) {
  const json::object* spec = object_member(&body, "spec");
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
  const json::object* spec = object_member(&body, "spec");
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
  claims.uid = string_at(object_member(&*account, "metadata"), "uid");
  if (const json::object* ref = object_member(spec, "boundObjectRef")) {
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
      std::string runs_as = string_at(object_member(&*bound, "spec"), "serviceAccountName");
      if (runs_as.empty()) runs_as = "default";  // what kube's admission gives such a pod
      if (runs_as != name) {
        co_return ApiError(Errc::bad_request, "cannot bind token for serviceaccount \"" + name +
                                                  "\" to pod running with different "
                                                  "serviceaccount name.");
      }
    }
    const std::string uid = string_at(object_member(&*bound, "metadata"), "uid");
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

}  // namespace kwatch::auth
