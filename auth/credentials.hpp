// What a request carries to say who it is and whom it acts as, read from its head by the
// transport: the client certificate checked during the TLS handshake, the Authorization header,
// and the Impersonate-* headers (kubectl --as). Value types.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kwatch::auth {

// The certificate a TLS client presented (only asked for when --client-ca-file is set), checked
// once per connection: the user it names (CN, groups from O) or why it cannot be trusted.
struct ClientCertificate {
  std::string error;  // empty: verified against the client CA, valid now, usable for client auth
  std::string user;   // subject CN
  std::vector<std::string> groups;  // subject O, in order
};

struct Credentials {
  std::string authorization = {};  // the Authorization header
  std::shared_ptr<const ClientCertificate> client_certificate = {};  // null: none presented
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
