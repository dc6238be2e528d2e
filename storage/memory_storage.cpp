#include "storage/memory_storage.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "storage/async_notifier.hpp"
#include "storage/mvcc_store.hpp"
#include "storage/wal.hpp"

namespace kwatch::storage {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Shared between one stream, the storage's watcher list and a pending cancellation handler.
struct WatchState : detail::AsyncNotifier {
  explicit WatchState(std::string p) : prefix(std::move(p)) {}

  const std::string prefix;
  std::atomic<bool> progress_requested{false};
  std::atomic<bool> closed{false};  // the storage is gone
};

}  // namespace

struct MemoryStorage::Core {
  MvccStore store;
  std::unique_ptr<Wal> wal;
  std::size_t batch_limit = 1024;

  std::mutex watchers_mutex;
  std::vector<std::weak_ptr<WatchState>> watchers;

  // Commit listener: runs under the store's writer mutex, so it only flags and posts.
  void on_commit(const Mutation& m) {
    std::lock_guard lock(watchers_mutex);
    for (std::size_t i = 0; i < watchers.size();) {
      auto w = watchers[i].lock();
      if (!w) {
        watchers[i] = std::move(watchers.back());
        watchers.pop_back();
        continue;
      }
      if (m.kind == Mutation::Kind::compact || m.key.starts_with(w->prefix)) w->notify();
      ++i;
    }
  }

  void close_all() {
    std::lock_guard lock(watchers_mutex);
    for (auto& weak : watchers) {
      if (auto w = weak.lock()) {
        w->closed = true;
        w->notify();
      }
    }
  }
};

namespace {

class MemoryWatchStream final : public WatchStream {
 public:
  MemoryWatchStream(std::weak_ptr<MemoryStorage::Core> core, std::shared_ptr<WatchState> state,
                    std::int64_t next_revision, std::size_t batch_limit)
      : core_(std::move(core)),
        state_(std::move(state)),
        next_revision_(next_revision),
        batch_limit_(batch_limit) {}

  asio::awaitable<Result<WatchBatch>> next() override {
    if (finished_) co_return finished_;
    for (;;) {
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) {
        co_return error_code(asio::error::operation_aborted);
      }
      auto core = core_.lock();
      // Clear before reading: a commit after this point either shows up in the read or leaves
      // the flag set, so the wait below cannot miss it.
      state_->clear();
      if (state_->closed) core.reset();
      if (!core) co_return finish(make_error_code(Errc::unavailable));
      auto read = core->store.read_events(state_->prefix, next_revision_, batch_limit_);
      if (!read) co_return finish(read.error());
      next_revision_ = read->next_revision;
      if (!read->events.empty()) {
        co_return WatchBatch{std::move(read->events), next_revision_ - 1};
      }
      if (next_revision_ <= read->current_revision) {
        // The scan budget ran out in a long stretch of other keys' writes: let other work run
        // before scanning on.
        core.reset();
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        continue;
      }
      if (state_->progress_requested.exchange(false)) {
        co_return WatchBatch{{}, read->current_revision};
      }
      core.reset();  // a waiting stream must not keep the storage alive
      auto [ec] = co_await detail::async_wait_notified(state_, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
    }
  }

  void request_progress() override {
    state_->progress_requested = true;
    state_->notify();
  }

 private:
  error_code finish(error_code e) {
    finished_ = e;
    return finished_;
  }

  std::weak_ptr<MemoryStorage::Core> core_;
  std::shared_ptr<WatchState> state_;
  std::int64_t next_revision_;
  std::size_t batch_limit_;
  error_code finished_;
};

}  // namespace

MemoryStorage::MemoryStorage(std::shared_ptr<Core> core) : core_(std::move(core)) {}

MemoryStorage::~MemoryStorage() {
  // A stream in the middle of a read may hold the core a little longer; the flag makes every
  // stream, waiting or not, report `unavailable` from now on.
  if (core_) core_->close_all();
}

Result<std::unique_ptr<MemoryStorage>> MemoryStorage::open(Options options) {
  auto core = std::make_shared<Core>();
  core->batch_limit = options.watch_batch_limit == 0 ? 1024 : options.watch_batch_limit;
  if (!options.data_dir.empty()) {
    WalOptions wal_options;
    wal_options.dir = options.data_dir;
    wal_options.sync = options.sync;
    wal_options.snapshot_log_bytes = options.snapshot_log_bytes;
    wal_options.snapshot_log_records = options.snapshot_log_records;
    auto wal = Wal::open(std::move(wal_options), core->store);
    if (!wal) return wal.error();
    core->wal = std::move(*wal);
    Core* c = core.get();
    core->store.set_commit_hook([c](const Mutation& m) -> Result<void> {
      // The hook runs before `m` is visible, so the exported state is the one just before it
      // and `m` becomes the first record of the fresh segment.
      if (c->wal->snapshot_due()) {
        if (auto r = c->wal->write_snapshot(c->store.export_state()); !r) {
          spdlog::warn("memory storage: snapshot failed: {}", r.error().message());
        }
      }
      return c->wal->append(m);
    });
  }
  Core* c = core.get();
  core->store.add_commit_listener([c](const Mutation& m) { c->on_commit(m); });
  return std::unique_ptr<MemoryStorage>(new MemoryStorage(std::move(core)));
}

MvccStore& MemoryStorage::store() { return core_->store; }

asio::awaitable<Result<KeyValue>> MemoryStorage::get(std::string key, std::int64_t revision) {
  co_return core_->store.get(key, revision);
}

asio::awaitable<Result<ListResult>> MemoryStorage::list(ListOptions options) {
  co_return core_->store.range(options);
}

asio::awaitable<Result<TxnResult>> MemoryStorage::put_if(std::string key,
                                                         std::int64_t expected_mod_revision,
                                                         std::string value) {
  co_return core_->store.put_if(key, expected_mod_revision, std::move(value));
}

asio::awaitable<Result<TxnResult>> MemoryStorage::delete_if(std::string key,
                                                            std::int64_t expected_mod_revision) {
  co_return core_->store.delete_if(key, expected_mod_revision);
}

asio::awaitable<Result<std::int64_t>> MemoryStorage::current_revision() {
  co_return core_->store.current_revision();
}

asio::awaitable<Result<void>> MemoryStorage::compact(std::int64_t revision) {
  co_return core_->store.compact(revision);
}

asio::awaitable<Result<std::unique_ptr<WatchStream>>> MemoryStorage::watch(
    std::string prefix, std::int64_t start_revision, PrevKv /*prev_kv: always kept, it is free*/) {
  auto state = std::make_shared<WatchState>(std::move(prefix));
  // Register before reading the revision so no commit after it can go unnoticed.
  {
    std::lock_guard lock(core_->watchers_mutex);
    core_->watchers.push_back(state);
  }
  if (start_revision == 0) {
    start_revision = core_->store.current_revision() + 1;
  } else if (start_revision <= core_->store.compacted_revision()) {
    co_return Errc::gone;
  }
  co_return std::unique_ptr<WatchStream>(std::make_unique<MemoryWatchStream>(
      core_, std::move(state), start_revision, core_->batch_limit));
}

}  // namespace kwatch::storage
