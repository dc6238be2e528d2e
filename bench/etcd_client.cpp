// The etcd side of the load generator: the same watchers, writers and lists as against kwatch,
// spoken directly to etcd's v3 gRPC API (kwatch::proto stubs). Every watcher has its own channel,
// hence its own TCP connection (local subchannel pool + a distinct channel argument), and
// watches with prev_kv off.
//
// Threads: watchers' steps complete on a few completion-queue threads (--threads, one callback
// at a time per watcher); writers and creators are plain threads doing blocking unary calls.
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bench/bench_common.hpp"
#include "etcd_rpc.grpc.pb.h"

namespace kwatch::bench {
namespace {

using namespace std::chrono_literals;

std::string prefix_end(std::string key) {
  // The smallest key greater than every key with this prefix.
  while (!key.empty()) {
    if (static_cast<unsigned char>(key.back()) < 0xff) {
      key.back() = static_cast<char>(key.back() + 1);
      return key;
    }
    key.pop_back();
  }
  return std::string(1, '\0');
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& target, int id) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kwatch.bench.channel", id);  // distinct arguments: never share a connection
  args.SetMaxReceiveMessageSize(-1);
  // "ipv4:" skips the DNS resolver: the endpoints are literal loopback addresses.
  return grpc::CreateCustomChannel("ipv4:" + target, grpc::InsecureChannelCredentials(), args);
}

// Completion queues, each drained by its own thread: gRPC C++'s cheapest way to read many
// streams (no hand-off to an executor per message, unlike the callback API).
class QueuePool {
 public:
  // A started operation; `done` runs on the queue's thread.
  struct Step {
    virtual ~Step() = default;
    virtual void done(bool ok) = 0;
  };

  explicit QueuePool(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) {
      queues_.push_back(std::make_unique<grpc::CompletionQueue>());
      threads_.emplace_back([q = queues_.back().get()] {
        void* tag = nullptr;
        bool ok = false;
        while (q->Next(&tag, &ok)) static_cast<Step*>(tag)->done(ok);
      });
    }
  }
  ~QueuePool() {
    for (auto& q : queues_) q->Shutdown();
    for (auto& t : threads_) t.join();
  }
  grpc::CompletionQueue* next() { return queues_[next_++ % queues_.size()].get(); }

 private:
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  std::size_t next_ = 0;
};

// One etcd watch stream on a pooled completion queue. Owner: EtcdTarget, which destroys it only
// after `wait_done` (every started step has come back).
class Watcher {
 public:
  Watcher(std::shared_ptr<grpc::Channel> channel, grpc::CompletionQueue* queue, WatcherRecord* rec,
          std::string key, std::string range_end, std::int64_t start_revision)
      : channel_(std::move(channel)), stub_(etcdserverpb::Watch::NewStub(channel_)), queue_(queue),
        rec_(rec) {
    auto* create = request_.mutable_create_request();
    create->set_key(std::move(key));
    create->set_range_end(std::move(range_end));
    create->set_start_revision(start_revision);
    create->set_prev_kv(false);
  }

  void start() {
    context_.set_wait_for_ready(true);  // the channel is new: wait for its connection
    std::lock_guard lock(mutex_);
    stream_ = stub_->PrepareAsyncWatch(&context_, queue_);
    begin_locked();
    stream_->StartCall(&started_);
  }

  // Ends the stream; the watcher is finished once `wait_done` returns true.
  void cancel() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    context_.TryCancel();
    if (!reading_) finish_locked();  // a stalled watcher has no read that could fail
  }

  bool wait_done(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [this] { return finished_ && pending_ == 0; });
  }

 private:
  struct Op final : QueuePool::Step {
    Op(Watcher* w, void (Watcher::*f)(bool)) : self(w), on(f) {}
    Watcher* self;
    void (Watcher::*on)(bool);
    void done(bool ok) override {
      Watcher* w = self;
      (w->*on)(ok);
      std::lock_guard lock(w->mutex_);
      if (--w->pending_ == 0 && w->finished_) w->cv_.notify_all();
    }
  };

  void begin_locked() { ++pending_; }

  void on_started(bool ok) {
    std::lock_guard lock(mutex_);
    if (!ok) return finish_locked();
    begin_locked();
    stream_->Write(request_, &wrote_);
    read_locked();
  }

  void on_written(bool) {}

  void read_locked() {
    reading_ = true;
    begin_locked();
    stream_->Read(&response_, &read_);
  }

  void on_read(bool ok) {
    std::lock_guard lock(mutex_);
    reading_ = false;
    if (!ok) {
      if (!cancelled_) rec_->ended = true;
      return finish_locked();
    }
    if (response_.created()) rec_->established = true;
    if (response_.canceled()) rec_->ended = true;
    const Nanos t = now_ns();
    const int n = response_.events_size();
    for (int i = 0; i < n; ++i) rec_->samples.push_back({response_.events(i).kv().mod_revision(), t});
    if (n > 0) rec_->events.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    if (rec_->stalled && rec_->established) return;  // never reads again
    read_locked();
  }

  void finish_locked() {
    if (finishing_) return;
    finishing_ = true;
    begin_locked();
    stream_->Finish(&status_, &finished_op_);
  }

  void on_finished(bool) {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::Watch::Stub> stub_;
  grpc::CompletionQueue* queue_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream_;
  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;
  grpc::Status status_;
  WatcherRecord* rec_;
  Op started_{this, &Watcher::on_started};
  Op wrote_{this, &Watcher::on_written};
  Op read_{this, &Watcher::on_read};
  Op finished_op_{this, &Watcher::on_finished};
  std::mutex mutex_;
  std::condition_variable cv_;
  int pending_ = 0;  // steps started and not yet back from the queue
  bool reading_ = false;
  bool cancelled_ = false;
  bool finishing_ = false;
  bool finished_ = false;
};

class EtcdTarget final : public Target {
 public:
  EtcdTarget(std::vector<std::string> endpoints, std::string prefix, int threads)
      : endpoints_(std::move(endpoints)), prefix_(std::move(prefix)), queues_(threads) {
    // Debian's Abseil checks every gRPC mutex for lock cycles; kwatch turns that off too.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    if (endpoints_.empty()) throw std::invalid_argument("no etcd endpoints");
    kv_ = etcdserverpb::KV::NewStub(make_channel(endpoints_[0], -1));
  }

  ~EtcdTarget() override { close_watchers(); }

  std::int64_t create_pool(const Workload& w, std::size_t concurrency) override {
    if (w.objects == 0) {
      etcdserverpb::RangeRequest req;
      req.set_key(prefix_ + "/");
      req.set_count_only(true);
      return range(req, 10s).header().revision();
    }
    concurrency = std::max<std::size_t>(1, std::min(concurrency, w.objects));
    std::vector<std::thread> threads;
    std::vector<std::int64_t> last(concurrency, 0);
    std::atomic<bool> failed{false};
    for (std::size_t c = 0; c < concurrency; ++c) {
      threads.emplace_back([&, c] {
        auto kv = etcdserverpb::KV::NewStub(make_channel(endpoints_[c % endpoints_.size()], -2 - int(c)));
        for (std::size_t i = c; i < w.objects && !failed; i += concurrency) {
          auto r = put(*kv, key(w, i), object_json(w, i, 0));
          if (r < 0) failed = true;
          last[c] = std::max(last[c], r);
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failed) throw std::runtime_error("etcd put failed while creating the pool");
    return *std::max_element(last.begin(), last.end());
  }

  std::size_t open_watchers(const Workload& w, const WatchSpec& spec,
                            std::vector<std::unique_ptr<WatcherRecord>>& records) override {
    const Nanos deadline = now_ns() + static_cast<Nanos>(spec.deadline_s * 1e9);
    const std::size_t total = spec.watchers + spec.stalled;
    std::vector<WatcherRecord*> opened;
    for (std::size_t i = 0; i < total; ++i) {
      // Bound the connections being set up, like the kwatch side (scans only the recent ones).
      for (;;) {
        std::size_t pending = 0;
        for (std::size_t k = i > 4 * spec.parallel_opens ? i - 4 * spec.parallel_opens : 0; k < i; ++k) {
          pending += opened[k]->established ? 0 : 1;
        }
        if (pending < spec.parallel_opens || now_ns() > deadline) break;
        std::this_thread::sleep_for(1ms);
      }
      auto rec = std::make_unique<WatcherRecord>();
      rec->stalled = i >= spec.watchers;
      std::string k = prefix_ + "/" + w.kind + "/" + w.ns + "/";
      if (spec.per_node && w.nodes > 0) k += "pod-node-" + std::to_string(i % w.nodes) + "-";
      auto watcher = std::make_unique<Watcher>(
          make_channel(endpoints_[i % endpoints_.size()], static_cast<int>(next_channel_++)),
          queues_.next(), rec.get(), k, prefix_end(k), spec.from_rv + 1);
      opened.push_back(rec.get());
      if (rec->stalled) stalled_.push_back(rec.get());
      records.push_back(std::move(rec));
      watcher->start();
      watchers_.push_back(std::move(watcher));
    }
    std::size_t ok = 0;
    for (;;) {
      ok = 0;
      for (auto& r : records) ok += r->established ? 1 : 0;
      if (ok == records.size() || now_ns() > deadline) break;
      std::this_thread::sleep_for(5ms);
    }
    return ok;
  }

  WriteResult run_writes(const Workload& w, const WriteSpec& spec) override {
    WriteResult out;
    std::vector<WriteResult> parts(spec.writers);
    std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> stubs;
    for (std::size_t j = 0; j < spec.writers; ++j) {
      auto channel = make_channel(endpoints_[j % endpoints_.size()], -1000 - int(j));
      channel->WaitForConnected(std::chrono::system_clock::now() + 5s);
      stubs.push_back(etcdserverpb::KV::NewStub(channel));
    }
    const Nanos start = now_ns() + 20'000'000;
    const Nanos end = start + static_cast<Nanos>(spec.duration_s * 1e9);
    const std::size_t per_writer = std::max<std::size_t>(1, w.objects / spec.writers);
    std::vector<std::thread> threads;
    for (std::size_t j = 0; j < spec.writers; ++j) {
      threads.emplace_back([&, j] {
        WriteResult& r = parts[j];
        for (std::uint64_t k = 0;; ++k) {
          Nanos due = start;
          if (spec.rate > 0) {
            due = start + static_cast<Nanos>(static_cast<double>(k * spec.writers + j) / spec.rate * 1e9);
            if (due >= end || now_ns() >= end) break;  // fell behind: stop at the end too
          }
          if (due > now_ns()) std::this_thread::sleep_for(std::chrono::nanoseconds(due - now_ns()));
          if (now_ns() >= end) break;
          std::size_t index = (j + (k % per_writer) * spec.writers) % w.objects;
          std::string value = object_json(w, index, k * spec.writers + j + 1);
          const Nanos sent = now_ns();
          auto rv = put(*stubs[j], key(w, index), std::move(value));
          Nanos t = now_ns();
          if (rv > 0) {
            r.acks.push_back({rv, t, sent});
          } else {
            ++r.errors;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& r : parts) {
      out.acks.insert(out.acks.end(), r.acks.begin(), r.acks.end());
      out.errors += r.errors;
    }
    out.seconds = static_cast<double>(now_ns() - start) / 1e9;
    return out;
  }

  void resume_stalled() override {
    throw std::invalid_argument("resuming stalled watchers: kwatch targets only");
  }

  std::size_t stalled_closed() override {
    // etcd never closes a slow watcher (it parks it as a "victim"); report what was observed.
    std::size_t n = 0;
    for (auto* r : stalled_) n += r->ended ? 1 : 0;
    return n;
  }

  void close_watchers() override {
    for (auto& w : watchers_) w->cancel();
    for (auto& w : watchers_) {
      if (!w->wait_done(10s)) {
        std::fprintf(stderr, "loadgen: an etcd watch did not finish within 10 s; leaking it\n");
        w.release();
      }
    }
    watchers_.clear();
    stalled_.clear();
  }

  double terminated_metric() override { return -1; }

  ListResult list(const Workload& w, const std::string&, int reps) override {
    ListResult out;
    std::string k = prefix_ + "/" + w.kind + "/" + w.ns + "/";
    for (int i = 0; i < reps; ++i) {
      Nanos t0 = now_ns();
      etcdserverpb::RangeRequest req;
      req.set_key(k);
      req.set_range_end(prefix_end(k));
      const etcdserverpb::RangeResponse res = range(req, 120s);
      // Decode: what an API server without a cache does with every value before filtering.
      std::size_t bytes = 0;
      for (const auto& kv : res.kvs()) {
        boost::json::value v = boost::json::parse(kv.value());
        bytes += kv.value().size();
        if (!v.is_object()) throw std::runtime_error("etcd value is not a JSON object");
      }
      out.ms.push_back(static_cast<double>(now_ns() - t0) / 1e6);
      out.items = static_cast<std::size_t>(res.kvs_size());
      out.bytes = bytes;
    }
    return out;
  }

  ConnectResult connect_each(const ConnectSpec&) override {
    throw std::invalid_argument("connects: only --target=kwatch");
  }

  std::string session_info() override { return ""; }

 private:
  // A blocking Range that waits for the connection; throws on failure.
  etcdserverpb::RangeResponse range(const etcdserverpb::RangeRequest& req,
                                    std::chrono::seconds timeout) {
    etcdserverpb::RangeResponse res;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    ctx.set_wait_for_ready(true);
    auto status = kv_->Range(&ctx, req, &res);
    if (!status.ok()) throw std::runtime_error("etcd range: " + status.error_message());
    return res;
  }

  std::string key(const Workload& w, std::size_t i) const {
    return prefix_ + "/" + w.kind + "/" + w.ns + "/" + object_name(w, i);
  }

  // Returns the revision of the put, or -1.
  static std::int64_t put(etcdserverpb::KV::Stub& kv, const std::string& key, std::string value) {
    etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(std::move(value));
    etcdserverpb::PutResponse res;
    grpc::Status status;
    for (int attempt = 0; attempt < 3; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      // A fresh channel may still be connecting: wait for it (within the deadline) instead of
      // failing fast, and retry a connection that failed transiently.
      ctx.set_wait_for_ready(true);
      status = kv.Put(&ctx, req, &res);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    }
    if (!status.ok()) {
      std::fprintf(stderr, "loadgen: etcd put: %s\n", status.error_message().c_str());
      return -1;
    }
    return res.header().revision();
  }

  std::vector<std::string> endpoints_;
  std::string prefix_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  QueuePool queues_;  // before watchers_: destroyed after them
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::vector<WatcherRecord*> stalled_;  // owned by the driver's records
  std::size_t next_channel_ = 0;
};

}  // namespace

std::unique_ptr<Target> make_etcd_target(const std::vector<std::string>& endpoints,
                                         const std::string& prefix, int threads) {
  return std::make_unique<EtcdTarget>(endpoints, prefix, threads);
}

}  // namespace kwatch::bench
