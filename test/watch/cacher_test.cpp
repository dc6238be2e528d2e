#include "watch/cacher.hpp"

#include "storage/memory_storage.hpp"
#include "test/support/breakable_storage.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

// GoogleTest's ASSERT_* return void, which a coroutine cannot: these end the coroutine instead.
#define CO_ASSERT_TRUE(c)                          \
  do {                                             \
    if (!(c)) {                                    \
      ADD_FAILURE() << "expected true: " #c;       \
      co_return;                                   \
    }                                              \
  } while (0)
#define CO_ASSERT_FALSE(c) CO_ASSERT_TRUE(!(c))
#define CO_ASSERT_EQ(a, b) \
  do {                     \
    EXPECT_EQ(a, b);       \
    if (!((a) == (b))) co_return; \
  } while (0)

namespace kwatch::watch {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using base::Errc;

using test::BreakableStorage;

class LabelIs : public Predicate {
 public:
  LabelIs(std::string k, std::string v) : k_(std::move(k)), v_(std::move(v)) {}
  bool matches(const CachedObject& o) const override {
    const std::string_view* v = o.label(k_);
    return v != nullptr && *v == v_;
  }
  bool empty() const override { return false; }
  std::optional<std::string> exact_field(std::string_view) const override { return std::nullopt; }

 private:
  std::string k_, v_;
};

class CacherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto memory = storage::MemoryStorage::open({});
    ASSERT_TRUE(memory);
    storage_ = std::make_shared<BreakableStorage>(std::shared_ptr<storage::Storage>(std::move(*memory)));
  }

  std::shared_ptr<Cacher> make_cacher(CacherOptions o = {}) {
    o.resource = "configmaps";
    o.prefix = "/registry/configmaps/";
    o.kind = "ConfigMap";
    o.api_version = "v1";
    if (o.freshness_timeout == 3000ms) o.freshness_timeout = 300ms;
    auto c = std::make_shared<Cacher>(ioc_.get_executor(), storage_, o);
    c->start();
    return c;
  }

  // Runs `body` on the io_context until it finishes, within a deadline.
  template <class F>
  void run(F body, std::chrono::seconds deadline = 10s) {
    bool done = false;
    asio::co_spawn(ioc_, body(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (!done && std::chrono::steady_clock::now() < until) ioc_.run_one_for(100ms);
    EXPECT_TRUE(done) << "test body did not finish within the deadline";
  }

  asio::awaitable<void> wait_ready(Cacher& c) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 500 && !c.ready(); ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_TRUE(c.ready());
  }

  asio::awaitable<std::int64_t> put(const std::string& name, const std::string& labels = "{}") {
    auto r = co_await storage_->guaranteed_update(
        "/registry/configmaps/default/" + name, [&](const storage::KeyValue*) {
          return storage::Storage::UpdateResult(R"({"metadata":{"name":")" + name +
                                              R"(","namespace":"default","labels":)" + labels +
                                              "}}");
        });
    EXPECT_TRUE(r);
    co_return r ? r->mod_revision : 0;
  }

  // Reads frames until `n` arrived (bookmarks skipped unless asked) or the session ends.
  asio::awaitable<std::vector<WatchFrame>> read(WatchSession& s, std::size_t n,
                                                bool keep_bookmarks = false) {
    std::vector<WatchFrame> out;
    while (out.size() < n) {
      auto frames = co_await s.next();
      if (!frames) break;
      for (auto& f : *frames) {
        if (f.type == EventType::bookmark && !keep_bookmarks) continue;
        out.push_back(std::move(f));
      }
    }
    co_return out;
  }

  WatchRequest request(std::optional<std::int64_t> rv, std::chrono::seconds life = 30s) {
    WatchRequest r;
    r.prefix = "/registry/configmaps/";
    r.resource_version = rv;
    r.deadline = std::chrono::steady_clock::now() + life;
    return r;
  }

  asio::io_context ioc_;
  std::shared_ptr<BreakableStorage> storage_;
};

TEST_F(CacherTest, WatchFromAVersionSeesEveryLaterChangeOnceInOrder) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("a");
    auto session = co_await cacher->watch(request(start));
    EXPECT_TRUE(session);
    if (!session) co_return;
    std::vector<std::int64_t> written;
    for (int i = 0; i < 50; ++i) {
      written.push_back(co_await put("o" + std::to_string(i % 7), R"({"i":")" + std::to_string(i) + "\"}"));
    }
    auto frames = co_await read(**session, 50);
    CO_ASSERT_EQ(frames.size(), 50u);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i].object->resource_version, written[i]);
      EXPECT_EQ(frames[i].type, i < 7 ? EventType::added : EventType::modified);
    }
  });
}

TEST_F(CacherTest, UnsetVersionStartsWithTheCurrentStateAsAdded) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await put("b");
    co_await put("a");
    co_await wait_ready(*cacher);
    auto session = co_await cacher->watch(request(std::nullopt));
    EXPECT_TRUE(session);
    if (!session) co_return;
    auto frames = co_await read(**session, 2);
    CO_ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].object->name, "a");  // sorted by key
    EXPECT_EQ(frames[1].object->name, "b");
    EXPECT_EQ(frames[0].type, EventType::added);
  });
}

TEST_F(CacherTest, SelectorTransitionsBecomeAddedAndDeleted) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("x", R"({"app":"db"})");
    auto req = request(start);
    req.predicate = std::make_shared<LabelIs>("app", "web");
    auto session = co_await cacher->watch(std::move(req));
    EXPECT_TRUE(session);
    if (!session) co_return;
    const auto enter = co_await put("x", R"({"app":"web"})");
    const auto stay = co_await put("x", R"({"app":"web","v":"2"})");
    const auto leave = co_await put("x", R"({"app":"db"})");
    co_await put("x", R"({"app":"db","v":"3"})");  // not matching before or after: nothing
    auto frames = co_await read(**session, 3);
    CO_ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].type, EventType::added);
    EXPECT_EQ(frames[0].object->resource_version, enter);
    EXPECT_EQ(frames[1].type, EventType::modified);
    EXPECT_EQ(frames[1].object->resource_version, stay);
    EXPECT_EQ(frames[2].type, EventType::deleted);
    EXPECT_EQ(frames[2].object->resource_version, leave);
    EXPECT_EQ(*frames[2].object->label("app"), "web");  // the previous content
  });
}

TEST_F(CacherTest, VersionOlderThanTheWindowIsGone) {
  CacherOptions o;
  o.lower_capacity = o.upper_capacity = 4;
  auto cacher = make_cacher(o);
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto first = co_await put("a");
    for (int i = 0; i < 6; ++i) co_await put("a", R"({"i":")" + std::to_string(i) + "\"}");
    auto fresh = co_await cacher->wait_until_fresh(first + 6);
    EXPECT_TRUE(fresh);
    auto session = co_await cacher->watch(request(first));
    CO_ASSERT_FALSE(session);
    EXPECT_EQ(session.error(), Errc::gone);
  });
}

TEST_F(CacherTest, VersionAheadOfStorageTimesOutAfterTheFreshnessWait) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto started = std::chrono::steady_clock::now();
    auto session = co_await cacher->watch(request(1'000'000));
    CO_ASSERT_FALSE(session);
    EXPECT_EQ(session.error(), Errc::timeout);
    EXPECT_GE(std::chrono::steady_clock::now() - started, 250ms);
  });
}

TEST_F(CacherTest, StalledWatcherIsParkedAndResumesWithEveryEventInOrder) {
  CacherOptions o;
  o.watcher_buffer = 8;
  auto cacher = make_cacher(o);
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("seed");
    auto stalled = co_await cacher->watch(request(start));
    auto fast = co_await cacher->watch(request(start));
    // A selective watcher that stalls too: it resumes with only what its selector matches, and
    // the ADDED/DELETED transitions of objects entering and leaving it.
    auto selective_request = request(start);
    selective_request.predicate = std::make_shared<LabelIs>("app", "web");
    auto selective = co_await cacher->watch(selective_request);
    EXPECT_TRUE(stalled && fast && selective);
    if (!stalled || !fast || !selective) co_return;
    std::size_t fast_seen = 0;
    bool fast_done = false;
    asio::co_spawn(
        co_await asio::this_coro::executor,
        [&]() -> asio::awaitable<void> {
          auto frames = co_await read(**fast, 300);
          fast_seen = frames.size();
          fast_done = true;
        },
        [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        });
    std::vector<std::int64_t> written;
    for (int i = 0; i < 300; ++i) {
      // Write 3j labels k<j> web, 3j+1 takes the label away, 3j+2 changes another label.
      const std::string labels = i % 3 == 0   ? R"({"app":"web"})"
                                 : i % 3 == 1 ? "{}"
                                              : R"({"n":")" + std::to_string(i) + "\"}";
      written.push_back(co_await put("k" + std::to_string(i / 3 % 50), labels));
    }
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 400 && !fast_done; ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(fast_seen, 300u);
    EXPECT_GE(cacher->counters().watchers_parked.load(), 2u);
    EXPECT_EQ(cacher->counters().watchers_terminated.load(), 0u);
    // The stalled watcher reads again: the 8 frames queued before it was parked, then the rest
    // from the event window, every event once, in order.
    auto frames = co_await read(**stalled, 300);
    CO_ASSERT_EQ(frames.size(), 300u);
    for (std::size_t i = 0; i < frames.size(); ++i) {
      EXPECT_EQ(frames[i].object->resource_version, written[i]) << i;
    }
    auto picked = co_await read(**selective, 200);
    CO_ASSERT_EQ(picked.size(), 200u);
    for (std::size_t i = 0; i < picked.size(); ++i) {
      // Write 3j labels it (ADDED), write 3j+1 unlabels it (DELETED), 3j+2 is not seen.
      const std::size_t write = (i / 2) * 3 + (i % 2);
      EXPECT_EQ(picked[i].type, i % 2 == 0 ? EventType::added : EventType::deleted) << i;
      EXPECT_EQ(picked[i].object->resource_version, written[write]) << i;
    }
    // Caught up: the watchers are live again and get the next write from the dispatcher.
    const auto last = co_await put("after", R"({"app":"web"})");
    auto next = co_await read(**stalled, 1);
    CO_ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0].object->resource_version, last);
    auto next_selective = co_await read(**selective, 1);
    CO_ASSERT_EQ(next_selective.size(), 1u);
    EXPECT_EQ(next_selective[0].object->resource_version, last);
    EXPECT_EQ(cacher->counters().watchers_terminated.load(), 0u);
  });
}

// As the server runs them: the dispatcher on a multi-threaded context, each watch's session on
// a strand of its own, so that watchers park (their channel full) and catch up on other threads
// while the dispatcher offers them events. Each pauses now and then so that it parks many times.
TEST_F(CacherTest, WatchersParkingAndCatchingUpOnOtherThreadsSeeEveryEventOnceInOrder) {
  CacherOptions o;
  o.watcher_buffer = 4;
  auto cacher = make_cacher(o);
  constexpr int kWatchers = 6;
  constexpr std::size_t kWrites = 600;
  auto guard = asio::make_work_guard(ioc_);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) threads.emplace_back([this] { ioc_.run(); });

  struct Reader {
    std::vector<std::int64_t> seen;
    std::atomic<bool> done{false};
  };
  std::vector<Reader> readers(kWatchers);
  std::vector<std::int64_t> written;
  std::promise<void> finished;
  asio::co_spawn(
      asio::make_strand(ioc_),
      [&]() -> asio::awaitable<void> {
        co_await wait_ready(*cacher);
        const auto start = co_await put("seed");
        for (int w = 0; w < kWatchers; ++w) {
          auto session = co_await cacher->watch(request(start));
          EXPECT_TRUE(session);
          if (!session) co_return;
          std::shared_ptr<WatchSession> s = std::move(*session);
          asio::co_spawn(
              asio::make_strand(ioc_),
              [s, &r = readers[w], w]() -> asio::awaitable<void> {
                asio::steady_timer pause(co_await asio::this_coro::executor);
                std::size_t batches = 0;
                while (r.seen.size() < kWrites) {
                  auto frames = co_await s->next();
                  if (!frames) break;
                  for (auto& f : *frames) {
                    if (f.type != EventType::bookmark) r.seen.push_back(f.object->resource_version);
                  }
                  // Readers pause at different rhythms: 1-3 ms every 2nd to 7th batch.
                  if (++batches % static_cast<std::size_t>(2 + w) == 0) {
                    pause.expires_after(std::chrono::milliseconds(1 + w % 3));
                    co_await pause.async_wait(asio::use_awaitable);
                  }
                }
                r.done = true;
              },
              [](std::exception_ptr e) {
                if (e) std::rethrow_exception(e);
              });
        }
        for (std::size_t i = 0; i < kWrites; ++i) {
          // A new label value each time (a write that changes nothing makes no event).
          written.push_back(
              co_await put("k" + std::to_string(i % 40), R"({"n":")" + std::to_string(i) + "\"}"));
        }
      },
      [&](std::exception_ptr e) {
        if (e) {
          finished.set_exception(e);
        } else {
          finished.set_value();
        }
      });
  auto writes = finished.get_future();
  ASSERT_EQ(writes.wait_for(30s), std::future_status::ready) << "the writes did not finish";
  writes.get();
  const auto until = std::chrono::steady_clock::now() + 30s;
  auto all_done = [&] {
    for (auto& r : readers) {
      if (!r.done) return false;
    }
    return true;
  };
  while (!all_done() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  const bool done = all_done();
  guard.reset();
  ioc_.stop();
  for (auto& t : threads) t.join();
  ASSERT_TRUE(done) << "a watcher stopped receiving (a lost wake-up)";
  EXPECT_GE(cacher->counters().watchers_parked.load(), static_cast<std::uint64_t>(kWatchers));
  EXPECT_EQ(cacher->counters().watchers_terminated.load(), 0u);
  for (int w = 0; w < kWatchers; ++w) {
    const auto& seen = readers[w].seen;
    std::size_t i = 0;
    while (i < seen.size() && i < written.size() && seen[i] == written[i]) ++i;
    EXPECT_TRUE(i == written.size() && seen.size() == written.size())
        << "watcher " << w << ": " << seen.size() << " events of " << written.size()
        << ", the first difference at " << i << ": "
        << (i < seen.size() ? std::to_string(seen[i]) : "none") << " where "
        << (i < written.size() ? std::to_string(written[i]) : "none") << " was written";
  }
}

TEST_F(CacherTest, ParkedWatcherWhoseNextEventLeftTheWindowIsEnded) {
  CacherOptions o;
  o.watcher_buffer = 8;
  o.lower_capacity = o.upper_capacity = 32;
  auto cacher = make_cacher(o);
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("seed");
    auto stalled = co_await cacher->watch(request(start));
    EXPECT_TRUE(stalled);
    if (!stalled) co_return;
    asio::steady_timer t(co_await asio::this_coro::executor);
    // 20 writes: parked, but its next event is still in the window of 32.
    for (int i = 0; i < 20; ++i) co_await put("k" + std::to_string(i));
    for (int i = 0; i < 400 && cacher->resource_version() < start + 20; ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_GE(cacher->resource_version(), start + 20);
    EXPECT_EQ(cacher->counters().watchers_parked.load(), 1u);
    EXPECT_EQ(cacher->counters().watchers_terminated.load(), 0u);
    // 80 more push that event out: the watcher is ended (its client re-lists) without reading.
    for (int i = 20; i < 100; ++i) co_await put("k" + std::to_string(i));
    for (int i = 0; i < 400 && cacher->counters().watchers_terminated.load() == 0; ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    CO_ASSERT_EQ(cacher->counters().watchers_terminated.load(), 1u);
    EXPECT_EQ(cacher->counters().watchers.load(), 0);
    // What it reads is a prefix of the events, then the end.
    std::size_t got = 0;
    auto rest = co_await (*stalled)->next();
    while (rest) {
      for (auto& f : *rest) {
        EXPECT_EQ(f.object->name, "k" + std::to_string(got));
        ++got;
      }
      rest = co_await (*stalled)->next();
    }
    EXPECT_EQ(rest.error(), Errc::unavailable);
    EXPECT_LE(got, 8u);
  });
}

TEST_F(CacherTest, AWritesHoldIsReleasedOnceDeliveryHasCaughtUpWithItsEvent) {
  CacherOptions o;
  o.watcher_buffer = 4;
  auto cacher = make_cacher(o);
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    asio::steady_timer t(co_await asio::this_coro::executor);
    // No watchers: released once the event has been dispatched.
    auto quiet = std::make_shared<int>();
    std::weak_ptr<int> quiet_seen = quiet;
    const auto a = co_await put("a");
    cacher->hold_until_delivered(a, std::move(quiet));
    for (int i = 0; i < 400 && !quiet_seen.expired(); ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_TRUE(quiet_seen.expired());

    auto reader = co_await cacher->watch(request(a));
    auto stalled = co_await cacher->watch(request(a));
    CO_ASSERT_TRUE(reader && stalled);
    const auto b = co_await put("b");
    auto hold = std::make_shared<int>();
    std::weak_ptr<int> held = hold;
    cacher->hold_until_delivered(b, std::move(hold));
    for (int i = 0; i < 400 && cacher->resource_version() < b; ++i) {
      t.expires_after(5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    // Dispatched, but neither watcher has written it yet.
    EXPECT_FALSE(held.expired());
    auto frames = co_await read(**reader, 1);  // taken from the channel: being written
    EXPECT_EQ(frames.size(), 1u);
    EXPECT_FALSE(held.expired());
    // The stalled watcher fills up and parks: what was queued for it no longer counts, so once
    // the reader has written what it took, the hold goes.
    for (int i = 0; i < 6; ++i) co_await put("c" + std::to_string(i));
    auto more = co_await read(**reader, 6);  // entering next() again: the first frame was written
    EXPECT_EQ(more.size(), 6u);
    EXPECT_GE(cacher->counters().watchers_parked.load(), 1u);
    EXPECT_TRUE(held.expired());
    EXPECT_LE(cacher->counters().frames_done.load(), cacher->counters().frames_handed.load());
  });
}

TEST_F(CacherTest, AWatchOnUnreachableStorageResumesWhereTheCacheIsWithoutAReList) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("a");
    auto session = co_await cacher->watch(request(start));
    CO_ASSERT_TRUE(session);
    const int watches_before = storage_->watches;
    // The stream breaks, losing the batch it read (b), and storage refuses the next two
    // watches, as an etcd that is down for a while.
    storage_->refuse_watches = 2;
    storage_->broken = true;
    const auto b = co_await put("b");
    const auto c = co_await put("c");
    auto frames = co_await read(**session, 2);
    CO_ASSERT_EQ(frames.size(), 2u);
    EXPECT_EQ(frames[0].object->name, "b");
    EXPECT_EQ(frames[0].object->resource_version, b);
    EXPECT_EQ(frames[1].object->name, "c");
    EXPECT_EQ(frames[1].object->resource_version, c);
    EXPECT_EQ(cacher->counters().relists.load(), 0u);
    EXPECT_TRUE(cacher->ready());
    EXPECT_EQ(storage_->watches - watches_before, 3);  // two refused, then the one that worked
    // The window is kept: a watch from before the break is still served from it.
    auto late = co_await cacher->watch(request(start));
    CO_ASSERT_TRUE(late);
    auto replay = co_await read(**late, 2);
    CO_ASSERT_EQ(replay.size(), 2u);
    EXPECT_EQ(replay[0].object->name, "b");
  });
}

TEST_F(CacherTest, AStorageWatchEndedOtherwiseReListsAndEndsWatchers) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("a");
    auto session = co_await cacher->watch(request(start));
    EXPECT_TRUE(session);
    if (!session) co_return;
    storage_->break_with = Errc::gone;  // compacted past what the watch had to read
    storage_->broken = true;
    co_await put("b");  // wakes the storage watch, which now fails
    auto frames = co_await (*session)->next();
    while (frames) frames = co_await (*session)->next();
    EXPECT_EQ(frames.error(), Errc::unavailable);
    co_await wait_ready(*cacher);
    EXPECT_EQ(cacher->counters().relists.load(), 1u);
    // A client re-listing now sees both objects.
    EXPECT_EQ(cacher->list("/registry/configmaps/", "", 0, nullptr).objects.size(), 2u);
  });
}

TEST_F(CacherTest, BookmarksArriveWhileQuietAndMarkTheEndOfInitialEvents) {
  CacherOptions o;
  o.bookmark_interval = 50ms;
  auto cacher = make_cacher(o);
  run([&]() -> asio::awaitable<void> {
    const auto written = co_await put("a");
    co_await wait_ready(*cacher);
    EXPECT_TRUE(co_await cacher->wait_until_fresh(written));
    auto req = request(0);
    req.send_initial_events = true;
    req.allow_bookmarks = true;
    auto session = co_await cacher->watch(std::move(req));
    EXPECT_TRUE(session);
    if (!session) co_return;
    auto frames = co_await read(**session, 3, true);
    CO_ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].type, EventType::added);
    EXPECT_EQ(frames[1].type, EventType::bookmark);
    EXPECT_NE(frames[1].object->json.find("k8s.io/initial-events-end"), std::string::npos);
    EXPECT_EQ(frames[2].type, EventType::bookmark);  // periodic
    EXPECT_EQ(frames[2].object->json.find("initial-events-end"), std::string::npos);
  });
}

TEST_F(CacherTest, ShutdownEndsWatchesWithALastBookmarkForThoseThatAskedForBookmarks) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    const auto start = co_await put("a");
    auto with = request(start);
    with.allow_bookmarks = true;
    auto bookmarking = co_await cacher->watch(std::move(with));
    auto plain = co_await cacher->watch(request(start));
    CO_ASSERT_TRUE(bookmarking && plain);
    const auto changed = co_await put("b");
    // A later write elsewhere: the cache's version passes the last event of this resource.
    auto other = co_await storage_->guaranteed_update("/registry/secrets/default/s", [](const storage::KeyValue*) {
      return storage::Storage::UpdateResult(std::string(R"({"metadata":{"name":"s"}})"));
    });
    CO_ASSERT_TRUE(other);
    EXPECT_TRUE(co_await cacher->wait_until_fresh(other->mod_revision));
    cacher->end_client_watches();

    auto frames = co_await read(**bookmarking, 3, true);
    CO_ASSERT_EQ(frames.size(), 2u);  // the stream ended after the bookmark
    EXPECT_EQ(frames[0].object->resource_version, changed);
    EXPECT_EQ(frames[1].type, EventType::bookmark);
    EXPECT_EQ(frames[1].object->resource_version, other->mod_revision);
    auto after = co_await (*bookmarking)->next();
    EXPECT_EQ(after.error(), base::Errc::unavailable);
    auto ended = co_await (*plain)->next();  // no bookmarks asked for: it ends at once
    EXPECT_EQ(ended.error(), base::Errc::unavailable);
    EXPECT_EQ(cacher->counters().watchers.load(), 0);
    auto refused = co_await cacher->watch(request(start));
    EXPECT_FALSE(refused);
  });
}

TEST_F(CacherTest, SessionEndsAtItsDeadline) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    auto req = request(std::nullopt);
    const auto deadline = std::chrono::steady_clock::now() + 200ms;
    req.deadline = deadline;
    auto session = co_await cacher->watch(std::move(req));
    EXPECT_TRUE(session);
    if (!session) co_return;
    auto frames = co_await (*session)->next();
    CO_ASSERT_FALSE(frames);
    EXPECT_EQ(frames.error(), boost::asio::error::eof);
    EXPECT_GE(std::chrono::steady_clock::now(), deadline) << "ended before its deadline";
    EXPECT_EQ(cacher->counters().watchers.load(), 1);
    session->reset();
    EXPECT_EQ(cacher->counters().watchers.load(), 0);
  });
}

}  // namespace
}  // namespace kwatch::watch

namespace kwatch::watch {
namespace {

// Storage like etcd < 3.4.25, whose progress may run ahead of events: a watch with no version
// takes its initial state from storage, so a write the cache has not applied yet is in it, and
// the event the cache applies later is not sent a second time.
TEST_F(CacherTest, UnsetVersionOnUnorderedStorageStartsFromStorageNotALaggingCache) {
  storage_->unordered = true;
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    co_await put("a");
    storage_->paused = true;  // the cache will not see "b" until resumed
    const auto b = co_await put("b");
    CO_ASSERT_TRUE(cacher->resource_version() < b);
    auto session = co_await cacher->watch(request(std::nullopt));
    CO_ASSERT_TRUE(session);
    auto initial = co_await read(**session, 2);
    CO_ASSERT_EQ(initial.size(), 2u);
    EXPECT_EQ(initial[0].object->name, "a");
    EXPECT_EQ(initial[1].object->name, "b");
    EXPECT_EQ(initial[1].object->resource_version, b);
    storage_->paused = false;
    const auto c = co_await put("c");
    auto later = co_await read(**session, 1);
    CO_ASSERT_EQ(later.size(), 1u);
    EXPECT_EQ(later[0].object->name, "c");  // not "b" again
    EXPECT_EQ(later[0].object->resource_version, c);
  });
}

// Many watches with no version arriving together share storage lists: one in flight per prefix,
// and every watch that came while it was in flight shares the next.
TEST_F(CacherTest, UnsetVersionWatchesOnUnorderedStorageShareStorageLists) {
  storage_->unordered = true;
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    co_await put("a");
    const int before = storage_->lists;
    storage_->hold_lists = true;
    constexpr int kWatches = 50;
    auto executor = co_await asio::this_coro::executor;
    int opened = 0;
    std::vector<std::unique_ptr<WatchSession>> sessions;
    for (int i = 0; i < kWatches; ++i) {
      asio::co_spawn(executor, [&]() -> asio::awaitable<void> {
        auto session = co_await cacher->watch(request(std::nullopt));
        EXPECT_TRUE(session);
        if (session) sessions.push_back(std::move(*session));
        ++opened;
      }, asio::detached);
    }
    asio::steady_timer t(executor);
    for (int i = 0; i < 2000 && storage_->lists - before < 1; ++i) {
      t.expires_after(1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    // One thread: the spawned watches started in order before this timer's first completion
    // and ran until they waited, the first on its held list, the others for it.
    EXPECT_EQ(storage_->lists - before, 1);
    storage_->hold_lists = false;
    for (int i = 0; i < 5000 && opened < kWatches; ++i) {
      t.expires_after(1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    CO_ASSERT_EQ(opened, kWatches);
    EXPECT_LE(storage_->lists - before, 2);
    for (auto& s : sessions) {
      auto frames = co_await read(*s, 1);
      CO_ASSERT_EQ(frames.size(), 1u);
      EXPECT_EQ(frames[0].object->name, "a");
    }
  });
}

}  // namespace
}  // namespace kwatch::watch

namespace kwatch::watch {
namespace {

// A paged list's pages after the first come from the state at the first page's version, kept
// by keep_list_snapshot: later writes do not show; a snapshot is not taken once the cache has
// moved on; at most kListSnapshots are kept.
TEST_F(CacherTest, PagedListsReadLaterPagesFromTheFirstPagesSnapshot) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    for (const char* name : {"a", "b", "c", "d", "e"}) co_await put(name);
    asio::steady_timer t(co_await asio::this_coro::executor);
    const std::string prefix = "/registry/configmaps/default/";
    CacheList first;
    for (int i = 0; i < 500; ++i) {  // until the cache has applied the last write
      first = cacher->list(prefix, "", 2, nullptr);
      if (first.remaining == 3) break;
      t.expires_after(2ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    CO_ASSERT_TRUE(first.more);
    cacher->keep_list_snapshot(prefix, first.resource_version);
    // Changed after the first page: d deleted, f added.
    co_await storage_->delete_if("/registry/configmaps/default/d", 0);
    co_await put("f");
    std::vector<std::string> names;
    std::string start = prefix + "b";
    start.push_back('\0');
    for (;;) {
      auto page = cacher->list_snapshot(first.resource_version, prefix, start, 2, nullptr);
      CO_ASSERT_TRUE(page.has_value());
      EXPECT_EQ(page->resource_version, first.resource_version);
      for (const auto& o : page->objects) names.emplace_back(o->name);
      if (!page->more) break;
      start = std::string(page->objects.back()->key) + '\0';
    }
    EXPECT_EQ(names, (std::vector<std::string>{"c", "d", "e"}));
    EXPECT_FALSE(cacher->list_snapshot(first.resource_version - 1, prefix, "", 2, nullptr))
        << "no snapshot at another version: storage answers";
    for (int i = 0; i < 500 && cacher->resource_version() == first.resource_version; ++i) {
      t.expires_after(2ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    cacher->keep_list_snapshot(prefix, first.resource_version - 1);
    EXPECT_FALSE(cacher->list_snapshot(first.resource_version - 1, prefix, "", 2, nullptr))
        << "not taken: the cache is no longer at that version";
    // The oldest goes once more are kept than kListSnapshots.
    for (std::size_t i = 0; i < Cacher::kListSnapshots; ++i) {
      const auto written = co_await put("g" + std::to_string(i));
      for (int j = 0; j < 500; ++j) {
        auto now = cacher->list(prefix, "", 1, nullptr);
        if (now.resource_version >= written) {
          cacher->keep_list_snapshot(prefix, now.resource_version);
          break;
        }
        t.expires_after(2ms);
        co_await t.async_wait(asio::use_awaitable);
      }
    }
    EXPECT_FALSE(cacher->list_snapshot(first.resource_version, prefix, "", 2, nullptr))
        << "evicted by newer snapshots";
  });
}

// The HTTP/2 transport's way: take() what there is, when_ready() to be called when more comes.
TEST_F(CacherTest, ASessionReadyWhenAnEventComesAndAtItsDeadline) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    auto req = request(std::nullopt);
    req.deadline = std::chrono::steady_clock::now() + 300ms;
    auto session = co_await cacher->watch(std::move(req));
    CO_ASSERT_TRUE(session);
    std::vector<WatchFrame> frames;
    CO_ASSERT_TRUE((*session)->take(frames));
    EXPECT_TRUE(frames.empty());
    int calls = 0;
    (*session)->when_ready([&calls] { ++calls; });
    co_await put("a");
    asio::steady_timer pause(co_await asio::this_coro::executor);
    while (calls == 0) {
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::use_awaitable);
    }
    CO_ASSERT_TRUE((*session)->take(frames));
    CO_ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].type, EventType::added);
    CO_ASSERT_TRUE((*session)->take(frames));
    EXPECT_TRUE(frames.empty());
    // Nothing more comes: the deadline wakes it, and take() says the watch is over.
    (*session)->when_ready([&calls] { ++calls; });
    while (calls == 1) {
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::use_awaitable);
    }
    auto over = (*session)->take(frames);
    CO_ASSERT_FALSE(over);
    EXPECT_EQ(over.error(), boost::asio::error::eof);
  });
}

// A session dropped while it waits to be called: the call comes (cancelled) and lets go of the
// watcher, which is unregistered at once.
TEST_F(CacherTest, ASessionDroppedWhileWaitingToBeCalledIsReleased) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    auto session = co_await cacher->watch(request(std::nullopt));
    CO_ASSERT_TRUE(session);
    std::vector<WatchFrame> frames;
    CO_ASSERT_TRUE((*session)->take(frames));
    auto alive = std::make_shared<int>(0);
    std::weak_ptr<int> held = alive;
    (*session)->when_ready([alive = std::move(alive)] {});
    EXPECT_EQ(cacher->counters().watchers.load(), 1);
    session->reset();
    EXPECT_EQ(cacher->counters().watchers.load(), 0);
    asio::steady_timer pause(co_await asio::this_coro::executor);
    for (int i = 0; i < 1000 && !held.expired(); ++i) {
      pause.expires_after(1ms);
      co_await pause.async_wait(asio::use_awaitable);
    }
    EXPECT_TRUE(held.expired()) << "the pending call still holds what it was given";
  });
}

// A client that opens long watches and drops them at once, in a loop: what the cacher keeps of
// their deadlines is swept, not kept until the deadlines come.
TEST_F(CacherTest, DeadlinesOfDroppedWatchesDoNotPileUp) {
  auto cacher = make_cacher();
  run([&]() -> asio::awaitable<void> {
    co_await wait_ready(*cacher);
    for (int i = 0; i < 5000; ++i) {
      auto session = co_await cacher->watch(request(std::nullopt, 3600s));
      CO_ASSERT_TRUE(session);
    }
    EXPECT_LT(cacher->deadline_entries(), 2100u);
    EXPECT_EQ(cacher->counters().watchers.load(), 0);
  });
}

}  // namespace
}  // namespace kwatch::watch
