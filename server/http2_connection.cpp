// HTTP/2 on the secure port (ALPN "h2"): one connection, many streams, each a request handed
// to the ApiHandler as HTTP/1.1's are. nghttp2 speaks the protocol (framing, HPACK, flow
// control, SETTINGS and PING); this file feeds it the connection's bytes, sends what it makes,
// and maps its streams to requests and answers, watches included.
//
// Everything of one connection runs on its strand: the reader, the writer, every stream's
// handler coroutine and every watch's pump. nghttp2 is never entered from two places at once,
// and never from inside its own callbacks (requests that become ready while it parses are
// started after it returns).
//
// Limits, beside nghttp2's own (SETTINGS entries per frame, queued control-frame answers to a
// client that does not read, reset streams per second):
//   - streams: SETTINGS_MAX_CONCURRENT_STREAMS (--http2-max-streams-per-connection). A stream
//     the client resets still holds its place until its handler returns; requests over the
//     limit wait, and a connection with more than four times the limit waiting is ended
//     (ENHANCE_YOUR_CALM): resetting streams cannot make the server run unbounded handlers.
//   - a request with a body is admitted on its head (authenticated, authorized) before its body
//     is taken: until then its stream's flow-control window (64 KiB; 256 KiB for the whole
//     connection) is all the client can send, and a refused one's body is dropped unread.
//   - a request's decoded header list past the header limit resets its stream (nghttp2 itself
//     ends a connection whose header block runs on in CONTINUATION frames); a body past the
//     body limit is answered 413.
//   - each stream buffers at most kStreamBuffer bytes of its answer; a watch stream whose client
//     takes nothing (its flow-control window stays shut) for the write timeout is reset, and the
//     cacher's slow-watcher rules apply to it as to any watch. A connection whose socket takes
//     nothing for the write timeout is closed.
//   - a connection without streams for the read timeout gets GOAWAY and is closed.
#include "server/http_server_impl.hpp"

#include "server/response_gzip.hpp"

#include <nghttp2/nghttp2.h>

#include <deque>
#include <memory>
#include <string_view>
#include <vector>

namespace kwatch::server {
namespace {

// What one stream of a connection buffers of its answer before its producer (a watch) waits.
constexpr std::size_t kStreamBuffer = 256 * 1024;
// What all streams of a connection may buffer of their answers before no new request starts
// (each answer is whole once its handler returns; watches stop at kStreamBuffer).
constexpr std::size_t kConnectionBuffer = 16 * 1024 * 1024;
// What the writer gathers from nghttp2 before one socket write.
constexpr std::size_t kWriteBatch = 64 * 1024;
// The flow-control window a client may fill per stream before kwatch takes its body: what a
// request not yet admitted can make the server hold, as HTTP/1.1's head limit (64 KiB). The
// connection's window is four of them: all streams' unadmitted bodies together.
constexpr std::uint32_t kStreamWindow = 64 * 1024;

// What one read hands nghttp2 at most.
constexpr std::size_t kReadBuffer = 16 * 1024;

// A connection's read buffer, taken once input has come and given back once nghttp2 has it, so
// that an idle connection (idle watches) holds none; a few are kept per thread for the next.
class ReadBuffer {
 public:
  ReadBuffer() {
    auto& pool = kept();
    if (pool.empty()) {
      data_ = std::make_unique_for_overwrite<std::uint8_t[]>(kReadBuffer);
    } else {
      data_ = std::move(pool.back());
      pool.pop_back();
    }
  }
  ~ReadBuffer() {
    auto& pool = kept();
    if (pool.size() < 4) pool.push_back(std::move(data_));
  }
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  std::uint8_t* data() { return data_.get(); }

 private:
  static std::vector<std::unique_ptr<std::uint8_t[]>>& kept() {
    thread_local std::vector<std::unique_ptr<std::uint8_t[]>> pool;
    return pool;
  }
  std::unique_ptr<std::uint8_t[]> data_;
};

std::string_view view(const std::uint8_t* p, std::size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

// Fields HTTP/2 forbids (RFC 9113 8.2.2): never sent in an answer.
bool connection_specific(std::string_view name) {
  return beast::iequals(name, "connection") || beast::iequals(name, "keep-alive") ||
         beast::iequals(name, "proxy-connection") || beast::iequals(name, "transfer-encoding") ||
         beast::iequals(name, "upgrade");
}

}  // namespace

// Counts a streamed answer in the server's open streams while it lives.
class OpenStream {
 public:
  OpenStream() = default;
  explicit OpenStream(std::shared_ptr<HttpServer::Impl> impl) : impl_(std::move(impl)) {
    ++impl_->streams;
  }
  OpenStream(OpenStream&&) noexcept = default;
  OpenStream& operator=(OpenStream&& o) noexcept {
    if (this != &o) {
      release();
      impl_ = std::move(o.impl_);
    }
    return *this;
  }
  ~OpenStream() { release(); }

 private:
  void release() {
    if (impl_) --impl_->streams;
    impl_.reset();
  }
  std::shared_ptr<HttpServer::Impl> impl_;
};

struct Http2Connection : std::enable_shared_from_this<Http2Connection> {
  struct Stream {
    std::int32_t id = 0;
    // The request as it arrives (the head as HTTP/1.1 would have it, and the body); gone once
    // it is served: a watch's stream keeps nothing of it for its life.
    struct Incoming {
      http::request<http::string_body> request;
      std::string method, path, authority;
    };
    std::unique_ptr<Incoming> in = std::make_unique<Incoming>();
    std::size_t header_bytes = 0;  // decoded, counted as SETTINGS_MAX_HEADER_LIST_SIZE counts
    std::size_t body_bytes = 0;
    std::size_t unconsumed = 0;  // DATA bytes not yet given back to flow control
    bool body_too_large = false;
    bool body_done = false;  // END_STREAM came
    bool admitted = false;   // its head was admitted: its body is taken as it comes
    bool withheld = false;   // refused on its head: its body is dropped, never read
    bool dispatched = false;
    bool closed = false;  // nghttp2 closed it (answered, or reset by either side)
    bool eof = false;     // the answer's last byte is in `out`
    // nghttp2 holds a DATA item for the answer (about 150 bytes): only while there is
    // something to send. Run dry, the item ends without END_STREAM; more submits a new one.
    bool data_item = false;
    // The answer's DATA still to go.
    std::string out;
    std::size_t out_offset = 0;
    std::chrono::steady_clock::time_point last_taken{};  // when the client last took data
    // A watch's producer waits here for room in `out` (a streaming answer only).
    std::unique_ptr<asio::steady_timer> room;
    std::shared_ptr<ApiResponse::BodySource> source;  // a streamed answer's, to cancel it
    std::pair<std::shared_ptr<void>, std::shared_ptr<void>> held;  // lease, on_sent
    // A watch's events, fed into `out` by the connection as they come (no task of its own).
    struct Feed {
      std::shared_ptr<watch::WatchSession> watch;
      // Whose strand the session's wake-up posts to (read from the waking thread: set once).
      std::weak_ptr<Http2Connection> connection;
      WatchRendering rendering;
      std::unique_ptr<EncodedBatch> pb;
      OpenStream counted;
      bool done = false;              // the watch ended: what is left goes, then the stream ends
      std::chrono::steady_clock::time_point room_by{};  // the write timeout of a wait for room
    };
    std::unique_ptr<Feed> feed;
    std::size_t pending() const { return out.size() - out_offset; }
    // Ends what the stream's answer comes from (a watch, a streamed source): its client is gone.
    void stop_producer() {
      if (feed) feed->watch->stop();
      if (source && source->cancel) source->cancel();
    }
  };

  Http2Connection(std::shared_ptr<HttpServer::Impl> impl, TlsStream stream,
                  std::shared_ptr<void> slot)
      : impl(std::move(impl)),
        stream(std::move(stream)),
        slot(std::move(slot)),
        wake(this->stream.get_executor()) {}

  ~Http2Connection() {
    if (session != nullptr) nghttp2_session_del(session);
  }

  asio::awaitable<void> run();
  asio::awaitable<void> read_loop();
  asio::awaitable<void> serve(std::shared_ptr<Stream> st);
  // A handler not yet returned: counted in `running` from start_ready on; once gone, the next
  // ready stream may start.
  struct Running {
    Http2Connection& c;
    ~Running() {
      --c.running;
      c.start_ready();
      c.kick();
    }
  };
  // A watch's events into its stream, without a task of its own (an idle watch holds no
  // coroutine): as much as the stream has room for; then it asks its session to call again when
  // more comes, or waits for the client to take some (within the write timeout). Once the
  // watch ends, the stream ends when its last bytes have gone.
  void feed_watch(const std::shared_ptr<Stream>& st);
  // The stream's room timer for its wait: feed_watch again when the client has taken data.
  void wait_for_room_then_feed(const std::shared_ptr<Stream>& st);
  asio::awaitable<void> pump_source(std::shared_ptr<Stream> st, ApiResponse& response);
  // Waits until `st` has room for more of its answer (at most `most` bytes pending: by default
  // half its buffer, so that a byte taken now and then is not room); false if that did not come
  // within the write timeout (the stream is then reset) or it closed.
  asio::awaitable<bool> wait_for_room(Stream& st, std::size_t most = kStreamBuffer / 2);
  bool setup();
  void start_ready();
  void submit_answer(Stream& st, const http::response<http::string_body>& head, bool has_body);
  void append(Stream& st, std::string_view data);
  // A DATA item for `st`'s answer, unless nghttp2 has one.
  void submit_data(Stream& st);
  void finish(Stream& st);
  void reset(Stream& st, std::uint32_t code);
  void kick() { wake.cancel(); }
  void go_away(std::uint32_t code) {
    if (goaway_sent) return;
    goaway_sent = true;
    nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session), code, nullptr, 0);
    kick();
  }

  // nghttp2's callbacks.
  static Http2Connection& self_of(void* user) { return *static_cast<Http2Connection*>(user); }
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t flags, void* user);
  static int on_data_chunk(nghttp2_session*, std::uint8_t flags, std::int32_t id,
                           const std::uint8_t* data, std::size_t len, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user);
  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user);
  static ssize_t read_data(nghttp2_session*, std::int32_t id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void* user);

  std::shared_ptr<HttpServer::Impl> impl;
  TlsStream stream;
  std::shared_ptr<void> slot;
  std::shared_ptr<const auth::ClientCertificate> peer;
  nghttp2_session* session = nullptr;
  std::map<std::int32_t, std::shared_ptr<Stream>> streams;
  std::deque<std::shared_ptr<Stream>> ready;  // requests whose head is whole, not yet started
  std::vector<std::int32_t> to_consume;  // admitted streams that received DATA (read_loop)
  std::size_t running = 0;  // handlers not yet returned (reset streams' included)
  std::size_t buffered = 0;  // answers' bytes not yet taken by nghttp2, all streams
  // feed_watch's batch and its buffers, reused from one batch to the next.
  std::vector<watch::WatchFrame> feed_frames;
  std::vector<asio::const_buffer> feed_buffers;
  asio::steady_timer wake;  // the writer sleeps here while nothing is to be sent
  WriteClock write_clock;
  bool reading = true;
  bool goaway_sent = false;
  bool failed = false;  // the connection ends now, whatever is pending
  std::uint32_t max_streams = 100;
};

bool Http2Connection::setup() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // A client that floods SETTINGS or PING and reads none of the answers is cut off once this
  // many answers wait; SETTINGS frames carry at most this many entries.
  nghttp2_option_set_max_outbound_ack(option, 1000);
  nghttp2_option_set_max_settings(option, 32);
  // Window updates are kwatch's: only a request admitted on its head gets more than its first
  // window of body (see on_data_chunk).
  nghttp2_option_set_no_auto_window_update(option, 1);
  const int rv = nghttp2_session_server_new2(&session, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) return false;
  max_streams = impl->limits.http2_max_streams;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
       static_cast<std::uint32_t>(impl->limits.max_header_bytes)},
  };
  if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) {
    return false;
  }
  nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0,
                                        static_cast<std::int32_t>(kStreamWindow * 4));
  return true;
}

int Http2Connection::on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                      void* user) {
  auto* self = static_cast<Http2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto st = std::make_shared<Stream>();
  st->id = frame->hd.stream_id;
  st->in->request.version(11);
  nghttp2_session_set_stream_user_data(session, st->id, st.get());
  self->streams.emplace(st->id, std::move(st));
  return 0;
}

int Http2Connection::on_header(nghttp2_session* session, const nghttp2_frame* frame,
                               const std::uint8_t* name, std::size_t namelen,
                               const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
                               void* user) {
  auto* self = static_cast<Http2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* st = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (st == nullptr || st->dispatched || !st->in) return 0;  // trailers: ignored
  // The decoded list, bounded as HTTP/1.1's head is (HPACK lets a few bytes on the wire name
  // kilobytes of table entries): past it, the stream is reset and nothing of it is served.
  st->header_bytes += namelen + valuelen + 32;
  if (st->header_bytes > self->impl->limits.max_header_bytes) {
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
  const std::string_view n = view(name, namelen), v = view(value, valuelen);
  if (n == ":method") {
    st->in->method = v;
  } else if (n == ":path") {
    st->in->path = v;
  } else if (n == ":authority") {
    st->in->authority = v;
  } else if (n.empty() || n.front() != ':') {
    // nghttp2 has checked the name (lower case, no connection-specific fields).
    st->in->request.insert(n, v);
  }
  return 0;
}

int Http2Connection::on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                                   const std::uint8_t* data, std::size_t len, void* user) {
  auto* self = static_cast<Http2Connection*>(user);
  auto* st = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, id));
  if (st == nullptr) return 0;
  // Flow control gives the client more room only for bytes kwatch consumed: those of a request
  // admitted on its head. Until then a client can send a stream's first window, no more.
  st->unconsumed += len;
  if (st->admitted) self->to_consume.push_back(id);
  if (st->body_done || st->body_too_large || st->withheld || !st->in) return 0;
  st->body_bytes += len;
  if (st->body_bytes > self->impl->limits.max_body_bytes) {
    st->body_too_large = true;
    st->in->request.body().clear();
    st->in->request.body().shrink_to_fit();
    return 0;
  }
  st->in->request.body().append(reinterpret_cast<const char*>(data), len);
  if (st->room) st->room->cancel();  // a body being waited for made progress
  return 0;
}

int Http2Connection::on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame,
                                   void* user) {
  auto* self = static_cast<Http2Connection*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  auto* st = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (st == nullptr) return 0;
  if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) st->body_done = true;
  if (st->room) st->room->cancel();
  // Every request starts once its head is whole: one with a body is admitted on its head
  // (authenticated, authorized) before a byte of the body beyond the first window is taken.
  if (frame->hd.type == NGHTTP2_HEADERS && !st->dispatched) {
    st->dispatched = true;
    auto it = self->streams.find(st->id);
    if (it != self->streams.end()) self->ready.push_back(it->second);
  }
  return 0;
}

int Http2Connection::on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t,
                                     void* user) {
  auto* self = static_cast<Http2Connection*>(user);
  auto it = self->streams.find(id);
  if (it == self->streams.end()) return 0;
  Stream& st = *it->second;
  st.closed = true;
  self->buffered -= st.pending();
  // What the stream received and kwatch never took goes back to the connection's window.
  if (st.unconsumed > 0) nghttp2_session_consume_connection(self->session, st.unconsumed);
  // A watch ends with its stream (the client reset it, or its answer is done).
  st.stop_producer();
  if (st.room) st.room->cancel();
  self->streams.erase(it);
  return 0;
}

ssize_t Http2Connection::read_data(nghttp2_session*, std::int32_t, std::uint8_t* buf,
                                   std::size_t length, std::uint32_t* flags,
                                   nghttp2_data_source* source, void* user) {
  auto* st = static_cast<Stream*>(source->ptr);
  const std::size_t available = st->pending();
  if (available == 0) {
    // The end (END_STREAM on an empty frame), or nothing for now: the item ends and nghttp2
    // frees it without sending a frame (an idle watch's stream holds none).
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!st->eof) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      st->data_item = false;
    }
    return 0;
  }
  const std::size_t n = std::min(available, length);
  std::memcpy(buf, st->out.data() + st->out_offset, n);
  st->out_offset += n;
  st->last_taken = std::chrono::steady_clock::now();
  if (st->out_offset == st->out.size()) {
    // Nothing kept between events: an idle watch holds no buffer.
    std::string().swap(st->out);
    st->out_offset = 0;
    if (st->eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  self_of(user).buffered -= n;
  if (st->room && (st->pending() < kStreamBuffer / 2 || st->eof)) st->room->cancel();
  return static_cast<ssize_t>(n);
}

void Http2Connection::append(Stream& st, std::string_view data) {
  if (st.closed || data.empty()) return;
  buffered += data.size();
  if (st.out_offset > 0 && st.out_offset >= st.out.size() / 2) {
    st.out.erase(0, st.out_offset);
    st.out_offset = 0;
  }
  st.out.append(data);
  submit_data(st);
  kick();
}

void Http2Connection::submit_data(Stream& st) {
  if (st.data_item || st.closed) return;
  nghttp2_data_provider provider{};
  provider.source.ptr = &st;
  provider.read_callback = read_data;
  if (nghttp2_submit_data(session, NGHTTP2_FLAG_END_STREAM, st.id, &provider) != 0) {
    reset(st, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  st.data_item = true;
}

void Http2Connection::finish(Stream& st) {
  if (st.closed) return;
  st.eof = true;
  submit_data(st);
  kick();
}

void Http2Connection::reset(Stream& st, std::uint32_t code) {
  if (st.closed) return;
  nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, st.id, code);
  kick();
}

void Http2Connection::submit_answer(Stream& st, const http::response<http::string_body>& head,
                                    bool has_body) {
  if (st.closed) return;
  std::vector<std::string> names;  // lower-cased; kept until submitted (nghttp2 copies them)
  std::vector<nghttp2_nv> nv;
  const std::string status = std::to_string(head.result_int());
  names.reserve(std::distance(head.begin(), head.end()));
  auto add = [&nv](std::string_view name, std::string_view value) {
    nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
                  reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                  value.size(), NGHTTP2_NV_FLAG_NONE});
  };
  add(":status", status);
  for (const auto& field : head) {
    const std::string_view name = field.name_string();
    if (connection_specific(name)) continue;
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names.push_back(std::move(lower));
  }
  std::size_t i = 0;
  for (const auto& field : head) {
    if (connection_specific(field.name_string())) continue;
    add(names[i++], field.value());
  }
  nghttp2_data_provider provider{};
  provider.source.ptr = &st;
  provider.read_callback = read_data;
  if (nghttp2_submit_response(session, st.id, nv.data(), nv.size(),
                              has_body ? &provider : nullptr) != 0) {
    reset(st, NGHTTP2_INTERNAL_ERROR);
  } else {
    st.data_item = has_body;
  }
  kick();
}

asio::awaitable<bool> Http2Connection::wait_for_room(Stream& st, std::size_t most) {
  // One write timeout for this much room, however the client trickles it (a byte a minute
  // would otherwise hold the stream forever), as HTTP/1.1 times each write.
  const auto deadline = std::chrono::steady_clock::now() + impl->limits.write_timeout;
  while (!st.closed && !failed && st.pending() > most) {
    st.room->expires_at(deadline);
    auto [ec] = co_await st.room->async_wait(use_tuple);
    if (!ec && !st.closed && st.pending() > most) {
      reset(st, NGHTTP2_CANCEL);
      co_return false;
    }
  }
  co_return !st.closed && !failed;
}

void Http2Connection::feed_watch(const std::shared_ptr<Stream>& st) {
  Stream::Feed& f = *st->feed;
  if (st->closed || failed) return;
  if (!f.done) {
    // The connection's scratch vectors (every feed runs on its strand, one at a time), emptied
    // on the way out: a batch's objects are not held until the next one.
    std::vector<watch::WatchFrame>& frames = feed_frames;
    std::vector<asio::const_buffer>& buffers = feed_buffers;
    struct Emptied {
      std::vector<watch::WatchFrame>& frames;
      std::vector<asio::const_buffer>& buffers;
      ~Emptied() {
        frames.clear();
        buffers.clear();
      }
    } emptied{frames, buffers};
    while (st->pending() <= kStreamBuffer / 2) {
      auto taken = f.watch->take(frames);
      if (taken && frames.empty()) {
        // Nothing more now: the session calls when something comes, from the thread that
        // brings it. One weak reference: the call fits in std::function without an allocation.
        std::weak_ptr<Stream> weak_stream = st;
        f.watch->when_ready([weak_stream] {
          auto s = weak_stream.lock();
          if (!s) return;
          auto c = s->feed->connection.lock();
          if (!c) return;
          asio::post(c->stream.get_executor(), [c, s] { c->feed_watch(s); });
        });
        return;
      }
      buffers.clear();
      if (!taken || !append_watch_batch(buffers, f.rendering, f.pb.get(), frames)) {
        f.done = true;
        finish(*st);
        break;
      }
      // Copied once, into the stream's own buffer (nghttp2 copies it again into its frames).
      for (const auto& b : buffers) append(*st, {static_cast<const char*>(b.data()), b.size()});
    }
  }
  if (f.done && st->pending() == 0) return;  // the stream ends with its last byte
  // Until the client takes what is pending (a watch still going: half of it).
  f.room_by = std::chrono::steady_clock::now() + impl->limits.write_timeout;
  wait_for_room_then_feed(st);
}

void Http2Connection::wait_for_room_then_feed(const std::shared_ptr<Stream>& st) {
  if (!st->room) st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
  st->room->expires_at(st->feed->room_by);
  std::weak_ptr<Http2Connection> weak_connection = weak_from_this();
  std::weak_ptr<Stream> weak_stream = st;
  st->room->async_wait([weak_connection, weak_stream](boost::system::error_code ec) {
    auto c = weak_connection.lock();
    auto s = weak_stream.lock();
    if (!c || !s || !s->feed || s->closed || c->failed) return;
    const std::size_t most = s->feed->done ? 0 : kStreamBuffer / 2;
    if (s->pending() <= most) {
      c->feed_watch(s);
    } else if (!ec) {
      c->reset(*s, NGHTTP2_CANCEL);  // the client took nothing for the write timeout
    } else {
      c->wait_for_room_then_feed(s);  // taken, not yet enough: the same deadline
    }
  });
}

asio::awaitable<void> Http2Connection::pump_source(std::shared_ptr<Stream> st,
                                                   ApiResponse& response) {
  st->source = response.body_source;
  for (;;) {
    const bool room = co_await wait_for_room(*st);
    if (!room) co_return;
    std::optional<std::string> piece = co_await response.body_source->next();
    if (!piece || st->closed) break;
    append(*st, *piece);
  }
  finish(*st);
}

asio::awaitable<void> Http2Connection::serve(std::shared_ptr<Stream> st) {
  auto self = shared_from_this();
  Running running_guard{*this};
  const auto start = std::chrono::steady_clock::now();
  if (st->closed) co_return;  // reset before it started
  http::request<http::string_body>& req = st->in->request;
  const http::verb verb = http::string_to_verb(st->in->method);
  if (verb == http::verb::unknown) {
    req.method_string(st->in->method);
  } else {
    req.method(verb);
  }
  req.target(st->in->path);
  if (!st->in->authority.empty() && req.find(http::field::host) == req.end()) {
    req.set(http::field::host, st->in->authority);
  }
  ApiRequest request = request_of(req, peer);
  if (!st->body_done && !st->body_too_large) {
    // A body follows: the head is judged first, as over HTTP/1.1 (ApiHandler::admit_head).
    st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
    const bool admitted = co_await impl->handler->admit_head(request);
    if (st->closed) co_return;
    if (!admitted) {
      // Answered (401/403) without its body, which is dropped as it comes; the stream is
      // reset once the answer has gone.
      st->withheld = true;
      request.body_withheld = true;
      req.body().clear();
    } else {
      st->admitted = true;
      if (st->unconsumed > 0) {
        nghttp2_session_consume(session, st->id, st->unconsumed);
        st->unconsumed = 0;
        kick();
      }
      // The rest of the body, within the read timeout of the last progress.
      while (!st->closed && !st->body_done && !st->body_too_large) {
        const std::size_t got = st->body_bytes;
        st->room->expires_after(impl->limits.read_timeout);
        auto [ec] = co_await st->room->async_wait(use_tuple);
        if (!ec && st->body_bytes == got && !st->body_done) {
          reset(*st, NGHTTP2_CANCEL);
          co_return;
        }
      }
      if (st->closed) co_return;
    }
  }
  if (st->body_too_large) {
    auto res = simple_error(413, "RequestEntityTooLarge", "request entity too large");
    st->out = std::move(res.body());
    buffered += st->out.size();
    st->eof = true;
    if (!st->room) st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
    submit_answer(*st, res, true);
    // The rest of the body is not wanted: once the answer has gone, the stream is reset
    // (RFC 9113 8.1), and what the client still sends of it is dropped unread.
    const bool sent = co_await wait_for_room(*st, 0);
    if (sent) reset(*st, NGHTTP2_NO_ERROR);
    co_return;
  }
  request.body = std::move(req.body());
  if (impl->handler->auditing()) request.remote_address = StreamOps<TlsStream>::remote_address(stream);
  const bool head_only = verb == http::verb::head;
  const bool gzip_ok = accepts_gzip(req[http::field::accept_encoding]);
  const std::string method = std::move(st->in->method);
  const std::string target = std::move(st->in->path);
  // The head is the request's now: the stream keeps nothing of it for its life.
  st->in.reset();
  ApiResponse response = co_await impl->handler->handle(std::move(request));
  if (st->closed) co_return;  // reset while it was served; a watch it started ends with `response`
  // Released when the stream closes: a watch's slot, the audit record's ResponseComplete.
  st->held = {std::move(response.lease), std::move(response.on_sent)};
  if (response.streaming) {
    spdlog::info("{} {} {} watch (HTTP/2)", method, target, response.status);
    {
      // The head, gone once submitted: a watch's frame keeps nothing of it.
      http::response<http::string_body> res{static_cast<http::status>(response.status), 11};
      res.set(http::field::server, "kwatch");
      std::string type = response.protobuf_watch
                             ? "application/vnd.kubernetes.protobuf;stream=watch"
                         : response.cbor_watch ? std::string(apimachinery::kCborSequenceMediaType)
                                               : response.content_type;
      if (response.body_source && response.content_type.empty()) type.clear();
      if (!type.empty()) res.set(http::field::content_type, type);
      if (!response.body_source) res.set(http::field::cache_control, "no-cache, private");
      for (const auto& [name, value] : response.headers) res.set(name, value);
      // A watch makes its room timer when it first waits for room (an idle one has none).
      if (!response.watch || response.body_source) {
        st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
      }
      submit_answer(*st, res, !head_only);
    }
    if (head_only) co_return;
    OpenStream counted(impl);
    append(*st, response.body);
    if (response.body_source) {
      co_await pump_source(st, response);
    } else if (response.watch) {
      auto f = std::make_unique<Stream::Feed>();
      f->watch = std::move(response.watch);
      f->connection = weak_from_this();
      f->rendering = WatchRendering(response);
      f->pb = encoded_batch_for(f->rendering);
      f->counted = std::move(counted);
      st->feed = std::move(f);
      feed_watch(st);
      co_return;
    } else {
      finish(*st);
    }
    co_await wait_for_room(*st, 0);
    co_return;
  }
  http::response<http::string_body> res;
  if (!response.items.empty() || !response.tail.empty()) {
    // A list from the cache is never assembled: it is compressed piece by piece, or its items
    // are copied into the stream's buffer as the client takes them, kStreamBuffer at a time
    // (a hundred streams of large lists must not mean a hundred whole lists in memory).
    const std::size_t length = GatheredBody::length(response);
    res = impl->answer_head(response, 11, true);
    if (gzip_ok && !head_only && length >= kGzipThreshold) {
      // Named, not converted in the call: GCC 12 destroys converted coroutine arguments twice.
      std::function<void(base::Deflater&)> feed = [&response](base::Deflater& deflater) {
        HttpServer::Impl::deflate_gathered(response, deflater);
      };
      std::string compressed = co_await impl->gzip_off_thread(std::move(feed), length);
      res.body() = std::move(compressed);
      res.set(http::field::content_encoding, "gzip");
      res.set(http::field::vary, "Accept-Encoding");
    } else {
      if (st->closed) co_return;
      res.content_length(length);
      st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
      submit_answer(*st, res, !head_only && length > 0);
      if (!head_only) {
        // Copied up to kStreamBuffer pending, an item in parts if need be.
        GatheredBody body(response);
        while (!body.done() && !st->closed) {
          if (st->pending() >= kStreamBuffer) {
            const bool room = co_await wait_for_room(*st);
            if (!room) co_return;
            continue;
          }
          append(*st, body.next(kStreamBuffer - st->pending()));
        }
        finish(*st);
      }
      const double ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count();
      spdlog::info("{} {} {} {:.3f}ms (HTTP/2)", method, target, response.status, ms);
      co_await wait_for_room(*st, 0);
      co_return;
    }
  } else {
    res = impl->answer_head(response, 11, head_only);
    co_await impl->gzip_body(res, gzip_ok);
  }
  if (st->closed) co_return;
  const bool has_body = !head_only && !res.body().empty();
  st->room = std::make_unique<asio::steady_timer>(stream.get_executor());
  if (!head_only) res.content_length(res.body().size());
  st->out = std::move(res.body());
  buffered += st->out.size();
  st->eof = true;
  submit_answer(*st, res, has_body);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} {} {} {:.3f}ms (HTTP/2)", method, target, response.status, ms);
  // The handler's place is kept until the client has taken the answer, or is reset if it takes
  // nothing for the write timeout: a client cannot pin answers by not reading them.
  const bool sent = co_await wait_for_room(*st, 0);
  if (sent && st->withheld) reset(*st, NGHTTP2_NO_ERROR);  // the body it still sends is unwanted
}

void Http2Connection::start_ready() {
  // Handlers of streams the client reset still count: they hold the places of new ones.
  while (!ready.empty() && running < max_streams && buffered < kConnectionBuffer && !failed) {
    auto st = std::move(ready.front());
    ready.pop_front();
    ++running;
    asio::co_spawn(stream.get_executor(), serve(std::move(st)),
                   [](std::exception_ptr e) { log_task_failure(e, "HTTP/2 stream"); });
  }
  if (ready.size() > 4 * static_cast<std::size_t>(max_streams)) {
    // A client that resets streams to start more handlers than it may run at once.
    go_away(NGHTTP2_ENHANCE_YOUR_CALM);
    failed = true;
  }
}

asio::awaitable<void> Http2Connection::read_loop() {
  auto self = shared_from_this();
  for (;;) {
    // Idle connections wait without a buffer (theirs or TLS's).
    auto [wait_ec] = co_await stream.async_wait_readable(use_tuple);
    if (wait_ec || failed) break;
    ReadBuffer buffer;
    auto [ec, n] =
        co_await stream.async_read_some(asio::buffer(buffer.data(), kReadBuffer), use_tuple);
    if (ec || failed) break;
    const ssize_t rv = nghttp2_session_mem_recv(session, buffer.data(), n);
    if (rv < 0) {
      // A protocol error: nghttp2 has queued GOAWAY where the protocol asks for one.
      spdlog::debug("HTTP/2 connection ends: {}", nghttp2_strerror(static_cast<int>(rv)));
      failed = true;
      break;
    }
    for (const std::int32_t id : to_consume) {
      auto it = streams.find(id);
      if (it == streams.end() || it->second->unconsumed == 0) continue;
      nghttp2_session_consume(session, id, it->second->unconsumed);
      it->second->unconsumed = 0;
    }
    to_consume.clear();
    start_ready();
    kick();
  }
  reading = false;
  kick();
}

asio::awaitable<void> Http2Connection::run() {
  auto self = shared_from_this();
  peer = StreamOps<TlsStream>::client_certificate(stream);
  if (!setup()) co_return;
  auto waiting = std::make_shared<HttpServer::Impl::Waiting>();
  waiting->strand = stream.get_executor();
  waiting->on_drain = [weak = weak_from_this()] {
    if (auto c = weak.lock()) c->go_away(NGHTTP2_NO_ERROR);
  };
  const std::shared_ptr<void> tracked = impl->track(waiting);
  if (impl->draining) go_away(NGHTTP2_NO_ERROR);
  StreamOps<TlsStream>::expires_never(stream);
  asio::co_spawn(stream.get_executor(), read_loop(),
                 [](std::exception_ptr e) { log_task_failure(e, "HTTP/2 reader"); });
  {
    std::weak_ptr<const void> alive = self;
    std::function<std::optional<std::chrono::steady_clock::time_point>()> since =
        [this] { return write_clock.since; };
    asio::co_spawn(stream.get_executor(),
                   guard_writes(stream, std::move(alive), std::move(since),
                                impl->limits.write_timeout),
                   [](std::exception_ptr e) { log_task_failure(e, "HTTP/2 write guard"); });
  }
  std::string out;
  auto idle_since = std::chrono::steady_clock::now();
  for (;;) {
    out.clear();
    while (out.size() < kWriteBatch) {
      const std::uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session, &data);
      if (n < 0) {
        failed = true;
        break;
      }
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (!out.empty()) {
      write_clock.since = std::chrono::steady_clock::now();
      auto [ec, n] = co_await asio::async_write(stream, asio::buffer(out), use_tuple);
      write_clock.since.reset();
      if (ec) break;
      if (!ready.empty()) start_ready();  // answers drained: requests held back may start
      continue;
    }
    if (failed || !reading) break;
    if (!nghttp2_session_want_read(session) && !nghttp2_session_want_write(session)) break;
    const bool idle = streams.empty() && running == 0;
    if (!idle) idle_since = std::chrono::steady_clock::now();
    if (idle && std::chrono::steady_clock::now() - idle_since >= impl->limits.read_timeout) {
      go_away(NGHTTP2_NO_ERROR);
      continue;
    }
    wake.expires_after(idle ? impl->limits.read_timeout : std::chrono::hours(1));
    co_await wake.async_wait(use_tuple);
  }
  failed = true;
  for (auto& [id, st] : streams) {
    st->closed = true;
    st->stop_producer();
    if (st->room) st->room->cancel();
  }
  streams.clear();
  ready.clear();
  StreamOps<TlsStream>::shutdown_send(stream);
  StreamOps<TlsStream>::close(stream);
}

asio::awaitable<void> HttpServer::Impl::serve_http2(TlsStream stream, std::shared_ptr<void> slot) {
  auto connection =
      std::make_shared<Http2Connection>(shared_from_this(), std::move(stream), std::move(slot));
  co_await connection->run();
}

}  // namespace kwatch::server
