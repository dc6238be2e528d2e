// The trust an API server publishes for extension API servers in the ConfigMap
// kube-system/extension-apiserver-authentication, in kube's keys: the client CA
// (`client-ca-file`), the request header CA (`requestheader-client-ca-file`) and the request
// header settings (`requestheader-allowed-names`, `-username-headers`, `-uid-headers`,
// `-group-headers`, `-extra-headers-prefix`, each a JSON array of strings). kwatch writes it
// (controllers/extension_authentication.hpp) and, as an extension server, reads it from the
// server it delegates to (delegation/).
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace kwatch::auth {

struct ExtensionAuthentication {
  std::string client_ca_pem;         // "": none
  std::string requestheader_ca_pem;  // "": none
  std::vector<std::string> allowed_names, username_headers, uid_headers, group_headers,
      extra_headers_prefix;
};

inline constexpr const char* kExtensionAuthenticationName = "extension-apiserver-authentication";

// From the ConfigMap's `data`; a list that is not a JSON array of strings reads as empty.
ExtensionAuthentication read_extension_authentication(const boost::json::object& data);

// A list as the ConfigMap keeps it: a JSON array of strings.
std::string json_string_list(const std::vector<std::string>& list);

}  // namespace kwatch::auth
