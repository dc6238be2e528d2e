// The HTTP front end: accepts connections and serves each on its own strand, HTTP/1.1 with
// keep-alive or (TLS, by ALPN) HTTP/2's streams, with size limits and timeouts, handing every
// request to the `ApiHandler`.
//
// Owned by main (or a test). Thread-safety: `listen` and `start` before the io_context runs;
// `stop` and `drain` from any thread. Cancellation: `stop` closes the acceptor; `drain` closes the
// connections that wait for a request and lets every other one close after its response (watch
// streams are ended by their cachers); what is left ends when the io_context stops.
#pragma once

#include "server/api_handler.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace kwatch::server {

struct HttpLimits {
  std::size_t max_body_bytes = 3 * 1024 * 1024;  // kube-apiserver's request limit
  std::size_t max_header_bytes = 64 * 1024;
  std::chrono::seconds read_timeout{60};   // idle keep-alive and slow request bodies
  std::chrono::seconds handshake_timeout{10};  // a TLS client that connects must finish soon
  std::chrono::seconds write_timeout{60};
  // Open connections (watches included) in all, and from one client address; one more is closed
  // as soon as it is accepted. 0: no cap. Behind a load balancer every client shares its
  // address: leave the per-address cap off there, or above what the balancer carries.
  std::size_t max_connections = 0;
  std::size_t max_connections_per_address = 0;
  // HTTP/2 on the secure port, by ALPN (clients that offer only HTTP/1.1 get it), with this
  // many concurrent streams per connection (--http2-max-streams-per-connection).
  bool http2 = true;
  std::uint32_t http2_max_streams = 100;
};

class HttpServer {
 public:
  // Watches stream from `delivery`'s threads when given (a connection that becomes a watch moves
  // there), else from the I/O threads that serve requests.
  HttpServer(boost::asio::io_context& ioc, std::shared_ptr<ApiHandler> handler, HttpLimits limits,
             boost::asio::io_context* delivery = nullptr);
  ~HttpServer();

  // Serves HTTPS instead of plain HTTP: TLS 1.2+, the certificate chain and key from these PEM
  // files, h2 (when HttpLimits::http2) or HTTP/1.1 by ALPN. With `client_ca_file` (PEM bundle), clients are asked for a
  // certificate, checked against it and named in each request (ApiRequest::credentials).
  // With `front_proxy_ca_file` (--requestheader-client-ca-file), a certificate it verifies is a
  // front proxy's (auth::ClientCertificate::front_proxy) and the request's headers are kept
  // for the request header authenticator.
  // `request_header`: the settings a front proxy verified by that CA is read with (null: the
  // handler's access options').
  // Call before `start`. Returns an error message, or "" on success.
  std::string enable_tls(const std::string& cert_file, const std::string& key_file,
                         const std::string& client_ca_file,
                         const std::string& front_proxy_ca_file = "",
                         std::shared_ptr<const auth::RequestHeaderOptions> request_header = {});
  // The same, read again while serving (a CA bundle that changed): connections accepted from
  // now on use the new context, open ones keep theirs. On an error the old context stays.
  std::string reload_tls(const std::string& cert_file, const std::string& key_file,
                         const std::string& client_ca_file, const std::string& front_proxy_ca_file,
                         std::shared_ptr<const auth::RequestHeaderOptions> request_header);

  // Binds and listens; port 0 picks a free port (see `port()`).
  boost::system::error_code listen(const std::string& address, unsigned short port);
  // Where large responses are compressed (gzip for clients that accept it), off the I/O
  // threads; unset: on the connection's own thread. Before start().
  void set_compute(boost::asio::any_io_executor executor);
  // Where connections go whose answers are marked low_cpu_priority (threads of a lower OS
  // priority run it); unset: every answer is written where its request was read. Before start().
  void set_low_priority(boost::asio::io_context* low);
  void start();
  void stop();
  // Graceful shutdown: from now on every response closes its connection ("Connection: close"),
  // and connections waiting for their next request are closed (at once, or as soon as they get
  // there). Requests being read or served finish.
  void drain();
  // Connections still open (reading or serving a request, or waiting for one) and watch streams.
  std::size_t open_connections() const;
  unsigned short port() const;

  // The connections' machinery (server/http_server_impl.hpp), named here for the transport's
  // unit tests, which drive it over Beast's test stream.
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kwatch::server
