#include "server/tls_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace kwatch::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;

namespace detail {

namespace {

constexpr std::size_t kInitialRead = 4096;
constexpr std::size_t kMaxRead = 65536;
// TLS 1.2/1.3 AEAD record overhead is 22-29 bytes; reserved per record so one batch is one
// allocation.
constexpr std::size_t kRecordOverhead = 64;

// A stream's write buffers (its ciphertext vectors and OpenSSL's ~17 KiB write buffer) are
// freed after a write that came after a quiet second, and kept while writes keep coming.
// Freeing them after every write cost +4 to +6 us of server CPU per event at 5 writes/s x 1,000
// watchers (measured 2026-11-23): all watchers allocate and free together, and glibc gives the
// freed heap back to the kernel and faults it in again on every event. An isolated write (a
// watch's head, a rare event) frees them at once; a watcher that goes quiet after a burst keeps
// them until its next write.
constexpr auto kQuiet = std::chrono::seconds(1);
}  // namespace

struct TlsState {
  SSL* ssl = nullptr;
  // Ciphertext received, [in_begin, in_end) not yet taken by OpenSSL.
  std::unique_ptr<unsigned char[]> in;
  std::size_t in_capacity = 0;
  std::size_t in_begin = 0;
  std::size_t in_end = 0;
  // A socket read into `in` is pending: `in` must stay (a write that completes meanwhile and
  // releases the idle buffers would free it under the read).
  bool reading = false;
  std::size_t read_chunk = kInitialRead;
  // Ciphertext OpenSSL produced and no send has taken yet; `sending` is the one in flight (two
  // vectors, so OpenSSL can append while a send reads).
  std::vector<unsigned char> out;
  std::vector<unsigned char> sending;
  std::size_t sending_pos = 0;
  bool writing = false;
  std::chrono::steady_clock::time_point last_write{};

  TlsState() = default;
  TlsState(const TlsState&) = delete;
  TlsState& operator=(const TlsState&) = delete;
  ~TlsState() { SSL_free(ssl); }
};

namespace {

int bio_write(BIO* bio, const char* data, size_t size, size_t* written) {
  auto* st = static_cast<TlsState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  st->out.insert(st->out.end(), p, p + size);
  *written = size;
  return 1;
}

int bio_read(BIO* bio, char* data, size_t size, size_t* read) {
  auto* st = static_cast<TlsState*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const std::size_t available = st->in_end - st->in_begin;
  if (available == 0) {
    BIO_set_retry_read(bio);
    *read = 0;
    return 0;
  }
  const std::size_t n = std::min(available, size);
  std::memcpy(data, st->in.get() + st->in_begin, n);
  st->in_begin += n;
  *read = n;
  return 1;
}

long bio_ctrl(BIO*, int cmd, long, void*) {
  // OpenSSL flushes after each handshake flight; everything written is already queued.
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO_METHOD* bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kwatch TlsStream");
    if (m == nullptr) throw std::bad_alloc();
    BIO_meth_set_write_ex(m, bio_write);
    BIO_meth_set_read_ex(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  return method;
}

// Ciphertext vectors freed by a stream go to a small per-thread pool, so the isolated writes
// of many quiet watchers reuse a few vectors instead of a malloc each.
constexpr std::size_t kPoolBuffers = 16;
constexpr std::size_t kPoolMaxCapacity = 2 * (kTlsBatch + 4 * kRecordOverhead);

// SSL_free_buffers with a partial record buffered was a use after free before OpenSSL 3.0.14,
// 3.1.6, 3.2.2 and 3.3.1 (CVE-2024-4741); older libraries keep their buffers.
bool free_openssl_buffers(SSL* ssl) {
  static const bool safe = [] {
    const unsigned long v = OpenSSL_version_num();
    return (v >= 0x300000e0L && v < 0x30100000L) || (v >= 0x30100060L && v < 0x30200000L) ||
           (v >= 0x30200020L && v < 0x30300000L) || v >= 0x30300010L;
  }();
  return safe && SSL_free_buffers(ssl) == 1;
}

std::vector<std::vector<unsigned char>>& buffer_pool() {
  thread_local std::vector<std::vector<unsigned char>> pool;
  return pool;
}

std::vector<unsigned char> take_buffer() {
  auto& pool = buffer_pool();
  if (pool.empty()) return {};
  std::vector<unsigned char> b = std::move(pool.back());
  pool.pop_back();
  return b;
}

void give_buffer(std::vector<unsigned char>& b) {
  if (b.capacity() == 0) return;
  auto& pool = buffer_pool();
  if (pool.size() < kPoolBuffers && b.capacity() <= kPoolMaxCapacity) {
    b.clear();
    pool.push_back(std::move(b));
  }
  std::vector<unsigned char>().swap(b);
}

error_code tls_error(int ssl_error) {
  const unsigned long err = ERR_get_error();
  ERR_clear_error();
  if (err != 0) return error_code(static_cast<int>(err), asio::error::get_ssl_category());
  (void)ssl_error;
  return asio::ssl::error::stream_truncated;
}

// Sends queued output now if the socket takes it (alerts, KeyUpdate answers, close_notify):
// never waits; what is left goes with the next write.
void flush_now(TlsState& st, int fd) {
  if (st.writing || st.out.empty() || fd < 0) return;
  const ssize_t n = ::send(fd, st.out.data(), st.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n <= 0) return;
  st.out.erase(st.out.begin(), st.out.begin() + n);
}

// `writes`: also the ciphertext vectors (back to the pool) and OpenSSL's buffers.
void release_buffers(TlsState& st, bool writes = true) {
  if (!st.reading && st.in_begin == st.in_end && st.in) {
    st.in.reset();
    st.in_capacity = st.in_begin = st.in_end = 0;
  }
  if (!writes || st.writing) return;
  if (st.out.empty()) give_buffer(st.out);
  give_buffer(st.sending);
  st.sending_pos = 0;
  // Refused (harmlessly) while OpenSSL still holds unread input.
  free_openssl_buffers(st.ssl);
}

}  // namespace

TlsStep tls_read(TlsState& st, int fd, asio::mutable_buffer target, std::size_t& got,
                 error_code& ec) {
  ERR_clear_error();
  std::size_t n = 0;
  const int r = SSL_read_ex(st.ssl, target.data(), target.size(), &n);
  flush_now(st, fd);
  if (r == 1) {
    got = n;
    return TlsStep::done;
  }
  const int e = SSL_get_error(st.ssl, r);
  if (e == SSL_ERROR_WANT_READ) return TlsStep::want_read;
  ec = e == SSL_ERROR_ZERO_RETURN ? error_code(asio::error::eof) : tls_error(e);
  return TlsStep::done;
}

asio::mutable_buffer tls_prepare_input(TlsState& st) {
  // Nothing is buffered (OpenSSL asked for more and took all we had): an idle reader (a
  // WebSocket watch) waits holding only `in`, not OpenSSL's 17 KiB read buffer. Refused while
  // a partial record is buffered.
  free_openssl_buffers(st.ssl);
  if (st.in_capacity < st.read_chunk) {
    st.in = std::make_unique_for_overwrite<unsigned char[]>(st.read_chunk);
    st.in_capacity = st.read_chunk;
  }
  st.in_begin = st.in_end = 0;
  st.reading = true;
  return asio::mutable_buffer(st.in.get(), st.read_chunk);
}

bool tls_input_ready(TlsState& st) {
  if (st.in_begin < st.in_end || SSL_pending(st.ssl) > 0) return true;
  release_buffers(st, false);
  free_openssl_buffers(st.ssl);  // refused while a partial record is buffered
  return false;
}

void tls_commit_input(TlsState& st, std::size_t n) {
  st.reading = false;
  st.in_begin = 0;
  st.in_end = n;
  // Bulk input (a large request body) is read in growing chunks; small reads keep it small.
  if (n == st.read_chunk) {
    st.read_chunk = std::min(st.read_chunk * 4, kMaxRead);
  } else if (n < kInitialRead) {
    st.read_chunk = kInitialRead;
  }
}

void tls_after_read(TlsState& st) {
  st.reading = false;  // also after a failed socket read
  release_buffers(st);
}

bool tls_encrypt(TlsState& st, const void* data, std::size_t size, error_code& ec) {
  const std::size_t records = (size + kTlsRecord - 1) / kTlsRecord;
  if (st.out.capacity() == 0) st.out = take_buffer();
  st.out.reserve(st.out.size() + size + records * kRecordOverhead);
  ERR_clear_error();
  std::size_t written = 0;
  const int r = SSL_write_ex(st.ssl, data, size, &written);
  if (r == 1) return true;
  ec = tls_error(SSL_get_error(st.ssl, r));
  return false;
}

unsigned char* tls_scratch() {
  alignas(64) thread_local unsigned char scratch[kTlsRecord];
  return scratch;
}

bool tls_has_output(const TlsState& st) { return !st.out.empty(); }

asio::const_buffer tls_next_send(TlsState& st) {
  if (st.sending_pos >= st.sending.size()) {
    st.sending.clear();
    st.sending.swap(st.out);
    st.sending_pos = 0;
  }
  st.writing = true;
  return asio::const_buffer(st.sending.data() + st.sending_pos, st.sending.size() - st.sending_pos);
}

bool tls_sent(TlsState& st, std::size_t n) {
  st.sending_pos += n;
  if (st.sending_pos < st.sending.size() || !st.out.empty()) return false;
  st.writing = false;
  st.sending.clear();
  st.sending_pos = 0;
  const auto now = std::chrono::steady_clock::now();
  const bool after_quiet = now - st.last_write >= kQuiet;
  st.last_write = now;
  release_buffers(st, after_quiet);
  return true;
}

void tls_send_failed(TlsState& st) {
  st.writing = false;
  st.out.clear();
  st.sending.clear();
  st.sending_pos = 0;
  release_buffers(st);
}

}  // namespace detail

TlsStream::TlsStream(beast::tcp_stream next, SSL_CTX* ctx)
    : next_(std::move(next)), state_(std::make_unique<detail::TlsState>()) {
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) {
    throw boost::system::system_error(
        error_code(static_cast<int>(ERR_get_error()), asio::error::get_ssl_category()), "SSL_new");
  }
  state_->ssl = ssl;
  BIO* bio = BIO_new(detail::bio_method());
  if (bio == nullptr) throw std::bad_alloc();
  BIO_set_data(bio, state_.get());
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by ssl
  SSL_set_accept_state(ssl);
  SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS);  // released by release_buffers, see kQuiet
}

TlsStream::TlsStream(TlsStream&&) noexcept = default;
// The BIO points at the state, not at the stream, so the state moves as it is.
TlsStream::TlsStream(TlsStream&& other, beast::tcp_stream next) noexcept
    : next_(std::move(next)), state_(std::move(other.state_)) {}
TlsStream::~TlsStream() = default;

SSL* TlsStream::native_handle() noexcept { return state_->ssl; }
std::size_t TlsStream::input_buffer_capacity() const noexcept { return state_->in_capacity; }

asio::awaitable<error_code> TlsStream::handshake() {
  constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
  detail::TlsState& st = *state_;
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(st.ssl);
    error_code ec;
    bool want_read = false;
    if (r != 1) {
      const int e = SSL_get_error(st.ssl, r);
      if (e == SSL_ERROR_WANT_READ) {
        want_read = true;
      } else {
        ec = detail::tls_error(e);
      }
    }
    // The server's flight (or the alert that ends a failed handshake).
    for (bool more = detail::tls_has_output(st); more;) {
      const asio::const_buffer out = detail::tls_next_send(st);
      auto [wec, n] = co_await next_.async_write_some(out, use_tuple);
      if (wec) {
        detail::tls_send_failed(st);
        co_return ec ? ec : wec;
      }
      more = !detail::tls_sent(st, n);
    }
    if (!want_read) {
      st.last_write = {};  // the handshake's flights are not the stream's traffic
      detail::release_buffers(st);
      co_return ec;
    }
    const asio::mutable_buffer in = detail::tls_prepare_input(st);
    auto [rec, n] = co_await next_.async_read_some(in, use_tuple);
    if (rec) {
      st.reading = false;
      co_return rec;
    }
    detail::tls_commit_input(st, n);
  }
}

void TlsStream::send_close_notify() {
  if (!state_ || state_->ssl == nullptr || !SSL_is_init_finished(state_->ssl)) return;
  if (state_->writing) return;
  ERR_clear_error();
  SSL_shutdown(state_->ssl);
  ERR_clear_error();
  detail::flush_now(*state_, fd());
}

void teardown(beast::role_type role, TlsStream& stream, error_code& ec) {
  stream.send_close_notify();
  using beast::websocket::teardown;
  teardown(role, stream.next_layer(), ec);
}

}  // namespace kwatch::server
