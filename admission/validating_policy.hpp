// The ValidatingAdmissionPolicy admission plugin (kube's plugin of that name): every write is
// judged by the policies whose bindings match it, after all mutation, as kube-apiserver judges
// it.
//
// Policies and bindings are followed from their watch caches (PolicySource): a change is
// compiled into a new PolicySet within ~100 ms and swapped in atomically; a request reads the
// current set without locks and never storage. Params and namespaces come from their watch
// caches too.
//
// Per write, for each policy (by name) whose matchConstraints match, each of its bindings (by
// name) whose matchResources match, and each param the binding's paramRef finds: the match
// conditions (all must hold), then the validations with a shared cost budget (10,000,000; at
// most 1,000,000 per expression), then the audit annotations. A failed validation acts as the
// binding's validationActions say: Deny refuses the write (422 Invalid unless the validation
// names another reason: `deployments.apps "web" is forbidden: ValidatingAdmissionPolicy 'p' with
// binding 'b' denied request: <message>`), Warn adds a `Warning` header, Audit adds the
// `validation.policy.admission.k8s.io/validation_failure` audit annotation. An expression that
// fails, or a binding that cannot be configured (params missing under Deny, an unknown
// paramKind) is a failure under failurePolicy Fail and ignored under Ignore.
//
// The admission policy kinds themselves are never judged by policies (kube's exemption), so a
// broken policy cannot lock its own repair out.
//
// Ownership: shared (the admission chain); see PolicyPluginBase. Thread-safety: handles() and
// validate() from any thread.
#pragma once

#include "admission/policy_plugin.hpp"
#include "registry/admission.hpp"

#include <memory>

namespace kwatch::admission {

class ValidatingPolicyPlugin final : public registry::ValidatingAdmission, public PolicyPluginBase {
 public:
  ValidatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                         std::shared_ptr<registry::CacherRegistry> cachers);
  ~ValidatingPolicyPlugin() override;

  // The number of (policy, binding) pairs in force, for tests and logs.
  std::size_t bound_policies() const;

  std::string_view name() const override { return "ValidatingAdmissionPolicy"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> judge(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object);
};

}  // namespace kwatch::admission
