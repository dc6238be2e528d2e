#include "auth/access.hpp"

#include "base/ascii.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "auth/rbac_policy_source.hpp"
#include "auth/service_account_tokens.hpp"
#include "auth/token_file.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "watch/cacher.hpp"

#include <boost/json/object.hpp>

#include <algorithm>
#include <optional>
#include <string_view>

namespace kwatch::auth {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;
using apimachinery::object_member;
using apimachinery::string_at;

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
  const json::object* meta = object_member(&*object, "metadata");
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

namespace {

// url.PathUnescape of an extra key; the key as it is when it does not unescape.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return std::string(s);
    }
    out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
    i += 2;
  }
  return out;
}

}  // namespace

std::optional<UserInfo> request_header_user(const RequestHeaderOptions& options,
                                            const ClientCertificate& cert,
                                            const Credentials& credentials) {
  if (!cert.front_proxy) return std::nullopt;
  if (!options.allowed_names.empty() &&
      std::find(options.allowed_names.begin(), options.allowed_names.end(), cert.user) ==
          options.allowed_names.end()) {
    return std::nullopt;
  }
  const auto& headers = credentials.proxy_headers;
  auto first = [&](const std::vector<std::string>& names) -> std::string {
    for (const auto& name : names) {
      for (const auto& [k, v] : headers) {
        if (base::iequals(k, name) && !v.empty()) return v;
      }
    }
    return "";
  };
  UserInfo user;
  user.name = first(options.username_headers);
  if (user.name.empty()) return std::nullopt;
  user.uid = first(options.uid_headers);
  for (const auto& name : options.group_headers) {
    for (const auto& [k, v] : headers) {
      if (base::iequals(k, name) && !v.empty()) user.groups.push_back(v);
    }
  }
  for (const auto& prefix : options.extra_prefixes) {
    for (const auto& [k, v] : headers) {
      if (k.size() <= prefix.size() || !base::istarts_with(k, prefix)) {
        continue;
      }
      std::string key = k.substr(prefix.size());
      for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      user.extra[unescape(key)].push_back(v);
    }
  }
  // kube's AuthenticatedGroupAdder: system:authenticated, unless either group is there already.
  const bool grouped = std::any_of(user.groups.begin(), user.groups.end(), [](const auto& g) {
    return g == "system:authenticated" || g == "system:unauthenticated";
  });
  if (!grouped) user.groups.push_back("system:authenticated");
  return user;
}

asio::awaitable<apimachinery::ApiResult<UserInfo>> authenticate(
    const AccessOptions& options, const Credentials& credentials, bool health_probe) {
  // kube-apiserver's order: a client certificate, then a bearer token. A credential that fails
  // does not fall back to anonymous: with no other credential that succeeds, it is a 401.
  bool failed = false;
  if (const ClientCertificate* cert = credentials.client_certificate.get();
      cert != nullptr && cert->front_proxy) {
    // kube's request header authenticator comes first: a front proxy's certificate, an allowed
    // name, and a user in the headers.
    const RequestHeaderOptions& settings =
        cert->request_header ? *cert->request_header : options.request_header;
    if (auto user = request_header_user(settings, *cert, credentials)) {
      co_return std::move(*user);
    }
  }
  if (const ClientCertificate* cert = credentials.client_certificate.get()) {
    if (!cert->error.empty()) {
      failed = true;
    } else if (!cert->user.empty()) {  // no CN: not a user, as in kube
      UserInfo user{cert->user, "", cert->groups};
      user.groups.push_back("system:authenticated");
      co_return user;
    }
  }
  // With no token authenticator configured, a token is not a credential anyone checks: the
  // request is as if it had none, as in kube-apiserver.
  if (!credentials.authorization.empty() &&
      (options.tokens || options.service_accounts || options.delegated_authentication)) {
    if (auto token = bearer_token(credentials.authorization)) {
      std::string text(*token);
      std::vector<std::string> api_audiences;
      auto result = co_await authenticate_token(options, text, api_audiences);
      if (result && result->authenticated) co_return std::move(result->user);
      // Last, as kube's union authenticator asks a token webhook: the server this one
      // delegates to.
      if (options.delegated_authentication) {
        auto remote = co_await options.delegated_authentication->authenticate(std::move(text));
        if (remote.authenticated) co_return std::move(remote.user);
        if (remote.busy) {
          ApiError e(Errc::too_many_requests,
                     "too many token reviews in flight, please try again later");
          e.retry_after_seconds = 1;
          co_return e;
        }
      }
    }
    co_return ApiError(Errc::unauthorized, "Unauthorized");
  }
  if (failed) co_return ApiError(Errc::unauthorized, "Unauthorized");
  if (options.anonymous || health_probe) {
    co_return UserInfo{"system:anonymous", "", {"system:unauthenticated"}};
  }
  co_return ApiError(Errc::unauthorized, "Unauthorized");
}

namespace {

// The attributes of impersonating one identity (kube: the verb impersonate on users, groups,
// serviceaccounts, uids or userextras/<key>).
RequestAttributes impersonation_attributes(const UserInfo& user, std::string api_group,
                                           std::string resource, std::string subresource,
                                           std::string ns, std::string name) {
  RequestAttributes a;
  a.user = user;
  a.verb = "impersonate";
  a.api_group = std::move(api_group);
  a.api_version = "v1";
  a.resource = std::move(resource);
  a.subresource = std::move(subresource);
  a.namespace_ = std::move(ns);
  a.name = std::move(name);
  return a;
}

}  // namespace

asio::awaitable<ApiResult<UserInfo>> impersonate(const AccessOptions& options,
                                                 const UserInfo& user,
                                                 const Impersonation& impersonation) {
  if (impersonation.user.empty()) {
    if (impersonation.empty()) co_return user;
    co_return ApiError(Errc::bad_request,
                       "requested impersonation of groups, extras or a uid without impersonating "
                       "a user");
  }
  // Each identity asked for must be one the caller may impersonate: the account or user first,
  // then each group, the uid and each extra, as kube checks them.
  std::vector<RequestAttributes> checks;
  UserInfo out;
  out.name = impersonation.user;
  constexpr std::string_view kServiceAccount = "system:serviceaccount:";
  if (out.name.starts_with(kServiceAccount) &&
      out.name.find(':', kServiceAccount.size()) != std::string::npos) {
    const std::string rest = out.name.substr(kServiceAccount.size());
    const std::string ns = rest.substr(0, rest.find(':'));
    checks.push_back(impersonation_attributes(user, "", "serviceaccounts", "", ns,
                                              rest.substr(rest.find(':') + 1)));
    out.groups = {"system:serviceaccounts", "system:serviceaccounts:" + ns};
  } else {
    checks.push_back(impersonation_attributes(user, "", "users", "", "", out.name));
  }
  for (const auto& group : impersonation.groups) {
    checks.push_back(impersonation_attributes(user, "", "groups", "", "", group));
    out.groups.push_back(group);
  }
  if (!impersonation.uid.empty()) {
    checks.push_back(
        impersonation_attributes(user, "authentication.k8s.io", "uids", "", "", impersonation.uid));
    out.uid = impersonation.uid;
  }
  for (const auto& [key, value] : impersonation.extra) {
    checks.push_back(
        impersonation_attributes(user, "authentication.k8s.io", "userextras", key, "", value));
    out.extra[key].push_back(value);
  }
  for (const auto& a : checks) {
    auto denied = co_await authorize(options, a);
    if (denied) co_return std::move(*denied);
  }
  const char* implied = out.name == "system:anonymous" ? "system:unauthenticated"
                                                        : "system:authenticated";
  if (std::find(out.groups.begin(), out.groups.end(), implied) == out.groups.end()) {
    out.groups.emplace_back(implied);
  }
  co_return out;
}

namespace {

// kube's 403 for a request no authorizer allowed; `reason` (a delegated authorizer's) ends it.
ApiError forbidden(const RequestAttributes& a, const std::string& reason) {
  std::string user = "User \"" + a.user.name + "\"";
  const std::string because = reason.empty() ? "" : ": " + reason;
  if (!a.resource_request) {
    return ApiError(Errc::forbidden, "forbidden: " + user + " cannot " + a.verb + " path \"" +
                                         a.path + "\"" + because);
  }
  std::string resource = a.resource + (a.subresource.empty() ? "" : "/" + a.subresource);
  std::string what = a.resource + (a.api_group.empty() ? "" : "." + a.api_group);
  if (!a.name.empty()) what += " \"" + a.name + "\"";
  std::string where = a.namespace_.empty() ? "at the cluster scope"
                                           : "in the namespace \"" + a.namespace_ + "\"";
  ApiError e(Errc::forbidden, what + " is forbidden: " + user + " cannot " + a.verb +
                                  " resource \"" + resource + "\" in API group \"" + a.api_group +
                                  "\" " + where + because);
  e.name = a.name;
  e.group = a.api_group;
  e.kind = a.resource;
  return e;
}

}  // namespace

asio::awaitable<std::optional<ApiError>> authorize(const AccessOptions& options,
                                                   const RequestAttributes& a) {
  if (!authorizes(options)) co_return std::nullopt;
  // kube's superuser authorizer runs first: system:masters needs no policy.
  if (is_superuser(a.user)) co_return std::nullopt;
  if (options.rbac) {
    auto policy = options.rbac->current();
    if (!policy) {
      // Not a decision: a client told 403 now (a leader renewing its lock) would give up.
      ApiError e(Errc::unavailable, "the authorization policy is not loaded yet, try again");
      e.retry_after_seconds = 1;
      co_return e;
    }
    if (policy->authorize(a).allowed) co_return std::nullopt;
  }
  std::string reason;
  if (options.delegated_authorization) {
    auto decision = co_await options.delegated_authorization->authorize(a);
    if (decision.allowed) co_return std::nullopt;
    if (decision.busy) {
      ApiError e(Errc::too_many_requests,
                 "too many access reviews in flight, please try again later");
      e.retry_after_seconds = 1;
      co_return e;
    }
    // As kube's authorization filter answers an authorizer's error: 500.
    if (!decision.error.empty()) co_return ApiError(Errc::internal, decision.error);
    reason = std::move(decision.reason);
  }
  co_return forbidden(a, reason);
}

}  // namespace kwatch::auth
