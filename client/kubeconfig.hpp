// kubeconfig files as kubectl and client-go read them: clusters, users and contexts by name, the
// current context (or one asked for), certificates and keys from files or inline `*-data`
// (base64), a bearer token or a token file, `insecure-skip-tls-verify`, `tls-server-name`, the
// context's namespace. Several files (KUBECONFIG=a:b) merge as client-go merges them: the first
// file that names a cluster, user or context wins, and the first `current-context` set wins.
// Paths in a file are relative to that file's directory. What kwatch's client cannot do (exec
// and auth-provider plugins, proxies) is refused with an error naming it, never ignored.
//
// Pure functions, except that loading reads files; safe from any thread.
#pragma once

#include <boost/system/result.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::client {

// The connection one context describes, everything resolved (file contents read).
struct ClientConfig {
  ClientConfig() = default;  // not an aggregate: a std::string must not convert to one
  std::string context;
  std::string cluster;
  std::string user;
  std::string server;           // https://host:port (or http://)
  std::string tls_server_name;  // to verify instead of the server's host; "" for the host
  bool insecure_skip_tls_verify = false;
  std::string ca_pem;           // certificate-authority(-data); "" for the system's roots
  std::string client_cert_pem;  // client-certificate(-data)
  std::string client_key_pem;   // client-key(-data)
  std::string token;            // token, or the token file's contents (trimmed)
  std::string token_file;       // kept so a long-running client can read a rotated token again
  std::string username;         // basic auth (kube-apiserver no longer accepts it; kept for
  std::string password;         // servers that do)
  std::string ns = "default";   // the context's namespace
};

using ConfigResult = boost::system::result<ClientConfig, std::string>;

// From kubeconfig text; `base_dir` resolves relative paths, `context` "" for current-context.
ConfigResult parse_kubeconfig(std::string_view text, const std::string& base_dir,
                              const std::string& context = "");
// From files merged in order (KUBECONFIG's list).
ConfigResult load_kubeconfig(const std::vector<std::string>& files, const std::string& context = "");
// As kubectl finds it: $KUBECONFIG (colon-separated), else ~/.kube/config.
ConfigResult load_default_kubeconfig(const std::string& context = "");

}  // namespace kwatch::client
