// The way to extension API servers, as kube-aggregator's proxy handler takes it: the remote
// APIService (one with spec.service) that serves a group/version, read from the APIService watch
// cache per request; its Service resolved to a ready endpoint (registry/service_endpoints.hpp:
// loopback and link-local endpoints refused unless a development switch allows them); TLS to
// "<service>.<namespace>.svc" verified against its caBundle (or not, with insecureSkipTLSVerify),
// presenting the proxy client certificate (--proxy-client-cert-file/--proxy-client-key-file);
// and the user of the request in X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra-<key> (escaped as client-go escapes it), any such header from the client
// dropped first.
//
// Thread-safety: every member may be called from any thread (the clients are kept under a lock).
#pragma once

#include "apimachinery/user_info.hpp"
#include "client/http_client.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kwatch::kinds {
class Scheme;
}
namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::aggregator {

// The reason of a forward() error whose Service could not be resolved to an endpoint.
inline constexpr const char* kUnresolved = "ServiceUnavailable";

struct ProxyOptions {
  std::string client_cert_pem;  // --proxy-client-cert-file's content ("": none presented)
  std::string client_key_pem;   // --proxy-client-key-file's
  bool allow_loopback = false;  // --unsafe-webhook-loopback-endpoints (tests only)
};

// A remote APIService in force.
struct RemoteApiService {
  std::string name;  // "v1beta1.metrics.k8s.io"
  std::string group, version;
  bool available = false;  // its Available condition is True
  std::string ns, service;
  int port = 443;
  std::string ca_pem;  // spec.caBundle decoded
  bool insecure = false;
  std::string resource_version;  // of the APIService: a changed one gets a new client
  int group_priority_minimum = 0;
  int version_priority = 0;
  // The extension server's APIResourceList for this group/version, as the last discovery check
  // that passed read it (none yet: null).
  std::shared_ptr<const boost::json::object> resources;
  // What its /openapi/v2 says of this group: {"definitions": ..., "paths": ...}, the paths under
  // /apis/<group>/ (none read yet: null), for kube's merge into this server's /openapi/v2.
  std::shared_ptr<const boost::json::object> openapi_v2;
};

// The largest WebSocket message of an extension server relayed to a client (16 MiB, the size of
// the answers the proxy buffers); a larger one ends the stream.
inline constexpr std::size_t kMaxRelayedMessageBytes = 16u << 20;

class ApiServiceProxy {
 public:
  ApiServiceProxy(std::shared_ptr<const kinds::Scheme> scheme,
                  std::shared_ptr<const registry::CacherRegistry> cachers,
                  boost::asio::any_io_executor executor, ProxyOptions options);

  // The remote APIService of `group`/`version` ("" for the core group); nullopt when there is
  // none or it is local (served here).
  std::optional<RemoteApiService> find(std::string_view group, std::string_view version) const;
  // Every remote APIService (for the availability controller).
  std::vector<RemoteApiService> remote() const;

  // `request` passed to `target`'s extension server as `user` would send it; the answer's head,
  // then its body as it comes. An error when the Service cannot be resolved (reason
  // kUnresolved, the message kube's words) or the server cannot be reached.
  boost::asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedResponse>>> forward(
      const RemoteApiService& target, const apimachinery::UserInfo& user,
      client::ForwardedRequest request) const;
  // The availability controller's discovery GET, as kube's makes it: the extension's
  // certificate not verified (whoever owns the network can only spoil a status), 5 s at most.
  boost::asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedResponse>>>
  forward_discovery_check(const RemoteApiService& target, const apimachinery::UserInfo& user,
                          client::ForwardedRequest request) const;
  // The same for a WebSocket upgrade: the handshake's answer, then the server's messages.
  boost::asio::awaitable<client::ApiResult<std::unique_ptr<client::ForwardedSocket>>>
  forward_websocket(const RemoteApiService& target, const apimachinery::UserInfo& user,
                    client::ForwardedRequest request) const;

  // What the availability controller's last passing discovery check of APIService `name` read
  // (its APIResourceList), for discovery to list the extension's resources.
  void remember_resources(const std::string& name, boost::json::object resource_list) const;
  // The same for its /openapi/v2 (RemoteApiService::openapi_v2), kept as it was when nothing
  // changed; and whether it is time to read it again (never, or not for a minute), which
  // counts as starting to read it: one read at a time per APIService.
  void remember_openapi_v2(const std::string& name, boost::json::object spec) const;
  bool claim_openapi_v2_read(const std::string& name) const;

  const ProxyOptions& options() const { return options_; }

 private:
  // `check`: the discovery check's client (no certificate check, a 5 s timeout).
  std::shared_ptr<client::HttpClient> client_for(const RemoteApiService& target,
                                                 std::string& error, bool check = false) const;
  // The client for `target`, `request`'s headers made the proxy's: the caller's identity
  // headers dropped, `user` in X-Remote-*. Null when the Service cannot be resolved (`error`).
  std::shared_ptr<client::HttpClient> prepare(const RemoteApiService& target,
                                              const apimachinery::UserInfo& user,
                                              client::ForwardedRequest& request,
                                              client::ApiError& error, bool check = false) const;
  // The remote APIServices by name, as of the APIService cache's revision `revision`: rebuilt
  // only when the cache has moved, so that a request for a group served here costs a lookup.
  struct Snapshot {
    std::int64_t revision = -1;
    std::map<std::string, RemoteApiService, std::less<>> by_name;
  };
  std::shared_ptr<const Snapshot> snapshot() const;
  mutable std::shared_ptr<const Snapshot> snapshot_;  // under mutex_

  std::shared_ptr<const kinds::Scheme> scheme_;
  std::shared_ptr<const registry::CacherRegistry> cachers_;
  boost::asio::any_io_executor executor_;
  ProxyOptions options_;
  mutable std::mutex mutex_;
  // "<name>|<resourceVersion>|<address>" -> its client; bounded.
  mutable std::map<std::string, std::shared_ptr<client::HttpClient>> clients_;
  // APIService name -> its extension's APIResourceList (under mutex_).
  mutable std::map<std::string, std::shared_ptr<const boost::json::object>> resources_;
  // APIService name -> what its /openapi/v2 says of its group, and when it was read.
  struct ReadSpec {
    std::shared_ptr<const boost::json::object> spec;
    std::chrono::steady_clock::time_point read;
  };
  mutable std::map<std::string, ReadSpec> openapi_v2_;
  void attach_resources(RemoteApiService& r) const;
};

// X-Remote-Extra-<key>'s key as client-go writes it: every byte that is not an RFC 7230 token
// character, and '%', as %XX.
std::string escape_extra_key(std::string_view key);

}  // namespace kwatch::aggregator
