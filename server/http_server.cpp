#include "server/http_server.hpp"

#include "server/http_server_impl.hpp"

#include "apimachinery/stored_json.hpp"
#include "kinds/scheme.hpp"
#include "schema/protobuf_decoder.hpp"
#include "server/responses.hpp"

#include <unistd.h>

#include <cctype>
#include <cstring>

namespace kwatch::server {

// ---- The streams kwatch serves: plain TCP and TLS ----

void StreamOps<beast::tcp_stream>::cancel(beast::tcp_stream& s) {
  boost::system::error_code ignored;
  s.socket().cancel(ignored);
}

void StreamOps<beast::tcp_stream>::close(beast::tcp_stream& s) {
  boost::system::error_code ignored;
  s.socket().close(ignored);
}

void StreamOps<beast::tcp_stream>::shutdown_send(beast::tcp_stream& s) {
  boost::system::error_code ignored;
  s.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

std::string StreamOps<beast::tcp_stream>::remote_address(beast::tcp_stream& s) {
  boost::system::error_code ec;
  auto peer = s.socket().remote_endpoint(ec);
  return ec ? std::string() : peer.address().to_string();
}

// The same connection, its socket adopted by `executor` (a strand of the delivery threads'
// io_context, whose reactor then waits on it). Nothing may be pending on `stream`.
std::optional<beast::tcp_stream> StreamOps<beast::tcp_stream>::hand_over(
    beast::tcp_stream& stream, const asio::any_io_executor& executor) {
  boost::system::error_code ec;
  auto& old = stream.socket();
  const auto protocol = old.local_endpoint(ec).protocol();
  if (ec) return std::nullopt;
  const auto fd = old.release(ec);
  if (ec) return std::nullopt;
  tcp::socket socket(executor);
  socket.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return std::nullopt;
  }
  return beast::tcp_stream(std::move(socket));
}

// Plain TCP: sends what the socket takes at once, with one non-blocking gather send, and answers
// how many bytes went; the caller waits for the rest with an asynchronous write. A watcher that
// keeps up then costs no write operation, no trip of its completion through the scheduler and
// no resumption per batch.
std::size_t StreamOps<beast::tcp_stream>::send_now(beast::tcp_stream& stream,
                                                   const std::vector<asio::const_buffer>& buffers) {
  auto& socket = stream.socket();
  boost::system::error_code ec;
  if (!socket.non_blocking()) socket.non_blocking(true, ec);
  if (ec) return 0;
  const std::size_t n = socket.write_some(buffers, ec);
  return ec ? 0 : n;
}

void StreamOps<TlsStream>::shutdown_send(TlsStream& s) {
  s.send_close_notify();
  Tcp::shutdown_send(s.next_layer());
}

std::optional<TlsStream> StreamOps<TlsStream>::hand_over(TlsStream& stream,
                                                         const asio::any_io_executor& executor) {
  auto next = Tcp::hand_over(stream.next_layer(), executor);
  if (!next) return std::nullopt;
  return TlsStream(std::move(stream), std::move(*next));
}

namespace {

// What a TLS context trusts front proxies with: the request header CA's certificates and the
// settings their requests are read with. Owned by the context (its ex_data), so that it lives
// as long as the connections made from that context, whichever context is current.
struct FrontProxyTrust {
  X509_STORE* store = nullptr;
  std::shared_ptr<const auth::RequestHeaderOptions> settings;
  ~FrontProxyTrust() { X509_STORE_free(store); }
};

int front_proxy_trust_index() {
  static const int index = SSL_CTX_get_ex_new_index(
      0, nullptr, nullptr, nullptr,
      [](void*, void* trust, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<FrontProxyTrust*>(trust);
      });
  return index;
}

const FrontProxyTrust* front_proxy_trust(SSL* ssl) {
  return static_cast<const FrontProxyTrust*>(
      SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), front_proxy_trust_index()));
}

}  // namespace

// What the TLS handshake learned about the client's certificate. The handshake accepts any
// certificate (kube-apiserver too: a bad one is a 401 the client can read, not a failed
// handshake); OpenSSL's verification result against the client CA decides here.
std::shared_ptr<const auth::ClientCertificate> StreamOps<TlsStream>::client_certificate(
    TlsStream& stream) {
  SSL* ssl = stream.native_handle();
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return nullptr;
  auto out = std::make_shared<auth::ClientCertificate>();
  // A front proxy's certificate is verified against the request header CA, kept apart from the
  // client CA (a proxy's certificate is not a user's, nor the other way round).
  if (const FrontProxyTrust* trust = front_proxy_trust(ssl)) {
    X509_STORE_CTX* check = X509_STORE_CTX_new();
    if (check != nullptr &&
        X509_STORE_CTX_init(check, trust->store, cert, SSL_get_peer_cert_chain(ssl)) == 1) {
      X509_STORE_CTX_set_purpose(check, X509_PURPOSE_SSL_CLIENT);
      out->front_proxy = X509_verify_cert(check) == 1;
      if (out->front_proxy) out->request_header = trust->settings;
    }
    X509_STORE_CTX_free(check);
  }
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK) {
    out->error = std::string("x509: ") + X509_verify_cert_error_string(verified);
    if (!out->front_proxy) return out;
  }
  const X509_NAME* subject = X509_get_subject_name(cert);
  auto entry_text = [](const X509_NAME_ENTRY* entry) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(entry);
    unsigned char* utf8 = nullptr;
    const int len = ASN1_STRING_to_UTF8(&utf8, data);
    std::string text = len > 0 ? std::string(reinterpret_cast<const char*>(utf8), len) : "";
    OPENSSL_free(utf8);
    return text;
  };
  // The last CN, as Go's parser keeps; every O, in order.
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
    out->user = entry_text(X509_NAME_get_entry(subject, i));
  }
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) >= 0;) {
    out->groups.push_back(entry_text(X509_NAME_get_entry(subject, i)));
  }
  return out;
}

// ---- Requests and responses ----

void add_warnings(http::response<http::string_body>& res, const std::vector<std::string>& warnings) {
  // kube's warning recorder: 4,096 bytes of headers in all; the warning that would pass them
  // turns on truncation, and every warning, those before it too, is then cut to its first 256
  // characters; once the cut ones fill the 4,096 bytes the rest are left out.
  constexpr std::size_t kMaxTotal = 4096;
  constexpr std::size_t kTruncateTo = 256;
  const auto header = [](std::string_view text, bool truncate) {
    std::string value = "299 - \"";
    std::size_t characters = 0;
    for (unsigned char c : text) {
      if (truncate && characters == kTruncateTo) break;
      ++characters;
      if (c == '"' || c == '\\') {
        value += '\\';
        value += static_cast<char>(c);
      } else if (c >= 0x20 && c < 0x7f) {
        value += static_cast<char>(c);
      } else {
        value += '?';
      }
    }
    value += '"';
    return value;
  };
  std::vector<std::string> headers;
  std::size_t total = 0;
  bool truncating = false;
  for (std::size_t i = 0; i < warnings.size(); ++i) {
    if (warnings[i].empty()) continue;
    if (truncating && total >= kMaxTotal) break;
    std::string value = header(warnings[i], truncating);
    if (truncating || total + value.size() <= kMaxTotal) {
      total += value.size();
      headers.push_back(std::move(value));
      continue;
    }
    // Past the budget: start again with every warning so far cut short.
    truncating = true;
    headers.clear();
    total = 0;
    for (std::size_t k = 0; k <= i; ++k) {
      if (warnings[k].empty()) continue;
      std::string cut = header(warnings[k], true);
      total += cut.size();
      headers.push_back(std::move(cut));
    }
  }
  for (auto& value : headers) res.insert(http::field::warning, value);
}

namespace {

// An Impersonate-Extra-<key> header's key as kube reads it: lowercased, then percent-decoded
// (keys such as `acme.com%2Fproject` hold characters header names cannot).
std::string extra_key(beast::string_view raw) {
  std::string lower;
  for (char c : raw) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string out;
  for (std::size_t i = 0; i < lower.size(); ++i) {
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    if (lower[i] == '%' && i + 2 < lower.size() && hex(lower[i + 1]) >= 0 &&
        hex(lower[i + 2]) >= 0) {
      out += static_cast<char>(hex(lower[i + 1]) * 16 + hex(lower[i + 2]));
      i += 2;
    } else {
      out += lower[i];
    }
  }
  return out;
}

}  // namespace

// Whether kwatch reads a header itself, or it belongs to the connection (Host, framing,
// upgrades, hop-by-hop ones): such headers are not among ApiRequest::other_headers.
bool read_here(http::field field, std::string_view name) {
  switch (field) {
    case http::field::host:
    case http::field::content_type:
    case http::field::content_length:
    case http::field::accept:
    case http::field::user_agent:
    case http::field::authorization:
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_authorization:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::expect:
    case http::field::accept_encoding:  // kwatch compresses its own answers
    case http::field::content_encoding:
      return true;
    default:
      break;
  }
  return beast::iequals(name.substr(0, std::min<std::size_t>(name.size(), 12)), "Impersonate-") ||
         beast::iequals(name.substr(0, std::min<std::size_t>(name.size(), 14)), "Sec-WebSocket-");
}

ApiRequest request_of(const http::request<http::string_body>& req,
                      const std::shared_ptr<const auth::ClientCertificate>& peer) {
  ApiRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  request.content_type = std::string(req[http::field::content_type]);
  request.accept = std::string(req[http::field::accept]);
  request.user_agent = std::string(req[http::field::user_agent]);
  request.credentials.authorization = std::string(req[http::field::authorization]);
  request.credentials.client_certificate = peer;
  if (peer && peer->front_proxy) {
    for (const auto& field : req) {
      request.credentials.proxy_headers.emplace_back(std::string(field.name_string()),
                                                     std::string(field.value()));
    }
  }
  for (const auto& field : req) {
    const auto name = field.name_string();
    if (!read_here(field.name(), name)) {
      request.other_headers.emplace_back(std::string(name), std::string(field.value()));
      continue;
    }
    if (beast::iequals(name, "Impersonate-User")) {
      request.impersonation.user = std::string(field.value());
    } else if (beast::iequals(name, "Impersonate-Group")) {
      request.impersonation.groups.emplace_back(field.value());
    } else if (beast::iequals(name, "Impersonate-Uid")) {
      request.impersonation.uid = std::string(field.value());
    } else if (constexpr std::string_view kExtra = "Impersonate-Extra-";
               name.size() > kExtra.size() && beast::iequals(name.substr(0, kExtra.size()), kExtra)) {
      request.impersonation.extra.emplace_back(extra_key(name.substr(kExtra.size())),
                                             std::string(field.value()));
    }
  }
  return request;
}

http::response<http::string_body> simple_error(unsigned status, std::string_view reason,
                                               std::string_view message) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  res.body() = std::string(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")") +
               std::string(message) + R"(","reason":")" + std::string(reason) + R"(","code":)" +
               std::to_string(status) + "}\n";
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

void convert_frames(const WatchRendering& rendering, std::vector<watch::WatchFrame>& frames) {
  if (!rendering.convert) return;
  for (auto& f : frames) {
    if (f.type == watch::EventType::error) continue;
    if (f.type == watch::EventType::bookmark && !rendering.convert_bookmarks) continue;
    f.object = rendering.convert(f.object);
  }
}

void append_frames(std::vector<asio::const_buffer>& out,
                   const std::vector<watch::WatchFrame>& frames) {
  for (const auto& f : frames) {
    auto prefix = watch::frame_prefix(f.type);
    out.emplace_back(prefix.data(), prefix.size());
    out.emplace_back(f.object->json.data(), f.object->json.size());
    out.emplace_back(watch::kFrameSuffix.data(), watch::kFrameSuffix.size());
  }
}

namespace {

// A batch's frames: each frame's head, its shared object bytes, then `suffix` (if any).
void append_batch(std::vector<asio::const_buffer>& out, const EncodedBatch& batch,
                  std::string_view suffix) {
  std::size_t begin = 0;
  for (std::size_t i = 0; i < batch.held.size(); ++i) {
    out.emplace_back(batch.heads.data() + begin, batch.ends[i] - begin);
    out.emplace_back(batch.held[i]->data(), batch.held[i]->size());
    if (!suffix.empty()) out.emplace_back(suffix.data(), suffix.size());
    begin = batch.ends[i];
  }
}

}  // namespace

bool append_protobuf_frames(std::vector<asio::const_buffer>& out, EncodedBatch& batch,
                            const std::vector<watch::WatchFrame>& frames) {
  batch.heads.clear();
  batch.ends.clear();
  batch.held.clear();
  for (const auto& f : frames) {
    std::shared_ptr<const std::string> message;
    std::string_view version = batch.api_version;
    std::string_view kind = batch.kind;
    if (f.type == watch::EventType::error) {
      // The Status the watch ends with, once per watcher.
      auto parsed = apimachinery::parse_json(f.object->json);
      std::optional<std::string> status;
      if (parsed && parsed->is_object()) {
        status = schema::encode_protobuf_status_message(parsed->get_object());
      }
      if (!status) return false;
      message = std::make_shared<const std::string>(std::move(*status));
      version = "v1";
      kind = "Status";
    } else {
      message = protobuf_message(f.object, batch.api_version, batch.kind);
    }
    if (!message) return false;
    batch.heads += schema::protobuf_watch_event_head(watch::event_type_name(f.type), version, kind,
                                                     message->size());
    batch.ends.push_back(batch.heads.size());
    batch.held.push_back(std::move(message));
  }
  append_batch(out, batch, schema::kWatchEventSuffix);
  return true;
}

bool append_cbor_frames(std::vector<asio::const_buffer>& out, EncodedBatch& batch,
                        const std::vector<watch::WatchFrame>& frames) {
  batch.heads.clear();
  batch.ends.clear();
  batch.held.clear();
  for (const auto& f : frames) {
    std::shared_ptr<const std::string> object;
    if (f.type == watch::EventType::error) {
      // The Status the watch ends with, once per watcher.
      auto parsed = apimachinery::parse_json(f.object->json);
      std::string status;
      if (!parsed || !apimachinery::append_cbor(status, *parsed)) return false;
      object = std::make_shared<const std::string>(std::move(status));
    } else {
      object = cbor_message(f.object, batch.api_version, batch.kind);
    }
    if (!object) return false;
    batch.heads += cbor_watch_event_head(watch::event_type_name(f.type));
    batch.ends.push_back(batch.heads.size());
    batch.held.push_back(std::move(object));
  }
  append_batch(out, batch, {});
  return true;
}

std::unique_ptr<EncodedBatch> encoded_batch_for(const WatchRendering& rendering) {
  const auto& info = rendering.protobuf_watch ? rendering.protobuf_watch : rendering.cbor_watch;
  if (!info) return nullptr;
  auto pb = std::make_unique<EncodedBatch>();
  pb->cbor = !rendering.protobuf_watch;
  pb->api_version = info->api_version();
  pb->kind = info->kind;
  return pb;
}

bool append_watch_batch(std::vector<asio::const_buffer>& out, const WatchRendering& rendering,
                        EncodedBatch* pb, std::vector<watch::WatchFrame>& frames) {
  convert_frames(rendering, frames);
  if (pb == nullptr) {
    append_frames(out, frames);
    return true;
  }
  if (pb->cbor ? append_cbor_frames(out, *pb, frames) : append_protobuf_frames(out, *pb, frames)) {
    return true;
  }
  spdlog::warn("a watch of {} ends: an object has no {} form",
               (rendering.protobuf_watch ? rendering.protobuf_watch : rendering.cbor_watch)->resource,
               pb->cbor ? "CBOR" : "protobuf");
  return false;
}

// ---- Connections ----

// Whether an accept failed for want of a resource (file descriptors, memory) that only time,
// not a retry, brings back.
bool out_of_resources(const boost::system::error_code& ec) {
  return ec == asio::error::no_descriptors ||  // EMFILE
         ec == boost::system::error_code(ENFILE, boost::system::system_category()) ||
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
}

asio::awaitable<void> HttpServer::Impl::accept_loop() {
  auto self = shared_from_this();
  asio::steady_timer pause(acceptor.get_executor());
  std::chrono::milliseconds backoff{0};
  auto last_log = std::chrono::steady_clock::time_point{};
  std::uint64_t failures = 0;
  for (;;) {
    // Each connection gets a strand of its own: its reads, writes and timers never race.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(ioc), use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // The pending connection stays queued, so retrying at once would spin: pause, longer
      // each time (up to a second), and log once per interval, not once per attempt.
      ++failures;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_log >= std::chrono::seconds(10)) {
        spdlog::warn("accept failed: {} ({} failures since the last report); pausing accepts",
                     ec.message(), failures);
        last_log = now;
        failures = 0;
      }
      backoff = out_of_resources(ec)
                    ? std::min(std::max(backoff * 2, std::chrono::milliseconds(10)),
                               std::chrono::milliseconds(1000))
                    : std::chrono::milliseconds(1);
      pause.expires_after(backoff);
      co_await pause.async_wait(use_tuple);
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    std::shared_ptr<void> slot;
    if (limits.max_connections > 0 || limits.max_connections_per_address > 0) {
      auto peer = socket.remote_endpoint(ec);
      slot = ec ? nullptr : take_slot(peer.address().to_string());
      if (!slot) {
        // Over a cap: closed before a byte is read or a handshake begins.
        if (refused_connections.fetch_add(1) % 1000 == 0) {
          spdlog::warn("a connection was refused: over --max-connections or "
                       "--max-connections-per-ip ({} refused so far)",
                       refused_connections.load());
        }
        socket.close(ec);
        continue;
      }
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    if (auto tls = current_tls()) {
      asio::co_spawn(executor, serve_tls(std::move(socket), std::move(slot), std::move(tls)),
                     [](std::exception_ptr e) { log_task_failure(e, "connection"); });
    } else {
      asio::co_spawn(executor,
                     serve_connection(beast::tcp_stream(std::move(socket)), std::move(slot)),
                     [](std::exception_ptr e) { log_task_failure(e, "connection"); });
    }
  }
}

std::shared_ptr<void> HttpServer::Impl::take_slot(const std::string& address) {
  std::lock_guard lock(slots_mutex);
  auto& from_address = slots_by_address[address];
  if ((limits.max_connections > 0 && open_slots >= limits.max_connections) ||
      (limits.max_connections_per_address > 0 &&
       from_address >= limits.max_connections_per_address)) {
    if (from_address == 0) slots_by_address.erase(address);
    return nullptr;
  }
  ++open_slots;
  ++from_address;
  // Not null (its truth says the slot was granted); the deleter gives the place back.
  return std::shared_ptr<void>(static_cast<void*>(this), [self = shared_from_this(),
                                                          address](void*) {
    std::lock_guard lock(self->slots_mutex);
    --self->open_slots;
    auto it = self->slots_by_address.find(address);
    if (it != self->slots_by_address.end() && --it->second == 0) self->slots_by_address.erase(it);
  });
}

asio::awaitable<void> HttpServer::Impl::serve_tls(tcp::socket socket, std::shared_ptr<void> slot,
                                                  std::shared_ptr<asio::ssl::context> tls) {
  auto self = shared_from_this();
  beast::tcp_stream tcp_stream(std::move(socket));
  // A client that connects and says nothing, or garbage, or never finishes its handshake, is
  // dropped at the handshake deadline.
  tcp_stream.expires_after(std::min(limits.read_timeout, limits.handshake_timeout));
  // Plain HTTP where TLS was expected gets the answer Go's servers (and so kube-apiserver) give,
  // instead of a failed handshake the user cannot read.
  {
    char first = 0;
    auto [pec, n] = co_await tcp_stream.socket().async_receive(
        asio::buffer(&first, 1), tcp::socket::message_peek, use_tuple);
    if (pec || n == 0) co_return;
    if (first >= 'A' && first <= 'Z') {
      static constexpr std::string_view kAnswer =
          "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
      co_await asio::async_write(tcp_stream.socket(), asio::buffer(kAnswer), use_tuple);
      beast::error_code ignored;
      tcp_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
  }
  TlsStream stream(std::move(tcp_stream), tls->native_handle());
  const boost::system::error_code ec = co_await stream.handshake();
  if (ec) {
    spdlog::debug("TLS handshake failed: {}", ec.message());
    co_return;
  }
  const unsigned char* protocol = nullptr;
  unsigned int protocol_length = 0;
  SSL_get0_alpn_selected(stream.native_handle(), &protocol, &protocol_length);
  if (protocol_length == 2 && std::memcmp(protocol, "h2", 2) == 0) {
    co_await serve_http2(std::move(stream), std::move(slot));
    co_return;
  }
  co_await serve_connection(std::move(stream), std::move(slot));
}

std::shared_ptr<void> HttpServer::Impl::track(const std::shared_ptr<Waiting>& waiting) {
  std::lock_guard lock(connections_mutex);
  const std::uint64_t id = next_connection++;
  connections.emplace(id, waiting);
  return std::shared_ptr<void>(nullptr, [self = shared_from_this(), id](void*) {
    std::lock_guard lock(self->connections_mutex);
    self->connections.erase(id);
  });
}

HttpServer::HttpServer(asio::io_context& ioc, std::shared_ptr<ApiHandler> handler,
                       HttpLimits limits, asio::io_context* delivery)
    : impl_(std::make_shared<Impl>(ioc, std::move(handler), limits, delivery)) {}

HttpServer::~HttpServer() = default;

namespace {

// ALPN: h2 when the client offers it and HTTP/2 is on (kubectl and Go clients offer h2 first,
// and fall back to HTTP/1.1 for WebSocket and SPDY by offering only that), else HTTP/1.1; a
// client that offers only other protocols gets no ALPN answer and may still speak HTTP/1.1.
// `arg`: non-null when h2 may be chosen.
int select_protocol(SSL*, const unsigned char** out, unsigned char* outlen,
                    const unsigned char* in, unsigned int inlen, void* arg) {
  static constexpr std::string_view kH2 = "h2", kHttp11 = "http/1.1";
  auto find = [&](std::string_view wanted) {
    for (unsigned int i = 0; i < inlen;) {
      const unsigned int len = in[i];
      if (i + 1 + len > inlen) break;
      if (len == wanted.size() && std::memcmp(in + i + 1, wanted.data(), len) == 0) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        return true;
      }
      i += 1 + len;
    }
    return false;
  };
  if (arg != nullptr && find(kH2)) return SSL_TLSEXT_ERR_OK;
  if (find(kHttp11)) return SSL_TLSEXT_ERR_OK;
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

namespace {

// A server TLS context from these files (see enable_tls), or why not.
std::shared_ptr<asio::ssl::context> make_tls_context(
    const std::string& cert_file, const std::string& key_file, const std::string& client_ca_file,
    const std::string& front_proxy_ca_file,
    std::shared_ptr<const auth::RequestHeaderOptions> request_header, bool offer_h2,
    std::string& error) {
  const auto fail = [&error](std::string why) {
    error = std::move(why);
    return std::shared_ptr<asio::ssl::context>();
  };
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  // TLS 1.2 and 1.3 only, as kube-apiserver's default minimum.
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                   ec);
  if (ec) return fail("TLS options: " + ec.message());
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return fail("cannot use the certificate in " + cert_file + ": " + ec.message());
  ctx->use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) {
    return fail("cannot use the private key in " + key_file + " with the certificate in " +
                cert_file + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return fail("the private key in " + key_file + " does not match the certificate in " +
                cert_file);
  }
  // Any non-null pointer says h2 may be chosen.
  static int h2_allowed = 1;
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), select_protocol,
                             offer_h2 ? &h2_allowed : nullptr);
  if (!front_proxy_ca_file.empty()) {
    auto trust = std::make_unique<FrontProxyTrust>();
    trust->store = X509_STORE_new();
    trust->settings = std::move(request_header);
    if (trust->store == nullptr ||
        X509_STORE_load_file(trust->store, front_proxy_ca_file.c_str()) != 1) {
      return fail("cannot load the request header CA in " + front_proxy_ca_file);
    }
    if (SSL_CTX_set_ex_data(ctx->native_handle(), front_proxy_trust_index(), trust.get()) != 1) {
      return fail("cannot keep the request header CA");
    }
    trust.release();  // the context's now: freed with it
  }
  if (!client_ca_file.empty() || !front_proxy_ca_file.empty()) {
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    for (const std::string& file : {client_ca_file, front_proxy_ca_file}) {
      if (file.empty()) continue;
      if (SSL_add_file_cert_subjects_to_stack(names, file.c_str()) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return fail("no CA certificate in " + file);
      }
    }
    if (!client_ca_file.empty()) {
      ctx->load_verify_file(client_ca_file, ec);
      if (ec) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return fail("cannot load the client CA in " + client_ca_file + ": " + ec.message());
      }
    }
    SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    // Ask for a certificate, never fail the handshake over it; the result is checked per
    // connection (see client_certificate_of) with the client-auth purpose (extended key usage).
    SSL_CTX_set_verify(ctx->native_handle(), SSL_VERIFY_PEER,
                       [](int, X509_STORE_CTX*) { return 1; });
    X509_VERIFY_PARAM_set_purpose(SSL_CTX_get0_param(ctx->native_handle()),
                                  X509_PURPOSE_SSL_CLIENT);
    // Resumed sessions keep their verified certificate; OpenSSL refuses to resume without this.
    static constexpr unsigned char kSessionContext[] = {'k', 'w', 'a', 't', 'c', 'h'};
    SSL_CTX_set_session_id_context(ctx->native_handle(), kSessionContext, sizeof kSessionContext);
  }
  return ctx;
}

}  // namespace

std::string HttpServer::enable_tls(const std::string& cert_file, const std::string& key_file,
                                   const std::string& client_ca_file,
                                   const std::string& front_proxy_ca_file,
                                   std::shared_ptr<const auth::RequestHeaderOptions> request_header) {
  std::string error;
  auto ctx = make_tls_context(cert_file, key_file, client_ca_file, front_proxy_ca_file,
                              std::move(request_header), impl_->limits.http2, error);
  if (!ctx) return error;
  std::lock_guard lock(impl_->tls_mutex);
  impl_->tls = std::move(ctx);
  return "";
}

std::string HttpServer::reload_tls(const std::string& cert_file, const std::string& key_file,
                                   const std::string& client_ca_file,
                                   const std::string& front_proxy_ca_file,
                                   std::shared_ptr<const auth::RequestHeaderOptions> request_header) {
  return enable_tls(cert_file, key_file, client_ca_file, front_proxy_ca_file,
                    std::move(request_header));
}

boost::system::error_code HttpServer::listen(const std::string& address, unsigned short port) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return ec;
  tcp::endpoint endpoint(addr, port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (ec) return ec;
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return ec;
  impl_->acceptor.bind(endpoint, ec);
  if (ec) return ec;
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  return ec;
}

void HttpServer::set_compute(asio::any_io_executor executor) { impl_->compute = std::move(executor); }

void HttpServer::set_low_priority(asio::io_context* low) { impl_->low_priority = low; }

void HttpServer::start() {
  asio::co_spawn(impl_->acceptor.get_executor(), impl_->accept_loop(),
                 [](std::exception_ptr e) { log_task_failure(e, "accept loop"); });
}

void HttpServer::stop() {
  asio::post(impl_->acceptor.get_executor(), [impl = impl_] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

void HttpServer::drain() {
  impl_->draining = true;
  std::vector<std::shared_ptr<Impl::Waiting>> all;
  {
    std::lock_guard lock(impl_->connections_mutex);
    for (auto& [id, weak] : impl_->connections) {
      if (auto w = weak.lock()) all.push_back(std::move(w));
    }
  }
  for (auto& w : all) {
    // On the connection's strand: only one waiting for a request with nothing of it read yet
    // (the parser may have consumed a start line already).
    asio::post(w->strand, [w] {
      if (w->on_drain) {
        w->on_drain();
        return;
      }
      if (w->between_requests && w->buffer->size() == 0 && !w->parser->got_some()) w->close();
    });
  }
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->connections_mutex);
  return impl_->connections.size() + impl_->streams.load();
}

unsigned short HttpServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

}  // namespace kwatch::server
