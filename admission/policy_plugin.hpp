// What the two admission policy plugins (validating_policy, mutating_policy) hold alike: the
// scheme, the watch caches, the PolicySource that follows their kinds, and where `authorizer`
// asks. Each plugin derives from it and from its admission stage's interface.
//
// Ownership: the source is shared with its tasks. Thread-safety: loaded() and the plugin's
// judgement from any thread; use_rbac, start and stop while the server is composed and stopped.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/fwd.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

namespace kwatch::auth {
class RbacPolicySource;
}

namespace kwatch::kinds {
class Scheme;
struct CompiledPolicy;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::admission {

class PolicySource;

class PolicyPluginBase {
 public:
  // Where `authorizer` in the policies' expressions asks (RBAC); without one every check is
  // allowed (--authorization-mode=AlwaysAllow). Set before serving.
  void use_rbac(std::shared_ptr<auth::RbacPolicySource> rbac) { rbac_ = std::move(rbac); }
  // Where a write that an expensive policy (one that may cost more than kHeavyCost) judges is
  // evaluated, away from the I/O threads, so that they keep answering; unset: where it came.
  void use_executor(boost::asio::any_io_executor compute) { compute_ = std::move(compute); }
  // Follows the policy and binding caches on `executor` until stop().
  void start(boost::asio::any_io_executor executor);
  void stop();
  // Whether the policies and bindings have been loaded once (start-up waits for it).
  bool loaded() const;
  // Puts the policies and bindings of these objects (as stored) in force, replacing those
  // before; a policy whose resourceVersion is unchanged keeps its compiled programs. What the
  // cache followers do after a change; tests and benchmarks call it directly.
  void load(const std::vector<boost::json::object>& policies,
            const std::vector<boost::json::object>& bindings);

 protected:
  using Compile = std::shared_ptr<const kinds::CompiledPolicy> (*)(const boost::json::object&);
  // `cachers` holds the caches of policies, bindings, params and namespaces; null for a plugin
  // given its policies by load() (then no params and no namespace are found).
  PolicyPluginBase(std::shared_ptr<kinds::Scheme> scheme,
                   std::shared_ptr<registry::CacherRegistry> cachers, std::string version,
                   std::string policy_resource, std::string binding_resource, Compile compile);
  ~PolicyPluginBase();

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<PolicySource> source_;
  std::shared_ptr<auth::RbacPolicySource> rbac_;
  boost::asio::any_io_executor compute_;

  // About 3 ms of evaluation: a policy that may cost more runs on `compute_`.
  static constexpr std::uint64_t kHeavyCost = 100'000;
  // Whether `a` should be judged on `compute_` and is not there yet (`current` is the
  // caller's executor).
  bool move_to_compute(const boost::asio::any_io_executor& current, std::string_view group,
                       std::string_view resource) const;
};

}  // namespace kwatch::admission
