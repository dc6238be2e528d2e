#include "watch/cacher.hpp"

#include "base/string_map.hpp"
#include "watch/watcher_queue.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kwatch::watch {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
using base::Errc;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

enum class Bucket { all, by_namespace, by_trigger };

// One registered watcher. Guarded by the cacher's dispatch mutex, except its atomics and its
// queue (which has its own lock).
struct Watcher {
  explicit Watcher(std::size_t capacity) : queue(capacity) {}

  std::uint64_t id = 0;
  std::string prefix;
  std::shared_ptr<const Predicate> predicate;
  bool bookmarks = false;
  bool internal = false;  // not counted in CacherCounters::watchers
  Clock::time_point next_bookmark = Clock::time_point::max();
  Clock::time_point deadline_at;
  Bucket bucket = Bucket::all;
  // Events at or below this were in the watcher's initial state or before its start: a late
  // event (storage progress ran ahead of it) must not reach the watcher twice or out of order.
  std::int64_t start_rv = 0;
  std::string bucket_key;
  // Parked: its queue was full when event `resume_from` was offered. The dispatcher skips it;
  // its session reads on from the event window (that event first) once the queue is drained,
  // and unparks it when it has caught up. A parked watcher holds no events of its own.
  // Written only under the dispatch mutex; read without it by catch_up's fast path.
  std::atomic<bool> parked{false};
  std::atomic<std::uint64_t> resume_from{0};  // written by the dispatcher, then by the session
  std::atomic<std::uint64_t> owed{0};  // frames in the queue (or being written) not yet done
  std::atomic<bool> ended{false};
  // Shutdown: unregistered after a last bookmark; the session writes what its queue holds,
  // then ends the stream.
  std::atomic<bool> draining{false};
  // Past its deadline: set by the cacher's deadline timer, which then wakes the session.
  std::atomic<bool> expired{false};
  WatcherQueue queue;

  bool wants(const ObjectPtr& o) const {
    return o && o->key.compare(0, prefix.size(), prefix) == 0 &&
           (!predicate || predicate->matches(*o));
  }
};

namespace {

using WatcherMap = std::unordered_map<std::uint64_t, std::shared_ptr<Watcher>>;

// The state before a modification, re-stamped with the modification's revision.
ObjectPtr restamped_prev(const CachedEvent& ev) {
  if (auto done = ev.restamped_prev.load()) return done;
  auto made = decode_object(std::string(ev.prev->key), ev.prev->json, ev.resource_version, {});
  ObjectPtr out = made ? std::move(*made) : ev.prev;  // the JSON is the cache's own: it parses
  ev.restamped_prev.store(out);
  return out;
}

// What one watcher receives for an event, with the ADDED/DELETED transitions of objects entering
// and leaving its selector.
std::optional<WatchFrame> frame_for(const Watcher& w, const CachedEvent& ev) {
  switch (ev.type) {
    case EventType::added:
      if (w.wants(ev.object)) return WatchFrame{EventType::added, ev.object};
      break;
    case EventType::modified: {
      const bool now = w.wants(ev.object);
      const bool before = w.wants(ev.prev);
      if (now && before) return WatchFrame{EventType::modified, ev.object};
      if (now) return WatchFrame{EventType::added, ev.object};
      if (before) return WatchFrame{EventType::deleted, restamped_prev(ev)};
      break;
    }
    case EventType::deleted:
      if (w.wants(ev.object)) return WatchFrame{EventType::deleted, ev.object};
      break;
    default:
      break;
  }
  return std::nullopt;
}

void log_failure(std::exception_ptr e, const char* what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{} failed: {}", what, ex.what());
  }
}

}  // namespace

struct Cacher::StoredState {
  std::vector<ObjectPtr> objects;  // all of them: each watch applies its own predicate
  std::int64_t revision = 0;
};

struct Cacher::Impl {
  explicit Impl(asio::any_io_executor ex) : strand(asio::make_strand(ex)) {}

  asio::strand<asio::any_io_executor> strand;
  asio::cancellation_signal reflector_cancel;
  std::mutex dispatch_mutex;
  WatcherMap all;
  base::StringMap<WatcherMap> by_namespace;
  base::StringMap<WatcherMap> by_trigger;
  WatcherMap with_bookmarks;
  std::uint64_t next_id = 1;

  // Reflector's storage watch, for progress requests; touched on the strand only.
  storage::WatchStream* stream = nullptr;

  struct Waiter {
    std::int64_t rv;
    std::shared_ptr<asio::steady_timer> timer;
  };
  std::mutex waiters_mutex;
  std::vector<Waiter> waiters;

  // Watch deadlines in 10 ms buckets, and one timer for the earliest: no timer per watcher.
  // Weak: a watcher gone before its deadline leaves only its control block here until then.
  // Entries of watchers already gone are swept out once they are half of them (a client that
  // opens and drops long watches in a loop must not grow this until the deadlines come).
  std::mutex deadlines_mutex;
  std::map<Clock::time_point, std::vector<std::weak_ptr<Watcher>>> deadlines;
  std::size_t deadline_entries = 0;         // under deadlines_mutex
  std::atomic<std::size_t> gone_entries{0};  // watchers unregistered since the last sweep
  Clock::duration tick{std::chrono::milliseconds(250)};
  // On the strand: the timer and the bucket it waits for (none: max).
  asio::steady_timer deadline_timer{strand};
  Clock::time_point deadline_armed = Clock::time_point::max();

  // Storage lists taken for watches with no resourceVersion on storage whose progress is not
  // ordered, shared by the watches of one prefix: a watch joins the batch whose list has not
  // been sent yet (so its state is no older than its request), and at most one list per prefix
  // is in flight. A thousand watches arriving at once cost two lists, not a thousand.
  struct ListBatch {
    bool done = false;
    base::Result<std::shared_ptr<const StoredState>> result{Errc::unavailable};
    std::vector<std::shared_ptr<asio::steady_timer>> waiters;
  };
  struct PrefixLists {
    std::shared_ptr<ListBatch> in_flight;
    std::shared_ptr<ListBatch> next;  // gathering watches until `in_flight` is done
  };
  std::mutex lists_mutex;
  std::map<std::string, PrefixLists, std::less<>> lists;

  // Paged lists' states, newest last (keep_list_snapshot).
  struct ListSnapshot {
    std::string prefix;
    std::int64_t rv = 0;
    std::vector<ObjectPtr> objects;
    Clock::time_point taken;
  };
  std::mutex snapshots_mutex;
  std::deque<std::shared_ptr<const ListSnapshot>> snapshots;

  // Watchers parked since the last check for those whose next event has left the window (may
  // also hold resumed or ended ones until then). Guarded by dispatch_mutex.
  std::vector<std::shared_ptr<Watcher>> parked;

  // Writes' fan-out holds: by revision until their event is dispatched, then by ticket until
  // frames_done reaches it. Guarded by holds_mutex (never held while taking dispatch_mutex).
  std::mutex holds_mutex;
  std::atomic<std::int64_t> dispatched_rv{0};  // frames_handed includes this revision's frames
  std::multimap<std::int64_t, std::shared_ptr<void>> awaiting_dispatch;
  std::multimap<std::uint64_t, std::shared_ptr<void>> awaiting_delivery;
  std::atomic<std::uint64_t> next_release{UINT64_MAX};
};

Cacher::Cacher(asio::any_io_executor executor, std::shared_ptr<storage::Storage> storage,
               CacherOptions options)
    : impl_(std::make_unique<Impl>(executor)),
      storage_(std::move(storage)),
      options_(std::move(options)),
      cache_(options_.lower_capacity, options_.upper_capacity, options_.trigger_field) {
  // Bookmarks a few times within their interval; watch deadlines within a tick.
  impl_->tick = std::max<std::chrono::milliseconds>(
      std::min<std::chrono::milliseconds>(options_.bookmark_interval / 4,
                                          std::chrono::milliseconds(250)),
      std::chrono::milliseconds(10));
}

Cacher::~Cacher() = default;

void Cacher::start() {
  auto self = shared_from_this();
  asio::co_spawn(impl_->strand, run_reflector(),
                 asio::bind_cancellation_slot(impl_->reflector_cancel.slot(), [](std::exception_ptr e) {
                   log_failure(e, "reflector");
                 }));
  asio::co_spawn(impl_->strand, run_ticker(),
                 [](std::exception_ptr e) { log_failure(e, "watch cache ticker"); });
}

void Cacher::stop() {
  asio::post(impl_->strand, [self = shared_from_this()] {
    self->stopped_ = true;
    self->impl_->deadline_timer.cancel();
    self->impl_->reflector_cancel.emit(asio::cancellation_type::terminal);
    self->end_all_watchers();
  });
}

// ---- Reflector ----

std::vector<ObjectPtr> Cacher::decode_listed(const storage::ListResult& listed,
                                             const Predicate* predicate, bool warn) const {
  std::vector<ObjectPtr> objects;
  objects.reserve(listed.kvs.size());
  for (const auto& kv : listed.kvs) {
    auto o = decode_object(kv.key, kv.value, kv.mod_revision, options_.fields);
    if (!o) {
      if (warn) {
        spdlog::warn("watch cache {}: skipping {}: it cannot be decoded", options_.resource, kv.key);
      }
      continue;
    }
    if (predicate == nullptr || predicate->matches(**o)) objects.push_back(std::move(*o));
  }
  return objects;
}

namespace {

// Waits `backoff`, then doubles it (at most `cap`). Cancelled with the timer.
asio::awaitable<void> back_off(asio::steady_timer& timer, std::chrono::milliseconds& backoff,
                               std::chrono::milliseconds cap = std::chrono::milliseconds(5000)) {
  timer.expires_after(std::min(backoff, cap));
  co_await timer.async_wait(use_tuple);
  backoff = std::min(backoff * 2, cap);
}

// Between watches of unreachable storage: each attempt already waits for storage a while
// (EtcdStorage tries for seconds before saying `unavailable`), and a short pause here means
// watchers get events soon after storage is back.
constexpr std::chrono::milliseconds kResumeBackoffCap(1000);

}  // namespace

asio::awaitable<void> Cacher::run_reflector() {
  auto self = shared_from_this();
  asio::steady_timer backoff_timer(impl_->strand);
  std::chrono::milliseconds backoff(100);
  while (!stopped_) {
    storage::ListOptions options;
    options.prefix = options_.prefix;
    auto listed = co_await storage_->list(options);
    if (listed) {
      std::vector<ObjectPtr> objects = decode_listed(*listed, nullptr, /*warn=*/true);
      {
        std::lock_guard lock(impl_->dispatch_mutex);
        cache_.replace(std::move(objects), listed->revision);
        ticket_dispatched(listed->revision);
      }
      std::int64_t from = listed->revision + 1;
      // Watches storage from `from`. While storage is only unreachable (its watch ended or
      // cannot be started with `unavailable`), the cache keeps its state, window and watchers and
      // watches again from where it is, as etcd's own client does: nothing is missed, and no
      // client has to re-list after an etcd outage. Anything else (`gone`: compacted while
      // away) re-lists.
      for (;;) {
        auto stream = co_await storage_->watch(options_.prefix, from,
                                               // The cache holds every previous state itself.
                                               storage::PrevKv::omit);
        if (!stream) {
          if (ready_ && !stopped_ && stream.error() == base::Errc::unavailable) {
            co_await back_off(backoff_timer, backoff, kResumeBackoffCap);
            if (!stopped_) continue;
          }
          break;
        }
        if (!ready_) {
          ready_ = true;
          notify_waiters();
          spdlog::info("watch cache {}: ready at revision {} with {} objects", options_.resource,
                       listed->revision, cache_.stats().objects);
        } else {
          spdlog::info("watch cache {}: watching storage again from revision {}",
                       options_.resource, from);
        }
        const auto watch_started = Clock::now();
        impl_->stream = stream->get();
        progress_ordered_ = (*stream)->progress_is_ordered();
        boost::system::error_code ended;
        for (;;) {
          auto batch = co_await (*stream)->next();
          if (!batch) {
            ended = batch.error();
            break;
          }
          for (const auto& event : batch->events) process(event);
          end_lapsed_watchers();
          cache_.advance(batch->revision);
          notify_waiters();
        }
        impl_->stream = nullptr;
        if (Clock::now() - watch_started > std::chrono::seconds(30)) {
          backoff = std::chrono::milliseconds(100);
        }
        if (stopped_) break;
        if (ended != base::Errc::unavailable) {
          spdlog::warn("watch cache {}: storage watch ended ({}); re-listing", options_.resource,
                       ended.message());
          break;
        }
        from = cache_.resource_version() + 1;
        spdlog::warn("watch cache {}: storage watch interrupted ({}); resuming from revision {}",
                     options_.resource, ended.message(), from);
        co_await back_off(backoff_timer, backoff, kResumeBackoffCap);
        if (stopped_) break;
      }
    }
    if (stopped_) break;
    ready_ = false;
    ++counters_.relists;
    // Clients re-list and re-watch: better than serving them a cache that may have gaps.
    end_all_watchers();
    co_await back_off(backoff_timer, backoff);
  }
}

void Cacher::process(const storage::Event& event) {
  const auto rv = event.kv.mod_revision;
  const auto now = Clock::now();
  EventPtr cached;
  ObjectPtr object, prev;
  bool deletion = event.type != storage::EventType::put;
  if (!deletion) {
    auto o = decode_object(event.kv.key, event.kv.value, rv, options_.fields);
    if (o) {
      object = std::move(*o);
      // Events apply in revision order, so the cache holds exactly the state before this one.
      prev = cache_.get(event.kv.key);
    } else {
      // A value written around kwatch that it cannot serve: rather than keep serving the
      // state before it as current, the object leaves the cache (watchers see DELETED).
      spdlog::warn("watch cache {}: {} at revision {} cannot be decoded; dropping it from the "
                   "cache", options_.resource, event.kv.key, rv);
      deletion = true;
    }
  }
  if (deletion) {
    base::Result<ObjectPtr> last = Errc::not_found;
    if (event.prev_kv) {
      last = decode_object(event.kv.key, event.prev_kv->value, rv, options_.fields);
    } else if (auto old = cache_.get(event.kv.key)) {
      last = decode_object(event.kv.key, old->json, rv, options_.fields);
    }
    if (!last) {
      cache_.advance(rv);
      return;
    }
    object = std::move(*last);
  }

  std::unique_lock lock(impl_->dispatch_mutex);
  cached = deletion ? cache_.apply_delete(object, now) : cache_.apply_put(object, prev, now);
  std::uint64_t delivered = 0;
  auto offer = [&](const WatcherMap& watchers) {
    for (const auto& [id, w] : watchers) {
      if (w->parked || w->ended || cached->resource_version <= w->start_rv) continue;
      auto frame = frame_for(*w, *cached);
      if (!frame) continue;
      // Owed before it is sent: the session may write it before this loop ends.
      w->owed.fetch_add(1, std::memory_order_relaxed);
      if (w->queue.try_push(std::move(*frame))) {
        ++delivered;
      } else {
        w->owed.fetch_sub(1, std::memory_order_relaxed);
        w->parked = true;
        w->resume_from = cached->sequence;
        impl_->parked.push_back(w);
        ++counters_.watchers_parked;
        forgive(*w);
      }
    }
  };
  offer(impl_->all);
  if (auto it = impl_->by_namespace.find(cached->object->ns); it != impl_->by_namespace.end()) {
    offer(it->second);
  }
  if (!options_.trigger_field.empty()) {
    const std::string_view* now_value = cached->object->field(options_.trigger_field);
    const std::string_view* old_value =
        cached->prev ? cached->prev->field(options_.trigger_field) : nullptr;
    if (now_value != nullptr) {
      if (auto it = impl_->by_trigger.find(*now_value); it != impl_->by_trigger.end()) {
        offer(it->second);
      }
    }
    if (old_value != nullptr && (now_value == nullptr || *old_value != *now_value)) {
      if (auto it = impl_->by_trigger.find(*old_value); it != impl_->by_trigger.end()) {
        offer(it->second);
      }
    }
  }
  counters_.events_dispatched += delivered;
  counters_.frames_handed += delivered;
  ticket_dispatched(cached->resource_version);
}

void Cacher::ticket_dispatched(std::int64_t rv) {
  {
    std::lock_guard lock(impl_->holds_mutex);
    impl_->dispatched_rv = rv;
    auto& waiting = impl_->awaiting_dispatch;
    if (waiting.empty() || waiting.begin()->first > rv) return;
    const std::uint64_t ticket = counters_.frames_handed.load();
    auto end = waiting.upper_bound(rv);
    for (auto it = waiting.begin(); it != end; ++it) {
      impl_->awaiting_delivery.emplace(ticket, std::move(it->second));
    }
    waiting.erase(waiting.begin(), end);
    impl_->next_release = impl_->awaiting_delivery.begin()->first;
  }
  release_delivered();
}

void Cacher::hold_until_delivered(std::int64_t rv, std::shared_ptr<void> hold) {
  if (!hold) return;
  {
    // The dispatcher stores dispatched_rv under this lock after counting the event's frames.
    std::lock_guard lock(impl_->holds_mutex);
    if (rv > impl_->dispatched_rv.load()) {
      impl_->awaiting_dispatch.emplace(rv, std::move(hold));
      return;
    }
    impl_->awaiting_delivery.emplace(counters_.frames_handed.load(), std::move(hold));
    impl_->next_release = impl_->awaiting_delivery.begin()->first;
  }
  release_delivered();
}

void Cacher::release_delivered() {
  const std::uint64_t done = counters_.frames_done.load();
  if (done < impl_->next_release.load()) return;
  std::vector<std::shared_ptr<void>> released;  // let go outside the lock: it may admit a write
  {
    std::lock_guard lock(impl_->holds_mutex);
    auto& holds = impl_->awaiting_delivery;
    auto end = holds.upper_bound(done);
    for (auto it = holds.begin(); it != end; ++it) released.push_back(std::move(it->second));
    holds.erase(holds.begin(), end);
    impl_->next_release = holds.empty() ? UINT64_MAX : holds.begin()->first;
  }
}

void Cacher::frames_written(Watcher& w, std::uint64_t n) {
  std::uint64_t owed = w.owed.load();
  std::uint64_t k = 0;
  do {
    k = std::min(owed, n);
  } while (k > 0 && !w.owed.compare_exchange_weak(owed, owed - k));
  if (k == 0) return;
  counters_.frames_done += k;
  release_delivered();
}

void Cacher::forgive(Watcher& w) {
  if (const auto owed = w.owed.exchange(0); owed > 0) {
    counters_.frames_done += owed;
    release_delivered();
  }
}

void Cacher::end_lapsed_watchers() {
  std::vector<std::shared_ptr<Watcher>> lapsed;
  {
    std::lock_guard lock(impl_->dispatch_mutex);
    if (impl_->parked.empty()) return;
    const std::uint64_t first = cache_.first_sequence();
    std::erase_if(impl_->parked, [&](const std::shared_ptr<Watcher>& w) {
      if (!w->parked || w->ended) return true;
      if (w->resume_from.load() >= first) return false;
      lapsed.push_back(w);
      return true;
    });
  }
  for (auto& w : lapsed) end_watcher(w, true);
}

base::Result<void> Cacher::catch_up(const std::shared_ptr<Watcher>& w,
                                       std::vector<WatchFrame>& out, std::size_t limit) {
  // Nearly always not parked, and then nothing is read from the window: that is known without
  // the dispatch mutex, which the dispatcher holds while it offers an event to every watcher
  // (taking it here, after each batch a watch writes, made the watches' threads queue behind
  // the dispatcher). Only the dispatcher parks a watcher, and only once its queue is full,
  // so a park not seen here leaves frames for the receive that follows, and the next call
  // sees it.
  if (w->ended.load()) return Errc::unavailable;
  if (!w->parked.load()) return {};
  {
    std::lock_guard lock(impl_->dispatch_mutex);
    if (w->ended) return Errc::unavailable;
    if (!w->parked) return {};
  }
  // Events are read under the cache's shared lock only; the dispatch mutex is taken to unpark,
  // when no event can be recorded between the last read and the dispatcher's next offer.
  constexpr std::size_t kScan = 4096;  // events examined per read, for a selective watcher
  std::uint64_t from = w->resume_from.load();
  std::vector<EventPtr> events;
  std::uint64_t delivered = 0;
  while (out.size() < limit) {
    events.clear();
    bool held = cache_.events_from(from, kScan, events);
    if (held && events.empty()) {
      std::unique_lock lock(impl_->dispatch_mutex);
      if (w->ended) return Errc::unavailable;
      held = cache_.events_from(from, kScan, events);
      if (held && events.empty()) {
        w->parked = false;
        std::erase(impl_->parked, w);
        lock.unlock();
        counters_.events_dispatched += delivered;
        return {};
      }
    }
    if (!held) {
      end_watcher(w, true);
      return Errc::unavailable;
    }
    for (const auto& ev : events) {
      from = ev->sequence + 1;
      if (ev->resource_version <= w->start_rv) continue;
      if (auto frame = frame_for(*w, *ev)) {
        out.push_back(std::move(*frame));
        ++delivered;
        if (out.size() >= limit) break;
      }
    }
    w->resume_from = from;
    if (!out.empty()) break;
  }
  counters_.events_dispatched += delivered;
  return {};
}

// ---- Ticker: bookmarks and progress ----

asio::awaitable<void> Cacher::run_ticker() {
  auto self = shared_from_this();
  asio::steady_timer timer(impl_->strand);
  const auto tick = impl_->tick;
  auto last_progress = Clock::now();
  while (!stopped_) {
    timer.expires_after(tick);
    co_await timer.async_wait(use_tuple);
    if (stopped_) break;
    const auto now = Clock::now();
    // Keeps the cache's version (and so bookmarks) moving while this resource is quiet.
    if (impl_->stream != nullptr && now - last_progress >= std::chrono::seconds(1)) {
      impl_->stream->request_progress();
      last_progress = now;
    }
    std::lock_guard lock(impl_->dispatch_mutex);
    if (impl_->with_bookmarks.empty()) continue;
    ObjectPtr bookmark;
    for (const auto& [id, w] : impl_->with_bookmarks) {
      if (w->ended || w->parked || now < w->next_bookmark) continue;
      if (!bookmark) {
        bookmark = bookmark_object(options_.kind, options_.api_version, cache_.resource_version(),
                                   false);
      }
      if (!w->queue.try_push(WatchFrame{EventType::bookmark, bookmark})) {
        continue;  // full: the next tick tries again
      }
      const auto pre_deadline = w->deadline_at - std::chrono::seconds(2);
      w->next_bookmark = now >= pre_deadline ? Clock::time_point::max()
                                             : std::min(now + options_.bookmark_interval, pre_deadline);
    }
  }
}

// ---- Watchers ----

std::size_t Cacher::deadline_entries() const {
  std::lock_guard lock(impl_->deadlines_mutex);
  return impl_->deadline_entries;
}

void Cacher::arm_deadlines() {
  Clock::time_point earliest;
  {
    std::lock_guard lock(impl_->deadlines_mutex);
    if (impl_->deadlines.empty()) return;
    earliest = impl_->deadlines.begin()->first;
  }
  if (stopped_ || impl_->deadline_armed <= earliest) return;
  impl_->deadline_armed = earliest;
  // A wait for a later bucket is cancelled by this (its handler does nothing).
  impl_->deadline_timer.expires_at(earliest);
  impl_->deadline_timer.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self) return;
    self->impl_->deadline_armed = Clock::time_point::max();
    self->expire_watchers(Clock::now());
    self->arm_deadlines();
  });
}

void Cacher::expire_watchers(Clock::time_point now) {
  std::vector<std::weak_ptr<Watcher>> due;
  {
    std::lock_guard lock(impl_->deadlines_mutex);
    auto end = impl_->deadlines.upper_bound(now);
    for (auto it = impl_->deadlines.begin(); it != end; ++it) {
      impl_->deadline_entries -= it->second.size();
      due.insert(due.end(), std::make_move_iterator(it->second.begin()),
                 std::make_move_iterator(it->second.end()));
    }
    impl_->deadlines.erase(impl_->deadlines.begin(), end);
  }
  for (const auto& weak : due) {
    auto w = weak.lock();
    if (!w || w->ended) continue;
    // Its session ends the stream (eof) at its next take, woken now if it waits.
    w->expired = true;
    w->queue.wake();
  }
}

void Cacher::register_watcher(const std::shared_ptr<Watcher>& w) {
  // Caller holds the dispatch mutex.
  w->id = impl_->next_id++;
  std::optional<std::string> pinned;
  if (w->predicate && !options_.trigger_field.empty()) {
    pinned = w->predicate->exact_field(options_.trigger_field);
  }
  const std::string resource_prefix = options_.prefix;
  if (pinned) {
    w->bucket = Bucket::by_trigger;
    w->bucket_key = *pinned;
    impl_->by_trigger[*pinned].emplace(w->id, w);
  } else if (w->prefix.size() > resource_prefix.size()) {
    // "/registry/pods/<ns>/": index by namespace.
    w->bucket = Bucket::by_namespace;
    w->bucket_key = w->prefix.substr(resource_prefix.size(),
                                     w->prefix.size() - resource_prefix.size() - 1);
    impl_->by_namespace[w->bucket_key].emplace(w->id, w);
  } else {
    w->bucket = Bucket::all;
    impl_->all.emplace(w->id, w);
  }
  if (w->bookmarks) impl_->with_bookmarks.emplace(w->id, w);
  if (!w->internal) ++counters_.watchers;
}

void Cacher::unregister_watcher(const Watcher& w) {
  std::lock_guard lock(impl_->dispatch_mutex);
  auto erase_from = [&](base::StringMap<WatcherMap>& index) {
    auto it = index.find(w.bucket_key);
    if (it == index.end()) return std::size_t{0};
    auto n = it->second.erase(w.id);
    if (it->second.empty()) index.erase(it);
    return n;
  };
  std::size_t erased = 0;
  switch (w.bucket) {
    case Bucket::all: erased = impl_->all.erase(w.id); break;
    case Bucket::by_namespace: erased = erase_from(impl_->by_namespace); break;
    case Bucket::by_trigger: erased = erase_from(impl_->by_trigger); break;
  }
  impl_->with_bookmarks.erase(w.id);
  if (erased > 0 && !w.internal) --counters_.watchers;
}

void Cacher::end_watcher(const std::shared_ptr<Watcher>& w, bool slow) {
  if (w->ended.exchange(true)) return;
  unregister_watcher(*w);
  forgive(*w);
  if (slow) {
    ++counters_.watchers_terminated;
    spdlog::info("watch cache {}: ended a watcher whose next event has left the event window",
                 options_.resource);
  }
  w->queue.close();
}

void Cacher::end_all_watchers() { end_watchers(false); }

void Cacher::end_client_watches() {
  clients_closed_ = true;
  // A watch that asked for bookmarks and has been handed every event so far (not parked) gets a
  // last one at the cache's version before its stream ends: its client resumes from there, so a
  // restarted server that listed at a later revision still has that version in its window
  // (kube-apiserver's bookmarks on shutdown). The others end at once.
  std::vector<std::shared_ptr<Watcher>> ending;
  std::vector<std::shared_ptr<Watcher>> drained;
  {
    std::lock_guard lock(impl_->dispatch_mutex);
    ObjectPtr bookmark;
    for (auto& w : registered_watchers(true)) {
      if (w->ended) continue;
      if (w->bookmarks && !w->parked) {
        if (!bookmark) {
          bookmark = bookmark_object(options_.kind, options_.api_version,
                                     cache_.resource_version(), false);
        }
        w->draining = true;
        if (w->queue.try_push(WatchFrame{EventType::bookmark, bookmark})) {
          drained.push_back(std::move(w));
          continue;
        }
      }
      ending.push_back(std::move(w));
    }
  }
  for (auto& w : drained) unregister_watcher(*w);
  for (auto& w : ending) end_watcher(w, false);
}

void Cacher::end_watchers(bool clients_only) {
  std::vector<std::shared_ptr<Watcher>> all;
  {
    std::lock_guard lock(impl_->dispatch_mutex);
    all = registered_watchers(clients_only);
  }
  for (auto& w : all) end_watcher(w, false);
}

std::vector<std::shared_ptr<Watcher>> Cacher::registered_watchers(bool clients_only) const {
  std::vector<std::shared_ptr<Watcher>> out;
  auto take = [&](const std::shared_ptr<Watcher>& w) {
    if (!clients_only || !w->internal) out.push_back(w);
  };
  for (const auto& [id, w] : impl_->all) take(w);
  for (const auto& [k, m] : impl_->by_namespace) {
    for (const auto& [id, w] : m) take(w);
  }
  for (const auto& [k, m] : impl_->by_trigger) {
    for (const auto& [id, w] : m) take(w);
  }
  return out;
}

// ---- Freshness ----

void Cacher::notify_waiters() {
  const auto rv = cache_.resource_version();
  std::lock_guard lock(impl_->waiters_mutex);
  auto& waiters = impl_->waiters;
  for (auto it = waiters.begin(); it != waiters.end();) {
    if (it->rv <= rv || !ready_) {
      asio::post(it->timer->get_executor(), [timer = it->timer] { timer->cancel(); });
      it = waiters.erase(it);
    } else {
      ++it;
    }
  }
}

asio::awaitable<base::Result<void>> Cacher::wait_until_fresh(std::int64_t rv) {
  if (!ready_) co_return Errc::too_many_requests;
  if (cache_.resource_version() >= rv) co_return base::Result<void>{};
  asio::post(impl_->strand, [self = shared_from_this()] {
    if (self->impl_->stream != nullptr) self->impl_->stream->request_progress();
  });
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
  timer->expires_after(options_.freshness_timeout);
  for (;;) {
    {
      std::lock_guard lock(impl_->waiters_mutex);
      if (cache_.resource_version() >= rv) co_return base::Result<void>{};
      impl_->waiters.push_back({rv, timer});
    }
    auto [ec] = co_await timer->async_wait(use_tuple);
    if (cache_.resource_version() >= rv) co_return base::Result<void>{};
    if (!ec) {
      std::lock_guard lock(impl_->waiters_mutex);
      std::erase_if(impl_->waiters, [&](const Impl::Waiter& w) { return w.timer == timer; });
      co_return Errc::timeout;
    }
    if (!ready_) co_return Errc::too_many_requests;
  }
}

asio::awaitable<base::Result<void>> Cacher::wait_until_consistent() {
  // Without ordered progress a quiet resource's cache cannot prove it is current: let storage
  // answer consistent reads instead.
  if (!progress_ordered_) co_return Errc::unavailable;
  auto current = co_await storage_->current_revision();
  if (!current) co_return current.error();
  co_return co_await wait_until_fresh(*current);
}

asio::awaitable<base::Result<std::unique_ptr<WatchSession>>> Cacher::watch(WatchRequest request) {
  if (!ready_) co_return Errc::too_many_requests;
  const bool from_state = !request.resource_version || *request.resource_version == 0 ||
                          request.send_initial_events;
  if (request.resource_version && *request.resource_version > 0) {
    auto fresh = co_await wait_until_fresh(*request.resource_version);
    if (!fresh) co_return fresh.error();
  }
  // An unset version starts from state at least as new as storage now. Storage whose progress
  // may run ahead of its events (etcd < 3.4.25) cannot tell when the cache has got there: the
  // state then comes from storage itself (as kube-apiserver serves such watches from etcd), and
  // the watcher follows the cache from that state's revision.
  std::optional<std::vector<ObjectPtr>> stored;
  std::int64_t stored_revision = 0;
  if (!request.resource_version) {
    auto consistent = co_await wait_until_consistent();
    if (!consistent && !progress_ordered_) {
      auto listed = co_await list_storage(request.prefix);
      if (listed) {
        const Predicate* predicate = request.predicate.get();
        stored.emplace();
        for (const auto& o : (*listed)->objects) {
          if (predicate == nullptr || predicate->matches(*o)) stored->push_back(o);
        }
        stored_revision = (*listed)->revision;
      }
    }
  }

  // Not make_shared: the deadline bucket's weak reference must not hold the watcher's memory.
  std::shared_ptr<Watcher> w(new Watcher(options_.watcher_buffer));
  w->prefix = request.prefix;
  w->predicate = request.predicate;
  w->bookmarks = request.allow_bookmarks;
  w->internal = request.internal;
  w->deadline_at = request.deadline;
  {
    // The bucket that ends at or after the deadline: a watch ends within 10 ms of it.
    constexpr Clock::duration kBucket = std::chrono::milliseconds(10);
    std::lock_guard lock(impl_->deadlines_mutex);
    const auto since = request.deadline.time_since_epoch();
    const auto bucket = Clock::time_point((since / kBucket + 1) * kBucket);
    impl_->deadlines[bucket].push_back(w);
    ++impl_->deadline_entries;
    const std::size_t gone = impl_->gone_entries.load(std::memory_order_relaxed);
    if (gone >= 1024 && gone * 2 >= impl_->deadline_entries) {
      impl_->gone_entries.store(0, std::memory_order_relaxed);
      for (auto it = impl_->deadlines.begin(); it != impl_->deadlines.end();) {
        impl_->deadline_entries -= std::erase_if(
            it->second, [](const std::weak_ptr<Watcher>& e) { return e.expired(); });
        it = it->second.empty() ? impl_->deadlines.erase(it) : std::next(it);
      }
    }
  }
  asio::post(impl_->strand, [self = shared_from_this()] { self->arm_deadlines(); });
  const auto now = Clock::now();
  if (w->bookmarks) {
    w->next_bookmark = std::min(now + options_.bookmark_interval,
                                request.deadline - std::chrono::seconds(2));
  }
  std::unique_ptr<WatchSession> session(new WatchSession());
  session->cacher_ = weak_from_this();
  session->watcher_ = w;
  {
    std::lock_guard lock(impl_->dispatch_mutex);
    if (!ready_) co_return Errc::too_many_requests;
    if (clients_closed_ && !request.internal) co_return Errc::unavailable;
    // Everything up to the last applied event is in the initial state or events below; only
    // later events may follow (progress may have moved resource_version() past late events).
    w->start_rv = cache_.applied_resource_version();
    if (!from_state) w->start_rv = std::max(w->start_rv, *request.resource_version);
    std::optional<std::vector<EventPtr>> ahead;  // cache events past `stored`
    if (stored && w->start_rv > stored_revision) {
      ahead = cache_.events_since(stored_revision);
      if (!ahead) stored.reset();  // left the window meanwhile: the cache's state after all
    }
    if (stored) {
      // Events the cache applies later up to the stored revision are in the state already.
      w->start_rv = std::max(w->start_rv, stored_revision);
      session->initial_.reserve(stored->size() + 1);
      for (auto& o : *stored) session->initial_.push_back({EventType::added, std::move(o)});
      if (request.send_initial_events && request.allow_bookmarks) {
        session->initial_.push_back(
            {EventType::bookmark,
             bookmark_object(options_.kind, options_.api_version, stored_revision, true)});
      }
      if (ahead) {
        for (const auto& ev : *ahead) {
          if (auto frame = frame_for(*w, *ev)) session->initial_.push_back(std::move(*frame));
        }
      }
    } else if (from_state) {
      auto state = cache_.list(request.prefix, "", 0, request.predicate.get());
      session->initial_.reserve(state.objects.size() + 1);
      for (auto& o : state.objects) session->initial_.push_back({EventType::added, std::move(o)});
      if (request.send_initial_events && request.allow_bookmarks) {
        session->initial_.push_back(
            {EventType::bookmark,
             bookmark_object(options_.kind, options_.api_version, state.resource_version, true)});
      }
    } else {
      auto events = cache_.events_since(*request.resource_version);
      if (!events) co_return Errc::gone;
      for (const auto& ev : *events) {
        if (auto frame = frame_for(*w, *ev)) session->initial_.push_back(std::move(*frame));
      }
    }
    register_watcher(w);
  }
  co_return session;
}

asio::awaitable<base::Result<std::shared_ptr<const Cacher::StoredState>>> Cacher::list_storage(
    std::string prefix) {
  auto self = shared_from_this();
  using Batch = Impl::ListBatch;
  std::shared_ptr<Batch> batch;
  std::shared_ptr<Batch> before;  // the list in flight this batch's list must follow
  bool lead = false;
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
  {
    std::lock_guard lock(impl_->lists_mutex);
    auto& lists = impl_->lists[prefix];
    if (lists.next) {
      batch = lists.next;
    } else {
      batch = std::make_shared<Batch>();
      lead = true;
      if (lists.in_flight) {
        lists.next = batch;
        before = lists.in_flight;
      } else {
        lists.in_flight = batch;
      }
    }
    if (!lead) batch->waiters.push_back(timer);
    if (before) before->waiters.push_back(timer);
  }
  // Woken by a cancel posted when the batch waited for is done; `done` is read under the lock,
  // and a wake-up that came before the wait began costs a second at most.
  const std::shared_ptr<Batch> awaited = lead ? before : batch;
  while (awaited) {
    {
      std::lock_guard lock(impl_->lists_mutex);
      if (awaited->done) break;
    }
    timer->expires_after(std::chrono::seconds(1));
    co_await timer->async_wait(use_tuple);
  }
  if (!lead) co_return batch->result;
  if (before) {
    std::lock_guard lock(impl_->lists_mutex);
    auto& lists = impl_->lists[prefix];
    lists.in_flight = batch;
    lists.next.reset();
  }
  storage::ListOptions list_options;
  list_options.prefix = prefix;
  auto listed = co_await storage_->list(list_options);
  base::Result<std::shared_ptr<const StoredState>> result{Errc::unavailable};
  if (listed) {
    auto state = std::make_shared<StoredState>();
    state->objects = decode_listed(*listed, nullptr, /*warn=*/false);
    state->revision = listed->revision;
    result = std::shared_ptr<const StoredState>(std::move(state));
  } else {
    result = listed.error();
  }
  std::vector<std::shared_ptr<asio::steady_timer>> waiters;
  {
    std::lock_guard lock(impl_->lists_mutex);
    batch->result = result;
    batch->done = true;
    waiters.swap(batch->waiters);
    auto it = impl_->lists.find(prefix);
    if (it != impl_->lists.end() && it->second.in_flight == batch) {
      it->second.in_flight.reset();
      if (!it->second.next) impl_->lists.erase(it);
    }
  }
  for (auto& t : waiters) asio::post(t->get_executor(), [t] { t->cancel(); });
  co_return result;
}

// ---- Paged lists ----

void Cacher::keep_list_snapshot(const std::string& prefix, std::int64_t rv) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(impl_->snapshots_mutex);
    for (const auto& s : impl_->snapshots) {
      if (s->rv == rv && s->prefix == prefix) return;  // another pagination's, at the same state
    }
  }
  auto objects = cache_.objects_at(prefix, rv);
  if (!objects) return;  // the cache moved on: the next pages come from storage
  auto snapshot = std::make_shared<Impl::ListSnapshot>();
  snapshot->prefix = prefix;
  snapshot->rv = rv;
  snapshot->objects = std::move(*objects);
  snapshot->taken = now;
  std::lock_guard lock(impl_->snapshots_mutex);
  auto& all = impl_->snapshots;
  while (!all.empty() && (all.size() >= kListSnapshots || now - all.front()->taken > kListSnapshotLife)) {
    all.pop_front();
  }
  all.push_back(std::move(snapshot));
}

std::optional<CacheList> Cacher::list_snapshot(std::int64_t rv, const std::string& prefix,
                                               const std::string& start_key, std::size_t limit,
                                               const Predicate* predicate) {
  std::shared_ptr<const Impl::ListSnapshot> found;
  {
    const auto now = Clock::now();
    std::lock_guard lock(impl_->snapshots_mutex);
    auto& all = impl_->snapshots;
    while (!all.empty() && now - all.front()->taken > kListSnapshotLife) all.pop_front();
    for (const auto& s : all) {
      if (s->rv == rv && s->prefix == prefix) found = s;
    }
  }
  if (!found) return std::nullopt;
  return list_sorted(found->objects, rv, prefix, start_key, limit, predicate);
}

// ---- Session ----

WatchSession::~WatchSession() {
  if (!watcher_) return;
  watcher_->ended = true;
  if (auto cacher = cacher_.lock()) ++cacher->impl_->gone_entries;
  // A pending when_ready() call is dropped: nothing wakes a session that is gone.
  if (ready_armed_) watcher_->queue.forget();
  if (auto cacher = cacher_.lock()) {
    cacher->unregister_watcher(*watcher_);
    cacher->forgive(*watcher_);
  }
}

std::int64_t WatchSession::start_resource_version() const { return watcher_->start_rv; }

void WatchSession::stop() {
  if (!watcher_) return;
  watcher_->ended = true;
  watcher_->queue.wake();
}

asio::awaitable<base::Result<std::vector<WatchFrame>>> WatchSession::next() {
  std::vector<WatchFrame> frames;
  auto r = co_await next(frames);
  if (!r) co_return r.error();
  co_return frames;
}

base::Result<void> WatchSession::take(std::vector<WatchFrame>& out) {
  constexpr std::size_t kBatch = 512;
  out.clear();
  if (initial_sent_ < initial_.size()) {
    const std::size_t n = std::min(kBatch, initial_.size() - initial_sent_);
    out.assign(initial_.begin() + static_cast<long>(initial_sent_),
               initial_.begin() + static_cast<long>(initial_sent_ + n));
    initial_sent_ += n;
    if (initial_sent_ == initial_.size()) {
      initial_.clear();
      initial_.shrink_to_fit();
      initial_sent_ = 0;
    }
    return base::Result<void>{};
  }
  Watcher& w = *watcher_;
  // The transport asks for more once it has written the last batch.
  if (taken_ > 0) {
    if (auto cacher = cacher_.lock()) cacher->frames_written(w, taken_);
    taken_ = 0;
  }
  if (w.expired) return boost::system::error_code(asio::error::eof);
  if (w.ended) return Errc::unavailable;
  // What the dispatcher queued comes first; once that is drained, a parked watcher reads on
  // from the event window.
  taken_ = w.queue.pop(out, kBatch);
  if (!out.empty()) return base::Result<void>{};
  if (w.draining) return Errc::unavailable;  // its last bookmark is written
  if (auto cacher = cacher_.lock()) {
    // Smaller batches from the window: watchers resuming together take turns with live
    // delivery instead of each writing hundreds of events in one go.
    constexpr std::size_t kCatchUpBatch = 64;
    auto caught_up = cacher->catch_up(watcher_, out, kCatchUpBatch);
    if (!caught_up) return caught_up.error();
  }
  return base::Result<void>{};
}

void WatchSession::when_ready(std::function<void()> ready) {
  ready_armed_ = true;
  watcher_->queue.when_ready(std::move(ready));
}

asio::awaitable<base::Result<void>> WatchSession::next(std::vector<WatchFrame>& out) {
  for (;;) {
    auto r = take(out);
    if (!r || !out.empty()) co_return r;
    // Until the queue has something (frames, or the end: the deadline, the watch ended).
    co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
        [this](auto handler) {
          // The call must be copyable; the coroutine's handler is not: it waits in a box.
          auto box = std::make_shared<decltype(handler)>(std::move(handler));
          when_ready([box] { asio::post(std::move(*box)); });
        },
        asio::use_awaitable);
  }
}

}  // namespace kwatch::watch
