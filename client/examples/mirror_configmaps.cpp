// The example of client/README.md: mirror the ConfigMaps of the kubeconfig's namespace and
// print each change (type, namespace/name).
#include "client/reflector.hpp"
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

int main() {
  using namespace kwatch::client;
  boost::asio::io_context ioc;
  auto config = load_default_kubeconfig();            // $KUBECONFIG or ~/.kube/config
  if (!config) { std::cerr << config.error() << "\n"; return 1; }
  auto client = HttpClient::create(ioc.get_executor(), *config);
  if (!client) { std::cerr << client.error() << "\n"; return 1; }
  auto store = std::make_shared<Store>();
  store->add_index("app", Store::by_label("app"));
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/" + config->ns + "/configmaps";
  auto reflector = std::make_shared<Reflector>(*client, store, options,
      [](EventType type, const Store::Object& object, const Store::Object&) {
        std::cout << static_cast<int>(type) << " " << Store::key_of(*object) << std::endl;
      });
  boost::asio::co_spawn(ioc, reflector->run(), boost::asio::detached);
  ioc.run();
}
