// The layer under a WebSocket watch's Beast stream: every byte the connection sends goes through
// one queue and leaves in gather writes, so kwatch can put several data frames in one write while
// Beast still answers pings and closes on its own.
//
// Beast's writes (the handshake answer, pongs, the close frame) are copied into the queue (they
// are small, and Beast reuses its buffers) and complete once sent. kwatch queues its data frames
// by reference (`queue`: header bytes and the shared serialized event) and waits for them with
// `async_wait_sent`. `run` sends what is queued, in order, one gather write at a time, so a pong
// can fall between two frames but never inside one.
//
// Thread-safety: all of it on the connection's strand. `run` must be running for writes to
// complete; after `stop` (or a failed write) waiting writes complete with an error.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::server {

template <class Next>
class QueueingStream {
 public:
  using next_layer_type = Next;
  using executor_type = typename Next::executor_type;

  explicit QueueingStream(Next next)
      : next_(std::move(next)), wake_(next_.get_executor()), sent_signal_(next_.get_executor()) {
    wake_.expires_at(boost::asio::steady_timer::time_point::max());
    sent_signal_.expires_at(boost::asio::steady_timer::time_point::max());
  }

  executor_type get_executor() noexcept { return next_.get_executor(); }
  Next& next_layer() noexcept { return next_; }
  const Next& next_layer() const noexcept { return next_; }

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

  // Queues bytes that stay valid until their ticket is sent; returns that ticket.
  std::uint64_t queue(boost::asio::const_buffer bytes) {
    pending_.push_back(bytes);
    wake_.cancel();
    return ++queued_;
  }

  // Completes (error_code, n) once everything up to `ticket` is sent, or with the error that
  // ended the stream.
  template <class WaitToken>
  auto async_wait_sent(std::uint64_t ticket, std::size_t n, WaitToken&& token) {
    return boost::asio::async_compose<WaitToken, void(boost::system::error_code, std::size_t)>(
        WaitSent{*this, ticket, n}, token, next_);
  }

  // Sends what is queued until stopped or a write fails.
  boost::asio::awaitable<void> run() {
    using boost::asio::as_tuple;
    using boost::asio::use_awaitable;
    std::vector<boost::asio::const_buffer> batch;
    while (!stopped_ && !error_) {
      if (pending_.empty()) {
        co_await wake_.async_wait(as_tuple(use_awaitable));
        continue;
      }
      batch.swap(pending_);
      auto [ec, n] = co_await boost::asio::async_write(next_, batch, as_tuple(use_awaitable));
      sent_ += batch.size();
      batch.clear();
      while (!copies_.empty() && copies_.front().first <= sent_) copies_.pop_front();
      if (ec) error_ = ec;
      sent_signal_.cancel();
    }
    if (!error_) error_ = boost::asio::error::operation_aborted;
    sent_signal_.cancel();
  }

  // Ends `run` once its current write is done; what waits for the queue completes with an error.
  void stop() {
    stopped_ = true;
    wake_.cancel();
    sent_signal_.cancel();
  }

 private:
  struct WaitSent {
    QueueingStream& s;
    std::uint64_t ticket;
    std::size_t n;
    bool started = false;

    template <class Self>
    void operator()(Self& self, boost::system::error_code = {}) {
      boost::system::error_code ec = s.error_;
      if (!ec && s.stopped_) ec = boost::asio::error::operation_aborted;
      const bool done = s.sent_ >= ticket || ec;
      if (done && !started) {
        started = true;  // never complete inside the initiating call
        return boost::asio::post(s.next_.get_executor(), std::move(self));
      }
      started = true;
      if (s.sent_ >= ticket) return self.complete({}, n);
      if (ec) return self.complete(ec, 0);
      s.sent_signal_.async_wait(std::move(self));
    }
  };

  Next next_;
  boost::asio::steady_timer wake_;         // cancelled when something is queued
  boost::asio::steady_timer sent_signal_;  // cancelled after each write
  std::vector<boost::asio::const_buffer> pending_;
  std::deque<std::pair<std::uint64_t, std::string>> copies_;  // ticket -> Beast's bytes
  std::uint64_t queued_ = 0;
  std::uint64_t sent_ = 0;
  boost::system::error_code error_;
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
