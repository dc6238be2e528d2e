// MemoryStorage: the embedded Storage backend. An MvccStore in memory, made durable by a Wal in
// `Options::data_dir` when that is set.
//
// Ownership: the caller owns the MemoryStorage; watch streams share its core only while they
// read, so a stream may outlive the storage: its next() then returns `unavailable` (a waiting
// next() is woken for that when the storage is destroyed).
// Thread-safety: every method may be called from any thread; the awaitables never suspend except
// WatchStream::next() waiting for a commit. Writes with `sync` block their thread for the log
// append and fdatasync (under the store's writer mutex; readers are not blocked).
// Cancellation: a waiting WatchStream::next() completes with asio::error::operation_aborted when
// its cancellation slot fires (any cancellation type); the stream stays usable and loses no event.
// Watch batches: `revision` of an event batch is its last event's revision (every change under
// the prefix up to it has been delivered); a progress batch carries the current revision.
// Wake-ups are posted to the executor of the coroutine awaiting next(), which keeps outstanding
// work on it while waiting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "storage/storage.hpp"

namespace kwatch::storage {

class MvccStore;

class MemoryStorage : public Storage {
 public:
  struct Options {
    std::string data_dir;  // empty: memory only, nothing survives the process
    bool sync = true;      // fdatasync after each write
    // A snapshot is written (and the log restarted) once the log exceeds either (0: never).
    std::uint64_t snapshot_log_bytes = 64u << 20;
    std::uint64_t snapshot_log_records = 0;
    std::size_t watch_batch_limit = 1024;  // events per WatchBatch at most
  };

  // Recovers `data_dir` when set. `corrupt` if the data cannot be recovered, `internal` on I/O
  // errors.
  static Result<std::unique_ptr<MemoryStorage>> open(Options options);
  ~MemoryStorage() override;
  MemoryStorage(const MemoryStorage&) = delete;
  MemoryStorage& operator=(const MemoryStorage&) = delete;

  boost::asio::awaitable<Result<KeyValue>> get(std::string key, std::int64_t revision = 0) override;
  boost::asio::awaitable<Result<ListResult>> list(ListOptions options) override;
  boost::asio::awaitable<Result<TxnResult>> put_if(std::string key,
                                                   std::int64_t expected_mod_revision,
                                                   std::string value) override;
  boost::asio::awaitable<Result<TxnResult>> delete_if(
      std::string key, std::int64_t expected_mod_revision = 0) override;
  boost::asio::awaitable<Result<std::int64_t>> current_revision() override;
  boost::asio::awaitable<Result<void>> compact(std::int64_t revision) override;
  // `gone` at once if start_revision is at or below the compacted revision.
  boost::asio::awaitable<Result<std::unique_ptr<WatchStream>>> watch(
      std::string prefix, std::int64_t start_revision, PrevKv prev_kv) override;

  // The synchronous core, for tools and tests in storage/. Writes through it are logged and wake
  // watchers like writes through the awaitables.
  MvccStore& store();

  struct Core;

 private:
  explicit MemoryStorage(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace kwatch::storage
