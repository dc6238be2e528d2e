#include "storage/etcd_storage.hpp"

#include "storage/async_notifier.hpp"

#include <arpa/inet.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "etcd_rpc.grpc.pb.h"
#include "storage/grpc_bridge.hpp"

namespace kwatch::storage {

namespace asio = boost::asio;
namespace pb = etcdserverpb;
using boost::system::error_code;
using namespace std::chrono_literals;

struct EtcdStorage::Core {
  Options options;
  asio::any_io_executor executor;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Watch::Stub> watch;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;
  // Last member: destroyed first, so no step is pending when the stubs and channel go.
  GrpcBridge bridge;
};

namespace {

// ---- Pure helpers ----

// etcd's range end for a prefix ("\0": no upper bound).
std::string etcd_range_end(std::string_view prefix) {
  std::string end = kwatch::storage::prefix_end(prefix);
  return end.empty() ? std::string(1, '\0') : end;
}

// etcd rejects an empty key; "\0" is the smallest key.
std::string range_start(std::string key) { return key.empty() ? std::string(1, '\0') : key; }

bool retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

// etcd's errors keep their gRPC code across versions; compaction and future revisions share
// OUT_OF_RANGE and differ only in the message.
error_code map_status(const grpc::Status& status) {
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return {};
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Errc::unavailable;
    case grpc::StatusCode::CANCELLED:
      return asio::error::operation_aborted;
    case grpc::StatusCode::OUT_OF_RANGE:
      if (message.find("compacted") != std::string::npos) return Errc::gone;
      return Errc::bad_request;  // "required revision is a future revision"
    case grpc::StatusCode::INVALID_ARGUMENT:
      // "etcdserver: request is too large": over etcd's --max-request-bytes (1.5 MiB default).
      if (message.find("too large") != std::string::npos) return Errc::too_large;
      return Errc::bad_request;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      if (message.find("too many requests") != std::string::npos) {
        return Errc::too_many_requests;
      }
      // "grpc: received message larger than max": far over etcd's request limit.
      if (message.find("larger than max") != std::string::npos) return Errc::too_large;
      break;
    default:
      break;
  }
  spdlog::warn("etcd: call failed with code {}: {}", static_cast<int>(status.error_code()),
               message);
  return Errc::internal;
}

KeyValue to_key_value(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version(), false, {}};
}

Event to_event(const mvccpb::Event& e) {
  Event out;
  out.type = e.type() == mvccpb::Event::DELETE ? EventType::del : EventType::put;
  out.kv = to_key_value(e.kv());
  if (e.has_prev_kv() && e.prev_kv().mod_revision() != 0) out.prev_kv = to_key_value(e.prev_kv());
  return out;
}

// ---- Unary calls ----

template <class Response>
struct UnaryCall {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
  Response response;
  grpc::Status status;
};

// Whether a unary call may be sent again within its deadline when its answer does not come.
enum class Repeat {
  never,        // its effect must not happen twice (a compaction, a plain put)
  idempotent,   // a read: again on UNAVAILABLE, which is how reads fail over to another member
  // A transaction guarded by a compare on the key's revision: whichever copy etcd applies
  // first changes the revision, so the others fail their compare; at most one applies. Sent
  // again on UNAVAILABLE, and when a third of the deadline passes without an answer: a member
  // that forwarded it to a leader that then died never answers before the leader's successor
  // is elected (etcd's own wait is longer than the whole deadline).
  conditional,
};

// Runs one unary RPC under the request deadline. `prepare(context, queue)` is the stub's
// PrepareAsync<Method> with the request bound. `repeated` (if given) is set when a copy was sent
// again: an earlier one may have been applied.
template <class Response, class Prepare>
asio::awaitable<Result<Response>> call_unary(std::shared_ptr<EtcdStorage::Core> core,
                                             Prepare prepare, Repeat repeat,
                                             bool* repeated = nullptr) {
  const auto deadline = std::chrono::system_clock::now() + core->options.request_timeout;
  const auto attempt_time = std::max<std::chrono::milliseconds>(
      1000ms, core->options.request_timeout / 3);
  auto backoff = 20ms;
  for (;;) {
    auto call = std::make_shared<UnaryCall<Response>>();
    auto attempt_deadline = deadline;
    if (repeat == Repeat::conditional) {
      attempt_deadline = std::min(deadline, std::chrono::system_clock::now() + attempt_time);
    }
    call->context.set_deadline(attempt_deadline);
    grpc::ClientContext* context = &call->context;
    // Built outside the co_await: GCC 12 may destroy converted temporaries in one twice.
    auto step = core->bridge.async_unary(
        call->context, call->reader,
        [&prepare, context](grpc::CompletionQueue* queue) { return prepare(context, queue); },
        call->response, call->status, std::shared_ptr<const void>(call), asio::use_awaitable);
    const bool ok = co_await std::move(step);
    if (!ok) co_return Errc::unavailable;  // the storage is shutting down
    if (call->status.ok()) co_return std::move(call->response);
    const bool unanswered =
        retryable(call->status) ||
        (repeat == Repeat::conditional && attempt_deadline < deadline &&
         call->status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    if (repeat != Repeat::never && unanswered &&
        std::chrono::system_clock::now() + backoff < deadline) {
      spdlog::debug("etcd: sending a call again after: {}", call->status.error_message());
      if (repeated != nullptr) *repeated = true;
      asio::steady_timer timer(co_await asio::this_coro::executor, backoff);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;  // cancelled while backing off
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, 500ms);
      continue;
    }
    spdlog::debug("etcd: call failed: {}", call->status.error_message());
    co_return map_status(call->status);
  }
}

asio::awaitable<Result<pb::RangeResponse>> call_range(std::shared_ptr<EtcdStorage::Core> core,
                                                      pb::RangeRequest request) {
  auto* stub = core->kv.get();
  auto prepare = [stub, &request](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncRange(context, request, queue);
  };
  co_return co_await call_unary<pb::RangeResponse>(std::move(core), std::move(prepare),
                                                   Repeat::idempotent);
}

asio::awaitable<Result<pb::TxnResponse>> call_txn(std::shared_ptr<EtcdStorage::Core> core,
                                                  const pb::TxnRequest& request, Repeat repeat,
                                                  bool* repeated = nullptr) {
  auto* stub = core->kv.get();
  auto prepare = [stub, &request](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncTxn(context, request, queue);
  };
  co_return co_await call_unary<pb::TxnResponse>(std::move(core), std::move(prepare), repeat,
                                                 repeated);
}

// ---- Wake-ups for a waiting coroutine (next(), watch()) ----

using Notifier = detail::AsyncNotifier;
using detail::async_wait_notified;

// ---- Watch ----

using WatchCall = grpc::ClientAsyncReaderWriter<pb::WatchRequest, pb::WatchResponse>;

// One gRPC Watch call. Owned by the WatchCore and by every step pending on it (the keep-alive),
// so the buffers gRPC reads from and writes into outlive the steps.
struct WatchAttempt {
  grpc::ClientContext context;
  std::unique_ptr<WatchCall> stream;
  pb::WatchResponse response;  // the read in flight fills this
  pb::WatchRequest request;    // the write in flight sends this
  grpc::Status status;
  std::deque<pb::WatchRequest> writes;
  bool started = false;
  bool created = false;
  bool reading = false;
  bool writing = false;
  bool failed = false;
};

constexpr std::size_t kReadAhead = 2;  // responses decoded but not yet taken by next()

// The state machine behind one EtcdWatchStream. Step completions run on the storage executor;
// next(), request_progress() and close() come from the owner's threads. All state is under
// `mutex_`; gRPC steps are started under it (they never complete inline).
class WatchCore : public std::enable_shared_from_this<WatchCore> {
 public:
  WatchCore(std::shared_ptr<EtcdStorage::Core> storage, std::string prefix,
            std::int64_t start_revision, PrevKv prev_kv)
      : storage_(std::move(storage)),
        prefix_(std::move(prefix)),
        prev_kv_(prev_kv),
        next_revision_(start_revision),
        timer_(storage_->executor) {}

  const std::shared_ptr<Notifier> notifier = std::make_shared<Notifier>();

  void start() {
    std::lock_guard lock(mutex_);
    failing_since_ = std::chrono::steady_clock::now();
    start_attempt_locked();
  }

  // The owner is gone: cancel everything; pending steps drain and drop their references.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    timer_.cancel();
    if (attempt_) attempt_->context.TryCancel();
  }

  void request_progress() {
    std::lock_guard lock(mutex_);
    if (finished_ || closed_) return;
    if (attempt_ && attempt_->started && !attempt_->failed) {
      queue_progress_locked(*attempt_);
      pump_writes_locked(attempt_);
    } else {
      progress_wanted_ = true;  // sent right after the next create request
    }
  }

  // next(): a ready item, or nullopt after making sure a read is in flight.
  std::optional<Result<WatchBatch>> take() {
    std::lock_guard lock(mutex_);
    if (!ready_.empty()) {
      auto item = std::move(ready_.front());
      ready_.pop_front();
      if (attempt_) start_read_locked(attempt_);
      return item;
    }
    if (attempt_) start_read_locked(attempt_);
    notifier->clear();
    return std::nullopt;
  }

  // watch(): whether the first create succeeded, or the error that ended the stream first.
  std::optional<Result<void>> creation() {
    std::lock_guard lock(mutex_);
    if (created_once_) return Result<void>{};
    if (!ready_.empty() && !ready_.front()) return ready_.front().error();
    notifier->clear();
    return std::nullopt;
  }

 private:
  using Attempt = std::shared_ptr<WatchAttempt>;

  template <class F>
  auto bound(F f) {
    return asio::bind_executor(storage_->executor, std::move(f));
  }

  void start_attempt_locked() {
    auto a = std::make_shared<WatchAttempt>();
    // Makes the member refuse the watch (and end it) while it has no leader, so a partitioned
    // member does not keep us silently watching stale data.
    a->context.AddMetadata("hasleader", "true");
    attempt_ = a;
    // A create that gets no answer is abandoned, and retried like a broken stream.
    arm_timer_locked(storage_->options.request_timeout, [a](WatchCore& self) {
      if (self.attempt_ == a && !a->created) a->context.TryCancel();
    });
    auto* stub = storage_->watch.get();
    storage_->bridge.async_start_call(
        a->context, a->stream,
        [stub, context = &a->context](grpc::CompletionQueue* queue) {
          return stub->PrepareAsyncWatch(context, queue);
        },
        a, bound([self = shared_from_this(), a](bool ok) { self->on_started(a, ok); }));
  }

  void on_started(const Attempt& a, bool ok) {
    std::lock_guard lock(mutex_);
    if (a != attempt_ || closed_ || finished_) return;
    if (!ok) return attempt_failed_locked(a);
    a->started = true;
    pb::WatchRequest create;
    auto* c = create.mutable_create_request();
    c->set_key(range_start(prefix_));
    c->set_range_end(etcd_range_end(prefix_));
    c->set_start_revision(next_revision_);
    c->set_progress_notify(true);
    c->set_prev_kv(prev_kv_ == PrevKv::include);
    c->set_fragment(true);
    a->writes.push_back(std::move(create));
    if (progress_wanted_) {
      progress_wanted_ = false;
      queue_progress_locked(*a);
    }
    pump_writes_locked(a);
    start_read_locked(a);
  }

  void queue_progress_locked(WatchAttempt& a) {
    for (const auto& w : a.writes) {
      if (w.has_progress_request()) return;  // one is on its way already
    }
    pb::WatchRequest progress;
    progress.mutable_progress_request();
    a.writes.push_back(std::move(progress));
  }

  void pump_writes_locked(const Attempt& a) {
    if (a->writing || a->failed || a->writes.empty()) return;
    a->request = std::move(a->writes.front());
    a->writes.pop_front();
    a->writing = true;
    storage_->bridge.async_write(
        *a->stream, a->context, a->request, a,
        bound([self = shared_from_this(), a](bool ok) { self->on_written(a, ok); }));
  }

  void on_written(const Attempt& a, bool ok) {
    std::lock_guard lock(mutex_);
    a->writing = false;
    // A failed write means the call is over; the pending read reports that.
    if (!ok || a != attempt_ || closed_ || finished_) return;
    pump_writes_locked(a);
  }

  void start_read_locked(const Attempt& a) {
    if (!a->started || a->reading || a->failed || closed_ || finished_) return;
    if (ready_.size() >= kReadAhead) return;  // resumed by take()
    a->reading = true;
    a->response.Clear();
    storage_->bridge.async_read(
        *a->stream, a->context, a->response, a,
        bound([self = shared_from_this(), a](bool ok) { self->on_read(a, ok); }));
  }

  void on_read(const Attempt& a, bool ok) {
    std::lock_guard lock(mutex_);
    a->reading = false;
    if (a != attempt_ || closed_ || finished_) return;
    if (!ok) return attempt_failed_locked(a);
    handle_response_locked(a, a->response);
    if (finished_) {
      a->context.TryCancel();
      return;
    }
    start_read_locked(a);
  }

  void handle_response_locked(const Attempt& a, const pb::WatchResponse& r) {
    if (r.created()) {
      a->created = true;
      failing_since_.reset();
      backoff_ = kInitialBackoff;
      timer_.cancel();
      // "From now on": pin the start so a re-created stream resumes where this one began.
      if (next_revision_ == 0) next_revision_ = r.header().revision() + 1;
      if (!created_once_) {
        created_once_ = true;
        notifier->notify();
      }
    }
    if (r.compact_revision() != 0) {
      spdlog::debug("etcd: watch on {} at {} fell behind compaction at {}", prefix_, next_revision_,
                    r.compact_revision());
      return finish_locked(Errc::gone);
    }
    if (r.canceled()) {
      if (r.cancel_reason().find("compacted") != std::string::npos) {
        return finish_locked(Errc::gone);
      }
      // Not ours to end: treat it like a broken stream and re-create.
      spdlog::info("etcd: watch on {} canceled by the server: {}", prefix_, r.cancel_reason());
      a->context.TryCancel();
      return;
    }
    for (const auto& e : r.events()) pending_.push_back(to_event(e));
    if (r.fragment()) return;  // more of the same revision follows
    if (!pending_.empty()) {
      WatchBatch batch;
      batch.events = std::move(pending_);
      pending_.clear();
      batch.revision = batch.events.back().revision();
      next_revision_ = batch.revision + 1;
      delivered_ = batch.revision;
      push_locked(std::move(batch));
      return;
    }
    if (!r.created()) {
      // A progress notification (requested: watch id -1; periodic: ours). It does not move
      // next_revision_: etcd 3.4 may announce progress before a catching-up watcher's events,
      // and resuming from a revision we have not seen events up to could skip some.
      const std::int64_t revision = r.header().revision();
      if (revision >= delivered_) {
        delivered_ = revision;
        push_locked(WatchBatch{{}, revision});
      }
    }
  }

  void push_locked(Result<WatchBatch> item) {
    ready_.push_back(std::move(item));
    notifier->notify();
  }

  void finish_locked(error_code ec) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    if (attempt_) attempt_->context.TryCancel();
    push_locked(ec);
  }

  void attempt_failed_locked(const Attempt& a) {
    a->failed = true;
    if (!a->stream) return on_finished_locked(a, false);  // never created: the bridge is closed
    storage_->bridge.async_finish_stream(*a->stream, a->context, a->status, a,
                                         bound([self = shared_from_this(), a](bool ok) {
                                           std::lock_guard lock(self->mutex_);
                                           self->on_finished_locked(a, ok);
                                         }));
  }

  void on_finished_locked(const Attempt& a, bool ok) {
    if (a != attempt_ || closed_ || finished_) return;
    attempt_.reset();
    if (!ok || storage_->bridge.closed()) return finish_locked(Errc::unavailable);
    const grpc::Status& status = a->status;
    error_code ec = map_status(status);
    if (ec == Errc::gone || ec == Errc::bad_request) return finish_locked(ec);
    const auto now = std::chrono::steady_clock::now();
    if (!failing_since_) failing_since_ = now;
    if (now - *failing_since_ >= storage_->options.watch_retry_timeout) {
      spdlog::warn("etcd: watch on {} lost: {}", prefix_, status.error_message());
      return finish_locked(Errc::unavailable);
    }
    spdlog::debug("etcd: watch on {} broke ({}), re-creating from {}", prefix_,
                  status.error_message(), next_revision_);
    arm_timer_locked(backoff_, [](WatchCore& self) {
      if (!self.attempt_) self.start_attempt_locked();
    });
    backoff_ = std::min<std::chrono::milliseconds>(backoff_ * 2, 1000ms);
  }

  // One timer serves the create deadline and the re-create backoff (never both at once); a
  // newer arming makes older handlers stale.
  template <class F>
  void arm_timer_locked(std::chrono::milliseconds after, F f) {
    const std::uint64_t generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait(
        bound([self = shared_from_this(), generation, f = std::move(f)](error_code ec) {
          std::lock_guard lock(self->mutex_);
          if (ec || generation != self->timer_generation_ || self->closed_ || self->finished_) {
            return;
          }
          f(*self);
        }));
  }

  static constexpr std::chrono::milliseconds kInitialBackoff{100};

  std::shared_ptr<EtcdStorage::Core> storage_;
  const std::string prefix_;
  const PrevKv prev_kv_;

  std::mutex mutex_;
  std::int64_t next_revision_;  // where a re-created stream starts; 0 until the first create
  std::int64_t delivered_ = 0;  // highest revision handed out (events or progress)
  Attempt attempt_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  std::chrono::milliseconds backoff_{kInitialBackoff};
  std::vector<Event> pending_;  // events of a fragmented response so far
  std::deque<Result<WatchBatch>> ready_;
  bool created_once_ = false;
  bool progress_wanted_ = false;
  bool finished_ = false;  // the last item of ready_ is the terminal error
  bool closed_ = false;
};

class EtcdWatchStream final : public WatchStream {
 public:
  explicit EtcdWatchStream(std::shared_ptr<WatchCore> core) : core_(std::move(core)) {}
  ~EtcdWatchStream() override { core_->close(); }

  asio::awaitable<Result<WatchBatch>> next() override {
    if (finished_) co_return finished_;
    for (;;) {
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) {
        co_return error_code(asio::error::operation_aborted);
      }
      if (auto item = core_->take()) {
        if (!*item) finished_ = item->error();
        co_return std::move(*item);
      }
      auto [ec] =
          co_await async_wait_notified(core_->notifier, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
    }
  }

  void request_progress() override { core_->request_progress(); }
  // etcd 3.4.23 (Debian 12) can send progress before a catching-up watcher's events.
  bool progress_is_ordered() const override { return false; }

  // Waits until etcd confirmed the watch, for at most `timeout`.
  asio::awaitable<Result<void>> wait_created(std::chrono::milliseconds timeout) {
    using namespace asio::experimental::awaitable_operators;
    asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
    for (;;) {
      if (auto created = core_->creation()) co_return *created;
      auto wait = [](std::shared_ptr<Notifier> n) -> asio::awaitable<void> {
        auto [ec] = co_await async_wait_notified(std::move(n), asio::as_tuple(asio::use_awaitable));
        (void)ec;
      };
      auto which = co_await (wait(core_->notifier) || timer.async_wait(asio::use_awaitable));
      if (which.index() == 1) co_return Errc::unavailable;
    }
  }

 private:
  std::shared_ptr<WatchCore> core_;
  error_code finished_;
};

// ---- Connection ----

struct Endpoint {
  std::string host;  // without brackets
  std::string port;
  bool tls = false;
};

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint e;
  if (url.starts_with("https://")) {
    e.tls = true;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.find("://") != std::string_view::npos) {
    return Errc::bad_request;
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  std::string_view host_port = url;
  std::size_t colon;
  if (host_port.starts_with('[')) {
    auto close = host_port.find(']');
    if (close == std::string_view::npos) return Errc::bad_request;
    e.host = std::string(host_port.substr(1, close - 1));
    colon = close + 1;
    if (colon < host_port.size() && host_port[colon] != ':') return Errc::bad_request;
  } else {
    colon = host_port.rfind(':');
    e.host = std::string(host_port.substr(0, colon));
  }
  e.port = colon < host_port.size() ? std::string(host_port.substr(colon + 1)) : "2379";
  if (e.host.empty() || e.port.empty()) return Errc::bad_request;
  return e;
}

bool is_ipv4(const std::string& host) {
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

bool is_ipv6(const std::string& host) {
  in6_addr a{};
  return inet_pton(AF_INET6, host.c_str(), &a) == 1;
}

// Resolves a host name now (the channel then balances over fixed addresses).
std::optional<std::string> resolve(const Endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, &found) != 0 || !found) return {};
  std::optional<std::string> out;
  char text[INET6_ADDRSTRLEN] = {};
  for (addrinfo* ai = found; ai && !out; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
      if (inet_ntop(AF_INET, &sa->sin_addr, text, sizeof text)) out = text;
    }
  }
  freeaddrinfo(found);
  return out;
}

// A gRPC target for the endpoints: "ipv4:a:p,b:p" / "ipv6:[a]:p,..." for address lists (the
// load balancer then spreads over, and fails over between, all members), "dns:///host:port" for
// a single name.
Result<std::string> make_target(const std::vector<Endpoint>& endpoints) {
  if (endpoints.size() == 1 && !is_ipv4(endpoints[0].host) && !is_ipv6(endpoints[0].host)) {
    return "dns:///" + endpoints[0].host + ":" + endpoints[0].port;
  }
  const bool v6 = std::all_of(endpoints.begin(), endpoints.end(),
                              [](const Endpoint& e) { return is_ipv6(e.host); });
  std::string target = v6 ? "ipv6:" : "ipv4:";
  for (const auto& e : endpoints) {
    std::string host = e.host;
    if (v6) {
      host = "[" + host + "]";
    } else if (!is_ipv4(host)) {
      auto address = resolve(e);
      if (!address) {
        spdlog::error("etcd: cannot resolve {} to an IPv4 address", e.host);
        return Errc::unavailable;
      }
      host = *address;
    }
    if (target.back() != ':') target += ',';
    target += host + ":" + e.port;
  }
  return target;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ---- EtcdStorage ----

EtcdStorage::EtcdStorage(std::shared_ptr<Core> core) : core_(std::move(core)) {}

EtcdStorage::~EtcdStorage() {
  // Streams may hold the core; cancelling every call makes them report `unavailable`.
  core_->bridge.shutdown();
}

Result<std::shared_ptr<EtcdStorage>> EtcdStorage::open(Options options,
                                                       asio::any_io_executor executor) {
  if (options.endpoints.empty()) return Errc::bad_request;
  std::vector<Endpoint> endpoints;
  for (const auto& url : options.endpoints) {
    auto e = parse_endpoint(url);
    if (!e) {
      spdlog::error("etcd: malformed endpoint '{}'", url);
      return e.error();
    }
    endpoints.push_back(std::move(*e));
  }
  const bool tls = endpoints.front().tls;
  for (const auto& e : endpoints) {
    if (e.tls != tls) {
      spdlog::error("etcd: endpoints mix http and https");
      return Errc::bad_request;
    }
  }
  auto target = make_target(endpoints);
  if (!target) return target.error();

  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    for (auto [path, field] : {std::pair{&options.ca_file, &ssl.pem_root_certs},
                               std::pair{&options.cert_file, &ssl.pem_cert_chain},
                               std::pair{&options.key_file, &ssl.pem_private_key}}) {
      if (path->empty()) continue;
      auto text = read_file(*path);
      if (!text) {
        spdlog::error("etcd: cannot read {}", *path);
        return Errc::internal;
      }
      *field = std::move(*text);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }

  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName(options.load_balancing);
  args.SetMaxReceiveMessageSize(-1);  // a watch response may carry many events
  // Notice a member that vanished without closing the connection; etcd allows pings every 5 s
  // on connections with calls.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A member that comes back is used again soon.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (endpoints.size() > 1 && !is_ipv4(endpoints[0].host) && !is_ipv6(endpoints[0].host)) {
    // Names were resolved to addresses: check certificates against the first name.
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, endpoints[0].host + ":" + endpoints[0].port);
  }

  auto core = std::make_shared<Core>();
  core->options = std::move(options);
  core->executor = std::move(executor);
  core->channel = grpc::CreateCustomChannel(*target, credentials, args);
  core->kv = pb::KV::NewStub(core->channel);
  core->watch = pb::Watch::NewStub(core->channel);
  core->maintenance = pb::Maintenance::NewStub(core->channel);

  // Dial: one member must answer before we report success.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + core->options.dial_timeout);
  context.set_wait_for_ready(true);
  pb::StatusRequest request;
  pb::StatusResponse response;
  auto status = core->maintenance->Status(&context, request, &response);
  if (!status.ok()) {
    spdlog::error("etcd: no member of {} answered: {}", *target, status.error_message());
    return Errc::unavailable;
  }
  spdlog::info("etcd: connected to {} (etcd {}, revision {})", *target, response.version(),
               response.header().revision());
  return std::shared_ptr<EtcdStorage>(new EtcdStorage(std::move(core)));
}

asio::awaitable<Result<KeyValue>> EtcdStorage::get(std::string key, std::int64_t revision) {
  pb::RangeRequest request;
  request.set_key(range_start(std::move(key)));
  request.set_revision(revision);
  auto r = co_await call_range(core_, std::move(request));
  if (!r) co_return r.error();
  if (r->kvs_size() == 0) co_return Errc::not_found;
  co_return to_key_value(r->kvs(0));
}

asio::awaitable<Result<ListResult>> EtcdStorage::list(ListOptions options) {
  pb::RangeRequest request;
  const std::string& start = options.start_key.empty() || options.start_key < options.prefix
                                 ? options.prefix
                                 : options.start_key;
  request.set_key(range_start(start));
  request.set_range_end(etcd_range_end(options.prefix));
  request.set_revision(options.revision);
  request.set_limit(std::max<std::int64_t>(options.limit, 0));
  request.set_count_only(options.count_only);
  auto r = co_await call_range(core_, std::move(request));
  if (!r) co_return r.error();
  ListResult result;
  result.kvs.reserve(static_cast<std::size_t>(r->kvs_size()));
  for (auto& kv : *r->mutable_kvs()) {
    result.kvs.push_back(KeyValue{std::move(*kv.mutable_key()), std::move(*kv.mutable_value()),
                                  kv.create_revision(), kv.mod_revision(), kv.version(), false, {}});
  }
  // etcd's header carries the current revision even for a read at an older one.
  result.revision = options.revision != 0 ? options.revision : r->header().revision();
  result.more = r->more();
  result.count = r->count();
  co_return result;
}

asio::awaitable<Result<TxnResult>> EtcdStorage::put_if(std::string key,
                                                       std::int64_t expected_mod_revision,
                                                       std::string value) {
  pb::TxnRequest txn;
  auto* guard = txn.add_compare();
  guard->set_key(key);
  guard->set_target(pb::Compare::MOD);
  guard->set_result(pb::Compare::EQUAL);
  guard->set_mod_revision(expected_mod_revision);  // an absent key has mod revision 0
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
  // Reads its own write: the new create revision and version, without echoing the value.
  auto* after = txn.add_success()->mutable_request_range();
  after->set_key(key);
  after->set_keys_only(true);
  txn.add_failure()->mutable_request_range()->set_key(key);

  bool repeated = false;
  auto r = co_await call_txn(core_, txn, Repeat::conditional, &repeated);
  if (!r) co_return r.error();
  TxnResult result;
  result.succeeded = r->succeeded();
  result.revision = r->header().revision();
  if (!result.succeeded && repeated && r->responses_size() > 0 &&
      r->responses(0).response_range().kvs_size() > 0) {
    const auto& now = r->responses(0).response_range().kvs(0);
    if (now.mod_revision() > expected_mod_revision &&
        now.value() == txn.success(0).request_put().value()) {
      // A copy sent earlier was applied and its answer lost: the key holds exactly this value
      // since a revision after the one compared against.
      result.succeeded = true;
      result.revision = now.mod_revision();
      result.kv = to_key_value(now);
      co_return result;
    }
  }
  if (result.succeeded) {
    result.kv.key = std::move(key);
    result.kv.value = std::move(*txn.mutable_success(0)->mutable_request_put()->mutable_value());
    result.kv.mod_revision = result.revision;
    result.kv.create_revision = expected_mod_revision == 0 ? result.revision : 0;
    result.kv.version = expected_mod_revision == 0 ? 1 : 0;
    if (r->responses_size() > 1 && r->responses(1).response_range().kvs_size() > 0) {
      const auto& kv = r->responses(1).response_range().kvs(0);
      result.kv.create_revision = kv.create_revision();
      result.kv.version = kv.version();
    }
  } else if (r->responses_size() > 0 && r->responses(0).response_range().kvs_size() > 0) {
    result.kv = to_key_value(r->responses(0).response_range().kvs(0));
  } else {
    result.kv.key = std::move(key);
  }
  co_return result;
}

asio::awaitable<Result<TxnResult>> EtcdStorage::delete_if(std::string key,
                                                          std::int64_t expected_mod_revision) {
  pb::TxnRequest txn;
  auto* guard = txn.add_compare();
  guard->set_key(key);
  if (expected_mod_revision != 0) {
    guard->set_target(pb::Compare::MOD);
    guard->set_result(pb::Compare::EQUAL);
    guard->set_mod_revision(expected_mod_revision);
  } else {
    guard->set_target(pb::Compare::VERSION);  // the key exists
    guard->set_result(pb::Compare::GREATER);
    guard->set_version(0);
  }
  auto* del = txn.add_success()->mutable_request_delete_range();
  del->set_key(key);
  del->set_prev_kv(true);
  txn.add_failure()->mutable_request_range()->set_key(key);

  // Not sent again: a copy that applied would leave the next one nothing to report.
  auto r = co_await call_txn(core_, txn, Repeat::never);
  if (!r) co_return r.error();
  TxnResult result;
  result.succeeded = r->succeeded();
  result.revision = r->header().revision();
  const auto* op = r->responses_size() > 0 ? &r->responses(0) : nullptr;
  if (result.succeeded && op && op->response_delete_range().prev_kvs_size() > 0) {
    result.kv = to_key_value(op->response_delete_range().prev_kvs(0));
  } else if (!result.succeeded && op && op->response_range().kvs_size() > 0) {
    result.kv = to_key_value(op->response_range().kvs(0));
  } else {
    result.kv.key = std::move(key);
  }
  co_return result;
}

asio::awaitable<Result<std::int64_t>> EtcdStorage::current_revision() {
  // A linearizable read of one (absent) key: its header is the cluster's current revision.
  pb::RangeRequest request;
  request.set_key(std::string(1, '\0'));
  request.set_count_only(true);
  auto r = co_await call_range(core_, std::move(request));
  if (!r) co_return r.error();
  co_return r->header().revision();
}

asio::awaitable<Result<void>> EtcdStorage::compact(std::int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  auto* stub = core_->kv.get();
  auto prepare = [stub, &request](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncCompact(context, request, queue);
  };
  auto r = co_await call_unary<pb::CompactionResponse>(core_, std::move(prepare), Repeat::never);
  if (!r) co_return r.error();
  co_return Result<void>{};
}

asio::awaitable<Result<std::int64_t>> EtcdStorage::put_raw(std::string key, std::string value) {
  pb::PutRequest request;
  request.set_key(std::move(key));
  request.set_value(std::move(value));
  auto* stub = core_->kv.get();
  auto prepare = [stub, &request](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
    return stub->PrepareAsyncPut(context, request, queue);
  };
  auto r = co_await call_unary<pb::PutResponse>(core_, std::move(prepare), Repeat::never);
  if (!r) co_return r.error();
  co_return r->header().revision();
}

asio::awaitable<Result<std::unique_ptr<WatchStream>>> EtcdStorage::watch(
    std::string prefix, std::int64_t start_revision, PrevKv prev_kv) {
  auto core = std::make_shared<WatchCore>(core_, std::move(prefix), start_revision, prev_kv);
  core->start();
  auto stream = std::make_unique<EtcdWatchStream>(core);
  auto created = co_await stream->wait_created(core_->options.request_timeout);
  if (!created) co_return created.error();
  co_return std::unique_ptr<WatchStream>(std::move(stream));
}

}  // namespace kwatch::storage
