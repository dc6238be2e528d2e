// The current RbacPolicy, kept from the four RBAC watch caches: a task follows them and
// rebuilds the policy after a change (within ~100 ms), swapping it atomically; requests read the
// current one without locks, never storage. A write's escalation check asks for a consistent one.
// Ownership: shared; the task holds it. Strand: its own.
#pragma once

#include "apimachinery/api_error.hpp"
#include "auth/rbac_authorizer.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::storage {
class Storage;
}

namespace kwatch::auth {

class RbacPolicySource : public std::enable_shared_from_this<RbacPolicySource> {
 public:
  // `storage` answers what the caches cannot prove they have caught up with (consistent()).
  RbacPolicySource(std::shared_ptr<kinds::Scheme> scheme,
                   std::shared_ptr<registry::CacherRegistry> cachers,
                   std::shared_ptr<storage::Storage> storage);
  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }
  // The policy as of the last rebuild; null until the caches are ready.
  std::shared_ptr<const RbacPolicy> current() const { return std::atomic_load(&policy_); }
  // The storage revision the current policy includes every RBAC object up to (0: none yet).
  std::int64_t covered_revision() const { return covered_.load(); }
  // Asks for a rebuild at the next tick (the caches may have moved on since the last one).
  void refresh() { dirty_ = true; }
  // A policy that holds every RBAC object written before the call (storage's current revision),
  // as kube reads roles and bindings from storage for a write's escalation check: the current
  // policy when it is new enough, else one rebuilt from the caches once they have caught up
  // (published for everyone), else one built from a storage list. `unavailable` (503, Retry-After)
  // while no policy is loaded or storage does not answer. Any executor.
  boost::asio::awaitable<apimachinery::ApiResult<std::shared_ptr<const RbacPolicy>>>
  consistent();

 private:
  boost::asio::awaitable<void> run();
  boost::asio::awaitable<void> watch_one(std::string resource);
  // Builds a policy from the caches and publishes it unless a newer one was published meanwhile;
  // null when a cache is not ready. Any thread.
  std::shared_ptr<const RbacPolicy> rebuild();
  boost::asio::awaitable<apimachinery::ApiResult<std::shared_ptr<const RbacPolicy>>>
  build_from_storage(std::int64_t revision);

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<storage::Storage> storage_;
  std::mutex publish_mutex_;  // policy_ and covered_ change together
  std::shared_ptr<const RbacPolicy> policy_;
  std::atomic<bool> dirty_{true};
  std::atomic<bool> stopped_{false};
  std::atomic<std::int64_t> covered_{0};
};

}  // namespace kwatch::auth
