// EtcdStorage: the Storage interface on an etcd v3 cluster, over gRPC.
//
// Mapping: get/list = Range (linearizable); put_if = Txn `mod_revision(key) == expected` then
// Put (+ a keys-only Range for the new create revision and version) else Range; delete_if = Txn
// with the same guard (expected 0: the key exists) then DeleteRange with prev_kv else Range;
// current_revision = Range header revision; compact = Compact; watch = one gRPC Watch stream per
// call with prev_kv and progress_notify. Errors: etcd unreachable or a deadline passed ->
// `unavailable`; compacted revision -> `gone`; future revision -> `bad_request`.
//
// Connection: one gRPC channel over all endpoints with client-side load balancing (round_robin by
// default: requests and new watches go to members that are up, so a dead member is routed around
// within a reconnect). Reads are retried on `unavailable` within their deadline. A guarded put
// (put_if) is sent again when its answer is lost, which the guard makes safe: a resent put whose
// guard fails while the key holds exactly its value at a later revision was the earlier copy,
// applied, and is answered as a success. delete_if is not resent (a lost answer cannot be told
// from another client's delete). https endpoints use TLS with the CA / client certificate files
// in Options.
//
// Ownership: open() returns a shared_ptr; watch streams keep the client's internals alive but not
// the connection: destroying the EtcdStorage cancels every call, and streams then fail with
// `unavailable`.
// Thread-safety: every method may be called from any thread; awaitables complete on the caller's
// executor. Internal watch bookkeeping runs on the executor given to open().
// Cancellation: unary operations complete with `operation_aborted` if their cancellation slot
// fires (the RPC is cancelled, a write may still have been applied). A cancelled
// WatchStream::next() completes with `operation_aborted`; the stream stays usable and loses no
// event (the gRPC read in flight is kept for the next call).
// Every unary call has a deadline (`request_timeout`). Reads are sent again on `unavailable`;
// guarded writes (put_if) also when no answer came within a third of it (at least 1 s), as when
// the member forwarded the write to a leader that died: the compare lets at most one copy apply,
// and a copy that applied unanswered is recognised by the key holding exactly the value written
// at a newer revision. Deletes and compactions are sent once. A watch stream that breaks is
// re-created from the next unseen revision for up to `watch_retry_timeout` before next()
// reports `unavailable`.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "storage/storage.hpp"

namespace kwatch::storage {

class EtcdStorage : public Storage {
 public:
  struct Options {
    // "http://host:port" or "https://host:port" (all of one scheme). A bare "host:port" is http.
    std::vector<std::string> endpoints;
    std::string ca_file;    // PEM; https: the CA that signed the members' certificates
    std::string cert_file;  // PEM; https with client-cert auth: this client's certificate
    std::string key_file;   // PEM; its private key
    std::chrono::milliseconds request_timeout{5000};      // deadline of every unary call
    std::chrono::milliseconds dial_timeout{3000};         // open(): wait this long for a member
    std::chrono::milliseconds watch_retry_timeout{5000};  // re-create a broken watch this long
    std::string load_balancing = "round_robin";           // or "pick_first"
  };

  // Connects (waits up to dial_timeout for a member to answer Maintenance.Status). `bad_request`
  // for malformed options, `internal` if a TLS file cannot be read, `unavailable` if no member
  // answered. Watch bookkeeping runs on `executor`.
  static Result<std::shared_ptr<EtcdStorage>> open(Options options,
                                                   boost::asio::any_io_executor executor);
  ~EtcdStorage() override;
  EtcdStorage(const EtcdStorage&) = delete;
  EtcdStorage& operator=(const EtcdStorage&) = delete;

  boost::asio::awaitable<Result<KeyValue>> get(std::string key, std::int64_t revision = 0) override;
  boost::asio::awaitable<Result<ListResult>> list(ListOptions options) override;
  boost::asio::awaitable<Result<TxnResult>> put_if(std::string key,
                                                   std::int64_t expected_mod_revision,
                                                   std::string value) override;
  boost::asio::awaitable<Result<TxnResult>> delete_if(
      std::string key, std::int64_t expected_mod_revision = 0) override;
  boost::asio::awaitable<Result<std::int64_t>> current_revision() override;
  boost::asio::awaitable<Result<void>> compact(std::int64_t revision) override;
  // Returns once etcd confirmed the watch (within request_timeout, else `unavailable`). A start
  // revision below the compacted one makes the first next() fail with `gone`.
  boost::asio::awaitable<Result<std::unique_ptr<WatchStream>>> watch(
      std::string prefix, std::int64_t start_revision, PrevKv prev_kv) override;

  // Writes `value` unconditionally (a plain Put), as another etcd client would. For tests and
  // tools. Returns the new mod revision.
  boost::asio::awaitable<Result<std::int64_t>> put_raw(std::string key, std::string value);

  struct Core;

 private:
  explicit EtcdStorage(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace kwatch::storage
