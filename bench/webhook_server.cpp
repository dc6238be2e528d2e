// An admission and conversion webhook for benchmarks: HTTPS (Beast + OpenSSL), keep-alive, one
// thread, answering every review at once so that a benchmark measures the API server, not the
// webhook. `/mutate...` answers with a JSONPatch that sets a label; `/convert...` answers a
// ConversionReview with each object in the desired version (apiVersion changed, nothing else);
// any other POST allows. `GET /stats` answers {"converted": objects converted so far}.
//
//   kwatch-bench-webhook --cert FILE --key FILE --port-file FILE
//
// Listens on 127.0.0.1 on a free port, which it writes to --port-file once listening.
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

// base64 of [{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]
constexpr const char* kPatch =
    "W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7Im11dGF0ZWQiOiJ5ZXMifX1d";

std::uint64_t converted = 0;  // one thread: no lock

std::string convert(json::value review) {
  json::object& request = review.as_object()["request"].as_object();
  json::array objects = std::move(request["objects"].as_array());
  const json::value desired = request["desiredAPIVersion"];
  for (auto& o : objects) o.as_object()["apiVersion"] = desired;
  converted += objects.size();
  return json::serialize(json::object{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "ConversionReview"},
      {"response", json::object{{"uid", request["uid"]},
                                {"result", json::object{{"status", "Success"}}},
                                {"convertedObjects", std::move(objects)}}}});
}

std::string answer(std::string_view target, const std::string& body) {
  boost::system::error_code ec;
  const json::value review = json::parse(body, ec);
  if (target.starts_with("/stats")) {
    return json::serialize(json::object{{"converted", converted}});
  }
  if (target.starts_with("/convert") && !ec) return convert(review);
  std::string uid;
  if (!ec && review.is_object()) {
    if (const auto* request = review.as_object().if_contains("request")) {
      if (const auto* u = request->is_object() ? request->as_object().if_contains("uid") : nullptr) {
        if (u->is_string()) uid = u->as_string().c_str();
      }
    }
  }
  json::object response{{"uid", uid}, {"allowed", true}};
  if (target.starts_with("/mutate")) {
    response["patch"] = kPatch;
    response["patchType"] = "JSONPatch";
  }
  return json::serialize(json::object{{"apiVersion", "admission.k8s.io/v1"},
                                      {"kind", "AdmissionReview"},
                                      {"response", std::move(response)}});
}

asio::awaitable<void> serve(beast::ssl_stream<beast::tcp_stream> stream) {
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::server,
                                               asio::as_tuple(asio::use_awaitable));
  if (hec) co_return;
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> req;
    auto [rec, n] = co_await http::async_read(stream, buffer, req,
                                              asio::as_tuple(asio::use_awaitable));
    if (rec) co_return;
    http::response<http::string_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "application/json");
    res.body() = answer(req.target(), req.body());
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res.keep_alive()) co_return;
  }
}

asio::awaitable<void> listen(tcp::acceptor acceptor, ssl::context& tls) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) continue;
    socket.set_option(tcp::no_delay(true));
    asio::co_spawn(acceptor.get_executor(),
                   serve(beast::ssl_stream<beast::tcp_stream>(std::move(socket), tls)),
                   asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string cert, key, port_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--cert") cert = argv[i + 1];
    if (flag == "--key") key = argv[i + 1];
    if (flag == "--port-file") port_file = argv[i + 1];
  }
  if (cert.empty() || key.empty() || port_file.empty()) {
    std::cerr << "usage: kwatch-bench-webhook --cert FILE --key FILE --port-file FILE\n";
    return 2;
  }
  asio::io_context ioc(1);
  ssl::context tls(ssl::context::tls_server);
  tls.use_certificate_chain_file(cert);
  tls.use_private_key_file(key, ssl::context::pem);
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  std::ofstream(port_file) << acceptor.local_endpoint().port() << "\n";
  asio::co_spawn(ioc, listen(std::move(acceptor), tls), asio::detached);
  ioc.run();
  return 0;
}
