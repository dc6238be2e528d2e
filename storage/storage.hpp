// The storage interface of kwatch: a revisioned key-value store in the shape of etcd v3.
//
// Every object lives under one key; its `resourceVersion` is the key's mod revision. One global
// revision counter increases by one per committed write (create, update or delete).
//
// Implementations: `MemoryStorage` (embedded MVCC store, optionally durable in a data directory),
// `EtcdStorage` (etcd v3 over gRPC) and `EncryptingStorage` (encryption at rest around either).
// Callers above `storage/` only see this header.
//
// Thread-safety: all methods may be called concurrently from any thread; each returned awaitable
// runs on the caller's executor. Cancellation: a cancelled `WatchStream::next()` completes with
// `operation_aborted`; other operations are short and not cancellable.
#pragma once

#include "base/errc.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::storage {

// Expected failures in base's vocabulary (base/errc.hpp).
using base::Errc;
using base::Result;

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;  // 0: the key does not exist
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;  // number of writes since the key was (re)created
  // Set only by a transforming decorator (encryption at rest, storage/encrypting_storage.hpp):
  // `stale`: the value was read through a transformation writes no longer use (an older key, or
  // plaintext while writes encrypt), so an update rewrites it even when its bytes are unchanged,
  // as kube's GuaranteedUpdate does. `read_error`: the stored bytes could not be turned back into
  // a value (why); `value` is then empty, so that no reader can mistake them for an object.
  bool stale = false;
  std::string read_error;
};

enum class EventType { put, del };

// One committed change. For `put`, `kv` is the new state; for `del`, `kv` carries the key and the
// delete's revision in `mod_revision` with an empty value. `prev_kv` is the state before the
// change, when there was one.
struct Event {
  EventType type = EventType::put;
  KeyValue kv;
  std::optional<KeyValue> prev_kv;

  std::int64_t revision() const { return kv.mod_revision; }
};

struct ListOptions {
  std::string prefix;          // keys that start with this
  std::string start_key;       // first key to return (inclusive), for paging; empty: from prefix
  std::int64_t revision = 0;   // read at this revision; 0: current
  std::int64_t limit = 0;      // at most this many; 0: no limit
  bool count_only = false;     // return no kvs, only `count`
};

struct ListResult {
  std::vector<KeyValue> kvs;
  std::int64_t revision = 0;  // the revision the list was read at
  bool more = false;          // keys remain after the last returned one
  std::int64_t count = 0;     // all keys under the prefix at `revision` from `start_key` on
};

// Outcome of a guarded write: whether the guard held, and the key's state after the operation
// (the new state on success, the current state when the guard failed; mod_revision 0 if absent).
struct TxnResult {
  bool succeeded = false;
  KeyValue kv;
  std::int64_t revision = 0;  // store revision after the operation
};

// Whether a watch's events carry the state before each change.
enum class PrevKv : bool { omit, include };

// A batch of events in revision order, or, with no events, a progress notification saying that
// nothing under the watched prefix changed up to `revision`.
struct WatchBatch {
  std::vector<Event> events;
  std::int64_t revision = 0;
};

// A stream of changes under one prefix. Owned by the caller; destroying it ends the watch.
// Thread-safety: one `next()` at a time.
class WatchStream {
 public:
  virtual ~WatchStream() = default;
  // Waits for the next batch. `gone` if the stream fell behind a compaction; `unavailable` if the
  // backend lost the stream. A stream that returned an error is finished.
  virtual boost::asio::awaitable<Result<WatchBatch>> next() = 0;
  // Asks for a progress notification (an empty batch with the current revision) soon.
  virtual void request_progress() = 0;
  // Whether a progress notification at revision R guarantees that every event up to R under the
  // prefix has already been delivered. etcd before 3.4.25 may announce progress ahead of events
  // still on their way, so a cache must not prove a consistent read with it.
  virtual bool progress_is_ordered() const { return true; }
};

// The smallest key above every key that starts with `prefix`; "" when there is none (a prefix
// of only 0xff bytes). A prefix range is [prefix, prefix_end(prefix)).
std::string prefix_end(std::string_view prefix);

class Storage {
 public:
  virtual ~Storage() = default;

  // The key at `revision` (0: current). `not_found` if absent, `gone` if compacted.
  virtual boost::asio::awaitable<Result<KeyValue>> get(std::string key,
                                                       std::int64_t revision = 0) = 0;
  virtual boost::asio::awaitable<Result<ListResult>> list(ListOptions options) = 0;
  // Writes `value` if the key's mod revision equals `expected_mod_revision` (0: key absent).
  virtual boost::asio::awaitable<Result<TxnResult>> put_if(std::string key,
                                                           std::int64_t expected_mod_revision,
                                                           std::string value) = 0;
  // Deletes the key if its mod revision equals `expected_mod_revision` (0: any). On success
  // `kv` is the deleted state and `revision` the delete's revision.
  virtual boost::asio::awaitable<Result<TxnResult>> delete_if(
      std::string key, std::int64_t expected_mod_revision = 0) = 0;
  virtual boost::asio::awaitable<Result<std::int64_t>> current_revision() = 0;
  // Drops history older than `revision`; reads and watches below it then fail with `gone`.
  virtual boost::asio::awaitable<Result<void>> compact(std::int64_t revision) = 0;
  // Every event under `prefix` with revision >= `start_revision` (0: from now on). With
  // `PrevKv::omit` events may come without `prev_kv`, which spares etcd a read and the stream
  // a copy of every old value: for callers that keep the previous state themselves.
  virtual boost::asio::awaitable<Result<std::unique_ptr<WatchStream>>> watch(
      std::string prefix, std::int64_t start_revision, PrevKv prev_kv) = 0;

  // ---- Built on the primitives above, once for every backend. ----

  // Creates the key; `already_exists` if it is there.
  boost::asio::awaitable<Result<KeyValue>> create(std::string key, std::string value);

  // Computes the new value from the current state and writes it with a compare-and-swap,
  // retrying with the fresh state when another writer got there first. `try_update` returns the
  // new value, nullopt to leave the state as it is, or an error (which ends the update); it sees
  // nullptr when the key is absent. Unchanged bytes, like nullopt, write nothing and return the
  // current state (unless that state is `stale`: then its bytes are written again).
  //
  // `suggested` is a state the caller believes current (a watch cache's copy), which saves the
  // read: the write's guard still compares against storage. Its `value` may be empty when the
  // caller holds that state in another form (a revision names one state of a key). When the
  // suggestion turns out stale, or `try_update` rejects it or leaves it unchanged, the update
  // re-reads storage and runs `try_update` again, so callers only ever see outcomes decided on
  // the current state.
  using UpdateResult = Result<std::optional<std::string>>;
  using UpdateFn = std::function<UpdateResult(const KeyValue* current)>;
  boost::asio::awaitable<Result<KeyValue>> guaranteed_update(
      std::string key, UpdateFn try_update, std::optional<KeyValue> suggested = std::nullopt);
  // The same with a `try_update` that may wait (an admission stage that asks another server):
  // the state it was given is compared against storage only when it is done.
  using AsyncUpdateFn =
      std::function<boost::asio::awaitable<UpdateResult>(const KeyValue* current)>;
  boost::asio::awaitable<Result<KeyValue>> guaranteed_update(
      std::string key, AsyncUpdateFn try_update, std::optional<KeyValue> suggested = std::nullopt);

  // Number of keys under `prefix` now.
  boost::asio::awaitable<Result<std::int64_t>> count(std::string prefix);
};

}  // namespace kwatch::storage
