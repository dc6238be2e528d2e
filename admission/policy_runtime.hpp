// What the two admission policy plugins (validating_policy, mutating_policy) share: the policy
// set kept from the watch caches of a policy kind and its binding kind, and the pieces of one
// evaluation (the `request` and `namespaceObject` documents, params, lazy `variables`, match
// conditions), as k8s.io/apiserver's plugin/policy/generic shares them.
//
// PolicySource: the policies and bindings followed in their caches (config_follower.hpp); a
// change is rebuilt at the next 100 ms tick (policies whose resourceVersion is unchanged keep
// their compiled programs); the set is swapped atomically and read without locks.
// Ownership: shared; its tasks hold it. Thread-safety: current() and load() from any thread.
#pragma once

#include "admission/policy_matching.hpp"
#include "cel/json_value.hpp"
#include "cel/value.hpp"
#include "kinds/admission_policy.hpp"
#include "kinds/authorizer_library.hpp"
#include "registry/admission.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <cstdint>
#include <forward_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::auth {
class RbacPolicySource;
}

namespace kwatch::admission {

// Kube's budgets: per expression call, per (policy, binding, param) evaluation, and for all of
// one evaluation's match conditions.
inline constexpr std::uint64_t kPerCallLimit = 1'000'000;
inline constexpr std::uint64_t kPolicyBudget = 10'000'000;
inline constexpr std::uint64_t kMatchConditionBudget = 2'500'000;
inline constexpr std::string_view kCostLimitExceeded =
    "operation cancelled: actual cost limit exceeded";

// The admission configuration kinds themselves (policies, bindings, webhook configurations),
// which policies and webhooks never judge or change.
bool exempt_from_policies(const kinds::ResourceInfo& info);

// `deployments.apps`, `pods`: a resource as kube's errors name it.
std::string group_resource(const kinds::ResourceInfo& info);

// Who kwatch's own writes (no user) are to policies: system:apiserver, in system:masters.
const apimachinery::UserInfo& apiserver_user();

// What a user's write is told while the policies are not loaded yet (403, kube's words).
apimachinery::ApiError not_ready(const registry::AdmissionAttributes& a);

struct ParamRef {
  std::string name, ns;
  std::optional<apimachinery::LabelSelector> selector;
  bool deny_when_missing = true;
};

struct PolicyBinding {
  std::string name;
  std::optional<ParamRef> param_ref;
  std::optional<CompiledMatch> match;
  std::vector<std::string> actions;  // validationActions, as listed
};

struct PolicySet {
  struct Entry {
    std::string resource_version;
    std::shared_ptr<const kinds::CompiledPolicy> policy;
    CompiledMatch match;
    bool has_match = false;
    std::vector<PolicyBinding> bindings;  // by name
  };
  std::vector<Entry> policies;  // by name
  bool loaded = false;

  // Whether a policy with a binding, estimated to cost at least `min_cost` an evaluation, could
  // apply to (group, resource).
  bool may_apply(std::string_view group, std::string_view resource,
                 std::uint64_t min_cost = 0) const;
};

using PolicyCompiler = std::shared_ptr<const kinds::CompiledPolicy> (*)(const boost::json::object&);

class PolicySource : public std::enable_shared_from_this<PolicySource> {
 public:
  // Policies of `policy_resource` and bindings of `binding_resource` in
  // admissionregistration.k8s.io/`version`, compiled by `compile`. `cachers` may be null for a
  // source given its objects by load().
  PolicySource(std::shared_ptr<kinds::Scheme> scheme,
               std::shared_ptr<registry::CacherRegistry> cachers, std::string version,
               std::string policy_resource, std::string binding_resource, PolicyCompiler compile);

  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }
  std::shared_ptr<const PolicySet> current() const { return std::atomic_load(&set_); }
  // Puts these objects (as stored) in force, replacing what was.
  void load(const std::vector<boost::json::object>& policies,
            const std::vector<boost::json::object>& bindings);

 private:

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::string version_, policy_resource_, binding_resource_;
  PolicyCompiler compile_;
  std::shared_ptr<const PolicySet> set_;
  std::atomic<bool> stopped_{false};
};

// `variables` of a policy's expressions: each evaluated when first read, at most once per
// evaluation, its cost taken from `remaining`. Lives as long as the evaluation using it.
class LazyVariables final : public cel::MapValue {
 public:
  LazyVariables(const kinds::CompiledPolicy& policy, std::span<const cel::Value> activation,
                std::uint64_t& remaining);
  std::size_t size() const override;
  std::optional<cel::Value> find(const cel::Value& key) const override;
  std::optional<cel::Value> find_field(std::string_view json_name,
                                       const cel::Type* type) const override;
  cel::Value key_at(std::size_t i) const override;
  cel::Value value_at(std::size_t i) const override;

 private:
  std::optional<cel::Value> field(std::string_view name) const;
  cel::Value value(std::size_t i) const;

  const kinds::CompiledPolicy& policy_;
  std::span<const cel::Value> activation_;
  std::uint64_t& remaining_;
  mutable std::vector<std::optional<cel::EvalResult>> results_;
};

// The write `a` as the matcher sees it, judged on `object` (null on delete).
MatchRequest match_request(const registry::AdmissionAttributes& a, const boost::json::object* object);

// `request`: admission/v1 AdmissionRequest's fields as kube's policies see them (empty optional
// fields absent); `matched` is the resource the policy's rule named. Allocated from `sp` (a
// write's monotonic buffer).
boost::json::object request_json(const registry::AdmissionAttributes& a,
                                 const kinds::ResourceInfo& matched,
                                 boost::json::storage_ptr sp = {});
// `namespaceObject`: the namespace's metadata kube keeps, its spec and status.
boost::json::object namespace_json(const boost::json::object& ns);
// `object` as `to` serves it (a rule matched an equivalent resource).
boost::json::object convert_object(const kinds::ResourceInfo& from, const kinds::ResourceInfo& to,
                                   const boost::json::object& object);
// The same, through the definition's conversion webhook when one converts between the two
// versions of a custom resource (kube converts the object a webhook is sent for its matched
// version as it converts any read); a failed conversion is a 500 naming the webhook.
boost::asio::awaitable<apimachinery::ApiResult<boost::json::object>> convert_matched(
    const kinds::ResourceInfo& from, const kinds::ResourceInfo& to,
    const boost::json::object& object);
// A write's object and old object (either may be null) as the matched resource `to` serves
// them, each through convert_matched when `to` is another group or version; the first failure.
struct MatchedForms {
  std::optional<boost::json::object> object, old;  // set when converted
  // The forms to use: the converted ones, else the write's own.
  const boost::json::object* object_or(const boost::json::object* own) const {
    return object ? &*object : own;
  }
  const boost::json::object* old_or(const boost::json::object* own) const {
    return old ? &*old : own;
  }
};
boost::asio::awaitable<apimachinery::ApiResult<MatchedForms>> convert_matched_forms(
    const kinds::ResourceInfo& from, const kinds::ResourceInfo& to,
    const boost::json::object* object, const boost::json::object* old);
// The namespaces one write's policies ask about (selectors, `namespaceObject`), each read from
// its watch cache and parsed once, when first asked. Lives as long as the write's judgement.
class NamespaceLookup {
 public:
  NamespaceLookup(const kinds::Scheme& scheme, const registry::CacherRegistry* cachers)
      : scheme_(scheme), cachers_(cachers) {}
  // The namespace `name`; null when absent (or no caches).
  const boost::json::object* find(std::string_view name);
  // Its labels, for CompiledMatch::matches.
  NamespaceLabels labels();
  // `namespaceObject` of the write `a`: its namespace as namespace_json gives it; null for
  // cluster-scoped objects and namespaces themselves.
  const boost::json::object* object_of(const registry::AdmissionAttributes& a);

 private:
  const kinds::Scheme& scheme_;
  const registry::CacherRegistry* cachers_;
  // A forward_list: entries stay where they are, and an empty one allocates nothing.
  std::forward_list<std::pair<std::string, std::optional<boost::json::object>>> found_;
  std::optional<std::optional<boost::json::object>> document_;
};

// The params a binding's paramRef finds.
struct Params {
  std::vector<boost::json::value> objects;
  bool none = false;  // no paramKind or no paramRef: one evaluation with params null
  std::string error;  // the binding cannot be configured (kube's words)
};
Params collect_params(const kinds::CompiledPolicy& policy, const PolicyBinding& binding,
                      const registry::AdmissionAttributes& a, const kinds::Scheme& scheme,
                      const registry::CacherRegistry* cachers);

// What `authorizer` answers during one write: the RBAC policy in force (`rbac` null: kwatch
// runs with AlwaysAllow, and every check is allowed), for the request's user (null: kwatch's
// own writes, as a member of system:masters) or the service account a check names.
std::shared_ptr<const kinds::PolicyAuthorizer> make_policy_authorizer(
    const auth::RbacPolicySource* rbac, const apimachinery::UserInfo* user);
// Sets `authorizer` and `authorizer.requestResource` (aimed at the request) in `activation`.
void set_authorizer(std::span<cel::Value> activation,
                    const std::shared_ptr<const kinds::PolicyAuthorizer>& authorizer,
                    const registry::AdmissionAttributes& a);

// The match conditions of one evaluation: false when one is false; errors (compile or run
// time) when none is false but some failed.
struct ConditionOutcome {
  bool hold = true;
  std::vector<std::string> errors;
};
ConditionOutcome evaluate_conditions(const kinds::CompiledPolicy& policy,
                                     std::span<const cel::Value> activation);

}  // namespace kwatch::admission
