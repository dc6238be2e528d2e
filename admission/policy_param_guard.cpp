#include "admission/policy_param_guard.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "auth/rbac_authorizer.hpp"
#include "auth/rbac_policy_source.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "watch/cacher.hpp"

#include <boost/json/object.hpp>

// The rules and texts follow kube-apiserver 1.34's registry strategies
// (pkg/registry/admissionregistration/*/authz.go).

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::object_member;
using apimachinery::string_at;
using registry::AdmissionAttributes;
using registry::AdmissionOperation;

namespace {

constexpr std::string_view kGroup = "admissionregistration.k8s.io";

bool is_policy(const kinds::ResourceInfo& info) {
  return info.group == kGroup && (info.resource == "validatingadmissionpolicies" ||
                                  info.resource == "mutatingadmissionpolicies");
}

bool is_binding(const kinds::ResourceInfo& info) {
  return info.group == kGroup && (info.resource == "validatingadmissionpolicybindings" ||
                                  info.resource == "mutatingadmissionpolicybindings");
}

// A user as Go's %v prints kube's *user.DefaultInfo: `&{alice  [system:authenticated] map[]}`.
std::string go_user(const apimachinery::UserInfo& u) {
  std::string out = "&{" + u.name + " " + u.uid + " [";
  for (std::size_t i = 0; i < u.groups.size(); ++i) out += (i ? " " : "") + u.groups[i];
  out += "] map[";
  bool first = true;
  for (const auto& [key, values] : u.extra) {
    out += (first ? "" : " ") + key + ":[";
    first = false;
    for (std::size_t i = 0; i < values.size(); ++i) out += (i ? " " : "") + values[i];
    out += "]";
  }
  return out + "]}";
}

json::value member(const json::object* spec, std::string_view key) {
  const json::value* v = spec != nullptr ? spec->if_contains(key) : nullptr;
  return v != nullptr ? *v : json::value();
}

ApiError forbidden(const AdmissionAttributes& a, const json::object& object, std::string field,
                   const std::string& detail) {
  std::vector<apimachinery::Cause> causes{
      {"FieldValueForbidden", "Forbidden: " + detail, std::move(field)}};
  return apimachinery::invalid_error(a.info.group, a.info.kind,
                                     string_at(object_member(object, "metadata"), "name"),
                                     std::move(causes));
}

}  // namespace

PolicyParamGuard::PolicyParamGuard(std::shared_ptr<auth::RbacPolicySource> rbac,
                                   std::shared_ptr<kinds::Scheme> scheme,
                                   std::shared_ptr<registry::CacherRegistry> cachers)
    : rbac_(std::move(rbac)), scheme_(std::move(scheme)), cachers_(std::move(cachers)) {}

bool PolicyParamGuard::handles(const AdmissionAttributes& a) const {
  return a.operation != AdmissionOperation::remove && a.user != nullptr &&
         !auth::is_superuser(*a.user) && (is_policy(a.info) || is_binding(a.info));
}

asio::awaitable<std::optional<ApiError>> PolicyParamGuard::validate(const AdmissionAttributes& a,
                                                                    const json::object* object) {
  if (object == nullptr) co_return std::nullopt;
  const json::object* spec = object_member(*object, "spec");
  const json::object* old_spec =
      a.old_object != nullptr ? object_member(*a.old_object, "spec") : nullptr;
  auth::RequestAttributes request;
  request.user = *a.user;
  request.verb = "get";
  std::string field, detail;
  // The group and resource of a paramKind; "*" for what cannot be resolved.
  auto resolve = [&](const json::object* param_kind) {
    request.api_group = "*";
    request.resource = "*";
    if (param_kind == nullptr) return;
    const std::string api_version = string_at(param_kind, "apiVersion");
    const auto [group, version] = kinds::parse_group_version(api_version);
    request.api_group = group;
    if (auto info = scheme_->find_kind(group, version, string_at(param_kind, "kind"))) {
      request.resource = info->resource;
    }
  };
  if (is_policy(a.info)) {
    const json::object* param_kind = object_member(spec, "paramKind");
    if (param_kind == nullptr) co_return std::nullopt;
    if (old_spec != nullptr && member(spec, "paramKind") == member(old_spec, "paramKind")) {
      co_return std::nullopt;
    }
    resolve(param_kind);
    field = "spec.paramKind";
    detail = "user " + go_user(*a.user) +
             " must have \"get\" permission on all objects of the referenced paramKind (kind=" +
             string_at(param_kind, "kind") + ", apiVersion=" + string_at(param_kind, "apiVersion") +
             ")";
  } else {
    const json::object* ref = object_member(spec, "paramRef");
    if (ref == nullptr) co_return std::nullopt;
    if (old_spec != nullptr && member(spec, "paramRef") == member(old_spec, "paramRef") &&
        member(spec, "policyName") == member(old_spec, "policyName")) {
      co_return std::nullopt;
    }
    // The policy's paramKind, from its watch cache; every kind when it is not there.
    const std::string policy_resource = a.info.resource == "validatingadmissionpolicybindings"
                                            ? "validatingadmissionpolicies"
                                            : "mutatingadmissionpolicies";
    const std::string version = a.info.resource == "validatingadmissionpolicybindings" ? "v1" : "v1beta1";
    std::optional<json::value> policy;
    if (auto info = scheme_->find(kGroup, version, policy_resource)) {
      if (auto cacher = cachers_->find(*info)) {
        if (auto cached = cacher->get(info->key("", string_at(spec, "policyName")))) {
          policy = apimachinery::parse_json(cached->json);
        }
      }
    }
    const json::object* policy_spec =
        policy && policy->is_object() ? object_member(policy->get_object(), "spec") : nullptr;
    resolve(object_member(policy_spec, "paramKind"));
    request.namespace_ = string_at(ref, "namespace");
    request.name = string_at(ref, "name");
    field = "spec.paramRef";
    detail = "user " + go_user(*a.user) +
             " does not have \"get\" permission on the object referenced by paramRef";
  }
  auto rbac = co_await rbac_->consistent();
  if (!rbac) co_return rbac.error();
  if ((*rbac)->authorize(request).allowed) co_return std::nullopt;
  co_return forbidden(a, *object, field, detail);
}

}  // namespace kwatch::admission
