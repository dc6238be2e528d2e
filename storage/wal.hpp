// Wal: durability of an MvccStore in a data directory.
//
// Layout: `wal-<seq>.log` segments (an 8-byte magic, then records of
// [u32 payload length][u32 CRC-32 of payload][payload], little-endian) and `snap-<seq>.snap`
// snapshots (magic, body with the full live state, CRC-32 of the body). A snapshot named <seq>
// holds the state just before the first record of segment <seq>. `*.tmp` files are unfinished
// snapshots and are removed on open.
//
// Recovery (`open`): load the newest snapshot, replay the segments from its sequence on. A bad
// record at the end of the last segment (a torn or half-written tail: the record reaches the end of
// the file, or only zero bytes follow it) is cut off; anything else that fails its checksum is
// `corrupt` and the directory is not opened. History older than the snapshot counts as compacted.
//
// Thread-safety: none. The owner serializes all calls; MemoryStorage calls `append` and
// `write_snapshot` from MvccStore's commit hook, which runs under the store's writer mutex.
// After an I/O error that could not be rolled back the Wal is broken and every later append fails
// with `internal` (the on-disk log stays a clean prefix of what was acknowledged).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "storage/errc.hpp"
#include "storage/mvcc_store.hpp"

namespace kwatch::storage {

struct WalOptions {
  std::filesystem::path dir;  // created if absent
  bool sync = true;           // fdatasync after each append
  // A snapshot is due once the log since the last snapshot exceeds either threshold (0: none).
  std::uint64_t snapshot_log_bytes = 64u << 20;
  std::uint64_t snapshot_log_records = 0;
};

class Wal {
 public:
  // Recovers the directory's content into `store`, which must be empty and not yet shared,
  // then opens the newest segment for appending.
  static Result<std::unique_ptr<Wal>> open(WalOptions options, MvccStore& store);
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Appends one record (and syncs when `sync`). On failure nothing of it remains in the log.
  Result<void> append(const Mutation& mutation);
  bool snapshot_due() const;
  // Writes `state` as the new snapshot (temp file, fsync, rename), starts a fresh segment and
  // removes the older segments and snapshots. After a failure the log stays as it was and the
  // snapshot is due again once another threshold's worth of records has been appended.
  Result<void> write_snapshot(const StoreState& state);

  std::filesystem::path segment_path() const;  // the segment being appended to
  std::uint64_t log_bytes() const { return log_bytes_; }
  std::uint64_t log_records() const { return log_records_; }

 private:
  explicit Wal(WalOptions options);
  Result<void> start_segment(std::uint64_t seq);

  WalOptions options_;
  int fd_ = -1;
  std::uint64_t seq_ = 0;
  std::uint64_t offset_ = 0;       // end of the last good record in the current segment
  std::uint64_t log_bytes_ = 0;    // record bytes since the last snapshot
  std::uint64_t log_records_ = 0;  // records since the last snapshot
  std::uint64_t retry_bytes_ = 0;  // log size at the last failed snapshot
  std::uint64_t retry_records_ = 0;
  bool broken_ = false;
  std::string buffer_;  // reused encoding buffer
};

}  // namespace kwatch::storage
