// Requests for the group/versions of remote APIServices, as kube-aggregator's proxy handler
// serves them: authorized here like any request (a resource request by its RequestInfo from the
// path, discovery by its path), answered 503 "service unavailable" while the APIService is not
// Available, else passed to the extension server (aggregator/api_service_proxy.hpp: its
// endpoint, TLS, the user in X-Remote-* headers) and its answer passed back: whole when it
// says its length (up to kMaxBufferedBytes), else streamed piece by piece (a watch).
//
// Headers pass both ways as kube's proxy passes them: the client's, but for the credentials
// and impersonation kwatch consumed and the connection's own (ApiRequest::other_headers); the
// extension's, but for the connection's own, with its Warning headers as warnings.

#include "server/api_handler.hpp"

#include "aggregator/api_service_proxy.hpp"
#include "base/ascii.hpp"
#include "server/request_info.hpp"
#include "server/request_options.hpp"
#include "server/responses.hpp"

#include <boost/asio/this_coro.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace kwatch::server {

namespace asio = boost::asio;
using apimachinery::ApiError;
using base::Errc;
using base::iequals;

namespace {

// An answer that says its length up to this is read whole and sent as one response.
constexpr std::size_t kMaxBufferedBytes = 16u << 20;

// The extension server's response headers that describe its connection or its framing, which
// kwatch's own answer replaces.
bool connection_header(std::string_view name) {
  for (std::string_view h : {"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection",
                             "TE", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length",
                             "Content-Type", "Date", "Server"}) {
    if (iequals(name, h)) return true;
  }
  return false;
}

// A `Warning: 299 - "text"` header's text (kube's and client-go's form), unescaped; nullopt for
// any other form, which clients ignore.
std::optional<std::string> warning_text(std::string_view value) {
  constexpr std::string_view kHead = "299 - \"";
  if (!value.starts_with(kHead) || value.size() < kHead.size() + 1 || !value.ends_with('"')) {
    return std::nullopt;
  }
  const std::string_view quoted = value.substr(kHead.size(), value.size() - kHead.size() - 1);
  std::string text;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    if (quoted[i] == '\\' && i + 1 < quoted.size()) ++i;
    text += quoted[i];
  }
  return text;
}

// The extension's headers onto kwatch's answer `r`.
void pass_headers_back(const std::vector<std::pair<std::string, std::string>>& headers,
                       ApiResponse& r) {
  for (const auto& [name, value] : headers) {
    if (connection_header(name)) continue;
    if (iequals(name, "Warning")) {
      if (auto text = warning_text(value)) r.warnings.push_back(std::move(*text));
      continue;
    }
    r.headers[name] = value;
  }
}

// kube's http.Error: plain text and a newline.
ApiResponse plain_error(unsigned status, std::string text) {
  return text_response(status, std::move(text) + "\n", "text/plain; charset=utf-8");
}

}  // namespace

std::optional<aggregator::RemoteApiService> ApiHandler::aggregated_target(
    const Exchange& ex) const {
  const auto& seg = ex.url.segments;
  if (!proxy_ || seg.size() < 3 || seg[0] != "apis") return std::nullopt;
  return proxy_->find(seg[1], seg[2]);
}

asio::awaitable<ApiResponse> ApiHandler::serve_aggregated(
    Exchange& ex, const aggregator::RemoteApiService& remote) {
  const auto& seg = ex.url.segments;
  const aggregator::RemoteApiService* target = &remote;
  const ApiRequest& request = ex.request;
  // /apis/<group>/<version> itself was authorized as a path (authorize_path); below it, as a
  // resource request of the extension's resources.
  if (seg.size() > 3 && (auth::authorizes(access_) || ex.audit)) {
    auto info = parse_request_info(seg);
    if (!info) co_return plain_error(404, "404 page not found");
    auth::RequestAttributes a;
    a.user = ex.route.user;
    a.api_group = info->group;
    a.api_version = seg[2];
    a.resource = info->resource;
    a.subresource = info->subresource;
    a.namespace_ = info->ns;
    a.name = info->name;
    const bool watch = info->watch_prefix || truthy(ex.url.param("watch"));
    a.verb = resource_verb(request.method, !info->name.empty(), watch);
    ex.route.verb = a.verb;
    std::string version = seg[2];
    auto denied =
        co_await authorize_and_audit(access_, ex.audit, std::move(version), std::move(a),
                                     ex.request.admitted.get());
    if (denied) co_return error_response(*denied);
  }
  if (request.body_withheld) {
    co_return error_response(
        ApiError(Errc::forbidden, "the request was refused before its body was read"));
  }
  co_return co_await pass_to(*target, ex);
}

asio::awaitable<ApiResponse> ApiHandler::pass_to(const aggregator::RemoteApiService& remote,
                                                 Exchange& ex) {
  const ApiRequest& request = ex.request;
  const aggregator::RemoteApiService* target = &remote;
  if (!target->available) co_return plain_error(503, "service unavailable");
  if (request.websocket) co_return co_await pass_websocket_to(*target, ex);
  client::ForwardedRequest forwarded;
  forwarded.method = request.method;
  forwarded.target = request.target;
  if (!request.accept.empty()) forwarded.headers.emplace_back("Accept", request.accept);
  if (!request.content_type.empty()) {
    forwarded.headers.emplace_back("Content-Type", request.content_type);
  }
  if (!request.user_agent.empty()) forwarded.headers.emplace_back("User-Agent", request.user_agent);
  for (const auto& h : request.other_headers) forwarded.headers.push_back(h);
  forwarded.body = request.body;
  auto answer = co_await proxy_->forward(*target, ex.route.user, std::move(forwarded));
  if (!answer) {
    // kube: an endpoint that cannot be resolved is 503 "service unavailable" (the reason only
    // logged); a transport failure is 503 with its text.
    spdlog::warn("proxying {} to APIService {}: {}", request.target, target->name,
                 answer.error().message);
    if (answer.error().reason == aggregator::kUnresolved) {
      co_return plain_error(503, "service unavailable");
    }
    co_return plain_error(503, answer.error().message);
  }
  std::shared_ptr<client::ForwardedResponse> upstream = std::move(*answer);
  ApiResponse r;
  r.status = upstream->status;
  r.content_type.clear();
  std::optional<std::size_t> length;
  bool chunked = false;
  for (const auto& [name, value] : upstream->headers) {
    if (iequals(name, "Content-Type")) {
      r.content_type = value;
    } else if (iequals(name, "Content-Length")) {
      std::size_t n = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec == std::errc() && p == value.data() + value.size()) length = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      chunked = true;
    }
  }
  pass_headers_back(upstream->headers, r);
  const bool redirect = std::any_of(r.headers.begin(), r.headers.end(), [](const auto& h) {
    return iequals(h.first, "Location");
  });
  if (r.status >= 300 && r.status < 400 && redirect) {
    // kube's --aggregator-reject-forwarding-redirect (on by default).
    upstream->close();
    co_return plain_error(502, "the backend attempted to redirect this request, which is not "
                                 "permitted");
  }
  if (!chunked && length && *length <= kMaxBufferedBytes) {
    std::string body;
    body.reserve(*length);
    for (;;) {
      auto piece = co_await upstream->next();
      if (!piece) co_return plain_error(503, piece.error().message);
      if (!*piece) break;
      body += **piece;
      if (body.size() > kMaxBufferedBytes) break;
    }
    upstream->close();
    r.body = std::move(body);
    co_return r;
  }
  // Streamed: a watch, or an answer too large to hold.
  r.streaming = true;
  r.body_source = std::make_shared<ApiResponse::BodySource>();
  r.body_source->cancel = [weak = std::weak_ptr<client::ForwardedResponse>(upstream)] {
    if (auto u = weak.lock()) u->close();
  };
  r.body_source->next = [upstream]() -> asio::awaitable<std::optional<std::string>> {
    auto piece = co_await upstream->next();
    if (!piece || !*piece) {
      upstream->close();
      co_return std::nullopt;
    }
    co_return std::move(**piece);
  };
  co_return r;
}

// A WebSocket upgrade, as kube's proxy passes one: the extension server's handshake first (the
// client's subprotocols offered, the one it picks answered), a refusal passed back as it came;
// once upgraded, its messages relayed whole to the client and the client's to it.
asio::awaitable<ApiResponse> ApiHandler::pass_websocket_to(
    const aggregator::RemoteApiService& remote, Exchange& ex) {
  const ApiRequest& request = ex.request;
  client::ForwardedRequest forwarded;
  forwarded.method = "GET";
  forwarded.target = request.target;
  if (!request.websocket_protocol.empty()) {
    forwarded.headers.emplace_back("Sec-WebSocket-Protocol", request.websocket_protocol);
  }
  if (!request.accept.empty()) forwarded.headers.emplace_back("Accept", request.accept);
  if (!request.user_agent.empty()) forwarded.headers.emplace_back("User-Agent", request.user_agent);
  for (const auto& h : request.other_headers) forwarded.headers.push_back(h);
  auto answer = co_await proxy_->forward_websocket(remote, ex.route.user, std::move(forwarded));
  if (!answer) {
    spdlog::warn("proxying {} (WebSocket) to APIService {}: {}", request.target, remote.name,
                 answer.error().message);
    if (answer.error().reason == aggregator::kUnresolved) {
      co_return plain_error(503, "service unavailable");
    }
    co_return plain_error(503, answer.error().message);
  }
  std::shared_ptr<client::ForwardedSocket> upstream = std::move(*answer);
  ApiResponse r;
  r.status = upstream->status;
  r.content_type.clear();
  for (const auto& [name, value] : upstream->headers) {
    if (iequals(name, "Content-Type")) {
      r.content_type = value;
    } else if (iequals(name, "Warning")) {
      if (auto text = warning_text(value)) r.warnings.push_back(std::move(*text));
    } else if (iequals(name, "Sec-WebSocket-Protocol") || iequals(name, "Retry-After")) {
      r.headers[name] = value;
    }
  }
  if (upstream->status != 101) {
    if (r.status >= 300 && r.status < 400) {
      co_return plain_error(502, "the backend attempted to redirect this request, which is not "
                                   "permitted");
    }
    r.body = std::move(upstream->body);
    co_return r;
  }
  r.status = 200;  // the client's own handshake answers 101
  r.streaming = true;
  r.body_source = std::make_shared<ApiResponse::BodySource>();
  r.body_source->cancel = [weak = std::weak_ptr<client::ForwardedSocket>(upstream)] {
    if (auto u = weak.lock()) u->close();
  };
  r.body_source->next = [upstream, source = std::weak_ptr<ApiResponse::BodySource>(
                                        r.body_source)]() -> asio::awaitable<std::optional<std::string>> {
    auto message = co_await upstream->next();
    if (!message || !*message) {
      upstream->close();
      co_return std::nullopt;
    }
    if (auto s = source.lock()) s->binary = (*message)->binary;
    co_return std::move((*message)->data);
  };
  // The client's messages go to the extension (a console, a port forward), as kube's proxy
  // passes both directions.
  r.body_source->send = [upstream](bool binary, std::string data) -> asio::awaitable<bool> {
    client::ForwardedSocket::Message m;
    m.binary = binary;
    m.data = std::move(data);
    auto sent = co_await upstream->send(std::move(m));
    co_return sent.has_value();
  };
  co_return r;
}

}  // namespace kwatch::server
