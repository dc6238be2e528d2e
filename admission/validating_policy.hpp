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
// Ownership: shared (the admission chain); the PolicySource it owns is shared with its tasks.
// Thread-safety: handles() and validate() from any thread.
#pragma once

#include "registry/admission.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::auth {
class RbacPolicySource;
}

namespace kwatch::admission {

class PolicySource;

class ValidatingPolicyPlugin final : public registry::ValidatingAdmission {
 public:
  // `cachers` holds the caches of policies, bindings, params and namespaces; null for a plugin
  // given its policies by load() (then no params and no namespace are found).
  ValidatingPolicyPlugin(std::shared_ptr<kinds::Scheme> scheme,
                         std::shared_ptr<registry::CacherRegistry> cachers);
  ~ValidatingPolicyPlugin() override;

  // Follows the policy and binding caches on `executor` until stop().
  // Where `authorizer` in the policies' expressions asks (RBAC); without one every check is
  // allowed (--authorization-mode=AlwaysAllow). Set before serving.
  void use_rbac(std::shared_ptr<auth::RbacPolicySource> rbac) { rbac_ = std::move(rbac); }
  void start(boost::asio::any_io_executor executor);
  void stop();
  // Whether the policies and bindings have been loaded once (start-up waits for it).
  bool loaded() const;
  // The number of (policy, binding) pairs in force, for tests and logs.
  std::size_t bound_policies() const;
  // Puts the policies and bindings of these objects (as stored) in force, replacing those
  // before; a policy whose resourceVersion is unchanged keeps its compiled programs. What the
  // cache followers do after a change; tests and benchmarks call it directly.
  void load(const std::vector<boost::json::object>& policies,
            const std::vector<boost::json::object>& bindings);

  std::string_view name() const override { return "ValidatingAdmissionPolicy"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<PolicySource> source_;
  std::shared_ptr<auth::RbacPolicySource> rbac_;
};

}  // namespace kwatch::admission
