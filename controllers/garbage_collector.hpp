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
//   deleted and loses the finalizer once no dependent with blockOwnerDeletion is left. Owners that
//   wait for each other that way (a cycle of references, or an object that owns itself) would
//   wait forever: as kube's collector does, the reference of one dependent on the cycle stops
//   blocking (blockOwnerDeletion: false), and they all go.
// Work is fair: namespaces take turns, and within a namespace the owners do, one item a turn, so
// an owner with ten thousand dependents or a long chain does not hold up another's collection.
// Up to 8 items are processed at a time (storage calls overlap), never two of one object.
// Items are queued by events only (and retried after failures with a growing delay): nothing is
// looked at again while nothing changes, so an idle server does no work.
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

namespace kwatch::kinds {
class Scheme;
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry
namespace kwatch::watch {
class Cacher;
struct WatchFrame;
}  // namespace kwatch::watch

namespace kwatch::registry {
class CacherRegistry;
}  // namespace kwatch::registry

namespace kwatch::controllers {

// The collector's decisions that need no I/O, testable alone.
namespace gc {

// The collector's queue: namespaces take turns, and within a namespace the groups (an owner's
// dependents, or one owner's own steps) do; a turn is one item. A key is queued once however
// often it is pushed, in the place of its first push.
// Ownership: the collector's. Not thread-safe (the collector's strand).
class FairQueue {
 public:
  struct Item {
    // The resource's key prefix (kinds::ResourceInfo::key_prefix()): the item looks its
    // description up again when it runs, so a custom resource is written under its
    // definition's current schema and a replaced description is not kept alive by the queue.
    std::string prefix;
    std::string key;
    std::string ns;  // the object's namespace; "" for a cluster-scoped one
  };
  // False when the key was queued already.
  bool push(const std::string& group, Item item);
  // The next item in turn; nullopt when empty.
  std::optional<Item> pop();
  bool contains(const std::string& key) const { return queued_.count(key) > 0; }
  bool empty() const { return queued_.empty(); }
  std::size_t size() const { return queued_.size(); }

 private:
  struct Namespace {
    std::deque<std::string> turns;  // groups with items, in turn
    std::map<std::string, std::deque<Item>> groups;
  };
  std::deque<std::string> turns_;  // namespaces with items, in turn
  std::map<std::string, Namespace> namespaces_;
  std::set<std::string> queued_;
};

// Who waits for whom among objects being deleted in foreground: waits[owner uid] holds the uids
// of the owner's dependents that block it (blockOwnerDeletion) and are deleting in foreground
// themselves, so wait for their own dependents.
using WaitGraph = std::map<std::string, std::set<std::string>>;

// When `owner` waits, through its dependents, for itself (a cycle of blocking references among
// objects deleting in foreground, or a blocking reference of an object to itself): the dependent
// it waits for first on such a cycle. None of them would ever go; that dependent's reference to
// the owner stops blocking and the cycle is open. Nullopt when the owner is on no cycle.
std::optional<std::string> dependent_on_wait_cycle(const WaitGraph& waits,
                                                   const std::string& owner);

// What an owner deleting in foreground does next, given how many dependents still block it.
struct ForegroundStep {
  enum class Action {
    finish,   // none blocks: its foregroundDeletion finalizer goes
    unblock,  // `dependent` (a uid) waits for it through a cycle: make its reference non-blocking
    wait,     // for the blocking dependents to go (their deletion events bring it back)
  };
  Action action = Action::wait;
  std::string dependent;
};
ForegroundStep foreground_step(const WaitGraph& waits, const std::string& owner_uid,
                               std::size_t blocking);

// How long a failed item waits before it is tried again: 100 ms doubling to 30 s.
std::chrono::milliseconds retry_delay(int failures);

}  // namespace gc

class GarbageCollector : public std::enable_shared_from_this<GarbageCollector> {
 public:
  GarbageCollector(std::shared_ptr<kinds::Scheme> scheme,
                   std::shared_ptr<registry::ResourceStore> store,
                   std::shared_ptr<registry::CacherRegistry> cachers);

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
    std::string prefix;  // of its resource's keys, as in gc::FairQueue::Item
    std::string ns;
    std::string name;
    std::string uid;
    std::int64_t revision = 0;  // of the state indexed
    std::vector<OwnerRef> owners;
    bool deleting_dependents = false;  // deletionTimestamp and the foregroundDeletion finalizer
  };
  enum class OwnerState { solid, waiting, gone, orphaned };
  // What became of an item: done, or to be tried again later (storage trouble).
  enum class Outcome { done, retry };

  boost::asio::awaitable<void> watch_cacher(std::shared_ptr<watch::Cacher> cacher);
  // Whether the index has every event up to `revision` of every cache followed (waiting for
  // them a little); false if not.
  boost::asio::awaitable<bool> index_covers(std::int64_t revision);
  void observe(const std::string& prefix, const watch::WatchFrame& frame);
  void forget_prefix(const std::string& prefix);
  // Queues every dependent whose owner's key is under `prefix`.
  void recheck_owners_under(const std::string& prefix);
  // Queues the object at `key` (in namespace `ns`) for a look; a dependent takes its turn among
  // its first owner's dependents, anything else among its own steps.
  void enqueue(const std::string& prefix, const std::string& key, const std::string& ns);
  // Queues the owner `ref` names, the owner of `d`.
  void enqueue_owner(const Dependent& d, const OwnerRef& ref);
  void enqueue_all(const std::set<std::string>& keys);
  void index(const std::string& key, Dependent d);
  void unindex(const std::string& key);
  std::string owner_key(const Dependent& d, const OwnerRef& ref) const;
  // Starts items in turn, up to kWorkers at a time, never two of one key.
  boost::asio::awaitable<void> work();
  // Waits until an item is queued (or a retry is due) and a worker is free; false once stopped.
  boost::asio::awaitable<bool> wait_for_work();
  // One item, a task of its own.
  boost::asio::awaitable<void> run_item(gc::FairQueue::Item item);
  boost::asio::awaitable<Outcome> process(const kinds::ResourceInfo& info,
                                          const std::string& key);
  // One turn of orphaning: at most a batch of dependents, then the owner queues again.
  boost::asio::awaitable<Outcome> orphan_dependents(const kinds::ResourceInfo& info,
                                                    const std::string& key,
                                                    const boost::json::object& owner);
  boost::asio::awaitable<Outcome> delete_dependents(const kinds::ResourceInfo& info,
                                                    const std::string& key,
                                                    std::int64_t revision,
                                                    const boost::json::object& owner);
  boost::asio::awaitable<Outcome> collect(const kinds::ResourceInfo& info,
                                          const std::string& key);
  boost::asio::awaitable<OwnerState> owner_state(const Dependent& dependent, const OwnerRef& ref);
  boost::asio::awaitable<bool> drop_finalizer(const kinds::ResourceInfo& info,
                                              const boost::json::object& obj,
                                              std::string_view finalizer);
  // Removes the references to owners in `uids`, or with `unblock` only sets their
  // blockOwnerDeletion to false.
  boost::asio::awaitable<bool> edit_references(const Dependent& dependent,
                                               std::set<std::string> uids, bool unblock);
  std::shared_ptr<const kinds::ResourceInfo> owner_info(const OwnerRef& ref) const;

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::optional<boost::asio::strand<boost::asio::any_io_executor>> strand_;
  std::atomic<bool> stopped_{false};

  // Strand-only state.
  std::set<std::string> watched_;                        // cache prefixes being watched
  std::map<std::string, std::int64_t> seen_;  // prefix -> version its events are indexed up to
  std::map<std::string, Dependent> dependents_;          // key -> object with owners
  std::map<std::string, std::set<std::string>> by_owner_uid_;  // owner uid -> dependent keys
  std::map<std::string, std::set<std::string>> by_owner_key_;  // owner key -> dependent keys
  std::map<std::string, std::set<std::string>> blockers_;  // owner uid -> keys blocking it
  gc::WaitGraph waits_;  // owner uid -> uids blocking it while deleting in foreground themselves
  // Owners seen being deleted with the orphan finalizer, and when: a dependent whose index entry
  // arrives after its owner went (another cache's stream lagging) is orphaned, not deleted.
  // The revision is the orphaning's: only dependents from before it were the owner's to orphan.
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, std::int64_t>> orphaned_;
  // Owners deleting in foreground, by key: the revision whose dependents were all queued (once
  // per change of the owner, not on each of its dependents' deletions).
  std::map<std::string, std::int64_t> fanned_out_;
  // Owners orphaning, by key: the last dependent key done (each turn does a batch).
  std::map<std::string, std::string> orphan_cursor_;
  gc::FairQueue queue_;
  // Items that failed, to be queued again at a time; their failures so far, by key.
  std::multimap<std::chrono::steady_clock::time_point, gc::FairQueue::Item> retries_;
  std::map<std::string, int> failures_;
  // Items being processed, by key, and items of those keys queued meanwhile (they wait for the
  // first to finish, then queue again).
  std::set<std::string> in_flight_;
  std::map<std::string, gc::FairQueue::Item> again_;
  std::unique_ptr<boost::asio::steady_timer> wake_;  // the dispatcher's only
};

}  // namespace kwatch::controllers
