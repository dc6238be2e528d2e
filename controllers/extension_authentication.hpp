// What kube-apiserver publishes for extension API servers in the ConfigMap
// kube-system/extension-apiserver-authentication: the client CA (`client-ca-file`) and, when a
// request header CA is configured, it and the request header settings (`requestheader-*`, the
// lists as JSON arrays). Extension servers (metrics-server, custom metrics adapters) read it to
// trust this server's front proxy and its users' certificates.
//
// Written once at start-up, merged with what is there as kube merges it for several replicas:
// lists united in order, CA bundles combined without duplicate certificates. A compare-and-swap
// write that loses a race is tried again from what won.
#pragma once

#include "auth/extension_authentication.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}
namespace kwatch::registry {
class ResourceStore;
}

namespace kwatch::controllers {

// --client-ca-file's and --requestheader-client-ca-file's contents and the --requestheader-*
// settings.
using auth::ExtensionAuthentication;

// Creates kube-system if needed, then the ConfigMap, or merges into it. Logs what fails.
boost::asio::awaitable<void> publish_extension_authentication(
    std::shared_ptr<registry::ResourceStore> store, std::shared_ptr<const kinds::Scheme> scheme,
    ExtensionAuthentication values);

// The merges, for tests: `ours` added to `theirs`.
std::string merge_ca_bundles(const std::string& theirs, const std::string& ours);
std::vector<std::string> merge_lists(const std::vector<std::string>& theirs,
                                     const std::vector<std::string>& ours);

}  // namespace kwatch::controllers
