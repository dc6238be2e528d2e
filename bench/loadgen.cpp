// kwatch-loadgen: one measurement against one running server (kwatch or etcd), printed as one
// JSON object on stdout. bench/run starts the servers, calls this once per scenario and target,
// and assembles the results.
//
//   kwatch-loadgen watch --target=kwatch --kwatch=127.0.0.1:PORT --server-pid=PID [options]
//   kwatch-loadgen watch --target=etcd --etcd=127.0.0.1:P,127.0.0.2:P --server-pid=PID [options]
//   kwatch-loadgen list  --target=kwatch|etcd ... --objects=N --reps=R
//   kwatch-loadgen connects --kwatch=127.0.0.1:PORT [--tls-ca=FILE] --connections=N --concurrency=C
//
// See usage() for the options.
#include <sys/resource.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "bench/bench_common.hpp"

namespace kwatch::bench {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

const char* kUsage = R"(usage: kwatch-loadgen watch|list|connects [--option=value ...]

Common:
  --target=kwatch|etcd       which server to drive
  --kwatch=HOST:PORT         kwatch address (127.0.0.1:PORT)
  --tls-ca=FILE              kwatch over HTTPS: every connection speaks TLS (1.2+, ALPN http/1.1)
                             and verifies the server against this CA and the address HOST
  --etcd=EP[,EP...]          etcd client endpoints host:port; watchers are spread over them
  --etcd-prefix=P            key prefix on etcd (default /bench)
  --server-pid=PID           server process for CPU (utime+stime) and VmRSS (0: not measured)
  --kind=configmaps|pods     resource written and watched (default configmaps)
  --object-size=BYTES        approximate object size (default 1024)
  --objects=N                objects created first, then updated in turn (default 100)
  --nodes=N                  pods: spread over node-0..node-(N-1) (default 0)
  --threads=N                client I/O threads: kwatch sockets / etcd completion queues (default 2)
watch:
  --watchers=N               watchers that read (default 0)
  --stalled=N                watchers that never read after being established (default 0)
  --stall-for=S              kwatch, chunked: the stalled watchers start reading S seconds after
                             the writes start, and are checked for every event in order (default 0:
                             they never read)
  --transport=chunked|ws     kwatch watch transport (default chunked)
  --per-node                 watcher i selects spec.nodeName=node-(i % nodes)
  --sources=N                kwatch: bind watchers to 127.0.0.1..127.0.0.N (default 1)
  --parallel-opens=N         connections being established at once (default 64)
  --writers=N                concurrent writers (default 8; 0: no writes)
  --rate=R                   total writes/s (default 0: as fast as the writers go)
  --duration=S               seconds of writing (default 5)
  --settle=S                 wait after opening watchers before reading RSS (default 1)
list:
  --reps=N                   lists per variant (default 5)
  --selector=SEL             kwatch labelSelector of the selective list (default bench%3Dnone)
connects (kwatch only; handshakes/s with --tls-ca, plain connects/s without):
  --connections=N            new connections, each: connect, TLS handshake, one GET, close (default 2000)
  --concurrency=C            connections in flight at once (default 16)
  --path=PATH                what each connection GETs (default /version)
)";

// CPU seconds (user+system) of this load generator so far.
double self_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Raises the soft open-file limit to the hard one: every watcher is a socket.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::unique_ptr<Target> make_target(const Options& o) {
  std::string t = o.str("target", "kwatch");
  if (t == "kwatch") {
    std::string addr = o.str("kwatch", "127.0.0.1:8080");
    auto colon = addr.rfind(':');
    return make_kwatch_target(addr.substr(0, colon), std::stoi(addr.substr(colon + 1)),
                              static_cast<int>(o.num("threads", 2)), o.str("tls-ca", ""));
  }
  if (t == "etcd") {
    return make_etcd_target(split(o.str("etcd", "127.0.0.1:2379"), ','), o.str("etcd-prefix", "/bench"),
                            static_cast<int>(o.num("threads", 2)));
  }
  throw std::invalid_argument("--target must be kwatch or etcd");
}

Workload workload(const Options& o) {
  Workload w;
  w.kind = o.str("kind", "configmaps");
  w.object_size = static_cast<std::size_t>(o.num("object-size", 1024));
  w.objects = static_cast<std::size_t>(o.num("objects", 100));
  w.nodes = static_cast<std::size_t>(o.num("nodes", 0));
  return w;
}

std::uint64_t total_events(const std::vector<std::unique_ptr<WatcherRecord>>& records) {
  std::uint64_t n = 0;
  for (auto& r : records) n += r->events.load(std::memory_order_relaxed);
  return n;
}

json::object stats_ms(std::vector<double>& v) {
  json::object o;
  o["samples"] = v.size();
  if (v.empty()) return o;
  o["p50"] = percentile(v, 50);
  o["p99"] = percentile(v, 99);
  o["p999"] = percentile(v, 99.9);
  o["max"] = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  o["mean"] = sum / static_cast<double>(v.size());
  return o;
}

// Waits until no event has arrived for 300 ms (at most 10 s): the watchers have drained.
void wait_until_quiet(const std::vector<std::unique_ptr<WatcherRecord>>& records) {
  std::uint64_t seen = total_events(records);
  Nanos quiet_since = now_ns();
  const Nanos drain_deadline = now_ns() + 10'000'000'000;
  while (now_ns() < drain_deadline) {
    std::this_thread::sleep_for(20ms);
    std::uint64_t n = total_events(records);
    if (n != seen) {
      seen = n;
      quiet_since = now_ns();
    } else if (now_ns() - quiet_since > 300'000'000) {
      break;
    }
  }
}

// The reading watchers' events from `t0` on, each joined with the acknowledgement (and the
// sending) of the write that produced it.
struct EventTimes {
  std::vector<double> latency_ms;    // from the write's acknowledgement (0 if it overtook it)
  std::vector<double> from_send_ms;  // from the write's sending
  std::uint64_t before_ack = 0;      // events that overtook their write's response
  std::uint64_t unmatched = 0;       // events of no acknowledged write
  Nanos last_event = 0;
};

EventTimes join_events(const WriteResult& writes,
                       const std::vector<std::unique_ptr<WatcherRecord>>& records, Nanos t0) {
  EventTimes out;
  out.last_event = t0;
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (auto& a : writes.acks) {
    if (a.rv <= 0) continue;
    lo = std::min(lo, a.rv);
    hi = std::max(hi, a.rv);
  }
  std::vector<Nanos> ack_at, sent_at;
  if (lo <= hi) {
    ack_at.assign(static_cast<std::size_t>(hi - lo + 1), -1);
    sent_at.assign(static_cast<std::size_t>(hi - lo + 1), -1);
  }
  for (auto& a : writes.acks) {
    if (a.rv <= 0) continue;
    ack_at[static_cast<std::size_t>(a.rv - lo)] = a.t;
    sent_at[static_cast<std::size_t>(a.rv - lo)] = a.sent;
  }
  for (auto& r : records) {
    if (r->stalled) continue;  // latency is the reading watchers'
    for (auto& s : r->samples) {
      if (s.t < t0) continue;
      out.last_event = std::max(out.last_event, s.t);
      if (s.rv < lo || s.rv > hi || ack_at[static_cast<std::size_t>(s.rv - lo)] < 0) {
        ++out.unmatched;
        continue;
      }
      out.from_send_ms.push_back(
          static_cast<double>(s.t - sent_at[static_cast<std::size_t>(s.rv - lo)]) / 1e6);
      Nanos d = s.t - ack_at[static_cast<std::size_t>(s.rv - lo)];
      if (d < 0) {
        ++out.before_ack;  // the event overtook the write's response
        d = 0;
      }
      out.latency_ms.push_back(static_cast<double>(d) / 1e6);
    }
  }
  return out;
}

// Resumed watchers (stalled, then resumed): every write's event exactly once, in order (they
// watch everything). Moves `last_event` past their last event.
json::object resumed_watchers(const WriteResult& writes,
                              const std::vector<std::unique_ptr<WatcherRecord>>& records,
                              std::size_t stalled, Nanos t0, Nanos& last_event) {
  std::vector<std::int64_t> acked;
  for (auto& a : writes.acks) {
    if (a.rv > 0) acked.push_back(a.rv);
  }
  std::sort(acked.begin(), acked.end());
  std::size_t complete = 0, ended = 0;
  std::uint64_t events = 0;
  for (auto& r : records) {
    if (!r->stalled) continue;
    std::vector<std::int64_t> seen;
    for (auto& s : r->samples) {
      if (s.t >= t0) seen.push_back(s.rv);
      last_event = std::max(last_event, s.t);
    }
    events += seen.size();
    complete += seen == acked ? 1 : 0;
    ended += r->ended ? 1 : 0;
  }
  json::object resumed;
  resumed["watchers"] = stalled;
  resumed["events"] = events;
  resumed["every_event_in_order"] = complete;
  resumed["ended"] = ended;
  return resumed;
}

// The server's costs over the window [t0, t1]: CPU per event and per write, the kernel's share,
// and whether one server thread is the bottleneck.
void add_server_costs(json::object& out, const ProcSample& p0, const ProcSample& p1,
                      const std::map<int, double>& threads0,
                      const std::map<int, double>& threads1, Nanos t0, Nanos t1,
                      std::uint64_t events, std::size_t writes) {
  const double window_s = static_cast<double>(t1 - t0) / 1e9;
  const double cpu = p1.cpu_s - p0.cpu_s;
  out["server_cpu_s"] = cpu;
  out["server_cpu_us_per_event"] = events > 0 ? cpu * 1e6 / static_cast<double>(events) : 0.0;
  // The kernel's share: socket sends (with loopback delivery to the client), wake-ups, polling.
  const double sys_cpu = p1.sys_cpu_s - p0.sys_cpu_s;
  out["server_sys_cpu_us_per_event"] =
      events > 0 ? sys_cpu * 1e6 / static_cast<double>(events) : 0.0;
  out["server_cpu_us_per_write"] = writes > 0 ? cpu * 1e6 / static_cast<double>(writes) : 0.0;
  out["server_rss_end_kib"] = p1.rss_kib;
  // Is one server thread the bottleneck? The busiest thread's share of one core over the window.
  double busiest = 0;
  for (const auto& [tid, cpu1] : threads1) {
    auto it = threads0.find(tid);
    busiest = std::max(busiest, cpu1 - (it == threads0.end() ? 0.0 : it->second));
  }
  out["server_threads"] = threads1.size();
  out["server_busiest_thread_cpu_s"] = busiest;
  out["server_busiest_thread_core_share"] = busiest / window_s;
  out["server_core_share"] = cpu / window_s;
}

json::object run_watch(const Options& o) {
  auto target = make_target(o);
  Workload w = workload(o);
  WatchSpec ws;
  ws.watchers = static_cast<std::size_t>(o.num("watchers", 0));
  ws.stalled = static_cast<std::size_t>(o.num("stalled", 0));
  const double stall_s = o.num("stall-for", 0);
  ws.resumable = ws.stalled > 0 && stall_s > 0;
  ws.transport = o.str("transport", "chunked");
  ws.per_node = o.flag("per-node");
  ws.sources = static_cast<std::size_t>(o.num("sources", 1));
  ws.parallel_opens = static_cast<std::size_t>(o.num("parallel-opens", 64));
  WriteSpec wr;
  wr.writers = static_cast<std::size_t>(o.num("writers", 8));
  wr.rate = o.num("rate", 0);
  wr.duration_s = o.num("duration", 5);
  const int pid = static_cast<int>(o.num("server-pid", 0));

  json::object out;
  out["target"] = o.str("target", "kwatch");
  out["transport"] = out["target"] == "etcd" ? "grpc" : ws.transport;
  out["tls"] = !o.str("tls-ca", "").empty();
  out["kind"] = w.kind;
  out["object_size"] = w.object_size;
  out["objects"] = w.objects;
  out["nodes"] = w.nodes;
  out["watchers"] = ws.watchers;
  out["stalled"] = ws.stalled;
  out["stall_s"] = stall_s;
  out["per_node"] = ws.per_node;
  out["writers"] = wr.writers;
  out["rate_target"] = wr.rate;
  out["duration_s"] = wr.duration_s;

  if (w.objects > 0) ws.from_rv = target->create_pool(w, 16);
  std::this_thread::sleep_for(500ms);
  ProcSample before = read_proc(pid);

  std::vector<std::unique_ptr<WatcherRecord>> records;
  Nanos t_open = now_ns();
  std::size_t established = target->open_watchers(w, ws, records);
  out["established"] = established;
  out["open_s"] = static_cast<double>(now_ns() - t_open) / 1e9;
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.num("settle", 1) * 1000)));
  ProcSample with_watchers = read_proc(pid);
  out["rss_before_kib"] = before.rss_kib;
  out["rss_with_watchers_kib"] = with_watchers.rss_kib;
  const std::size_t n_watch = ws.watchers + ws.stalled;
  out["bytes_per_watcher"] =
      n_watch > 0 ? static_cast<double>(with_watchers.rss_kib - before.rss_kib) * 1024.0 / static_cast<double>(n_watch) : 0.0;

  const double terminated0 = target->terminated_metric();
  const std::uint64_t events0 = total_events(records);
  const ProcSample p0 = read_proc(pid);
  const auto threads0 = read_thread_cpu(pid);
  const double client0 = self_cpu_s();
  const Nanos t0 = now_ns();

  std::thread resumer;
  if (ws.resumable) {
    resumer = std::thread([&target, stall_s] {
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(stall_s * 1000)));
      target->resume_stalled();
    });
  }
  WriteResult writes;
  if (wr.writers > 0 && wr.duration_s > 0) writes = target->run_writes(w, wr);
  if (resumer.joinable()) resumer.join();

  wait_until_quiet(records);
  const ProcSample p1 = read_proc(pid);
  const auto threads1 = read_thread_cpu(pid);
  const double client1 = self_cpu_s();
  const Nanos t1 = now_ns();
  const std::uint64_t events = total_events(records) - events0;
  const double terminated1 = target->terminated_metric();
  std::size_t ended = 0;
  for (auto& r : records) ended += (!r->stalled && r->ended) ? 1 : 0;
  out["stalled_closed"] = ws.stalled > 0 && !ws.resumable ? target->stalled_closed() : 0;
  target->close_watchers();

  // Latency: each event joined with the acknowledgement of the write that produced it.
  EventTimes times = join_events(writes, records, t0);
  if (ws.resumable) {
    out["resumed"] = resumed_watchers(writes, records, ws.stalled, t0, times.last_event);
  }
  std::vector<double> write_ms;
  for (auto& a : writes.acks) write_ms.push_back(static_cast<double>(a.t - a.sent) / 1e6);
  records.clear();

  const double write_s = writes.seconds > 0 ? writes.seconds : 0;
  const double event_s = static_cast<double>(std::max<Nanos>(times.last_event - t0, 1)) / 1e9;
  out["writes"] = writes.acks.size();
  out["write_errors"] = writes.errors;
  out["writes_per_s"] = write_s > 0 ? static_cast<double>(writes.acks.size()) / write_s : 0.0;
  out["events"] = events;
  out["events_per_s"] = events > 0 ? static_cast<double>(events) / event_s : 0.0;
  out["expected_events"] = ws.per_node ? writes.acks.size()
                                        : writes.acks.size() * (ws.watchers + (ws.resumable ? ws.stalled : 0));
  json::object latency = stats_ms(times.latency_ms);
  latency["before_ack"] = times.before_ack;
  latency["unmatched"] = times.unmatched;
  out["latency_ms"] = latency;
  // The same events measured from when the write was sent: never negative, includes the write.
  out["latency_from_send_ms"] = stats_ms(times.from_send_ms);
  out["write_latency_ms"] = stats_ms(write_ms);
  add_server_costs(out, p0, p1, threads0, threads1, t0, t1, events, writes.acks.size());
  // The load generator's own CPU over the same window: is the client the bottleneck?
  out["client_core_share"] = (client1 - client0) / (static_cast<double>(t1 - t0) / 1e9);
  out["terminated_metric_delta"] = terminated0 >= 0 ? terminated1 - terminated0 : -1.0;
  out["ended_early"] = ended;
  out["tls_session"] = target->session_info();
  return out;
}

// New connections, each with one request: handshakes per second and the server's CPU per
// connection, for TLS (--tls-ca) or plain TCP.
json::object run_connects(const Options& o) {
  auto target = make_target(o);
  ConnectSpec spec;
  spec.connections = static_cast<std::size_t>(o.num("connections", 2000));
  spec.concurrency = static_cast<std::size_t>(o.num("concurrency", 16));
  spec.path = o.str("path", "/version");
  const int pid = static_cast<int>(o.num("server-pid", 0));
  json::object out;
  out["target"] = o.str("target", "kwatch");
  out["tls"] = !o.str("tls-ca", "").empty();
  out["connections"] = spec.connections;
  out["concurrency"] = spec.concurrency;
  out["path"] = spec.path;
  // A few connections first, unmeasured: lazy set-up on either side (and what TLS negotiated).
  ConnectSpec warm = spec;
  warm.connections = std::min<std::size_t>(spec.connections, 20);
  target->connect_each(warm);
  std::this_thread::sleep_for(200ms);
  const ProcSample p0 = read_proc(pid);
  const double client0 = self_cpu_s();
  ConnectResult r = target->connect_each(spec);
  const ProcSample p1 = read_proc(pid);
  const double client1 = self_cpu_s();
  const double ok = static_cast<double>(r.ms.size());
  out["ok"] = r.ms.size();
  out["errors"] = r.errors;
  out["seconds"] = r.seconds;
  out["per_s"] = r.seconds > 0 ? ok / r.seconds : 0.0;
  out["connection_ms"] = stats_ms(r.ms);
  const double cpu = p1.cpu_s - p0.cpu_s;
  out["server_cpu_s"] = cpu;
  out["server_cpu_us_per_connection"] = ok > 0 ? cpu * 1e6 / ok : 0.0;
  out["server_sys_cpu_us_per_connection"] = ok > 0 ? (p1.sys_cpu_s - p0.sys_cpu_s) * 1e6 / ok : 0.0;
  out["server_core_share"] = r.seconds > 0 ? cpu / r.seconds : 0.0;
  out["client_cpu_us_per_connection"] = ok > 0 ? (client1 - client0) * 1e6 / ok : 0.0;
  out["client_core_share"] = r.seconds > 0 ? (client1 - client0) / r.seconds : 0.0;
  out["tls_session"] = target->session_info();
  return out;
}

json::object run_list(const Options& o) {
  auto target = make_target(o);
  Workload w = workload(o);
  const int reps = static_cast<int>(o.num("reps", 5));
  json::object out;
  out["target"] = o.str("target", "kwatch");
  out["objects"] = w.objects;
  out["object_size"] = w.object_size;
  const int server_pid = static_cast<int>(o.num("server-pid", 0));
  out["server_rss_before_kib"] = read_proc(server_pid).rss_kib;
  Nanos t0 = now_ns();
  target->create_pool(w, 16);
  const double create_s = static_cast<double>(now_ns() - t0) / 1e9;
  out["create_per_s"] = static_cast<double>(w.objects) / create_s;
  std::this_thread::sleep_for(1s);
  out["server_rss_kib"] = read_proc(server_pid).rss_kib;
  auto variant = [&](const std::string& selector) {
    ListResult r = target->list(w, selector, reps);
    json::object v = stats_ms(r.ms);
    v["items"] = r.items;
    v["bytes"] = r.bytes;
    return v;
  };
  if (out["target"] == "kwatch") {
    out["selector"] = variant(o.str("selector", "bench%3Dnone"));
    out["full"] = variant("");
  } else {
    out["full"] = variant("");  // Range + JSON decode of every value
  }
  return out;
}

}  // namespace
}  // namespace kwatch::bench

int main(int argc, char** argv) {
  using namespace kwatch::bench;
  try {
    Options o(argc, argv);
    if (o.flag("help") || o.command().empty()) {
      std::fputs(kUsage, o.flag("help") ? stdout : stderr);
      return o.flag("help") ? 0 : 2;
    }
    raise_fd_limit();
    boost::json::object result;
    if (o.command() == "watch") {
      result = run_watch(o);
    } else if (o.command() == "list") {
      result = run_list(o);
    } else if (o.command() == "connects") {
      result = run_connects(o);
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
    std::cout << boost::json::serialize(result) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kwatch-loadgen: %s\n", e.what());
    return 1;
  }
}
