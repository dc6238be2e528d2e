// What keeps API Priority and Fairness's configuration current, as kube's APF config consumer
// and producer do: the FlowSchemas and PriorityLevelConfigurations are followed in their watch
// caches and handed to the dispatcher after every change; each FlowSchema's Dangling condition
// is written when it no longer says whether its priority level exists; and kube's bootstrap
// objects are kept (created when missing, their specs restored as their annotation allows,
// stale ones removed) at start-up and every minute.
// Ownership: shared; its tasks hold it. Strand: its own.
#pragma once

#include "flowcontrol/priority_and_fairness.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::flowcontrol {

class ConfigKeeper : public std::enable_shared_from_this<ConfigKeeper> {
 public:
  ConfigKeeper(std::shared_ptr<PriorityAndFairness> dispatcher,
               std::shared_ptr<kinds::Scheme> scheme,
               std::shared_ptr<registry::CacherRegistry> cachers,
               std::shared_ptr<registry::ResourceStore> store);
  // Follows the caches and keeps the bootstrap objects every minute (the caches have listed).
  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }
  // One round of keeping the bootstrap objects; false when the caches have not listed or a
  // write failed (the next round tries again).
  boost::asio::awaitable<bool> ensure_bootstrap();
  // Until the configuration is settled: the caches have caught up with storage, the dispatcher
  // has every object, and no FlowSchema's Dangling condition is left to write (at most a few
  // rounds). Start-up waits for it before /readyz is green, so that the server's own writes at
  // start are done before clients begin (a watch resumed from before a restart finds them all
  // in the caches' window) and a client's first request is classified by the whole
  // configuration. On storage whose progress may run ahead of its events (etcd < 3.4.25), where
  // a cache cannot prove it is current, the caches are caught up when they hold what the last
  // ensure_bootstrap() and settle() itself wrote. Start-up only: before start().
  boost::asio::awaitable<void> settle();

  // A write of the keeper's: the object and the resourceVersion it got (0: deleted).
  struct Written {
    std::size_t resource = 0;  // 0: a PriorityLevelConfiguration, 1: a FlowSchema
    std::string name;
    std::int64_t resource_version = 0;
  };

 private:
  void reconfigure(std::vector<std::vector<boost::json::object>>& lists);
  // Writes the conditions; returns what was written.
  boost::asio::awaitable<std::vector<Written>> write_conditions(
      std::vector<DanglingCondition> conditions, std::vector<boost::json::object> schemas);

  std::shared_ptr<PriorityAndFairness> dispatcher_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<registry::ResourceStore> store_;
  boost::asio::any_io_executor executor_;
  std::atomic<bool> stopped_{false};
  std::vector<Written> written_;  // by the last ensure_bootstrap(), for settle()
};

}  // namespace kwatch::flowcontrol
