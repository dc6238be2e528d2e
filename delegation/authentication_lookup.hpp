// What an extension API server reads at start-up from the server it delegates to, as kube's
// delegating authentication does unless --authentication-skip-lookup: the ConfigMap
// kube-system/extension-apiserver-authentication (auth/extension_authentication.hpp), which
// says whose client certificates to trust and which front proxy may name users in headers.
#pragma once

#include "auth/extension_authentication.hpp"
#include "client/http_client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <string>

namespace kwatch::delegation {

// The published trust (empty when the server publishes none: no such ConfigMap), or why it
// could not be read, in kube's words when this server may not read it.
boost::asio::awaitable<boost::system::result<auth::ExtensionAuthentication, std::string>>
look_up_extension_authentication(client::HttpClient& client);

}  // namespace kwatch::delegation
