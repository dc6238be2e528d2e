// client-go's SharedInformer: one Reflector and Store shared by several handlers, each fed
// through a queue of its own on a thread of its own, so that a slow handler never holds up the
// reflector or the other handlers.
//
// Each handler gets every change in the order the store applied it (adds, updates, deletes; no
// merging) while its queue has room. A queue is bounded (`capacity` notifications): when it is
// full, further changes are kept as "the latest change per object" instead (memory bounded by
// the number of objects), and once the queue has drained the handler gets those, one per object,
// with the object as it is now: the one place where deltas are merged, counted in `overflows`.
// After a re-list, objects that vanished come as DELETED with their last known state (client-go's
// DeletedFinalStateUnknown). With a resync period every object is delivered again as MODIFIED
// with `previous` equal to it, as client-go's resync does.
//
// Thread-safety: `run` on one executor; the rest from any thread; handlers on their own threads.
#pragma once

#include "client/reflector.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kwatch::client {

struct HandlerStats {
  std::uint64_t delivered = 0;  // notifications the handler has returned from
  std::size_t backlog = 0;      // queued now, plus objects waiting after an overflow
  std::size_t max_backlog = 0;
  std::uint64_t overflows = 0;  // changes that found the queue full (merged per object)
};

class Informer {
 public:
  using Handler = Reflector::Handler;

  Informer(std::shared_ptr<HttpClient> client, ReflectorOptions options,
           std::chrono::milliseconds resync_period = std::chrono::milliseconds(0),
           Store::Representation representation = Store::Representation::parsed);
  ~Informer();

  // Before run(). Returns the handler's index (for stats()).
  std::size_t add_handler(Handler handler, std::size_t capacity = 1024);

  // Lists and watches until stop(); handlers are called from their own threads meanwhile.
  boost::asio::awaitable<void> run();
  // Stops the reflector and the handlers' threads (what is queued is not delivered).
  void stop();

  // The mirror: get, list, by index (add indexes to it before run()).
  const std::shared_ptr<Store>& store() const { return store_; }
  bool has_synced() const { return reflector_->has_synced(); }
  // Blocks the calling thread until the first list is in the store, or the timeout.
  bool wait_for_cache_sync(std::chrono::milliseconds timeout) const;
  HandlerStats stats(std::size_t handler) const;
  const ReflectorCounters& counters() const { return reflector_->counters(); }

 private:
  struct Notification {
    EventType type;
    Store::Object object;
    Store::Object previous;
  };
  struct Listener {
    Handler handler;
    std::size_t capacity;
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Notification> queue;
    std::size_t in_hand = 0;  // taken from the queue by the handler's thread, not yet delivered
    bool idle = false;        // the handler's thread waits for a notification
    std::map<std::string, Notification> overflowed;  // key -> latest change while full
    HandlerStats stats;
    std::thread thread;
  };

  void notify(EventType type, const Store::Object& object, const Store::Object& previous);
  void serve(Listener& listener);
  boost::asio::awaitable<void> resync_loop();

  std::shared_ptr<HttpClient> client_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Reflector> reflector_;
  std::chrono::milliseconds resync_period_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> resyncing_{false};
};

}  // namespace kwatch::client
