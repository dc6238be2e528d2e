#pragma once

// TlsStream: the server side of TLS over a beast::tcp_stream, in place of
// beast::ssl_stream<beast::tcp_stream> (asio::ssl::stream + beast::flat_stream).
//
// Why: asio::ssl::stream moves every record through a BIO pair and two 17 KiB buffers per
// connection (68 KiB resident per idle watcher) and stacks three composed operations and three
// copies per record. Here OpenSSL writes ciphertext through a custom BIO straight into one
// per-connection buffer that is sent with one tcp_stream write; a gathered write (a batch of
// watch frames) is one copy into a per-thread scratch buffer, one SSL_write (one record up to
// 16 KiB) and one send. Write buffers are kept while writes keep coming and freed after a write
// that follows a quiet second; OpenSSL's read buffer is freed before waiting for input.
//
// Ownership: owns the tcp_stream (next_layer(), also the lowest layer, so Beast's
// `get_lowest_layer(s).expires_after(...)` and `.socket()` work unchanged) and the SSL object.
// Strand: all calls on the connection's strand. One outstanding read and one outstanding write
// at a time (as for any Asio stream); a read and a write may be outstanding together.
// Cancellation: through the tcp_stream (its timeouts, close()); an operation ends with the
// socket's error. Handlers are never invoked from inside the initiating function.
// Errors: TLS failures are in asio::error::get_ssl_category() (ERR_get_error codes); a peer's
// close_notify and a TCP end of stream are both asio::error::eof (Beast: end_of_stream).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/teardown.hpp>

#include <openssl/ssl.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

namespace kwatch::server {

namespace detail {

// The non-template state (in tls_stream.cpp): SSL object, BIO buffers, release policy.
struct TlsState;

enum class TlsStep { done, want_read };

// Plaintext per SSL_write: one TLS record.
inline constexpr std::size_t kTlsRecord = 16384;
// Plaintext encrypted per async_write_some: a few records, one send.
inline constexpr std::size_t kTlsBatch = 4 * kTlsRecord;

TlsStep tls_read(TlsState& st, int fd, boost::asio::mutable_buffer target, std::size_t& got,
                 boost::system::error_code& ec);
boost::asio::mutable_buffer tls_prepare_input(TlsState& st);
void tls_commit_input(TlsState& st, std::size_t n);
void tls_after_read(TlsState& st);
// True if a read can make progress without the socket (ciphertext or plaintext buffered);
// otherwise gives back the idle input buffers (`in`, OpenSSL's read buffer) and says false.
bool tls_input_ready(TlsState& st);
// Encrypts `size` bytes into the output buffer (one record per 16 KiB).
bool tls_encrypt(TlsState& st, const void* data, std::size_t size, boost::system::error_code& ec);
// The per-thread scratch buffer a gathered record is linearized in (kTlsRecord bytes).
unsigned char* tls_scratch();
bool tls_has_output(const TlsState& st);
// The next ciphertext to send; marks a write in flight.
boost::asio::const_buffer tls_next_send(TlsState& st);
// Records that n bytes were sent; true when all output is gone (the write is then over).
bool tls_sent(TlsState& st, std::size_t n);
// A failed send: the output is dropped, the write is over.
void tls_send_failed(TlsState& st);

}  // namespace detail

class TlsStream {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using lowest_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;

  // A server-side connection; `ctx` must outlive the stream.
  TlsStream(boost::beast::tcp_stream next, SSL_CTX* ctx);
  TlsStream(TlsStream&&) noexcept;
  // The connection `other` had (its TLS session and buffers) over `next`, the same socket
  // adopted by another executor. `other` is left empty. Nothing may be pending on `other`.
  TlsStream(TlsStream&& other, boost::beast::tcp_stream next) noexcept;
  TlsStream& operator=(TlsStream&&) = delete;
  ~TlsStream();

  executor_type get_executor() noexcept { return next_.get_executor(); }
  next_layer_type& next_layer() noexcept { return next_; }
  const next_layer_type& next_layer() const noexcept { return next_; }
  SSL* native_handle() noexcept;
  // Bytes of ciphertext buffer the stream holds for reading (0 while idle between reads).
  std::size_t input_buffer_capacity() const noexcept;

  // The server handshake, within whatever expiry the tcp_stream has. Returns the failure.
  boost::asio::awaitable<boost::system::error_code> handshake();

  // Best effort: queues close_notify and sends it if the socket takes it now (never waits, and
  // not while a write is in flight). The caller then shuts or closes the TCP side.
  void send_close_notify();

  template <class MutableBufferSequence, class ReadToken>
  auto async_read_some(const MutableBufferSequence& buffers, ReadToken&& token) {
    return boost::asio::async_compose<ReadToken, void(boost::system::error_code, std::size_t)>(
        ReadOp<MutableBufferSequence>{*this, buffers}, token, next_);
  }

  // Completes when a read can make progress: input is buffered, or the socket has some (or its
  // end, or an error). Holds no buffer while it waits, so a reader that waits here and takes
  // its own buffer only then (HTTP/2's) holds none while its connection is idle. Not under the
  // tcp_stream's expiry: for readers without a read timeout.
  template <class WaitToken>
  auto async_wait_readable(WaitToken&& token) {
    return boost::asio::async_compose<WaitToken, void(boost::system::error_code)>(
        WaitOp{*this}, token, next_);
  }

  // Consumes up to kTlsBatch bytes of plaintext from `buffers` (gathered into records of up to
  // 16 KiB) and completes once their ciphertext has been sent.
  template <class ConstBufferSequence, class WriteToken>
  auto async_write_some(const ConstBufferSequence& buffers, WriteToken&& token) {
    return boost::asio::async_compose<WriteToken, void(boost::system::error_code, std::size_t)>(
        WriteOp<ConstBufferSequence>{*this, buffers}, token, next_);
  }

 private:
  int fd() { return next_.socket().native_handle(); }

  template <class ConstBufferSequence>
  std::size_t encrypt_from(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    namespace asio = boost::asio;
    auto it = asio::buffer_sequence_begin(buffers);
    const auto end = asio::buffer_sequence_end(buffers);
    std::size_t offset = 0;  // into *it
    std::size_t consumed = 0;
    while (consumed < detail::kTlsBatch) {
      while (it != end && asio::const_buffer(*it).size() <= offset) {
        ++it;
        offset = 0;
      }
      if (it == end) break;
      const asio::const_buffer cur = asio::const_buffer(*it) + offset;
      auto next = it;
      ++next;
      if (cur.size() >= detail::kTlsRecord || next == end) {
        // Large or last: encrypted in place, no copy.
        const std::size_t n = std::min(cur.size(), detail::kTlsBatch - consumed);
        if (!detail::tls_encrypt(*state_, cur.data(), n, ec)) return consumed;
        consumed += n;
        offset += n;
        continue;
      }
      // Small buffers: linearized into one record.
      unsigned char* scratch = detail::tls_scratch();
      const std::size_t room = std::min(detail::kTlsRecord, detail::kTlsBatch - consumed);
      std::size_t fill = 0;
      while (fill < room && it != end) {
        const asio::const_buffer b = asio::const_buffer(*it) + offset;
        const std::size_t n = std::min(b.size(), room - fill);
        std::memcpy(scratch + fill, b.data(), n);
        fill += n;
        offset += n;
        if (offset >= asio::const_buffer(*it).size()) {
          ++it;
          offset = 0;
        }
      }
      if (!detail::tls_encrypt(*state_, scratch, fill, ec)) return consumed;
      consumed += fill;
    }
    return consumed;
  }

  template <class MutableBufferSequence>
  struct ReadOp {
    TlsStream& s;
    MutableBufferSequence buffers;
    bool suspended = false;  // an async operation ran: completing now is not inline
    bool posted = false;
    boost::system::error_code result{};
    std::size_t bytes = 0;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}, std::size_t n = 0) {
      namespace asio = boost::asio;
      detail::TlsState& st = *s.state_;
      if (posted) {
        self.complete(result, bytes);
        return;
      }
      if (suspended) {
        if (ec) {
          finish(self, ec, 0);
          return;
        }
        detail::tls_commit_input(st, n);
      }
      asio::mutable_buffer target;
      for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
           ++it) {
        target = asio::mutable_buffer(*it);
        if (target.size() > 0) break;
      }
      if (target.size() == 0) {
        finish(self, {}, 0);
        return;
      }
      std::size_t got = 0;
      boost::system::error_code rec;
      if (detail::tls_read(st, s.fd(), target, got, rec) == detail::TlsStep::done) {
        finish(self, rec, got);
        return;
      }
      suspended = true;
      const asio::mutable_buffer in = detail::tls_prepare_input(st);
      s.next_.async_read_some(in, std::move(self));
    }

    template <class Self>
    void finish(Self& self, boost::system::error_code ec, std::size_t n) {
      detail::tls_after_read(*s.state_);
      if (suspended) {
        self.complete(ec, n);
        return;
      }
      posted = true;
      result = ec;
      bytes = n;
      boost::asio::post(s.get_executor(), std::move(self));
    }
  };

  struct WaitOp {
    TlsStream& s;
    bool started = false;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}) {
      if (started) {
        self.complete(ec);
        return;
      }
      started = true;
      if (detail::tls_input_ready(*s.state_)) {
        boost::asio::post(s.get_executor(), std::move(self));
        return;
      }
      s.next_.socket().async_wait(boost::asio::socket_base::wait_read, std::move(self));
    }
  };

  template <class ConstBufferSequence>
  struct WriteOp {
    TlsStream& s;
    ConstBufferSequence buffers;
    bool started = false;
    bool posted = false;
    boost::system::error_code result{};
    std::size_t consumed = 0;

    template <class Self>
    void operator()(Self& self, boost::system::error_code ec = {}, std::size_t n = 0) {
      detail::TlsState& st = *s.state_;
      if (posted) {
        self.complete(result, result ? 0 : consumed);
        return;
      }
      if (!started) {
        started = true;
        consumed = s.encrypt_from(buffers, result);
        if (result || !detail::tls_has_output(st)) {
          posted = true;
          boost::asio::post(s.get_executor(), std::move(self));
          return;
        }
        s.next_.async_write_some(detail::tls_next_send(st), std::move(self));
        return;
      }
      if (ec) {
        detail::tls_send_failed(st);
        self.complete(ec, 0);
        return;
      }
      if (!detail::tls_sent(st, n)) {
        s.next_.async_write_some(detail::tls_next_send(st), std::move(self));
        return;
      }
      self.complete({}, consumed);
    }
  };

  boost::beast::tcp_stream next_;
  std::unique_ptr<detail::TlsState> state_;
};

// WebSocket close: close_notify (best effort), then the TCP teardown Beast does for tcp_stream.
void teardown(boost::beast::role_type role, TlsStream& stream, boost::system::error_code& ec);

template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, TlsStream& stream, TeardownHandler&& handler) {
  stream.send_close_notify();
  using boost::beast::websocket::async_teardown;
  async_teardown(role, stream.next_layer(), std::forward<TeardownHandler>(handler));
}

}  // namespace kwatch::server
