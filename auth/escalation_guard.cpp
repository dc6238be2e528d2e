#include "auth/escalation_guard.hpp"

#include "auth/rbac_escalation.hpp"
#include "auth/rbac_policy_source.hpp"
#include "kinds/scheme.hpp"

#include <utility>

namespace kwatch::auth {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using registry::AdmissionAttributes;
using registry::AdmissionOperation;

EscalationGuard::EscalationGuard(std::shared_ptr<RbacPolicySource> policies)
    : policies_(std::move(policies)) {}

bool EscalationGuard::handles(const AdmissionAttributes& a) const {
  // Members of system:masters need no policy (kube's EscalationAllowed).
  return a.operation != AdmissionOperation::remove && a.user != nullptr &&
         !is_superuser(*a.user) && is_rbac_resource(a.info.group, a.info.resource);
}

asio::awaitable<std::optional<ApiError>> EscalationGuard::validate(const AdmissionAttributes& a,
                                                                   const json::object* object) {
  if (object == nullptr) co_return std::nullopt;
  auto policy = co_await policies_->consistent();
  if (!policy) co_return policy.error();
  // An `escalate` or `bind` grant with resourceNames matches the name in the request's URL,
  // which a create does not have.
  const std::string url_name = a.operation == AdmissionOperation::create ? std::string() : a.name;
  const RbacAdmission admission(std::move(*policy), *a.user, a.info.resource, a.ns, url_name);
  co_return admission.admit(a.old_object, *object);
}

}  // namespace kwatch::auth
