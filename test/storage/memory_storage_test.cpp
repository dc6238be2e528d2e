#include "storage/memory_storage.hpp"

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <variant>

#include "storage/mvcc_store.hpp"

namespace kwatch::storage {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;

// ASSERT_* returns from the function, which a coroutine cannot do.
#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

constexpr auto kDeadline = 10s;

// Runs `task` on `ioc` (with `threads` threads) until it finishes or the deadline passes.
void run(asio::io_context& ioc, asio::awaitable<void> task, int threads = 1) {
  bool done = false;
  std::exception_ptr error;
  asio::co_spawn(ioc, std::move(task), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  std::vector<std::thread> extra;
  for (int i = 1; i < threads; ++i) extra.emplace_back([&] { ioc.run_for(kDeadline); });
  ioc.run_for(kDeadline);
  for (auto& t : extra) t.join();
  ioc.restart();
  ASSERT_TRUE(done) << "task did not finish before the deadline";
  if (error) std::rethrow_exception(error);
}

std::unique_ptr<MemoryStorage> open_memory(MemoryStorage::Options options = {}) {
  auto s = MemoryStorage::open(std::move(options));
  EXPECT_TRUE(s);
  return s ? std::move(*s) : nullptr;
}

// Counts the reads that reach the wrapped storage.
class CountingStorage final : public Storage {
 public:
  explicit CountingStorage(Storage& inner) : inner_(inner) {}
  int gets = 0;

  asio::awaitable<Result<KeyValue>> get(std::string key, std::int64_t revision) override {
    ++gets;
    co_return co_await inner_.get(std::move(key), revision);
  }
  asio::awaitable<Result<ListResult>> list(ListOptions options) override {
    co_return co_await inner_.list(std::move(options));
  }
  asio::awaitable<Result<TxnResult>> put_if(std::string key, std::int64_t expected,
                                            std::string value) override {
    co_return co_await inner_.put_if(std::move(key), expected, std::move(value));
  }
  asio::awaitable<Result<TxnResult>> delete_if(std::string key, std::int64_t expected) override {
    co_return co_await inner_.delete_if(std::move(key), expected);
  }
  asio::awaitable<Result<std::int64_t>> current_revision() override {
    co_return co_await inner_.current_revision();
  }
  asio::awaitable<Result<void>> compact(std::int64_t revision) override {
    co_return co_await inner_.compact(revision);
  }
  asio::awaitable<Result<std::unique_ptr<WatchStream>>> watch(std::string prefix,
                                                              std::int64_t start,
                                                              PrevKv prev_kv) override {
    co_return co_await inner_.watch(std::move(prefix), start, prev_kv);
  }

 private:
  Storage& inner_;
};

KeyValue suggestion(std::string key, std::string value, std::int64_t mod_revision) {
  KeyValue kv;
  kv.key = std::move(key);
  kv.value = std::move(value);
  kv.mod_revision = mod_revision;
  return kv;
}

TEST(MemoryStorage, GuaranteedUpdateStartsFromASuggestedStateAndRereadsWhenItIsStale) {
  asio::io_context ioc;
  auto memory = open_memory();
  ASSERT_TRUE(memory);
  CountingStorage storage(*memory);
  auto body = [&]() -> asio::awaitable<void> {
    co_await storage.create("/s/a", "1");  // 2
    std::vector<std::string> seen;
    Storage::UpdateFn append = [&](const KeyValue* cur) -> Storage::UpdateResult {
      if (cur == nullptr) return Errc::not_found;
      seen.push_back(cur->value);
      return cur->value + "+";
    };
    // A current suggestion: one guarded write, no read.
    auto fresh = co_await storage.guaranteed_update("/s/a", append, suggestion("/s/a", "1", 2));
    CO_ASSERT(fresh);
    EXPECT_EQ(fresh->value, "1+");
    EXPECT_EQ(fresh->mod_revision, 3);
    EXPECT_EQ(storage.gets, 0);
    EXPECT_EQ(seen, (std::vector<std::string>{"1"}));

    // A stale one: the guard fails and the update retries on the state storage returned.
    seen.clear();
    auto stale = co_await storage.guaranteed_update("/s/a", append, suggestion("/s/a", "1", 2));
    CO_ASSERT(stale);
    EXPECT_EQ(stale->value, "1++");
    EXPECT_EQ(seen, (std::vector<std::string>{"1", "1+"}));
    EXPECT_EQ((co_await storage.get("/s/a", 0))->value, "1++");
    storage.gets = 0;

    // A rejection decided on a stale suggestion is not final: storage is read and asked again.
    Storage::UpdateFn needs_current = [&](const KeyValue* cur) -> Storage::UpdateResult {
      if (cur == nullptr) return Errc::not_found;
      if (cur->value != "1++") return Errc::conflict;
      return std::string("2");
    };
    auto rejected =
        co_await storage.guaranteed_update("/s/a", needs_current, suggestion("/s/a", "1", 2));
    CO_ASSERT(rejected);
    EXPECT_EQ(rejected->value, "2");
    EXPECT_EQ(storage.gets, 1);

    // So is a no-op: the result is the current state, not the suggested one.
    Storage::UpdateFn keep = [](const KeyValue* cur) -> Storage::UpdateResult {
      return cur ? cur->value : "absent";
    };
    auto same = co_await storage.guaranteed_update("/s/a", keep, suggestion("/s/a", "1", 2));
    CO_ASSERT(same);
    EXPECT_EQ(same->value, "2");
    EXPECT_EQ(same->mod_revision, 5);
    EXPECT_EQ(storage.gets, 2);
    EXPECT_EQ(*(co_await storage.current_revision()), 5);

    // "Leave it as it is" (nullopt) on a suggestion without bytes: decided again on storage's
    // state, which is returned unwritten.
    std::vector<std::int64_t> revisions;
    Storage::UpdateFn leave = [&](const KeyValue* cur) -> Storage::UpdateResult {
      revisions.push_back(cur ? cur->mod_revision : 0);
      return std::nullopt;
    };
    auto left = co_await storage.guaranteed_update("/s/a", leave, suggestion("/s/a", "", 5));
    CO_ASSERT(left);
    EXPECT_EQ(left->value, "2");
    EXPECT_EQ(left->mod_revision, 5);
    EXPECT_EQ(revisions, (std::vector<std::int64_t>{5, 5}));
    EXPECT_EQ(storage.gets, 3);
    EXPECT_EQ(*(co_await storage.current_revision()), 5);

    // A suggestion for a key deleted since: the update sees the key absent.
    co_await storage.delete_if("/s/a", 0);
    auto gone = co_await storage.guaranteed_update("/s/a", append, suggestion("/s/a", "2", 5));
    CO_ASSERT(!gone);
    EXPECT_EQ(gone.error(), Errc::not_found);
    auto after = co_await storage.get("/s/a", 0);
    EXPECT_EQ(after.error(), Errc::not_found);
    // Nothing to leave as it is.
    auto absent = co_await storage.guaranteed_update("/s/a", leave, std::nullopt);
    CO_ASSERT(!absent);
    EXPECT_EQ(absent.error(), Errc::not_found);
  };
  run(ioc, body());
}

TEST(MemoryStorage, WatchFromAPastRevisionReplaysEventsWithPrevKv) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    co_await storage->put_if("/w/a", 0, "1");    // 2
    co_await storage->put_if("/other", 0, "o");  // 3
    co_await storage->put_if("/w/a", 2, "2");    // 4
    co_await storage->delete_if("/w/a");         // 5
    auto stream = co_await storage->watch("/w/", 3, PrevKv::include);
    CO_ASSERT(stream);
    auto batch = co_await (*stream)->next();
    CO_ASSERT(batch);
    CO_ASSERT(batch->events.size() == 2u);
    EXPECT_EQ(batch->revision, 5);
    EXPECT_EQ(batch->events[0].type, EventType::put);
    EXPECT_EQ(batch->events[0].kv.value, "2");
    CO_ASSERT(batch->events[0].prev_kv);
    EXPECT_EQ(batch->events[0].prev_kv->value, "1");
    EXPECT_EQ(batch->events[1].type, EventType::del);
    EXPECT_EQ(batch->events[1].revision(), 5);
    CO_ASSERT(batch->events[1].prev_kv);
    EXPECT_EQ(batch->events[1].prev_kv->value, "2");
  };
  run(ioc, body());
}

TEST(MemoryStorage, WatchBatchesAreCappedAtTheConfiguredLimit) {
  asio::io_context ioc;
  MemoryStorage::Options options;
  options.watch_batch_limit = 3;
  auto storage = open_memory(options);
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    for (int i = 0; i < 7; ++i) co_await storage->put_if("/k" + std::to_string(i), 0, "v");
    auto stream = co_await storage->watch("/", 2, PrevKv::include);
    CO_ASSERT(stream);
    std::vector<std::size_t> sizes;
    std::int64_t last = 0;
    while (last < 8) {
      auto batch = co_await (*stream)->next();
      CO_ASSERT(batch && !batch->events.empty());
      EXPECT_EQ(batch->events.front().revision(), last == 0 ? 2 : last + 1);
      last = batch->events.back().revision();
      EXPECT_EQ(batch->revision, last);
      sizes.push_back(batch->events.size());
    }
    EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 3, 1}));
  };
  run(ioc, body());
}

TEST(MemoryStorage, WatchWakesUpForCommitsMadeOnAnotherThread) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  constexpr int kWrites = 300;
  std::unique_ptr<WatchStream> stream;
  auto start = [&]() -> asio::awaitable<void> {
    auto s = co_await storage->watch("/w/", 0, PrevKv::include);
    CO_ASSERT(s);
    stream = std::move(*s);
  };
  run(ioc, start());
  ASSERT_TRUE(stream);
  std::thread writer([&] {
    for (int i = 0; i < kWrites; ++i) {
      storage->store().put_if("/w/" + std::to_string(i), 0, "v");
      storage->store().put_if("/unwatched/" + std::to_string(i), 0, "v");
    }
  });
  int seen = 0;
  auto collect = [&]() -> asio::awaitable<void> {
    std::int64_t last = 0;
    while (seen < kWrites) {
      auto batch = co_await stream->next();
      CO_ASSERT(batch);
      for (const auto& e : batch->events) {
        EXPECT_GT(e.revision(), last);
        EXPECT_TRUE(e.kv.key.starts_with("/w/"));
        last = e.revision();
        ++seen;
      }
    }
  };
  run(ioc, collect());
  writer.join();
  EXPECT_EQ(seen, kWrites);
}

TEST(MemoryStorage, ConcurrentUpdatesOnAMultiThreadedContextLoseNothing) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  constexpr int kWorkers = 8;
  constexpr int kIncrements = 50;
  auto body = [&]() -> asio::awaitable<void> {
    co_await storage->create("/counter", "0");
    auto stream = co_await storage->watch("/counter", 0, PrevKv::include);
    CO_ASSERT(stream);
    int finished = 0;
    for (int w = 0; w < kWorkers; ++w) {
      asio::co_spawn(
          asio::make_strand(ioc),
          [&]() -> asio::awaitable<void> {
            for (int i = 0; i < kIncrements; ++i) {
              auto r = co_await storage->guaranteed_update(
                  "/counter", [](const KeyValue* cur) -> Storage::UpdateResult {
                    return std::to_string(std::stoi(cur->value) + 1);
                  });
              EXPECT_TRUE(r);
            }
          },
          [&](std::exception_ptr) { ++finished; });
    }
    int events = 0;
    while (events < kWorkers * kIncrements) {
      auto batch = co_await (*stream)->next();
      CO_ASSERT(batch);
      events += static_cast<int>(batch->events.size());
    }
    auto end = co_await storage->get("/counter");
    CO_ASSERT(end);
    EXPECT_EQ(end->value, std::to_string(kWorkers * kIncrements));
  };
  run(ioc, body(), 2);
}

TEST(MemoryStorage, NextRacedAgainstATimerIsCancelledAndTheStreamKeepsWorking) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/", 0, PrevKv::include);
    CO_ASSERT(stream);
    asio::steady_timer timer(ioc, 20ms);
    auto first = co_await ((*stream)->next() || timer.async_wait(asio::use_awaitable));
    EXPECT_EQ(first.index(), 1u);
    co_await storage->put_if("/a", 0, "v");
    auto batch = co_await (*stream)->next();
    CO_ASSERT(batch);
    CO_ASSERT(batch->events.size() == 1u);
    EXPECT_EQ(batch->events[0].kv.key, "/a");
  };
  run(ioc, body());
}

TEST(MemoryStorage, CancellationSlotAbortsAWaitingNext) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  std::unique_ptr<WatchStream> stream;
  auto start = [&]() -> asio::awaitable<void> {
    auto s = co_await storage->watch("/", 0, PrevKv::include);
    CO_ASSERT(s);
    stream = std::move(*s);
  };
  run(ioc, start());
  ASSERT_TRUE(stream);

  asio::cancellation_signal signal;
  std::optional<Result<WatchBatch>> result;
  asio::co_spawn(
      ioc, stream->next(),
      asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, Result<WatchBatch> r) {
        EXPECT_FALSE(e);
        result = std::move(r);
      }));
  // Posted after the spawn, so it runs once next() is suspended waiting for a commit.
  asio::post(ioc, [&] { signal.emit(asio::cancellation_type::terminal); });
  ioc.run_for(kDeadline);
  ASSERT_TRUE(result);
  ASSERT_FALSE(*result);
  EXPECT_EQ(result->error(), asio::error::operation_aborted);
}

TEST(MemoryStorage, StreamThatFallsBehindCompactionIsGone) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/", 0, PrevKv::include);
    CO_ASSERT(stream);
    for (int i = 0; i < 4; ++i) co_await storage->put_if("/k" + std::to_string(i), 0, "v");
    CO_ASSERT(co_await storage->compact(4));
    auto batch = co_await (*stream)->next();
    CO_ASSERT(!batch);
    EXPECT_EQ(batch.error(), Errc::gone);
    auto late = co_await storage->watch("/", 3, PrevKv::include);
    CO_ASSERT(!late);
    EXPECT_EQ(late.error(), Errc::gone);
    auto fine = co_await storage->watch("/", 5, PrevKv::include);
    EXPECT_TRUE(fine);
  };
  run(ioc, body());
}

TEST(MemoryStorage, DestroyingTheStorageEndsWaitingStreamsWithUnavailable) {
  asio::io_context ioc;
  auto storage = open_memory();
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    auto stream = co_await storage->watch("/", 0, PrevKv::include);
    CO_ASSERT(stream);
    asio::post(co_await asio::this_coro::executor, [&] { storage.reset(); });
    auto batch = co_await (*stream)->next();
    CO_ASSERT(!batch);
    EXPECT_EQ(batch.error(), Errc::unavailable);
  };
  run(ioc, body());
}

class MemoryStorageDurable : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kwatch-mem-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  MemoryStorage::Options options() const {
    MemoryStorage::Options o;
    o.data_dir = dir_.string();
    o.snapshot_log_records = 5;
    return o;
  }

  fs::path dir_;
};

TEST_F(MemoryStorageDurable, RestartPreservesRevisionsAndOldWatchesAreGone) {
  asio::io_context ioc;
  KeyValue before;
  {
    auto storage = open_memory(options());
    ASSERT_TRUE(storage);
    auto body = [&]() -> asio::awaitable<void> {
      for (int i = 0; i < 12; ++i) {
        co_await storage->guaranteed_update(
            "/k" + std::to_string(i % 4),
            [i](const KeyValue*) -> Storage::UpdateResult { return "v" + std::to_string(i); });
      }
      co_await storage->delete_if("/k0");
      auto kv = co_await storage->get("/k3");
      CO_ASSERT(kv);
      before = *kv;
    };
    run(ioc, body());
  }
  auto storage = open_memory(options());
  ASSERT_TRUE(storage);
  auto body = [&]() -> asio::awaitable<void> {
    EXPECT_EQ(*(co_await storage->current_revision()), 14);
    auto kv = co_await storage->get("/k3");
    CO_ASSERT(kv);
    EXPECT_EQ(kv->value, before.value);
    EXPECT_EQ(kv->create_revision, before.create_revision);
    EXPECT_EQ(kv->mod_revision, before.mod_revision);
    EXPECT_EQ(kv->version, before.version);
    EXPECT_EQ((co_await storage->get("/k0")).error(), Errc::not_found);
    EXPECT_EQ((co_await storage->watch("/", 2, PrevKv::include)).error(), Errc::gone);
    auto stream = co_await storage->watch("/", 0, PrevKv::include);
    CO_ASSERT(stream);
    co_await storage->put_if("/new", 0, "n");
    auto batch = co_await (*stream)->next();
    CO_ASSERT(batch && batch->events.size() == 1u);
    EXPECT_EQ(batch->events[0].revision(), 15);
  };
  run(ioc, body());
}

}  // namespace
}  // namespace kwatch::storage
