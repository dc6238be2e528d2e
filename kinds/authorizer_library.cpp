#include "kinds/authorizer_library.hpp"

#include <span>
#include <utility>

namespace kwatch::kinds {

namespace {

using cel::Value;

constexpr std::uint64_t kCheckCost = 350'000;

// Every value of the library carries the authorizer and the question asked so far.
class AuthzValue final : public cel::OpaqueValue {
 public:
  enum class Kind { authorizer, path, group, resource, decision };

  AuthzValue(Kind kind, std::shared_ptr<const PolicyAuthorizer> impl, AuthorizationCheck check)
      : kind_(kind), impl_(std::move(impl)), check_(std::move(check)) {}

  std::string_view type_name() const override {
    switch (kind_) {
      case Kind::authorizer: return "kubernetes.authorization.Authorizer";
      case Kind::path: return "kubernetes.authorization.PathCheck";
      case Kind::group: return "kubernetes.authorization.GroupCheck";
      case Kind::resource: return "kubernetes.authorization.ResourceCheck";
      case Kind::decision: return "kubernetes.authorization.Decision";
    }
    return "";
  }
  bool equals(const cel::OpaqueValue& other) const override { return &other == this; }
  std::string literal() const override { return std::string(type_name()) + "{}"; }

  Kind kind() const { return kind_; }
  const std::shared_ptr<const PolicyAuthorizer>& impl() const { return impl_; }
  const AuthorizationCheck& check() const { return check_; }
  AuthorizationDecision decision;  // Kind::decision

 private:
  Kind kind_;
  std::shared_ptr<const PolicyAuthorizer> impl_;
  AuthorizationCheck check_;
};

const AuthzValue* as(const Value& v, AuthzValue::Kind kind) {
  const auto* a = v.opaque_as<AuthzValue>();
  return a != nullptr && a->kind() == kind ? a : nullptr;
}

Value make(AuthzValue::Kind kind, const AuthzValue& from, AuthorizationCheck check) {
  return Value::opaque(std::make_shared<AuthzValue>(kind, from.impl(), std::move(check)));
}

Value no_overload(std::string_view function) {
  return Value::error("no such overload: " + std::string(function));
}

Value path(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* a = as(args[0], AuthzValue::Kind::authorizer);
  if (a == nullptr) return no_overload("path");
  AuthorizationCheck c = a->check();
  c.resource_request = false;
  c.path = std::string(args[1].as_text());
  return make(AuthzValue::Kind::path, *a, std::move(c));
}

Value group(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* a = as(args[0], AuthzValue::Kind::authorizer);
  if (a == nullptr) return no_overload("group");
  AuthorizationCheck c = a->check();
  c.group = std::string(args[1].as_text());
  return make(AuthzValue::Kind::group, *a, std::move(c));
}

Value service_account(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* a = as(args[0], AuthzValue::Kind::authorizer);
  if (a == nullptr) return no_overload("serviceAccount");
  AuthorizationCheck c;
  c.service_account = true;
  c.service_account_namespace = std::string(args[1].as_text());
  c.service_account_name = std::string(args[2].as_text());
  return make(AuthzValue::Kind::authorizer, *a, std::move(c));
}

Value resource(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* g = as(args[0], AuthzValue::Kind::group);
  if (g == nullptr) return no_overload("resource");
  AuthorizationCheck c = g->check();
  c.resource = std::string(args[1].as_text());
  return make(AuthzValue::Kind::resource, *g, std::move(c));
}

// subresource, namespace, name, fieldSelector, labelSelector: a ResourceCheck narrowed.
template <std::string AuthorizationCheck::*Field>
Value narrowed(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* r = as(args[0], AuthzValue::Kind::resource);
  if (r == nullptr) return no_overload("ResourceCheck");
  AuthorizationCheck c = r->check();
  c.*Field = std::string(args[1].as_text());
  return make(AuthzValue::Kind::resource, *r, std::move(c));
}

// The selectors narrow what is asked; RBAC, which kwatch authorizes with, does not look at them.
Value selector(std::span<const Value> args, cel::EvalBudget&) {
  if (as(args[0], AuthzValue::Kind::resource) == nullptr) return no_overload("ResourceCheck");
  return args[0];
}

Value check(std::span<const Value> args, cel::EvalBudget& budget) {
  const auto* a = args[0].opaque_as<AuthzValue>();
  if (a == nullptr || (a->kind() != AuthzValue::Kind::path &&
                       a->kind() != AuthzValue::Kind::resource)) {
    return no_overload("check");
  }
  budget.charge(kCheckCost);
  AuthorizationCheck c = a->check();
  c.verb = std::string(args[1].as_text());
  auto out = std::make_shared<AuthzValue>(AuthzValue::Kind::decision, a->impl(), c);
  out->decision = a->impl() ? a->impl()->check(c)
                            : AuthorizationDecision{false, "", "no authorizer for this request"};
  return Value::opaque(std::move(out));
}

Value allowed(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* d = as(args[0], AuthzValue::Kind::decision);
  if (d == nullptr) return no_overload("allowed");
  return Value::boolean(d->decision.allowed);
}

Value reason(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* d = as(args[0], AuthzValue::Kind::decision);
  if (d == nullptr) return no_overload("reason");
  return Value::string(d->decision.reason);
}

Value errored(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* d = as(args[0], AuthzValue::Kind::decision);
  if (d == nullptr) return no_overload("errored");
  return Value::boolean(!d->decision.error.empty());
}

Value error(std::span<const Value> args, cel::EvalBudget&) {
  const AuthzValue* d = as(args[0], AuthzValue::Kind::decision);
  if (d == nullptr) return no_overload("error");
  return Value::string(d->decision.error);
}

}  // namespace

cel::Value authorizer_value(std::shared_ptr<const PolicyAuthorizer> impl) {
  return Value::opaque(
      std::make_shared<AuthzValue>(AuthzValue::Kind::authorizer, std::move(impl),
                                   AuthorizationCheck{}));
}

cel::Value request_resource_value(std::shared_ptr<const PolicyAuthorizer> impl, std::string group,
                                  std::string resource, std::string subresource, std::string ns,
                                  std::string name) {
  AuthorizationCheck c;
  c.group = std::move(group);
  c.resource = std::move(resource);
  c.subresource = std::move(subresource);
  c.ns = std::move(ns);
  c.name = std::move(name);
  return Value::opaque(
      std::make_shared<AuthzValue>(AuthzValue::Kind::resource, std::move(impl), std::move(c)));
}

void add_authorizer_library(cel::FunctionRegistry& r) {
  const std::string authorizer = "kubernetes.authorization.Authorizer";
  const std::string path_check = "kubernetes.authorization.PathCheck";
  const std::string group_check = "kubernetes.authorization.GroupCheck";
  const std::string resource_check = "kubernetes.authorization.ResourceCheck";
  const std::string decision = "kubernetes.authorization.Decision";
  r.add("path", "authorizer_path", true, authorizer + ", string -> " + path_check, path);
  r.add("group", "authorizer_group", true, authorizer + ", string -> " + group_check, group);
  r.add("serviceAccount", "authorizer_serviceaccount", true,
        authorizer + ", string, string -> " + authorizer, service_account);
  r.add("resource", "groupcheck_resource", true, group_check + ", string -> " + resource_check,
        resource);
  r.add("subresource", "resourcecheck_subresource", true,
        resource_check + ", string -> " + resource_check,
        narrowed<&AuthorizationCheck::subresource>);
  r.add("namespace", "resourcecheck_namespace", true,
        resource_check + ", string -> " + resource_check, narrowed<&AuthorizationCheck::ns>);
  r.add("name", "resourcecheck_name", true, resource_check + ", string -> " + resource_check,
        narrowed<&AuthorizationCheck::name>);
  r.add("fieldSelector", "resourcecheck_fieldselector", true,
        resource_check + ", string -> " + resource_check, selector);
  r.add("labelSelector", "resourcecheck_labelselector", true,
        resource_check + ", string -> " + resource_check, selector);
  r.add("check", "pathcheck_check", true, path_check + ", string -> " + decision, check);
  r.add("check", "resourcecheck_check", true, resource_check + ", string -> " + decision, check);
  r.add("allowed", "decision_allowed", true, decision + " -> bool", allowed);
  r.add("reason", "decision_reason", true, decision + " -> string", reason);
  r.add("errored", "decision_errored", true, decision + " -> bool", errored);
  r.add("error", "decision_error", true, decision + " -> string", error);
}

}  // namespace kwatch::kinds
