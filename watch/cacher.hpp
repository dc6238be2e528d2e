// The cacher of one resource: a reflector that list-watches storage into a WatchCache, a
// dispatcher that fans each event out to the interested cache watchers, and reads served from
// memory.
//
// Ownership: shared; the reflector and the bookmark ticker hold it alive while the io_context
// runs. Strands: the reflector (and with it the dispatcher) and the ticker run on the cacher's
// own strand. `watch`, `list`, `get` and `wait_until_fresh` may be called from any executor;
// they synchronize with the dispatcher through a mutex, so a new watcher never misses or repeats
// an event. Cancellation: `stop()` ends the reflector and every watcher.
#pragma once

#include "storage/storage.hpp"
#include "watch/object_codec.hpp"
#include "watch/watch_cache.hpp"
#include "watch/watch_types.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::watch {

struct CacherOptions {
  std::string resource;      // "pods": for logs and metrics
  std::string prefix;        // "/registry/pods/"
  std::string kind;          // "Pod": bookmarks
  std::string api_version;   // "v1": bookmarks
  std::string trigger_field;  // "spec.nodeName": indexed for lists and dispatch ("" for none)
  std::size_t lower_capacity = 100;
  std::size_t upper_capacity = 100 * 1024;
  std::chrono::milliseconds bookmark_interval{60'000};
  // Events queued per watcher; a watcher whose queue is full is parked and later reads on from
  // the event window. Frames hold shared references to cached objects: pointers, not copies.
  std::size_t watcher_buffer = 100;
  std::chrono::milliseconds freshness_timeout{3'000};
  FieldsFn fields;
};

struct WatchRequest {
  std::string prefix;  // the resource prefix, or the namespace's prefix below it
  std::shared_ptr<const Predicate> predicate;  // null: everything
  std::optional<std::int64_t> resource_version;  // nullopt: unset
  bool send_initial_events = false;  // also implied by an unset or "0" resource version
  bool allow_bookmarks = false;
  // A watch of kwatch's own controllers: not counted as a client's watch in `watchers`.
  bool internal = false;
  std::chrono::steady_clock::time_point deadline;
};

class Cacher;
struct Watcher;

// One client's watch. Owned by the transport; destroying it unregisters the watcher.
// Strand: the transport's; one `next()` at a time.
class WatchSession {
 public:
  ~WatchSession();
  WatchSession(const WatchSession&) = delete;
  WatchSession& operator=(const WatchSession&) = delete;

  // The next frames to write, oldest first (initial events, then live ones, batched). Completes
  // with `asio::error::eof` at the deadline, and with `Errc::unavailable` when the cacher ended
  // the watch (its next event left the window while it was parked, re-list, shutdown).
  boost::asio::awaitable<base::Result<std::vector<WatchFrame>>> next();
  // The same, appending to `out` (cleared first) so a transport can reuse one vector.
  boost::asio::awaitable<base::Result<void>> next(std::vector<WatchFrame>& out);
  // What next() gives without waiting: frames in `out` (cleared first), or an empty `out` when
  // there are none yet, or the end as next() reports it. With when_ready(), for a transport
  // that serves many watches from one task (HTTP/2): an idle watch then holds no coroutine.
  base::Result<void> take(std::vector<WatchFrame>& out);
  // Calls `ready` once when take() has something to give (frames, or the end: the deadline,
  // the watch ended), on the thread that brings it (the dispatcher's, a timer's), or at once if
  // it is already there: `ready` must be quick and thread-safe, and post to the transport's
  // strand. Only after a take() that gave nothing; at most one pending.
  void when_ready(std::function<void()> ready);
  // Ends the watch from the transport's side (the client went away); a pending or later
  // `next()` completes with `Errc::unavailable`. Thread-safe.
  void stop();

  // Pre-stream error (e.g. 410 after acceptance) to send as an ERROR event, if any.
  const ObjectPtr& error() const { return error_; }
  // The version the watch started from: every event up to it is in the initial state (or
  // before it); the frames after that are later events.
  std::int64_t start_resource_version() const;

 private:
  friend class Cacher;
  WatchSession() = default;
  std::weak_ptr<Cacher> cacher_;
  std::shared_ptr<Watcher> watcher_;
  std::vector<WatchFrame> initial_;
  std::size_t initial_sent_ = 0;
  std::size_t taken_ = 0;  // frames of the last batch that came from the queue
  bool ready_armed_ = false;  // a when_ready() call may be pending on the queue
  ObjectPtr error_;
};

struct CacherCounters {
  std::atomic<std::uint64_t> events_dispatched{0};   // frames handed to watchers
  std::atomic<std::uint64_t> watchers_terminated{0};  // ended: next event left the window
  std::atomic<std::uint64_t> watchers_parked{0};  // times a full watcher was parked
  // Delivery progress: frames put into watchers' queues, and those of them written by their
  // transports or given up (the watcher parked or ended). Frames read from the window by a
  // parked watcher are in neither.
  std::atomic<std::uint64_t> frames_handed{0};
  std::atomic<std::uint64_t> frames_done{0};
  std::atomic<std::uint64_t> relists{0};
  std::atomic<std::int64_t> watchers{0};  // clients' watches (internal ones not counted)
};

class Cacher : public std::enable_shared_from_this<Cacher> {
 public:
  Cacher(boost::asio::any_io_executor executor, std::shared_ptr<storage::Storage> storage,
         CacherOptions options);
  ~Cacher();

  void start();
  void stop();
  // Graceful shutdown: ends every client's watch (its stream ends cleanly; the client re-watches
  // elsewhere from its last resourceVersion) and refuses new ones with `unavailable`; kwatch's
  // own (internal) watches go on. A watch that asked for bookmarks and has every event so far
  // gets a last bookmark at the cache's version first. Thread-safe.
  void end_client_watches();
  bool ready() const { return ready_.load(); }
  const CacherOptions& options() const { return options_; }
  const CacherCounters& counters() const { return counters_; }
  // The objects cached now and their size in all (API Priority and Fairness's list estimate).
  std::int64_t object_count() const { return cache_.object_count(); }
  std::int64_t object_bytes() const { return cache_.object_bytes(); }
  CacheStats stats() const { return cache_.stats(); }
  std::int64_t window_start() const { return cache_.window_start(); }
  std::int64_t resource_version() const { return cache_.resource_version(); }
  // The version of the last event applied: unlike resource_version(), never moved by progress.
  std::int64_t applied_resource_version() const { return cache_.applied_resource_version(); }
  // False on storage whose progress may run ahead of events (etcd < 3.4.25): reads that must be
  // at least as new as a version then go to storage.
  bool progress_ordered() const { return progress_ordered_.load(); }

  // Errors: too_many_requests (not ready), timeout (version ahead after the wait), gone (older
  // than the window; returned as a session whose error() is set, since kube reports it inside
  // the stream).
  boost::asio::awaitable<base::Result<std::unique_ptr<WatchSession>>> watch(WatchRequest request);
  // Waits until the cache has reached `rv` (and asks storage for progress). `timeout` if not
  // within the freshness timeout, `too_many_requests` if not ready.
  boost::asio::awaitable<base::Result<void>> wait_until_fresh(std::int64_t rv);
  // Waits until the cache is at least as fresh as storage now (consistent read).
  boost::asio::awaitable<base::Result<void>> wait_until_consistent();
  CacheList list(const std::string& prefix, const std::string& start_key, std::size_t limit,
                 const Predicate* predicate) const {
    return cache_.list(prefix, start_key, limit, predicate);
  }
  ObjectPtr get(const std::string& key) const { return cache_.get(key); }

  // Paged lists, as kube-apiserver's list snapshots: after a first page at version `rv` that
  // has more, keep_list_snapshot keeps the state under `prefix` at `rv` (when the cache is
  // still there) for a while, and the pages after it (continue tokens at `rv`) come from it.
  // At most kListSnapshots per resource, for kListSnapshotLife; nullopt when there is none
  // (storage then serves the page at its revision).
  static constexpr std::size_t kListSnapshots = 8;
  static constexpr std::chrono::seconds kListSnapshotLife{120};
  void keep_list_snapshot(const std::string& prefix, std::int64_t rv);
  std::optional<CacheList> list_snapshot(std::int64_t rv, const std::string& prefix,
                                         const std::string& start_key, std::size_t limit,
                                         const Predicate* predicate);

  // Keeps `hold` (a write's fan-out seats) until delivery has done as many frames as had been
  // handed to watchers once the event of revision `rv` was dispatched. Thread-safe.
  void hold_until_delivered(std::int64_t rv, std::shared_ptr<void> hold);

 private:
  friend class WatchSession;

  boost::asio::awaitable<void> run_reflector();
  boost::asio::awaitable<void> run_ticker();
  // Applies one storage event and offers it to watchers; a watcher whose queue is full is
  // parked at that event instead of queueing it.
  void process(const storage::Event& event);
  // The listed values as cached objects, those matching `predicate` (null: all); values that
  // cannot be decoded are skipped (and logged with `warn`).
  std::vector<ObjectPtr> decode_listed(const storage::ListResult& listed, const Predicate* predicate,
                                       bool warn) const;
  // Storage's current state under `prefix`, every object decoded, from a list shared with the
  // watches that asked for it meanwhile (see Impl::ListBatch).
  struct StoredState;
  boost::asio::awaitable<base::Result<std::shared_ptr<const StoredState>>> list_storage(
      std::string prefix);
  // Ends parked watchers whose next event has left the window (their clients re-list).
  void end_lapsed_watchers();
  // The watch deadlines the cacher keeps (those of watches already gone included until swept).
  // Tests.
 public:
  std::size_t deadline_entries() const;

 private:
  // Marks the watchers whose deadline has come expired and wakes them; arm_deadlines (on the
  // strand) sets the one deadline timer for the earliest bucket.
  void expire_watchers(std::chrono::steady_clock::time_point now);
  void arm_deadlines();
  // Frames for a parked watcher from the event window, at most `limit`; unparks it once it has
  // caught up (then `out` may be empty). `unavailable` when the watch ended meanwhile or its
  // next event has left the window (the watcher is ended).
  base::Result<void> catch_up(const std::shared_ptr<Watcher>& w, std::vector<WatchFrame>& out,
                                 std::size_t limit);
  // A session wrote `n` frames it had taken from its queue.
  void frames_written(Watcher& w, std::uint64_t n);
  // The frames still queued for a watcher that parks or goes count as done.
  void forgive(Watcher& w);
  void release_delivered();
  // Gives the holds of writes up to `rv` their ticket (frames handed so far); called by the
  // dispatcher after each event.
  void ticket_dispatched(std::int64_t rv);
  void register_watcher(const std::shared_ptr<Watcher>& w);
  void unregister_watcher(const Watcher& w);
  void end_watcher(const std::shared_ptr<Watcher>& w, bool slow);
  void end_all_watchers();
  void end_watchers(bool clients_only);
  // Every registered watcher (kwatch's own left out when `clients_only`); the caller holds the
  // dispatch mutex.
  std::vector<std::shared_ptr<Watcher>> registered_watchers(bool clients_only) const;
  void notify_waiters();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<storage::Storage> storage_;
  CacherOptions options_;
  WatchCache cache_;
  CacherCounters counters_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> clients_closed_{false};  // end_client_watches
  std::atomic<bool> progress_ordered_{true};  // the storage watch's progress_is_ordered()
};

}  // namespace kwatch::watch
