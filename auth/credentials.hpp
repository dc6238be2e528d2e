// What a request carries to say who it is and whom it acts as, read from its head by the
// transport: the client certificate checked during the TLS handshake, the Authorization header,
// and the Impersonate-* headers (kubectl --as). Value types.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::auth {

// --requestheader-*: who may name the user of a request in its headers (an aggregator, with a
// certificate from the request header CA), and in which headers.
struct RequestHeaderOptions {
  std::vector<std::string> allowed_names;     // the certificate's CN must be one (empty: any)
  std::vector<std::string> username_headers;  // the first non-empty one is the user
  std::vector<std::string> uid_headers;
  std::vector<std::string> group_headers;     // every value of each
  std::vector<std::string> extra_prefixes;    // <prefix><key>: extra[key] (lowercased, unescaped)
};

// The certificate a TLS client presented (only asked for when --client-ca-file is set), checked
// once per connection: the user it names (CN, groups from O) or why it cannot be trusted.
struct ClientCertificate {
  // Verified against --requestheader-client-ca-file (valid now, usable for client auth): a
  // front proxy (an aggregator) that names the user in request headers.
  bool front_proxy = false;
  // With front_proxy: the request header settings that came with the trust that verified it
  // (the server's TLS context's; null: the access options' own).
  std::shared_ptr<const RequestHeaderOptions> request_header;
  std::string error;  // empty: verified against the client CA, valid now, usable for client auth
  std::string user;   // subject CN
  std::vector<std::string> groups;  // subject O, in order
};

struct Credentials {
  std::string authorization = {};  // the Authorization header
  std::shared_ptr<const ClientCertificate> client_certificate = {};  // null: none presented
  // Every header of the request, kept only when a front proxy's certificate came with it (the
  // request header authenticator reads the user from them).
  std::vector<std::pair<std::string, std::string>> proxy_headers = {};
};

// Impersonate-User, Impersonate-Group (each header), Impersonate-Uid (kubectl --as, --as-group).
struct Impersonation {
  std::string user = {};
  std::vector<std::string> groups = {};
  std::string uid = {};
  // Impersonate-Extra-<key>: value, one pair per header value, the key lowercased and
  // percent-decoded as kube reads it.
  std::vector<std::pair<std::string, std::string>> extra = {};

  bool empty() const { return user.empty() && groups.empty() && uid.empty() && extra.empty(); }
};

}  // namespace kwatch::auth
