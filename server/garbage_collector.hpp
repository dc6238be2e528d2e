// The garbage collector, as kube-controller-manager runs it, inside kwatch and driven by the watch
// caches of every resource (built-in and custom):
// - an object whose ownerReferences all name owners that are gone (no object of that kind and
//   name with that uid, checked against storage) or being deleted in foreground is deleted: in
//   foreground when an owner waits for it and it has dependents of its own, otherwise as its own
//   finalizers ask, background by default; an object that still has a live owner only loses its
//   references to the others;
// - an owner deleted with propagationPolicy=Orphan (the `orphan` finalizer) has its references
//   removed from its dependents, then the finalizer, and goes;
// - an owner deleted with propagationPolicy=Foreground (`foregroundDeletion`) has its dependents
//   deleted and loses the finalizer once no dependent with blockOwnerDeletion is left.
// On by default (--enable-garbage-collector). A restart rebuilds everything from the caches'
// initial events, so work cut short is picked up again. Every replica runs one: their writes
// are compare-and-swap and their deletes carry the object's uid as a precondition, so they
// agree.
//
// Ownership: shared; its tasks hold it. Strand: every task and all state on one strand.
// Cancellation: `stop()` ends the tasks at their next wait.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kwatch::registry {
class ResourceStore;
class Scheme;
struct ResourceInfo;
}  // namespace kwatch::registry
namespace kwatch::watch {
class Cacher;
struct WatchFrame;
}  // namespace kwatch::watch

namespace kwatch::server {

class CacherRegistry;

class GarbageCollector : public std::enable_shared_from_this<GarbageCollector> {
 public:
  GarbageCollector(std::shared_ptr<registry::Scheme> scheme,
                   std::shared_ptr<registry::ResourceStore> store,
                   std::shared_ptr<CacherRegistry> cachers);

  // Watches every cache there is and every one added later; starts the worker.
  void start(boost::asio::any_io_executor executor);
  void stop();

 private:
  struct OwnerRef {
    std::string api_version;
    std::string kind;
    std::string name;
    std::string uid;
    bool block = false;  // blockOwnerDeletion
  };
  // An object with owner references.
  struct Dependent {
    const registry::ResourceInfo* info = nullptr;
    std::string ns;
    std::string name;
    std::string uid;
    std::int64_t revision = 0;  // of the state indexed
    std::vector<OwnerRef> owners;
  };
  struct Work {
    const registry::ResourceInfo* info;
    std::string key;
  };
  enum class OwnerState { solid, waiting, gone, orphaned };

  boost::asio::awaitable<void> watch_cacher(std::shared_ptr<watch::Cacher> cacher);
  void observe(const registry::ResourceInfo& info, const watch::WatchFrame& frame);
  void forget_prefix(const std::string& prefix);
  // Queues every dependent whose owner's key is under `prefix`.
  void recheck_owners_under(const std::string& prefix);
  void enqueue(const registry::ResourceInfo* info, const std::string& key);
  void enqueue_all(const std::set<std::string>& keys);
  void index(const std::string& key, Dependent d);
  void unindex(const std::string& key);
  std::string owner_key(const Dependent& d, const OwnerRef& ref) const;
  boost::asio::awaitable<void> work();
  boost::asio::awaitable<void> process(const registry::ResourceInfo& info, const std::string& key);
  boost::asio::awaitable<void> orphan_dependents(const boost::json::object& owner);
  boost::asio::awaitable<void> delete_dependents(const registry::ResourceInfo& info,
                                                 const boost::json::object& owner);
  boost::asio::awaitable<void> collect(const registry::ResourceInfo& info, const std::string& key);
  boost::asio::awaitable<OwnerState> owner_state(const Dependent& dependent, const OwnerRef& ref);
  boost::asio::awaitable<bool> drop_finalizer(const registry::ResourceInfo& info,
                                              const boost::json::object& obj,
                                              std::string_view finalizer);
  boost::asio::awaitable<bool> drop_references(const Dependent& dependent,
                                               std::set<std::string> uids);
  const registry::ResourceInfo* info_for_prefix(const std::string& prefix) const;
  const registry::ResourceInfo* owner_info(const OwnerRef& ref) const;

  std::shared_ptr<registry::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<CacherRegistry> cachers_;
  std::optional<boost::asio::strand<boost::asio::any_io_executor>> strand_;
  std::atomic<bool> stopped_{false};

  // Strand-only state.
  std::set<std::string> watched_;                        // cache prefixes being watched
  std::map<std::string, Dependent> dependents_;          // key -> object with owners
  std::map<std::string, std::set<std::string>> by_owner_uid_;  // owner uid -> dependent keys
  std::map<std::string, std::set<std::string>> by_owner_key_;  // owner key -> dependent keys
  // Owners seen being deleted with the orphan finalizer, and when: a dependent whose index entry
  // arrives after its owner went (another cache's stream lagging) is orphaned, not deleted.
  // The revision is the orphaning's: only dependents from before it were the owner's to orphan.
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::int64_t>> orphaned_;
  std::deque<Work> queue_;
  std::set<std::string> queued_;
  std::unique_ptr<boost::asio::steady_timer> wake_;
};

}  // namespace kwatch::server
