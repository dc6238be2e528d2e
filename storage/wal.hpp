// Wal: durability of an MvccStore in a data directory.
//
// Layout: `wal-<seq>.log` segments (an 8-byte magic, then records of
// [u32 payload length][u32 CRC-32 of payload][payload], little-endian) and `snap-<seq>.snap`
// snapshots (magic, body with the full live state, CRC-32 of the body). A snapshot named <seq>
// holds the state just before the first record of segment <seq>. Two generations are kept: the
// newest snapshot and the one before it (before the second snapshot: the empty store, whose log
// starts at segment 1), with every segment from the older one on; write_snapshot removes anything
// older. `*.tmp` files are unfinished snapshots and are removed on open. The directory is created
// 0700 and every file 0600 (an existing directory open to group or others is only warned about).
//
// Recovery (`open`): load the newest snapshot and replay the segments from its sequence on, which
// must all be present. If that snapshot fails its checksum, fall back to the previous generation
// (its snapshot, or the empty store) and replay every segment since it: nothing acknowledged is
// lost; the error is logged and the damaged file renamed to `<name>.damaged-<unix time>`.
// Only a torn tail is cut: a bad last record of the last segment that is the write in flight at a
// crash, i.e. its header and a prefix of its payload (sectors that never reached the disk read as
// zeros, and zeros may follow), with a plausible length, kind and the next revision, and no
// valid record anywhere after it. Before cutting, the original segment is copied to
// `<segment>.torn-<unix time>` (0600, synced). Any other damage (a record that fails its
// checksum in an earlier segment or with data after it, a length running past the end of the
// file while valid records follow, a complete last record with a bad checksum, a missing
// segment) is `corrupt`: the directory is not opened nor changed, and the error log names the
// file, the offset and what the operator can do. History older than the base snapshot counts as
// compacted.
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
#include <string_view>

#include "base/errc.hpp"
#include "storage/mvcc_store.hpp"

namespace kwatch::storage {

// Expected failures in base's vocabulary (base/errc.hpp).
using base::Errc;
using base::Result;

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
  // then opens the newest segment for appending. `corrupt` when that is impossible without
  // dropping acknowledged writes (the directory is left as it was); `internal` on I/O errors.
  static Result<std::unique_ptr<Wal>> open(WalOptions options, MvccStore& store);
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Appends one record (and syncs when `sync`). On failure nothing of it remains in the log.
  Result<void> append(const Mutation& mutation);
  bool snapshot_due() const;
  // Writes `state` as the new snapshot (temp file, fsync, rename), starts a fresh segment and
  // removes the generations before the previous one (see Layout). After a failure the log stays
  // as it was and the snapshot is due again once another threshold's worth of records has been
  // appended.
  Result<void> write_snapshot(const StoreState& state);

  std::filesystem::path segment_path() const;  // the segment being appended to
  std::uint64_t log_bytes() const { return log_bytes_; }
  std::uint64_t log_records() const { return log_records_; }

 private:
  explicit Wal(WalOptions options);
  Result<void> start_segment(std::uint64_t seq);
  // Appends continue in the last segment found at open (`file` its bytes): after its last good
  // record at `pos`, a torn tail cut off (the original kept aside first).
  Result<void> resume_segment(std::uint64_t seq, const std::filesystem::path& path,
                              std::string_view file, std::size_t pos, bool torn);

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
