#include "delegation/authentication_lookup.hpp"

#include "apimachinery/json_members.hpp"

namespace kwatch::delegation {

namespace asio = boost::asio;
namespace json = boost::json;
using Looked = boost::system::result<auth::ExtensionAuthentication, std::string>;

asio::awaitable<boost::system::result<auth::ExtensionAuthentication, std::string>>
look_up_extension_authentication(client::HttpClient& client) {
  std::string path = std::string("/api/v1/namespaces/kube-system/configmaps/") +
                     auth::kExtensionAuthenticationName;
  auto read = co_await client.get(std::move(path));
  if (!read) {
    if (read.error().is(404)) co_return auth::ExtensionAuthentication{};
    if (read.error().is(403) || read.error().is(401)) {
      // An aggregate is constructible from its first member's type: the error is named.
      co_return Looked(boost::system::in_place_error,
                       "Unable to get configmap/extension-apiserver-authentication in "
                       "kube-system.  Usually fixed by 'kubectl create rolebinding -n "
                       "kube-system ROLEBINDING_NAME "
                       "--role=extension-apiserver-authentication-reader "
                       "--serviceaccount=YOUR_NS:YOUR_SA': " +
                           read.error().describe());
    }
    co_return Looked(boost::system::in_place_error,
                     "cannot read configmap/extension-apiserver-authentication in kube-system: " +
                         read.error().describe());
  }
  const json::object* data = apimachinery::object_member(*read, "data");
  co_return auth::read_extension_authentication(data ? *data : json::object{});
}

}  // namespace kwatch::delegation
