#include "aggregator/api_service_proxy.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/service_endpoints.hpp"
#include "watch/cacher.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/ascii.hpp"
#include "base/base64.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>

namespace kwatch::aggregator {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

std::optional<RemoteApiService> remote_of(const json::object& service) {
  const json::object* spec = object_member(service, "spec");
  const json::object* target = object_member(spec, "service");
  if (target == nullptr) return std::nullopt;
  RemoteApiService r;
  const json::object* meta = object_member(service, "metadata");
  r.name = string_at(meta, "name");
  r.resource_version = string_at(meta, "resourceVersion");
  r.group = string_at(spec, "group");
  r.version = string_at(spec, "version");
  r.ns = string_at(target, "namespace");
  r.service = string_at(target, "name");
  if (const json::value* p = target->if_contains("port"); p != nullptr && p->is_int64()) {
    r.port = static_cast<int>(p->get_int64());
  }
  if (auto ca = base::base64_decode(string_at(spec, "caBundle"))) r.ca_pem = std::move(*ca);
  if (const json::value* p = spec->if_contains("groupPriorityMinimum"); p && p->is_int64()) {
    r.group_priority_minimum = static_cast<int>(p->get_int64());
  }
  if (const json::value* p = spec->if_contains("versionPriority"); p && p->is_int64()) {
    r.version_priority = static_cast<int>(p->get_int64());
  }
  const json::value* skip = spec->if_contains("insecureSkipTLSVerify");
  r.insecure = skip != nullptr && skip->is_bool() && skip->get_bool();
  if (const json::array* conditions =
          apimachinery::array_member(object_member(service, "status"), "conditions")) {
    for (const auto& c : *conditions) {
      const json::object* co = c.if_object();
      if (string_at(co, "type") == "Available") r.available = string_at(co, "status") == "True";
    }
  }
  return r;
}

bool token_char(unsigned char c) {
  if (std::isalnum(c) != 0) return true;
  switch (c) {
    case '!': case '#': case '$': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

// Headers a proxy does not pass on: hop-by-hop ones, the client's credentials (the extension
// server trusts the proxy's certificate and the identity headers instead) and any identity or
// impersonation header the client sent itself.
bool dropped(std::string_view name) {
  for (std::string_view hop : {"Connection", "Keep-Alive", "Proxy-Authorization",
                               "Proxy-Authenticate", "TE", "Trailer", "Transfer-Encoding",
                               "Upgrade", "Host", "Content-Length", "Authorization"}) {
    if (base::iequals(name, hop)) return true;
  }
  return base::istarts_with(name, "Impersonate-") || base::istarts_with(name, "X-Remote-");
}

}  // namespace

std::string escape_extra_key(std::string_view key) {
  return base::percent_encode(key, [](unsigned char c) { return token_char(c) && c != '%'; });
}

ApiServiceProxy::ApiServiceProxy(std::shared_ptr<const kinds::Scheme> scheme,
                                 std::shared_ptr<const registry::CacherRegistry> cachers,
                                 asio::any_io_executor executor, ProxyOptions options)
    : scheme_(std::move(scheme)),
      cachers_(std::move(cachers)),
      executor_(std::move(executor)),
      options_(std::move(options)) {}

std::shared_ptr<const ApiServiceProxy::Snapshot> ApiServiceProxy::snapshot() const {
  auto info = scheme_->find("apiregistration.k8s.io", "v1", "apiservices");
  auto cacher = info ? cachers_->find(*info) : nullptr;
  if (!cacher) return std::make_shared<const Snapshot>();
  const std::int64_t revision = cacher->resource_version();
  {
    std::lock_guard lock(mutex_);
    if (snapshot_ && snapshot_->revision == revision) return snapshot_;
  }
  auto fresh = std::make_shared<Snapshot>();
  fresh->revision = revision;
  for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (!parsed || !parsed->is_object()) continue;
    if (auto r = remote_of(parsed->get_object())) fresh->by_name.emplace(r->name, std::move(*r));
  }
  std::lock_guard lock(mutex_);
  snapshot_ = fresh;
  return fresh;
}

std::optional<RemoteApiService> ApiServiceProxy::find(std::string_view group,
                                                      std::string_view version) const {
  auto current = snapshot();
  if (current->by_name.empty()) return std::nullopt;
  const std::string name = std::string(version) + "." + std::string(group);
  auto it = current->by_name.find(name);
  if (it == current->by_name.end()) return std::nullopt;
  RemoteApiService r = it->second;
  attach_resources(r);
  return r;
}

void ApiServiceProxy::attach_resources(RemoteApiService& r) const {
  std::lock_guard lock(mutex_);
  if (auto it = resources_.find(r.name); it != resources_.end()) r.resources = it->second;
  if (auto it = openapi_v2_.find(r.name); it != openapi_v2_.end()) r.openapi_v2 = it->second.spec;
}

void ApiServiceProxy::remember_openapi_v2(const std::string& name, json::object spec) const {
  std::lock_guard lock(mutex_);
  ReadSpec& kept = openapi_v2_[name];
  // The same spec keeps its identity: the merged document is not made again.
  if (!kept.spec || *kept.spec != spec) kept.spec = std::make_shared<const json::object>(std::move(spec));
}

bool ApiServiceProxy::claim_openapi_v2_read(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  auto [it, added] = openapi_v2_.try_emplace(name);
  if (!added && now - it->second.read < std::chrono::minutes(1)) return false;
  it->second.read = now;
  return true;
}

void ApiServiceProxy::remember_resources(const std::string& name,
                                         json::object resource_list) const {
  auto shared = std::make_shared<const json::object>(std::move(resource_list));
  std::lock_guard lock(mutex_);
  resources_[name] = std::move(shared);
}

std::vector<RemoteApiService> ApiServiceProxy::remote() const {
  std::vector<RemoteApiService> out;
  for (const auto& [name, r] : snapshot()->by_name) {
    out.push_back(r);
    attach_resources(out.back());
  }
  return out;
}

std::shared_ptr<client::HttpClient> ApiServiceProxy::client_for(const RemoteApiService& target,
                                                                std::string& error,
                                                                bool check) const {
  const registry::ServiceEndpoint where = registry::resolve_service_endpoint(
      *scheme_, cachers_.get(), target.ns, target.service, target.port, options_.allow_loopback);
  if (!where.error.empty()) {
    error = where.error;
    return nullptr;
  }
  const std::string key = target.name + "|" + target.resource_version + "|" + where.address +
                          (check ? "|check" : "");
  std::lock_guard lock(mutex_);
  if (auto it = clients_.find(key); it != clients_.end()) return it->second;
  client::ClientConfig config;
  config.server = "https://" + where.address;
  config.tls_server_name = target.service + "." + target.ns + ".svc";
  if (!check) config.ca_pem = target.ca_pem;
  config.insecure_skip_tls_verify = target.insecure || check;
  config.client_cert_pem = options_.client_cert_pem;
  config.client_key_pem = options_.client_key_pem;
  client::HttpClient::Options client_options;
  client_options.user_agent = "kube-aggregator";
  client_options.request_timeout = check ? std::chrono::seconds(5) : std::chrono::seconds(30);
  // A relayed WebSocket message is held whole: as large as an answer kwatch buffers, no larger
  // (other answers stream through and are not bounded by it).
  client_options.max_response_bytes = kMaxRelayedMessageBytes;
  auto made = client::HttpClient::create(executor_, std::move(config), client_options);
  if (!made) {
    error = made.error();
    return nullptr;
  }
  if (clients_.size() >= 256) clients_.clear();  // APIServices and endpoints change: bounded
  clients_.emplace(key, *made);
  return *made;
}

std::shared_ptr<client::HttpClient> ApiServiceProxy::prepare(const RemoteApiService& target,
                                                             const apimachinery::UserInfo& user,
                                                             client::ForwardedRequest& request,
                                                             client::ApiError& error,
                                                             bool check) const {
  std::string why;
  std::shared_ptr<client::HttpClient> client = client_for(target, why, check);
  if (!client) {
    error.kind = client::ApiError::Kind::transport;
    error.reason = kUnresolved;
    error.message = why;
    return nullptr;
  }
  std::erase_if(request.headers, [](const auto& h) { return dropped(h.first); });
  request.headers.emplace_back("X-Remote-User", user.name);
  if (!user.uid.empty()) request.headers.emplace_back("X-Remote-Uid", user.uid);
  for (const auto& g : user.groups) request.headers.emplace_back("X-Remote-Group", g);
  for (const auto& [key, values] : user.extra) {
    for (const auto& v : values) {
      request.headers.emplace_back("X-Remote-Extra-" + escape_extra_key(key), v);
    }
  }
  return client;
}

asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedResponse>>>
ApiServiceProxy::forward(const RemoteApiService& target, const apimachinery::UserInfo& user,
                         client::ForwardedRequest request) const {
  client::ApiError error;
  auto client = prepare(target, user, request, error);
  if (!client) co_return error;
  co_return co_await client->forward(std::move(request));
}

asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedResponse>>>
ApiServiceProxy::forward_discovery_check(const RemoteApiService& target,
                                         const apimachinery::UserInfo& user,
                                         client::ForwardedRequest request) const {
  client::ApiError error;
  auto client = prepare(target, user, request, error, /*check=*/true);
  if (!client) co_return error;
  co_return co_await client->forward(std::move(request));
}

asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedSocket>>>
ApiServiceProxy::forward_websocket(const RemoteApiService& target,
                                   const apimachinery::UserInfo& user,
                                   client::ForwardedRequest request) const {
  client::ApiError error;
  auto client = prepare(target, user, request, error);
  if (!client) co_return error;
  co_return co_await client->forward_websocket(std::move(request));
}

}  // namespace kwatch::aggregator
