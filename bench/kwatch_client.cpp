// The kwatch side of the load generator: watchers over chunked HTTP or WebSocket, writers over
// keep-alive HTTP, lists and /metrics, plain or over TLS. The only translation unit that
// instantiates Beast.
//
// Threads: one io_context run by `threads` threads; every connection lives on its own strand and
// has one outstanding read. The driver thread only posts work and waits on futures or atomics.
//
// TLS: the code that reads and writes is templated on the stream (beast::tcp_stream or
// beast::ssl_stream<beast::tcp_stream>), so the plain path compiles to what it was before TLS
// existed: no virtual call or branch per byte.
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/bench_common.hpp"

namespace kwatch::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using namespace std::chrono_literals;

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

// Logs the failure of a task root instead of dropping it.
void log_failure(const char* what, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "loadgen: %s: %s\n", what, ex.what());
  }
}

// Splits a chunked transfer-encoded body into '\n'-terminated lines.
class ChunkedLines {
 public:
  // Feeds received bytes; calls on_line for each complete line. False once the last chunk came.
  template <class F>
  bool feed(const char* data, std::size_t size, F&& on_line) {
    in_.append(data, size);
    std::size_t p = 0;
    while (!finished_) {
      if (state_ == State::size) {
        auto eol = in_.find("\r\n", p);
        if (eol == std::string::npos) break;
        remaining_ = std::strtoull(in_.c_str() + p, nullptr, 16);
        p = eol + 2;
        if (remaining_ == 0) {
          finished_ = true;
          break;
        }
        state_ = State::data;
      } else if (state_ == State::data) {
        std::size_t take = std::min(remaining_, in_.size() - p);
        if (take == 0) break;
        const char* s = in_.data() + p;
        const char* end = s + take;
        while (s < end) {
          const char* nl = static_cast<const char*>(std::memchr(s, '\n', end - s));
          if (!nl) {
            line_.append(s, end);
            break;
          }
          line_.append(s, nl);
          on_line(line_);
          line_.clear();
          s = nl + 1;
        }
        p += take;
        remaining_ -= take;
        if (remaining_ == 0) state_ = State::crlf;
      } else {
        if (in_.size() - p < 2) break;
        p += 2;
        state_ = State::size;
      }
    }
    in_.erase(0, p);
    return !finished_;
  }

 private:
  enum class State { size, data, crlf };
  State state_ = State::size;
  std::string in_;
  std::string line_;
  std::size_t remaining_ = 0;
  bool finished_ = false;
};

// Splits a server's WebSocket byte stream into messages (frames unmasked, as servers send them;
// a masked frame is unmasked anyway). Control frames are skipped; a close frame ends the stream.
// As cheap as ChunkedLines: no per-message allocation once the buffers have grown.
class WsMessages {
 public:
  // Feeds received bytes; calls on_message for each complete message. False once closed.
  template <class F>
  bool feed(const char* data, std::size_t size, F&& on_message) {
    in_.append(data, size);
    std::size_t p = 0;
    while (!closed_) {
      const std::size_t avail = in_.size() - p;
      if (avail < 2) break;
      const auto* h = reinterpret_cast<const unsigned char*>(in_.data() + p);
      const bool fin = (h[0] & 0x80) != 0;
      const unsigned opcode = h[0] & 0x0F;
      const bool masked = (h[1] & 0x80) != 0;
      std::uint64_t len = h[1] & 0x7F;
      std::size_t header = 2;
      if (len == 126) {
        if (avail < 4) break;
        len = (std::uint64_t{h[2]} << 8) | h[3];
        header = 4;
      } else if (len == 127) {
        if (avail < 10) break;
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | h[2 + i];
        header = 10;
      }
      const std::size_t key_at = header;
      if (masked) header += 4;
      if (avail < header + len) break;
      const char* payload = in_.data() + p + header;
      if (opcode == 0x8) {
        closed_ = true;
      } else if (opcode < 0x8) {  // text, binary or a continuation
        const std::size_t at = message_.size();
        message_.append(payload, len);
        if (masked) {
          for (std::size_t i = 0; i < len; ++i) message_[at + i] ^= in_[p + key_at + (i % 4)];
        }
        if (fin) {
          on_message(message_);
          message_.clear();
        }
      }
      p += header + len;
    }
    in_.erase(0, p);
    return !closed_;
  }

 private:
  std::string in_;
  std::string message_;
  bool closed_ = false;
};

// Records one watch event line or WebSocket message; false for an ERROR event.
bool record_event(WatcherRecord& rec, const std::string& text) {
  if (text.rfind(R"({"type":"BOOKMARK")", 0) == 0) return true;
  if (text.rfind(R"({"type":"ERROR")", 0) == 0) return false;
  rec.samples.push_back({find_resource_version(text.data(), text.size()), now_ns()});
  rec.events.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Counts a watcher's attempt to establish as finished once, however it ends.
struct Establishing {
  std::atomic<std::size_t>* n;
  void finish() {
    if (n) n->fetch_sub(1);
    n = nullptr;
  }
  ~Establishing() { finish(); }
};

// One watch connection. Strand: its own; the driver touches it only through posts.
struct Conn {
  Conn(asio::any_io_executor ex, asio::ssl::context* tls_context) : tcp(ex) {
    if (tls_context) tls.emplace(ex, *tls_context);
  }
  // The connection's socket, plain or under TLS. `tcp` always carries the strand; under TLS it
  // is never opened.
  beast::tcp_stream& lowest() { return tls ? tls->next_layer() : tcp; }
  beast::tcp_stream tcp;
  std::optional<TlsStream> tls;
  WatcherRecord* rec = nullptr;
  bool stopping = false;
  std::atomic<bool> running{true};
  std::atomic<bool> closed_by_server{false};  // stalled watchers: seen when drained
  std::optional<asio::steady_timer> resume;  // resumable stalled watchers: cancelled to resume
};

class KwatchTarget final : public Target {
 public:
  KwatchTarget(std::string host, int port, int threads, const std::string& tls_ca)
      : host_(std::move(host)),
        endpoint_(asio::ip::make_address_v4(host_), static_cast<unsigned short>(port)),
        guard_(asio::make_work_guard(ioc_)) {
    if (!tls_ca.empty()) {
      tls_.emplace(asio::ssl::context::tls_client);
      tls_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                        asio::ssl::context::no_tlsv1_1);
      tls_->load_verify_file(tls_ca);
      tls_->set_verify_mode(asio::ssl::verify_peer);
      // Offered as Go clients do (the server answers http/1.1 whatever else is offered).
      static constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
      SSL_CTX_set_alpn_protos(tls_->native_handle(), kAlpn, sizeof kAlpn);
    }
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

  ~KwatchTarget() override {
    close_watchers();
    guard_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

  std::int64_t create_pool(const Workload& w, std::size_t concurrency) override {
    std::int64_t last = w.objects > 0 ? create_objects(w, concurrency) : 0;
    if (last <= 0) {
      // Nothing created: the list's revision is where the watches start.
      std::string body;
      const int status = get(path(w) + "?limit=1", body);
      if (status != 200) throw std::runtime_error("LIST " + path(w) + ": " + std::to_string(status));
      return find_resource_version(body.data(), body.size());
    }
    return last;
  }

  // POSTs the pool; the highest resourceVersion created (0 when all existed already).
  std::int64_t create_objects(const Workload& w, std::size_t concurrency) {
    std::vector<std::future<std::int64_t>> parts;
    concurrency = std::max<std::size_t>(1, std::min(concurrency, w.objects));
    for (std::size_t c = 0; c < concurrency; ++c) {
      std::promise<std::int64_t> p;
      parts.push_back(p.get_future());
      asio::co_spawn(asio::make_strand(ioc_), create_part(w, c, concurrency),
                     [p = std::move(p)](std::exception_ptr e, std::int64_t rv) mutable {
                       if (e) {
                         p.set_exception(e);
                       } else {
                         p.set_value(rv);
                       }
                     });
    }
    std::int64_t last = 0;
    for (auto& f : parts) last = std::max(last, f.get());
    return last;
  }

  std::size_t open_watchers(const Workload& w, const WatchSpec& spec,
                            std::vector<std::unique_ptr<WatcherRecord>>& records) override {
    std::atomic<std::size_t> establishing{0};
    const Nanos deadline = now_ns() + static_cast<Nanos>(spec.deadline_s * 1e9);
    const std::size_t total = spec.watchers + spec.stalled;
    for (std::size_t i = 0; i < total; ++i) {
      while (establishing.load() >= spec.parallel_opens && now_ns() < deadline) {
        std::this_thread::sleep_for(200us);
      }
      auto rec = std::make_unique<WatcherRecord>();
      rec->stalled = i >= spec.watchers;
      auto conn = std::make_shared<Conn>(asio::make_strand(ioc_), tls_ ? &*tls_ : nullptr);
      conn->rec = rec.get();
      if (rec->stalled && spec.resumable) {
        conn->resume.emplace(conn->tcp.get_executor(), asio::steady_timer::time_point::max());
      }
      records.push_back(std::move(rec));
      conns_.push_back(conn);
      std::string target = watch_target(w, spec, i);
      auto source = asio::ip::make_address_v4(
          "127.0.0." + std::to_string(1 + i % std::max<std::size_t>(1, spec.sources)));
      establishing.fetch_add(1);
      asio::co_spawn(conn->tcp.get_executor(),
                     watch_one(conn, target, source, spec.transport, &establishing),
                     [conn](std::exception_ptr e) {
                       if (!conn->stopping && (!conn->rec->stalled || conn->resume)) {
                         conn->rec->ended = true;
                       }
                       if (!conn->stopping) log_failure("watch", e);
                       conn->running = false;
                     });
    }
    while (establishing.load() > 0 && now_ns() < deadline) std::this_thread::sleep_for(1ms);
    std::size_t ok = 0;
    for (auto& r : records) ok += r->established ? 1 : 0;
    return ok;
  }

  WriteResult run_writes(const Workload& w, const WriteSpec& spec) override {
    WriteResult out;
    std::vector<std::future<WriteResult>> parts;
    const Nanos start = now_ns() + 20'000'000;  // let every writer connect first
    for (std::size_t j = 0; j < spec.writers; ++j) {
      std::promise<WriteResult> p;
      parts.push_back(p.get_future());
      asio::co_spawn(asio::make_strand(ioc_), write_part(w, spec, j, start),
                     [p = std::move(p)](std::exception_ptr e, WriteResult r) mutable {
                       if (e) {
                         p.set_exception(e);
                       } else {
                         p.set_value(std::move(r));
                       }
                     });
    }
    for (auto& f : parts) {
      WriteResult r = f.get();
      out.acks.insert(out.acks.end(), r.acks.begin(), r.acks.end());
      out.errors += r.errors;
    }
    out.seconds = static_cast<double>(now_ns() - start) / 1e9;
    return out;
  }

  void resume_stalled() override {
    for (auto& c : conns_) {
      if (c->resume) asio::post(c->tcp.get_executor(), [c] { c->resume->cancel(); });
    }
  }

  std::size_t stalled_closed() override {
    std::vector<std::future<bool>> checks;
    for (auto& c : conns_) {
      if (!c->rec->stalled || c->resume) continue;
      std::promise<bool> p;
      checks.push_back(p.get_future());
      asio::co_spawn(c->tcp.get_executor(), drain_stalled(c),
                     [p = std::move(p)](std::exception_ptr e, bool closed) mutable {
                       log_failure("drain", e);
                       p.set_value(!e && closed);
                     });
    }
    std::size_t closed = 0;
    for (auto& f : checks) closed += f.get() ? 1 : 0;
    return closed;
  }

  void close_watchers() override {
    for (auto& c : conns_) {
      asio::post(c->tcp.get_executor(), [c] {
        c->stopping = true;
        beast::error_code ec;
        c->lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
        c->lowest().close();
      });
    }
    const Nanos deadline = now_ns() + 10'000'000'000;
    for (auto& c : conns_) {
      while (c->running && now_ns() < deadline) std::this_thread::sleep_for(1ms);
    }
    // Strands may still hold the last handler; wait for them before the records go away.
    for (auto& c : conns_) {
      std::promise<void> p;
      auto f = p.get_future();
      asio::post(c->tcp.get_executor(), [p = std::move(p)]() mutable { p.set_value(); });
      f.wait_for(1s);
    }
    conns_.clear();
  }

  double terminated_metric() override {
    std::string body;
    get("/metrics", body);
    double sum = 0;
    std::size_t pos = 0;
    static constexpr std::string_view kName = "kwatch_watchers_terminated_total";
    while ((pos = body.find(kName, pos)) != std::string::npos) {
      bool line_start = pos == 0 || body[pos - 1] == '\n';
      auto eol = body.find('\n', pos);
      if (line_start) {
        auto space = body.rfind(' ', eol);
        if (space != std::string::npos && space > pos) sum += std::atof(body.c_str() + space + 1);
      }
      pos = eol == std::string::npos ? body.size() : eol;
    }
    return sum;
  }

  ListResult list(const Workload& w, const std::string& selector, int reps) override {
    ListResult out;
    std::string target = "/api/v1/namespaces/" + w.ns + "/" + w.kind + "?resourceVersion=0";
    if (!selector.empty()) target += "&labelSelector=" + selector;
    for (int i = 0; i < reps; ++i) {
      Nanos t0 = now_ns();
      // One buffer for every rep: a fresh 30+ MiB string per rep measures glibc's mmap and page
      // faults (its mmap threshold is 32 MiB), not the server.
      const int status = get(target, list_body_);
      const std::string& body = list_body_;
      out.ms.push_back(static_cast<double>(now_ns() - t0) / 1e6);
      if (status != 200) throw std::runtime_error("LIST " + target + ": " + std::to_string(status));
      out.bytes = body.size();
      // Every item carries a resourceVersion, and so does the list's metadata.
      std::size_t n = 0;
      for (std::size_t p = 0; (p = body.find(R"("resourceVersion":")", p)) != std::string::npos; ++p) ++n;
      out.items = n > 0 ? n - 1 : 0;
    }
    return out;
  }

  ConnectResult connect_each(const ConnectSpec& spec) override {
    ConnectResult out;
    std::atomic<std::size_t> next{0};
    std::vector<std::future<ConnectResult>> parts;
    const Nanos t0 = now_ns();
    const std::size_t workers = std::max<std::size_t>(1, std::min(spec.concurrency, spec.connections));
    for (std::size_t i = 0; i < workers; ++i) {
      std::promise<ConnectResult> p;
      parts.push_back(p.get_future());
      asio::co_spawn(asio::make_strand(ioc_), connect_worker(spec, &next),
                     [p = std::move(p)](std::exception_ptr e, ConnectResult r) mutable {
                       if (e) {
                         p.set_exception(e);
                       } else {
                         p.set_value(std::move(r));
                       }
                     });
    }
    for (auto& f : parts) {
      ConnectResult r = f.get();
      out.ms.insert(out.ms.end(), r.ms.begin(), r.ms.end());
      out.errors += r.errors;
    }
    out.seconds = static_cast<double>(now_ns() - t0) / 1e9;
    return out;
  }

  std::string session_info() override {
    std::lock_guard lock(session_mutex_);
    return session_info_;
  }

 private:
  std::string path(const Workload& w) const {
    return "/api/v1/namespaces/" + w.ns + "/" + w.kind;
  }

  std::string watch_target(const Workload& w, const WatchSpec& spec, std::size_t i) const {
    std::string t = path(w) + "?watch=1&resourceVersion=" + std::to_string(spec.from_rv);
    if (spec.per_node && w.nodes > 0) {
      t += "&fieldSelector=spec.nodeName%3Dnode-" + std::to_string(i % w.nodes);
    }
    return t;
  }

  asio::awaitable<void> connect(beast::tcp_stream& s, asio::ip::address_v4 source) {
    s.socket().open(tcp::v4());
    int one = 1;
    // Lets many connections share a source address: the port is picked at connect time for
    // the whole 4-tuple instead of at bind time.
    ::setsockopt(s.socket().native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    s.socket().bind(tcp::endpoint(source, 0));
    s.expires_after(30s);
    co_await s.async_connect(endpoint_, asio::use_awaitable);
  }

  // The client side of a full TLS handshake (no session resumption) on a connected stream. The
  // server's certificate must chain to the CA and name host_; host_ is an IP address here, so no
  // SNI is sent (RFC 6066 allows only host names there), as Go clients do.
  asio::awaitable<void> handshake(TlsStream& s) {
    SSL* ssl = s.native_handle();
    boost::system::error_code not_ip;
    asio::ip::make_address(host_, not_ip);
    if (not_ip) {
      SSL_set_tlsext_host_name(ssl, host_.c_str());
      SSL_set1_host(ssl, host_.c_str());
    } else {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host_.c_str());
    }
    s.next_layer().expires_after(30s);
    co_await s.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
    if (!session_seen_.exchange(true)) {
      const unsigned char* alpn = nullptr;
      unsigned int alpn_len = 0;
      SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
      const int group = SSL_get_negotiated_group(ssl);
      const char* group_name = group > 0 ? OBJ_nid2sn(group) : nullptr;
      std::string info = std::string(SSL_get_version(ssl)) + " " + SSL_get_cipher_name(ssl) +
                         ", key exchange " + (group_name ? group_name : "?") + ", ALPN " +
                         (alpn_len ? std::string(reinterpret_cast<const char*>(alpn), alpn_len)
                                   : std::string("none"));
      std::lock_guard lock(session_mutex_);
      session_info_ = std::move(info);
    }
  }

  // Opens a connection from `source`: connected (plain) or connected and handshaken (TLS).
  asio::awaitable<void> open(beast::tcp_stream& s, asio::ip::address_v4 source) {
    co_await connect(s, source);
  }
  asio::awaitable<void> open(TlsStream& s, asio::ip::address_v4 source) {
    co_await connect(s.next_layer(), source);
    co_await handshake(s);
  }

  asio::awaitable<void> watch_one(std::shared_ptr<Conn> c, std::string target,
                                  asio::ip::address_v4 source, std::string transport,
                                  std::atomic<std::size_t>* establishing) {
    Establishing done{establishing};
    WatcherRecord& rec = *c->rec;
    beast::tcp_stream& low = c->lowest();
    if (rec.stalled) {
      // A tiny receive buffer makes the server's writes block after a few events.
      low.socket().open(tcp::v4());
      low.socket().set_option(asio::socket_base::receive_buffer_size(4096));
      low.socket().bind(tcp::endpoint(source, 0));
      low.expires_after(30s);
      co_await low.async_connect(endpoint_, asio::use_awaitable);
    } else {
      co_await connect(low, source);
    }
    if (c->tls) co_await handshake(*c->tls);
    const bool ws = transport == "ws";
    if (c->tls) {
      co_await read_watch(*c->tls, *c, target, ws, done);
    } else {
      co_await read_watch(c->tcp, *c, target, ws, done);
    }
  }

  // Sends the watch request and records its events until the stream ends or the driver stops it.
  // WebSocket (`ws`): the upgrade is sent and read by hand and messages are parsed from the raw
  // bytes, so that a WebSocket watcher costs the load generator what a chunked one does (a
  // Beast read per message cost several times more and bounded the measurement).
  template <class Stream>
  asio::awaitable<void> read_watch(Stream& s, Conn& c, const std::string& target, bool ws,
                                   Establishing& done) {
    WatcherRecord& rec = *c.rec;
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: " + host_ + "\r\nAccept: application/json\r\n";
    if (ws) {
      req += "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    }
    req += "\r\n";
    c.lowest().expires_after(30s);
    co_await asio::async_write(s, asio::buffer(req), asio::use_awaitable);
    // Headers first (kwatch sends them as soon as the watch is registered).
    std::string head;
    // Lives in the coroutine frame of every watcher: small enough for 100k idle watchers.
    char buf[8192];
    std::size_t header_end = std::string::npos;
    while (header_end == std::string::npos) {
      std::size_t n = co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
      head.append(buf, n);
      header_end = head.find("\r\n\r\n");
      if (head.size() > 65536) throw std::runtime_error("watch response headers too long");
    }
    if (head.rfind(ws ? "HTTP/1.1 101" : "HTTP/1.1 200", 0) != 0) {
      throw std::runtime_error("watch " + target + ": " + head.substr(0, head.find("\r\n")));
    }
    c.lowest().expires_never();
    rec.established = true;
    done.finish();
    if (rec.stalled && !c.resume) co_return;  // never reads again; drain_stalled() looks at it
    if (c.resume) {
      // Cancelled by resume_stalled() (or by the stop, which the check below sees).
      co_await c.resume->async_wait(asio::as_tuple(asio::use_awaitable));
      if (c.stopping) co_return;
    }
    bool ok = true;
    auto on_line = [&](const std::string& line) { ok = record_event(rec, line) && ok; };
    ChunkedLines lines;
    WsMessages messages;
    auto feed = [&](const char* data, std::size_t n) {
      return ws ? messages.feed(data, n, on_line) : lines.feed(data, n, on_line);
    };
    bool more = feed(head.data() + header_end + 4, head.size() - header_end - 4);
    while (more && ok) {
      auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      more = feed(buf, n);
    }
    if (!c.stopping) rec.ended = true;
  }

  // Reads whatever a stalled watcher has pending; true when the server had closed the stream.
  asio::awaitable<bool> drain_stalled(std::shared_ptr<Conn> c) {
    bool closed = false;
    if (c->tls) {
      closed = co_await drain(*c->tls, c->lowest());
    } else {
      closed = co_await drain(c->tcp, c->tcp);
    }
    co_return closed;
  }

  template <class Stream>
  asio::awaitable<bool> drain(Stream& s, beast::tcp_stream& low) {
    char buf[8192];
    for (;;) {
      low.expires_after(2s);
      auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::eof || ec == asio::error::connection_reset ||
          ec == asio::ssl::error::stream_truncated) {
        co_return true;
      }
      if (ec) co_return false;  // timeout: still open and quiet
    }
  }

  http::request<http::string_body> request(http::verb verb, const std::string& target, std::string body) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host_);
    req.set(http::field::accept, "application/json");
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }

  asio::awaitable<std::int64_t> create_part(Workload w, std::size_t part, std::size_t parts) {
    auto ex = co_await asio::this_coro::executor;
    const auto source = asio::ip::make_address_v4("127.0.0.1");
    std::int64_t last = 0;
    if (tls_) {
      TlsStream s(ex, *tls_);
      co_await open(s, source);
      last = co_await create_on(s, w, part, parts);
    } else {
      beast::tcp_stream s(ex);
      co_await open(s, source);
      last = co_await create_on(s, w, part, parts);
    }
    co_return last;
  }

  template <class Stream>
  asio::awaitable<std::int64_t> create_on(Stream& s, const Workload& w, std::size_t part,
                                          std::size_t parts) {
    beast::flat_buffer buf;
    std::int64_t last = 0;
    for (std::size_t i = part; i < w.objects; i += parts) {
      auto req = request(http::verb::post, path(w), object_json(w, i, 0));
      beast::get_lowest_layer(s).expires_after(30s);
      co_await http::async_write(s, req, asio::use_awaitable);
      http::response<http::string_body> res;
      co_await http::async_read(s, buf, res, asio::use_awaitable);
      if (res.result() != http::status::created && res.result() != http::status::conflict) {
        throw std::runtime_error("create " + object_name(w, i) + ": " + std::to_string(res.result_int()) +
                                 " " + res.body().substr(0, 300));
      }
      last = std::max(last, find_resource_version(res.body().data(), res.body().size()));
    }
    co_return last;
  }

  asio::awaitable<WriteResult> write_part(Workload w, WriteSpec spec, std::size_t j, Nanos start) {
    auto ex = co_await asio::this_coro::executor;
    const auto source = asio::ip::make_address_v4("127.0.0.1");
    WriteResult out;
    if (tls_) {
      TlsStream s(ex, *tls_);
      co_await open(s, source);
      out = co_await write_on(s, w, spec, j, start);
    } else {
      beast::tcp_stream s(ex);
      co_await open(s, source);
      out = co_await write_on(s, w, spec, j, start);
    }
    co_return out;
  }

  template <class Stream>
  asio::awaitable<WriteResult> write_on(Stream& s, const Workload& w, const WriteSpec& spec,
                                        std::size_t j, Nanos start) {
    WriteResult out;
    asio::steady_timer timer(s.get_executor());
    beast::flat_buffer buf;
    const Nanos end = start + static_cast<Nanos>(spec.duration_s * 1e9);
    const std::size_t per_writer = std::max<std::size_t>(1, w.objects / spec.writers);
    for (std::uint64_t k = 0;; ++k) {
      if (spec.rate > 0) {
        // Open-loop schedule: write number k*W+j is due at start + (k*W+j)/rate.
        Nanos due = start + static_cast<Nanos>(static_cast<double>(k * spec.writers + j) / spec.rate * 1e9);
        if (due >= end || now_ns() >= end) break;  // a writer that fell behind stops at the end too
        if (due > now_ns()) {
          timer.expires_after(std::chrono::nanoseconds(due - now_ns()));
          co_await timer.async_wait(asio::use_awaitable);
        }
      } else {
        if (now_ns() < start) {
          timer.expires_after(std::chrono::nanoseconds(start - now_ns()));
          co_await timer.async_wait(asio::use_awaitable);
        }
        if (now_ns() >= end) break;
      }
      // Writer j owns objects j, j+W, j+2W, ...: no two writers race on one object.
      std::size_t index = (j + (k % per_writer) * spec.writers) % w.objects;
      auto req = request(http::verb::put, path(w) + "/" + object_name(w, index),
                         object_json(w, index, k * spec.writers + j + 1));
      beast::get_lowest_layer(s).expires_after(30s);
      const Nanos sent = now_ns();
      co_await http::async_write(s, req, asio::use_awaitable);
      http::response<http::string_body> res;
      co_await http::async_read(s, buf, res, asio::use_awaitable);
      Nanos t = now_ns();
      if (res.result() == http::status::ok) {
        out.acks.push_back({find_resource_version(res.body().data(), res.body().size()), t, sent});
      } else {
        ++out.errors;
      }
    }
    co_return out;
  }

  // A plain GET on a fresh connection. Reads the body straight into one string sized from
  // Content-Length (Beast's parser with a string body was >10x slower than curl on 30 MB lists).
  asio::awaitable<int> get_once(std::string target, std::string* body) {
    auto ex = co_await asio::this_coro::executor;
    const auto source = asio::ip::make_address_v4("127.0.0.1");
    int status = 0;
    if (tls_) {
      TlsStream s(ex, *tls_);
      co_await open(s, source);
      status = co_await get_on(s, target, *body);
    } else {
      beast::tcp_stream s(ex);
      co_await open(s, source);
      status = co_await get_on(s, target, *body);
    }
    co_return status;
  }

  // The response's status; its body (raw: chunked bodies keep their framing) into `body`.
  template <class Stream>
  asio::awaitable<int> get_on(Stream& s, const std::string& target, std::string& body) {
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: " + host_ +
                      "\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
    beast::get_lowest_layer(s).expires_after(120s);
    co_await asio::async_write(s, asio::buffer(req), asio::use_awaitable);
    std::string head;
    std::size_t header_end = std::string::npos;
    char buf[65536];
    while (header_end == std::string::npos) {
      std::size_t n = co_await s.async_read_some(asio::buffer(buf), asio::use_awaitable);
      head.append(buf, n);
      header_end = head.find("\r\n\r\n");
    }
    const int status = std::atoi(head.c_str() + 9);  // "HTTP/1.1 200 ..."
    std::string lower = head.substr(0, header_end);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    body.assign(head, header_end + 4);  // keeps the buffer's capacity
    auto cl = lower.find("\r\ncontent-length:");
    if (cl != std::string::npos) {
      const std::size_t length = std::strtoull(lower.c_str() + cl + 17, nullptr, 10);
      std::size_t have = body.size();
      body.resize(std::max(length, have));
      if (length > have) {
        co_await asio::async_read(s, asio::buffer(body.data() + have, length - have), asio::use_awaitable);
      }
    } else {  // chunked or close-delimited: keep the raw bytes until the server closes
      for (;;) {
        auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
        if (ec) break;
        body.append(buf, n);
      }
    }
    co_return status;
  }

  // One of spec.concurrency workers of connect_each: takes connection numbers from `next` until
  // all are taken. Each connection: connect (+ TLS handshake), one GET, close.
  asio::awaitable<ConnectResult> connect_worker(ConnectSpec spec, std::atomic<std::size_t>* next) {
    ConnectResult out;
    auto ex = co_await asio::this_coro::executor;
    const auto source = asio::ip::make_address_v4("127.0.0.1");
    const std::string req = "GET " + spec.path + " HTTP/1.1\r\nHost: " + host_ +
                            "\r\nAccept: application/json\r\nConnection: close\r\n\r\n";
    while (next->fetch_add(1) < spec.connections) {
      const Nanos t0 = now_ns();
      bool ok = false;
      try {
        if (tls_) {
          TlsStream s(ex, *tls_);
          co_await open(s, source);
          ok = co_await request_once(s, req);
        } else {
          beast::tcp_stream s(ex);
          co_await open(s, source);
          ok = co_await request_once(s, req);
        }
      } catch (const std::exception& e) {
        if (out.errors == 0) std::fprintf(stderr, "loadgen: connect: %s\n", e.what());
      }
      if (ok) {
        out.ms.push_back(static_cast<double>(now_ns() - t0) / 1e6);
      } else {
        ++out.errors;
      }
    }
    co_return out;
  }

  // One GET on a connection that is closed afterwards; true for a 200.
  template <class Stream>
  asio::awaitable<bool> request_once(Stream& s, const std::string& req) {
    beast::get_lowest_layer(s).expires_after(30s);
    co_await asio::async_write(s, asio::buffer(req), asio::use_awaitable);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    co_await http::async_read(s, buf, res, asio::use_awaitable);
    beast::error_code ignored;
    beast::get_lowest_layer(s).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(s).close();
    co_return res.result() == http::status::ok;
  }

  int get(const std::string& target, std::string& body) {
    std::promise<int> p;
    auto f = p.get_future();
    asio::co_spawn(asio::make_strand(ioc_), get_once(target, &body),
                   [&p](std::exception_ptr e, int status) {
                     if (e) {
                       p.set_exception(e);
                     } else {
                       p.set_value(status);
                     }
                   });
    return f.get();
  }

  std::string host_;
  tcp::endpoint endpoint_;
  std::string list_body_;  // list()'s response body, reused across reps
  // Set: every connection speaks TLS. Outlives the io_context and every stream in it.
  std::optional<asio::ssl::context> tls_;
  asio::io_context ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
  std::vector<std::shared_ptr<Conn>> conns_;
  std::atomic<bool> session_seen_{false};
  std::mutex session_mutex_;
  std::string session_info_;  // what the first TLS handshake negotiated
};

}  // namespace

std::unique_ptr<Target> make_kwatch_target(const std::string& host, int port, int threads,
                                           const std::string& tls_ca) {
  return std::make_unique<KwatchTarget>(host, port, threads, tls_ca);
}

}  // namespace kwatch::bench
