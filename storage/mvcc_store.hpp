// MvccStore: the in-memory, multi-version key-value core of the embedded backend, in the model of
// etcd v3 (one global revision, per-key create/mod revision and version, tombstones, compaction,
// an event log for watches). Pure and synchronous: no executor, no I/O.
//
// Revisions: an empty store is at revision 1; every successful put or delete adds one (the first
// write gets revision 2). Failed guards, deletes of absent keys and compactions add nothing.
//
// Compaction at C keeps the state at C readable: reads at revisions >= C succeed, reads below C
// fail with `gone`. Event reads (watches) need start revisions > C; at or below C they fail with
// `gone`. Reads at a revision above the current one fail with `bad_request`.
//
// Thread-safety: every method may be called from any thread. Readers share a std::shared_mutex;
// writers are serialized by a separate writer mutex and hold the shared_mutex exclusively only
// while publishing a write, so the commit hook (e.g. a log append + fdatasync) never blocks
// readers. Values are stored once as shared_ptr<const std::string>; the API copies them into
// KeyValue at the boundary.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/errc.hpp"
#include "storage/storage.hpp"

namespace kwatch::storage {

// Expected failures in base's vocabulary (base/errc.hpp).
using base::Errc;
using base::Result;

// One change as it is made durable and replayed: the unit of the write-ahead log.
struct Mutation {
  enum class Kind : std::uint8_t { put = 1, del = 2, compact = 3 };
  Kind kind = Kind::put;
  std::int64_t revision = 0;         // put/del: the write's revision; compact: the target revision
  std::int64_t create_revision = 0;  // put: the key's create revision after the write
  std::int64_t version = 0;          // put: the key's version after the write
  std::string key;                   // put/del
  std::shared_ptr<const std::string> value;  // put
};

// A live key in a snapshot; shares its value with the store.
struct SnapshotEntry {
  std::string key;
  std::shared_ptr<const std::string> value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
};

// The full live state at one revision (what a snapshot file holds).
struct StoreState {
  std::int64_t revision = 1;
  std::int64_t compacted_revision = 0;
  std::vector<SnapshotEntry> entries;  // ordered by key
};

// Events under a prefix, read from the event log.
struct EventRead {
  std::vector<Event> events;
  std::int64_t next_revision = 0;     // where the next read should start
  std::int64_t current_revision = 0;  // the store's revision at the time of the read
};

class MvccStore {
 public:
  // Called under the writer mutex, before a write becomes visible, with the write as it will be
  // applied. An error aborts the write (the store is unchanged) and is returned to the writer.
  // Must not call back into the store's write methods (deadlock); reads are fine.
  using CommitHook = std::function<Result<void>(const Mutation&)>;
  // Called under the writer mutex after a write became visible, in revision order. Must be
  // cheap and must not write to the store or add/remove listeners (deadlock).
  using CommitListener = std::function<void(const Mutation&)>;

  MvccStore() = default;
  MvccStore(const MvccStore&) = delete;
  MvccStore& operator=(const MvccStore&) = delete;

  // ---- Reads ----
  std::int64_t current_revision() const;
  std::int64_t compacted_revision() const;
  // The key at `revision` (0: current). not_found, gone (compacted) or bad_request (future).
  Result<KeyValue> get(std::string_view key, std::int64_t revision = 0) const;
  // Keys under `prefix` from `start_key` on, at `revision`; see ListOptions.
  Result<ListResult> range(const ListOptions& options) const;
  // Events under `prefix` with revisions >= `start_revision`, at most `max_events` of them;
  // scans at most `max_scan` log entries so one call holds the lock briefly. `gone` if
  // start_revision <= compacted revision.
  Result<EventRead> read_events(std::string_view prefix, std::int64_t start_revision,
                                std::size_t max_events, std::size_t max_scan = 65536) const;
  // The live state now (values shared, not copied).
  StoreState export_state() const;
  // Number of live keys.
  std::size_t size() const;

  // ---- Writes ----
  // Writes `value` if the key's mod revision equals `expected_mod_revision` (0: key absent).
  Result<TxnResult> put_if(std::string_view key, std::int64_t expected_mod_revision,
                           std::string value);
  // Deletes the key if its mod revision equals `expected_mod_revision` (0: any). Deleting an
  // absent key is not an error: succeeded=false, kv.mod_revision=0.
  Result<TxnResult> delete_if(std::string_view key, std::int64_t expected_mod_revision = 0);
  // Drops history older than `revision`. gone if already compacted there, bad_request if future.
  Result<void> compact(std::int64_t revision);

  // ---- Recovery (no hook, no listeners are called) ----
  // Replaces the whole content with `state`; history below state.revision counts as compacted.
  void restore(StoreState state);
  // Re-applies a logged write. `corrupt` if it does not follow the current revision.
  Result<void> apply(const Mutation& mutation);

  // ---- Subscriptions ----
  // Set before concurrent use; an empty function removes the hook.
  void set_commit_hook(CommitHook hook);
  std::uint64_t add_commit_listener(CommitListener listener);
  void remove_commit_listener(std::uint64_t id);

 private:
  // One revision of one key; a null value is a tombstone.
  struct Rev {
    std::int64_t mod_revision = 0;
    std::int64_t create_revision = 0;
    std::int64_t version = 0;
    std::shared_ptr<const std::string> value;
  };
  struct LogEntry {
    std::string key;
    Rev rev;
    Rev prev;  // prev.value null: no previous live state
  };
  using KeyMap = std::map<std::string, std::vector<Rev>, std::less<>>;

  Result<std::int64_t> resolve_revision(std::int64_t revision) const;
  static const Rev* find_at(const std::vector<Rev>& revs, std::int64_t revision);
  static KeyValue to_key_value(std::string_view key, const Rev& rev);
  const Rev* live(std::string_view key) const;  // current live state, writer or reader lock
  Result<void> commit(Mutation mutation);       // writer mutex held
  void apply_locked(const Mutation& mutation);  // state mutex held exclusively
  void compact_locked(std::int64_t revision);

  mutable std::shared_mutex state_mutex_;  // guards the fields below
  KeyMap keys_;
  std::deque<LogEntry> log_;  // log_[i] has revision log_base_ + i
  std::int64_t log_base_ = 2;
  std::int64_t revision_ = 1;
  std::int64_t compacted_ = 0;
  std::size_t live_count_ = 0;

  std::mutex writer_mutex_;  // serializes writers; guards hook_ and listeners_
  CommitHook hook_;
  std::vector<std::pair<std::uint64_t, CommitListener>> listeners_;
  std::uint64_t next_listener_id_ = 1;
};

}  // namespace kwatch::storage
