// Shared vocabulary of the load generator: what a watcher records, what a writer acknowledges,
// the scenario parameters, and the one interface both targets (kwatch over HTTP, etcd over gRPC)
// implement. No Asio, Beast or gRPC here: those stay in kwatch_client.cpp and etcd_client.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::bench {

using Nanos = std::int64_t;

// steady_clock in nanoseconds; every timestamp of one run comes from this one process.
Nanos now_ns();

// One delivered event: its resourceVersion (etcd: mod_revision) and when it was received.
struct Sample {
  std::int64_t rv;
  Nanos t;
};

// One write's acknowledgement: the resourceVersion the server returned, when the request was
// sent and when its response arrived.
struct Ack {
  std::int64_t rv;
  Nanos t;
  Nanos sent;
};

// What one watcher saw. Owner: the driver (loadgen.cpp). Thread-safety: `samples` is appended
// only by the watcher's own reader (one outstanding read at a time) and read by the driver only
// after the watcher has been stopped; the atomics may be read at any time.
struct WatcherRecord {
  std::vector<Sample> samples;
  std::atomic<std::uint64_t> events{0};
  std::atomic<bool> established{false};  // kwatch: 200 headers read; etcd: `created` received
  std::atomic<bool> ended{false};        // the stream ended before the driver stopped it
  bool stalled = false;                  // never reads after being established (until resumed)
};

// Which objects are written and watched.
struct Workload {
  std::string kind = "configmaps";  // "configmaps" or "pods"
  std::string ns = "default";
  std::size_t object_size = 1024;   // approximate serialized size of one object
  std::size_t objects = 100;        // pool created before the measurement, then updated in turn
  std::size_t nodes = 0;            // pods: object i runs on node-(i % nodes); 0: no nodeName
};

struct WatchSpec {
  std::size_t watchers = 0;
  std::size_t stalled = 0;
  bool resumable = false;             // kwatch: stalled watchers read again on resume_stalled()
  std::string transport = "chunked";  // kwatch: "chunked" or "ws"
  bool per_node = false;              // watcher i selects spec.nodeName=node-(i % nodes)
  std::int64_t from_rv = 0;           // watch changes after this revision
  std::size_t sources = 1;            // kwatch: bind to 127.0.0.1 .. 127.0.0.<sources>
  std::size_t parallel_opens = 64;    // connections being established at the same time
  double deadline_s = 120;            // to establish all of them
};

struct WriteSpec {
  std::size_t writers = 8;  // concurrent writers, each on its own connection
  double rate = 0;          // total writes per second; 0 = as fast as the writers go
  double duration_s = 5;
};

struct WriteResult {
  std::vector<Ack> acks;
  std::uint64_t errors = 0;
  double seconds = 0;
};

// New connections, each with one request (kwatch-loadgen connects): connect, the TLS handshake
// when the target speaks TLS, one GET and its response, close.
struct ConnectSpec {
  std::size_t connections = 1000;
  std::size_t concurrency = 16;  // connections in flight at once
  std::string path = "/version";
};

struct ConnectResult {
  std::vector<double> ms;  // connect to last response byte, one per successful connection
  std::uint64_t errors = 0;
  double seconds = 0;      // wall time of the whole batch
};

struct ListResult {
  std::vector<double> ms;  // one per repetition
  std::size_t items = 0;
  std::size_t bytes = 0;
};

// A server under test. Methods block the calling (driver) thread; the I/O runs on the client's
// own threads. Not thread-safe: one driver thread calls it.
class Target {
 public:
  virtual ~Target() = default;
  // Creates the workload's pool of objects (not measured); returns the last revision written.
  virtual std::int64_t create_pool(const Workload& w, std::size_t concurrency) = 0;
  // Opens the watchers into `records` (one per watcher, stalled ones last); returns how many
  // were established before the deadline.
  virtual std::size_t open_watchers(const Workload& w, const WatchSpec& spec,
                                    std::vector<std::unique_ptr<WatcherRecord>>& records) = 0;
  // Updates the pool in turn at the given rate for the given duration.
  virtual WriteResult run_writes(const Workload& w, const WriteSpec& spec) = 0;
  // How many stalled watchers had their stream closed by the server (checked by draining them).
  virtual std::size_t stalled_closed() = 0;
  // Resumable stalled watchers start reading (and recording) from now on. Thread-safe.
  virtual void resume_stalled() = 0;
  // Stops every watcher and waits for their I/O to finish.
  virtual void close_watchers() = 0;
  // Server-side count of terminated watchers, or -1 when the server has none.
  virtual double terminated_metric() = 0;
  // Times `reps` lists of the workload's objects; `selector` narrows it (kwatch), `decode`
  // parses every value as JSON (etcd).
  virtual ListResult list(const Workload& w, const std::string& selector, int reps) = 0;
  // Opens spec.connections new connections, spec.concurrency at a time, each doing one GET.
  virtual ConnectResult connect_each(const ConnectSpec& spec) = 0;
  // What the connections negotiated, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256"; "" when plain.
  virtual std::string session_info() = 0;
};

// `tls_ca`: empty for plain HTTP; otherwise every connection (watchers, writers, lists) speaks
// TLS and verifies the server's certificate against this CA file and the address `host`.
std::unique_ptr<Target> make_kwatch_target(const std::string& host, int port, int threads,
                                           const std::string& tls_ca);
std::unique_ptr<Target> make_etcd_target(const std::vector<std::string>& endpoints,
                                         const std::string& prefix, int threads);

// The JSON body of object `index` of the workload at update `version`, about w.object_size
// bytes. kwatch gets the Kubernetes object; etcd gets the same bytes as its value.
std::string object_name(const Workload& w, std::size_t index);
std::string object_json(const Workload& w, std::size_t index, std::uint64_t version);

// The first "resourceVersion":"N" in text, or -1.
std::int64_t find_resource_version(const char* data, std::size_t size);

// /proc/<pid>: user+system CPU seconds and VmRSS in KiB.
struct ProcSample {
  double cpu_s = 0;
  double sys_cpu_s = 0;  // the kernel part of cpu_s (stime)
  long rss_kib = 0;
};
ProcSample read_proc(int pid);
// CPU seconds of each thread of pid (/proc/<pid>/task/<tid>/stat), by thread id.
std::map<int, double> read_thread_cpu(int pid);

// Percentile (0..100) of an unsorted vector (sorted in place).
double percentile(std::vector<double>& v, double p);

// --key=value command-line options.
class Options {
 public:
  Options(int argc, char** argv);
  std::string str(const std::string& key, const std::string& fallback) const;
  double num(const std::string& key, double fallback) const;
  bool flag(const std::string& key) const;
  const std::string& command() const { return command_; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

}  // namespace kwatch::bench
