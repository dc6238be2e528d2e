#include "admission/policy_runtime.hpp"

#include "registry/config_follower.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "auth/rbac_authorizer.hpp"
#include "auth/rbac_policy_source.hpp"
#include "kinds/scheme.hpp"
#include "kinds/subresources.hpp"
#include "kinds/version_converter.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/deletion.hpp"
#include "watch/cacher.hpp"

#include <boost/json/array.hpp>

#include <algorithm>
#include <map>

// The semantics follow k8s.io/apiserver 1.34 plugin/policy/generic and plugin/cel.

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::strings_at;
using base::Errc;
using kinds::CompiledPolicy;
using kinds::PolicyExpression;
using registry::AdmissionAttributes;

namespace {

constexpr std::string_view kGroup = "admissionregistration.k8s.io";

PolicyBinding compile_binding(const json::object& object) {
  PolicyBinding b;
  b.name = string_at(object_member(object, "metadata"), "name");
  const json::object* spec = object_member(object, "spec");
  if (const json::object* ref = object_member(spec, "paramRef")) {
    ParamRef p;
    p.name = string_at(ref, "name");
    p.ns = string_at(ref, "namespace");
    if (const json::object* selector = object_member(ref, "selector")) {
      if (auto s = apimachinery::label_selector_from_json(*selector)) p.selector = std::move(*s);
    }
    p.deny_when_missing = string_at(ref, "parameterNotFoundAction") != "Allow";
    b.param_ref = std::move(p);
  }
  if (const json::object* match = object_member(spec, "matchResources")) {
    b.match = CompiledMatch::compile(*match, /*empty_rules_match_all=*/true);
  }
  b.actions = strings_at(spec ? *spec : json::object(), "validationActions");
  return b;
}

}  // namespace

bool exempt_from_policies(const kinds::ResourceInfo& info) {
  if (info.group != kGroup) return false;
  const std::string& r = info.resource;
  return r == "validatingadmissionpolicies" || r == "validatingadmissionpolicybindings" ||
         r == "mutatingadmissionpolicies" || r == "mutatingadmissionpolicybindings" ||
         r == "validatingwebhookconfigurations" || r == "mutatingwebhookconfigurations";
}

std::string group_resource(const kinds::ResourceInfo& info) {
  return info.group.empty() ? info.resource : info.resource + "." + info.group;
}

const apimachinery::UserInfo& apiserver_user() {
  static const apimachinery::UserInfo kUser{"system:apiserver", "", {"system:masters"}};
  return kUser;
}

apimachinery::ApiError not_ready(const AdmissionAttributes& a) {
  apimachinery::ApiError e(base::Errc::forbidden,
                           group_resource(a.info) + " \"" + a.name +
                               "\" is forbidden: not yet ready to handle request");
  e.name = a.name;
  e.group = a.info.group;
  e.kind = a.info.resource;
  return e;
}

bool PolicySet::may_apply(std::string_view group, std::string_view resource,
                          std::uint64_t min_cost) const {
  for (const auto& entry : policies) {
    if (!entry.bindings.empty() && entry.has_match && entry.policy->max_cost >= min_cost &&
        entry.match.may_match(group, resource)) {
      return true;
    }
  }
  return false;
}

PolicySource::PolicySource(std::shared_ptr<kinds::Scheme> scheme,
                           std::shared_ptr<registry::CacherRegistry> cachers, std::string version,
                           std::string policy_resource, std::string binding_resource,
                           PolicyCompiler compile)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)), version_(std::move(version)),
      policy_resource_(std::move(policy_resource)),
      binding_resource_(std::move(binding_resource)), compile_(compile),
      set_(std::make_shared<const PolicySet>()) {}

void PolicySource::start(asio::any_io_executor executor) {
  auto self = shared_from_this();
  registry::follow_configurations(
      std::move(executor),
      {scheme_, cachers_, std::string(kGroup), version_, {policy_resource_, binding_resource_}},
      [self] { return !self->stopped_; },
      [self](std::vector<std::vector<json::object>>& lists) { self->load(lists[0], lists[1]); },
      "admission policy task");
}

void PolicySource::load(const std::vector<json::object>& policies,
                        const std::vector<json::object>& binding_objects) {
  // A policy whose resourceVersion did not change keeps its compiled programs.
  std::map<std::string, const PolicySet::Entry*, std::less<>> previous;
  const auto old = current();
  for (const auto& entry : old->policies) previous.emplace(entry.policy->name, &entry);
  auto next = std::make_shared<PolicySet>();
  next->loaded = true;
  std::map<std::string, std::vector<PolicyBinding>, std::less<>> bindings;
  for (const json::object& b : binding_objects) {
    const std::string name = string_at(object_member(b, "spec"), "policyName");
    bindings[name].push_back(compile_binding(b));
  }
  for (const json::object& p : policies) {
    const json::object* meta = object_member(p, "metadata");
    const std::string name = string_at(meta, "name");
    PolicySet::Entry entry;
    entry.resource_version = string_at(meta, "resourceVersion");
    auto it = previous.find(name);
    if (it != previous.end() && it->second->resource_version == entry.resource_version) {
      entry.policy = it->second->policy;
    } else {
      entry.policy = compile_(p);
    }
    if (const json::object* match = object_member(object_member(p, "spec"), "matchConstraints")) {
      entry.match = CompiledMatch::compile(*match, /*empty_rules_match_all=*/false);
      entry.has_match = true;
    }
    if (auto b = bindings.find(name); b != bindings.end()) entry.bindings = std::move(b->second);
    std::sort(entry.bindings.begin(), entry.bindings.end(),
              [](const PolicyBinding& x, const PolicyBinding& y) { return x.name < y.name; });
    next->policies.push_back(std::move(entry));
  }
  std::sort(next->policies.begin(), next->policies.end(),
            [](const auto& x, const auto& y) { return x.policy->name < y.policy->name; });
  std::atomic_store(&set_, std::shared_ptr<const PolicySet>(std::move(next)));
}

LazyVariables::LazyVariables(const CompiledPolicy& policy, std::span<const cel::Value> activation,
                             std::uint64_t& remaining)
    : policy_(policy), activation_(activation), remaining_(remaining),
      results_(policy.variables.size()) {}

std::size_t LazyVariables::size() const { return policy_.variables.size(); }

std::optional<cel::Value> LazyVariables::find(const cel::Value& key) const {
  if (!key.is(cel::ValueKind::string)) return std::nullopt;
  return field(key.as_text());
}

std::optional<cel::Value> LazyVariables::find_field(std::string_view json_name,
                                                    const cel::Type*) const {
  return field(json_name);
}

cel::Value LazyVariables::key_at(std::size_t i) const {
  return cel::Value::borrowed_string(policy_.variables[i].name);
}

cel::Value LazyVariables::value_at(std::size_t i) const { return value(i); }

std::optional<cel::Value> LazyVariables::field(std::string_view name) const {
  for (std::size_t i = 0; i < policy_.variables.size(); ++i) {
    if (policy_.variables[i].name == name) return value(i);
  }
  return std::nullopt;
}

cel::Value LazyVariables::value(std::size_t i) const {
  const auto& variable = policy_.variables[i];
  if (results_[i]) return results_[i]->value;
  if (!variable.expression.program) {
    return cel::Value::error("composited variable \"" + variable.name +
                             "\" fails to compile: " + variable.expression.compile_error);
  }
  const std::uint64_t limit = std::min(kPerCallLimit, remaining_);
  results_[i] = variable.expression.program->evaluate(activation_, limit);
  remaining_ -= std::min(results_[i]->cost, remaining_);
  if (results_[i]->value.is_error()) {
    results_[i]->value = cel::Value::error("composited variable \"" + variable.name +
                                           "\" fails to evaluate: " +
                                           std::string(results_[i]->value.as_text()));
  }
  return results_[i]->value;
}

// `kind_name`, when given, names the kind in place of the resource's (a connect's options).
json::object group_version(const kinds::ResourceInfo& info, bool kind, json::storage_ptr sp,
                           std::string_view kind_name = {}) {
  json::object out(std::move(sp));
  out.reserve(3);
  out.emplace("group", info.group);
  out.emplace("version", info.version);
  if (!kind) {
    out.emplace("resource", info.resource);
  } else {
    out.emplace("kind", kind_name.empty() ? std::string_view(info.kind) : kind_name);
  }
  return out;
}

// `request`: admission/v1 AdmissionRequest's fields as kube's policies see them (empty optional
// fields absent).
MatchRequest match_request(const AdmissionAttributes& a, const json::object* object) {
  MatchRequest request;
  request.info = &a.info;
  request.subresource = a.subresource;
  request.ns = a.ns;
  request.name = a.name;
  request.operation = registry::operation_name(a.operation);
  request.object = object;
  request.old_object = a.old_object;
  return request;
}

json::object request_json(const AdmissionAttributes& a, const kinds::ResourceInfo& matched,
                          json::storage_ptr sp) {
  json::object r(sp);
  r.reserve(14);
  // A connect's object is its options, of the subresource's kind (PodExecOptions), in the
  // resource's group and version.
  std::string_view kind_name;
  if (a.operation == registry::AdmissionOperation::connect) {
    if (const kinds::Subresource* sub = kinds::find_subresource(a.info, a.subresource)) {
      kind_name = sub->kind;
    }
  }
  r["kind"] = group_version(matched, true, sp, kind_name);
  r["resource"] = group_version(matched, false, sp);
  if (!a.subresource.empty()) r["subResource"] = a.subresource;
  r["requestKind"] = group_version(a.info, true, sp, kind_name);
  r["requestResource"] = group_version(a.info, false, sp);
  if (!a.subresource.empty()) r["requestSubResource"] = a.subresource;
  if (!a.name.empty()) r["name"] = a.name;
  if (!a.ns.empty()) r["namespace"] = a.ns;
  r["operation"] = registry::operation_name(a.operation);
  const apimachinery::UserInfo& who = a.user != nullptr ? *a.user : apiserver_user();
  json::object user(sp);
  if (!who.name.empty()) user["username"] = who.name;
  if (!who.uid.empty()) user["uid"] = who.uid;
  if (!who.groups.empty()) {
    json::array groups(sp);
    groups.reserve(who.groups.size());
    for (const auto& g : who.groups) groups.emplace_back(g);
    user["groups"] = std::move(groups);
  }
  if (!who.extra.empty()) {
    json::object extra(sp);
    for (const auto& [k, values] : who.extra) {
      json::array v(sp);
      for (const auto& s : values) v.emplace_back(s);
      extra[k] = std::move(v);
    }
    user["extra"] = std::move(extra);
  }
  r["userInfo"] = std::move(user);
  r["dryRun"] = a.dry_run;
  // A connect has no options of its own (kube's ConnectResource passes none).
  if (a.operation == registry::AdmissionOperation::connect) return r;
  const char* options = a.operation == registry::AdmissionOperation::create   ? "CreateOptions"
                        : a.operation == registry::AdmissionOperation::update ? "UpdateOptions"
                                                                              : "DeleteOptions";
  json::object o(sp);
  o.emplace("kind", options);
  o.emplace("apiVersion", "meta.k8s.io/v1");
  if (a.dry_run) o["dryRun"] = json::array({"All"}, sp);
  if (!a.field_manager.empty()) o["fieldManager"] = a.field_manager;
  if (!a.field_validation.empty()) o["fieldValidation"] = a.field_validation;
  if (const registry::DeleteQuery* d = a.delete_query) {
    if (d->grace_period_seconds) o["gracePeriodSeconds"] = *d->grace_period_seconds;
    if (d->uid || d->resource_version) {
      json::object pre(sp);
      if (d->uid) pre["uid"] = *d->uid;
      if (d->resource_version) pre["resourceVersion"] = *d->resource_version;
      o["preconditions"] = std::move(pre);
    }
    if (d->orphan_dependents) o["orphanDependents"] = *d->orphan_dependents;
    if (d->propagation) {
      o["propagationPolicy"] = *d->propagation == registry::Propagation::orphan       ? "Orphan"
                               : *d->propagation == registry::Propagation::background ? "Background"
                                                                                      : "Foreground";
    }
  }
  r["options"] = std::move(o);
  return r;
}

// `namespaceObject`: the namespace's metadata kube keeps, its spec and status.
json::object namespace_json(const json::object& ns) {
  json::object out;
  json::object meta;
  if (const json::object* m = object_member(ns, "metadata")) {
    for (const char* key : {"name", "generateName", "namespace", "labels", "annotations", "uid",
                            "creationTimestamp", "deletionGracePeriodSeconds",
                            "deletionTimestamp", "generation", "resourceVersion", "finalizers"}) {
      if (const json::value* v = m->if_contains(key)) meta[key == std::string_view("uid") ? "UID" : key] = *v;
    }
  }
  out["metadata"] = std::move(meta);
  if (const json::value* v = ns.if_contains("spec")) out["spec"] = *v;
  if (const json::value* v = ns.if_contains("status")) out["status"] = *v;
  return out;
}

// The object as the matched resource serves it, when a rule matched an equivalent one.
json::object convert_object(const kinds::ResourceInfo& from, const kinds::ResourceInfo& to,
                     const json::object& object) {
  json::object out = object;
  if (from.hooks.to_stored) from.hooks.to_stored(out);
  if (to.hooks.to_served) to.hooks.to_served(out);
  out["apiVersion"] = to.api_version();
  out["kind"] = to.kind;
  return out;
}

asio::awaitable<ApiResult<MatchedForms>> convert_matched_forms(const kinds::ResourceInfo& from,
                                                              const kinds::ResourceInfo& to,
                                                              const json::object* object,
                                                              const json::object* old) {
  MatchedForms forms;
  if (to.group == from.group && to.version == from.version) co_return forms;
  if (object != nullptr) {
    auto c = co_await convert_matched(from, to, *object);
    if (!c) co_return ApiResult<MatchedForms>(boost::system::in_place_error, c.error());
    forms.object.emplace(std::move(*c));
  }
  if (old != nullptr) {
    auto c = co_await convert_matched(from, to, *old);
    if (!c) co_return ApiResult<MatchedForms>(boost::system::in_place_error, c.error());
    forms.old.emplace(std::move(*c));
  }
  co_return forms;
}

asio::awaitable<ApiResult<json::object>> convert_matched(const kinds::ResourceInfo& from,
                                                         const kinds::ResourceInfo& to,
                                                         const json::object& object) {
  const bool by_webhook = (from.conversion_webhook || to.conversion_webhook) &&
                          from.group == to.group && from.kind == to.kind &&
                          from.version != to.version;
  if (!by_webhook) co_return convert_object(from, to, object);
  const kinds::VersionConverter* converter =
      from.converter ? from.converter.get() : to.converter.get();
  if (converter == nullptr) {
    co_return ApiError(Errc::internal, "conversion webhook for " + from.api_version() +
                                           ", Kind=" + from.kind + " is not ready yet");
  }
  std::vector<json::object> one;
  one.push_back(object);
  std::string target = to.api_version();
  auto converted = co_await converter->convert(std::move(one), std::move(target), false);
  if (!converted) co_return converted.error();
  if (converted->size() != 1) {
    co_return ApiError(Errc::internal, "conversion webhook for " + from.api_version() +
                                           ", Kind=" + from.kind + " returned no object");
  }
  co_return std::move(converted->front());
}

Params collect_params(const CompiledPolicy& policy, const PolicyBinding& binding,
                      const AdmissionAttributes& a, const kinds::Scheme& scheme,
                      const registry::CacherRegistry* cachers) {
  Params out;
  if (!policy.has_param_kind || !binding.param_ref) {
    out.none = true;
    return out;
  }
  const auto [group, version] = kinds::parse_group_version(policy.param_api_version);
  auto info = scheme.find_kind(group, version, policy.param_kind);
  if (!info) {
    out.error = "failed to find resource referenced by paramKind: '" + group + "/" + version +
                ", Kind=" + policy.param_kind + "'";
    return out;
  }
  auto cacher = cachers != nullptr ? cachers->find(*info) : nullptr;
  if (!cacher || !cacher->ready()) {
    out.error = "paramKind kind `" + group + "/" + version + ", Kind=" + policy.param_kind +
                "` not yet synced to use for admission";
    return out;
  }
  const ParamRef& ref = *binding.param_ref;
  std::string ns;
  if (info->namespaced) {
    ns = ref.ns.empty() ? a.ns : ref.ns;
    if (ns.empty()) {
      out.error = "cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                  "resources";
      return out;
    }
  } else if (!ref.ns.empty()) {
    out.error = "paramRef.namespace must not be provided for a cluster-scoped `paramKind`";
    return out;
  }
  auto add = [&](const watch::CachedObject& cached) {
    if (auto v = apimachinery::parse_json(cached.json); v && v->is_object()) {
      out.objects.push_back(std::move(*v));
    }
  };
  if (!ref.name.empty()) {
    if (auto cached = cacher->get(info->key(ns, ref.name))) add(*cached);
  } else if (ref.selector) {
    const std::string prefix = info->namespaced ? info->namespace_prefix(ns) : info->key_prefix();
    for (const auto& cached : cacher->list(prefix, "", 0, nullptr).objects) {
      json::object labels;
      for (const auto& [k, v] : cached->labels) labels[k] = v;
      if (ref.selector->matches(&labels)) add(*cached);
    }
  }
  if (out.objects.empty() && ref.deny_when_missing) {
    out.error = "no params found for policy binding with `Deny` parameterNotFoundAction";
  }
  return out;
}

const json::object* NamespaceLookup::find(std::string_view name) {
  for (const auto& [n, ns] : found_) {
    if (n == name) return ns ? &*ns : nullptr;
  }
  std::optional<json::object> ns;
  auto info = scheme_.find("", "v1", "namespaces");
  auto cacher = info && cachers_ != nullptr ? cachers_->find(*info) : nullptr;
  if (auto cached = cacher ? cacher->get(info->key("", name)) : nullptr) {
    if (auto v = apimachinery::parse_json(cached->json); v && v->is_object()) {
      ns = std::move(v->get_object());
    }
  }
  auto& entry = found_.emplace_front(std::string(name), std::move(ns));
  return entry.second ? &*entry.second : nullptr;
}

NamespaceLabels NamespaceLookup::labels() {
  return [this](std::string_view name) -> std::optional<json::object> {
    const json::object* ns = find(name);
    if (ns == nullptr) return std::nullopt;
    const json::object* labels = object_member(object_member(*ns, "metadata"), "labels");
    return labels != nullptr ? *labels : json::object();
  };
}

const json::object* NamespaceLookup::object_of(const AdmissionAttributes& a) {
  if (!document_) {
    document_.emplace();
    if (!a.ns.empty() && !(a.info.group.empty() && a.info.resource == "namespaces")) {
      if (const json::object* ns = find(a.ns)) *document_ = namespace_json(*ns);
    }
  }
  return *document_ ? &**document_ : nullptr;
}

namespace {

class RbacPolicyAuthorizer final : public kinds::PolicyAuthorizer {
 public:
  RbacPolicyAuthorizer(std::shared_ptr<const auth::RbacPolicy> policy, bool allow_all,
                       std::optional<apimachinery::UserInfo> user)
      : policy_(std::move(policy)), allow_all_(allow_all), user_(std::move(user)) {}

  kinds::AuthorizationDecision check(const kinds::AuthorizationCheck& c) const override {
    if (allow_all_) return {true, "", ""};
    auth::RequestAttributes r;
    if (c.service_account) {
      const std::string& ns = c.service_account_namespace;
      r.user.name = "system:serviceaccount:" + ns + ":" + c.service_account_name;
      r.user.groups = {"system:serviceaccounts", "system:serviceaccounts:" + ns,
                       "system:authenticated"};
    } else {
      r.user = user_ ? *user_ : apiserver_user();
    }
    r.resource_request = c.resource_request;
    r.verb = c.verb;
    r.api_group = c.group;
    r.resource = c.resource;
    r.subresource = c.subresource;
    r.namespace_ = c.ns;
    r.name = c.name;
    r.path = c.path;
    if (!policy_) return {false, "", "the RBAC policy is not loaded yet"};
    const auth::Decision d = policy_->authorize(r);
    return {d.allowed, d.reason, ""};
  }

 private:
  std::shared_ptr<const auth::RbacPolicy> policy_;
  bool allow_all_;
  std::optional<apimachinery::UserInfo> user_;
};

}  // namespace

std::shared_ptr<const kinds::PolicyAuthorizer> make_policy_authorizer(
    const auth::RbacPolicySource* rbac, const apimachinery::UserInfo* user) {
  std::optional<apimachinery::UserInfo> who;
  if (user != nullptr) who = *user;
  return std::make_shared<RbacPolicyAuthorizer>(rbac != nullptr ? rbac->current() : nullptr,
                                                rbac == nullptr, std::move(who));
}

void set_authorizer(std::span<cel::Value> activation,
                    const std::shared_ptr<const kinds::PolicyAuthorizer>& authorizer,
                    const AdmissionAttributes& a) {
  activation[kinds::slot_authorizer] = kinds::authorizer_value(authorizer);
  activation[kinds::slot_request_resource] = kinds::request_resource_value(
      authorizer, a.info.group, a.info.resource, a.subresource, a.ns, a.name);
}

ConditionOutcome evaluate_conditions(const CompiledPolicy& policy,
                                     std::span<const cel::Value> activation) {
  ConditionOutcome out;
  std::uint64_t remaining = kMatchConditionBudget;
  for (const auto& condition : policy.match_conditions) {
    const PolicyExpression& e = condition.expression;
    if (!e.program) {
      out.errors.push_back("compilation error: " + e.compile_error);
      continue;
    }
    const std::uint64_t limit = std::min(kPerCallLimit, remaining);
    const cel::EvalResult r = e.program->evaluate(activation, limit);
    remaining -= std::min(r.cost, remaining);
    if (r.value.is_error()) {
      out.errors.push_back("expression '" + e.source + "' resulted in error: " +
                           std::string(r.value.as_text()));
    } else if (r.value.is(cel::ValueKind::boolean) && !r.value.as_bool()) {
      out.hold = false;
      out.errors.clear();
      return out;
    }
  }
  out.hold = out.errors.empty();
  return out;
}

}  // namespace kwatch::admission
