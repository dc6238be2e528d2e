// The layer under a WebSocket watch's Beast stream: every byte the connection sends goes through
// one queue and leaves in gather writes, so kwatch can put several data frames in one write while
// Beast still answers pings and closes on its own.
//
// Beast's writes (the handshake answer, pongs, the close frame) are copied into the queue (they
// are small, and Beast reuses its buffers) and complete once sent. kwatch queues its data frames
// by reference (`queue`: header bytes and the shared serialized event) and waits for them with
// `async_wait_sent`. Waiting is what sends: when no write is in flight, everything queued leaves
// in one gather write, started by the waiter itself; what is queued meanwhile leaves in the next
// one, started from the completion of the last. So a pong can fall between two frames but never
// inside one, and a batch of events costs one write and no hop through another task.
//
// Thread-safety: all of it on the connection's strand. A write in flight keeps the owner given to
// `keep_alive_while_writing` alive. After `stop` (or a failed write) waiting writes complete with
// an error and nothing more is sent.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kwatch::server {

template <class Next>
class QueueingStream {
 public:
  using next_layer_type = Next;
  using executor_type = typename Next::executor_type;

  explicit QueueingStream(Next next) : next_(std::move(next)) {}

  executor_type get_executor() noexcept { return next_.get_executor(); }
  Next& next_layer() noexcept { return next_; }
  const Next& next_layer() const noexcept { return next_; }

  // The object that owns this stream (e.g. the shared_ptr holding the WebSocket stream): held
  // while a write is in flight, so that a write's completion never outlives the stream.
  void keep_alive_while_writing(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return next_.async_read_some(buffers, std::forward<ReadToken>(token));
  }

  // Beast's writes: copied into the queue; complete once sent.
  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    std::string bytes(boost::asio::buffer_size(buffers), '\0');
    boost::asio::buffer_copy(boost::asio::buffer(bytes), buffers);
    const std::size_t n = bytes.size();
    copies_.emplace_back(queued_ + 1, std::move(bytes));
    const std::uint64_t ticket = queue(boost::asio::buffer(copies_.back().second));
    return async_wait_sent(ticket, n, std::forward<WriteToken>(token));
  }

  // Queues bytes that stay valid until their ticket is sent; returns that ticket. Nothing is
  // sent before somebody waits.
  std::uint64_t queue(boost::asio::const_buffer bytes) {
    pending_.push_back(bytes);
    return ++queued_;
  }

  // Completes (error_code, n) once everything up to `ticket` is sent, or with the error that
  // ended the stream; starts a write of what is queued when none is in flight. Never completes
  // inside the initiating call.
  template <class WaitToken>
  auto async_wait_sent(std::uint64_t ticket, std::size_t n, WaitToken&& token) {
    return boost::asio::async_initiate<WaitToken, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, std::uint64_t t, std::size_t bytes) {
          const boost::system::error_code ec = failure();
          if (sent_ >= t || ec) {
            boost::asio::post(next_.get_executor(),
                              boost::asio::append(std::move(handler), ec, ec ? 0 : bytes));
            return;
          }
          using H = std::decay_t<decltype(handler)>;
          waiters_.push_back(Waiter{t, bytes, std::make_unique<WaitOp<H>>(std::move(handler))});
          if (!write_started_) start_write();
        },
        token, ticket, n);
  }

  // Sends what is queued now, without waiting, when no write is in flight and the next layer is
  // a plain TCP stream: one non-blocking gather send. True when everything queued so far has
  // been sent (then nobody needs to wait); otherwise the rest goes in an asynchronous write
  // started here, and the caller waits for its ticket as usual.
  bool flush_now() {
    if (write_started_ || failure()) return false;
    if constexpr (std::is_same_v<Next, boost::beast::tcp_stream>) {
      if (!pending_.empty()) {
        auto& socket = next_.socket();
        boost::system::error_code ec;
        if (!socket.non_blocking()) socket.non_blocking(true, ec);
        std::size_t n = ec ? 0 : socket.write_some(pending_, ec);
        if (ec) n = 0;
        // Drop what went: whole buffers count as sent tickets, a partly sent one is advanced.
        std::size_t done = 0;
        while (done < pending_.size() && n >= pending_[done].size()) {
          n -= pending_[done].size();
          ++done;
        }
        if (done < pending_.size()) pending_[done] += n;
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
        sent_ += done;
        while (!copies_.empty() && copies_.front().first <= sent_) copies_.pop_front();
      }
      if (pending_.empty()) return true;
    }
    start_write();
    return false;
  }

  // When the write in flight started; nullopt when none is.
  std::optional<std::chrono::steady_clock::time_point> writing_since() const {
    return write_started_;
  }

  // Sends nothing more; what waits completes with operation_aborted (a write in flight still
  // ends with its own result).
  void stop() {
    stopped_ = true;
    complete_ready(false);
  }

 private:
  // A waiting handler, type-erased (one allocation per wait). Completed on its associated
  // executor: inline when already running there (`dispatch`), else posted.
  struct WaitBase {
    virtual ~WaitBase() = default;
    virtual void complete(const executor_type& fallback, bool dispatch,
                          boost::system::error_code ec, std::size_t n) = 0;
  };
  template <class Handler>
  struct WaitOp final : WaitBase {
    explicit WaitOp(Handler h) : handler(std::move(h)) {}
    void complete(const executor_type& fallback, bool dispatch, boost::system::error_code ec,
                  std::size_t n) override {
      auto ex = boost::asio::get_associated_executor(handler, fallback);
      auto call = boost::asio::append(std::move(handler), ec, n);
      if (dispatch) {
        boost::asio::dispatch(ex, std::move(call));
      } else {
        boost::asio::post(ex, std::move(call));
      }
    }
    Handler handler;
  };
  struct Waiter {
    std::uint64_t ticket;
    std::size_t n;
    std::unique_ptr<WaitBase> op;
  };

  boost::system::error_code failure() const {
    if (error_) return error_;
    if (stopped_) return boost::asio::error::operation_aborted;
    return {};
  }

  void start_write() {
    if (pending_.empty() || failure()) return;
    write_started_ = std::chrono::steady_clock::now();
    batch_.swap(pending_);
    boost::asio::async_write(
        next_, batch_,
        [this, keep = owner_.lock()](boost::system::error_code ec, std::size_t) { written(ec); });
  }

  void written(boost::system::error_code ec) {
    write_started_.reset();
    sent_ += batch_.size();
    batch_.clear();
    while (!copies_.empty() && copies_.front().first <= sent_) copies_.pop_front();
    if (ec && !error_) error_ = ec;
    // The next write first: a waiter resumed below may queue more, which then waits for it.
    if (!waiters_.empty()) start_write();
    complete_ready(true);
  }

  // Hands the waiters whose bytes are sent (all of them once the stream failed or stopped) their
  // result: from a write's completion inline (it runs on their strand), else posted.
  void complete_ready(bool from_completion) {
    const boost::system::error_code ec = failure();
    std::vector<Waiter> ready;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (ec || sent_ >= it->ticket) {
        ready.push_back(std::move(*it));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& w : ready) w.op->complete(next_.get_executor(), from_completion, ec, ec ? 0 : w.n);
  }

  Next next_;
  std::weak_ptr<void> owner_;
  std::vector<boost::asio::const_buffer> pending_;  // queued, not yet in a write
  std::vector<boost::asio::const_buffer> batch_;    // the write in flight
  std::deque<std::pair<std::uint64_t, std::string>> copies_;  // ticket -> Beast's bytes
  std::vector<Waiter> waiters_;
  std::uint64_t queued_ = 0;
  std::uint64_t sent_ = 0;
  boost::system::error_code error_;
  // When the write in flight started; nullopt: none is.
  std::optional<std::chrono::steady_clock::time_point> write_started_;
  bool stopped_ = false;
};

// WebSocket close: the next layer's teardown.
template <class Next>
void teardown(boost::beast::role_type role, QueueingStream<Next>& stream,
              boost::system::error_code& ec) {
  using boost::beast::websocket::teardown;
  teardown(role, stream.next_layer(), ec);
}

template <class Next, class TeardownHandler>
void async_teardown(boost::beast::role_type role, QueueingStream<Next>& stream,
                    TeardownHandler&& handler) {
  using boost::beast::websocket::async_teardown;
  async_teardown(role, stream.next_layer(), std::forward<TeardownHandler>(handler));
}

// The header of an unmasked, final text frame of `size` payload bytes, as a server sends it
// (RFC 6455 5.2); returns its length (2, 4 or 10).
inline std::size_t text_frame_header(std::uint64_t size, std::array<unsigned char, 10>& out) {
  out[0] = 0x81;  // FIN, opcode 1 (text)
  if (size < 126) {
    out[1] = static_cast<unsigned char>(size);
    return 2;
  }
  if (size <= 0xffff) {
    out[1] = 126;
    out[2] = static_cast<unsigned char>(size >> 8);
    out[3] = static_cast<unsigned char>(size);
    return 4;
  }
  out[1] = 127;
  for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<unsigned char>(size >> (56 - 8 * i));
  return 10;
}

}  // namespace kwatch::server
