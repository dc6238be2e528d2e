// The example of client/README.md: an informer over the ConfigMaps of the kubeconfig's
// namespace; its handler prints each change (type, namespace/name) from a thread of its own.
#include "client/informer.hpp"
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

int main() {
  using namespace kwatch::client;
  auto config = load_default_kubeconfig();  // $KUBECONFIG or ~/.kube/config
  if (!config) { std::cerr << config.error() << "\n"; return 1; }
  boost::asio::io_context ioc;
  auto client = HttpClient::create(ioc.get_executor(), *config);
  if (!client) { std::cerr << client.error() << "\n"; return 1; }
  ReflectorOptions options;
  options.path = "/api/v1/namespaces/" + config->ns + "/configmaps";
  Informer informer(*client, options);
  informer.store()->add_index("app", Store::by_label("app"));  // Lister: by_index("app", "web")
  informer.add_handler([](EventType type, const Store::Object& now, const Store::Object& before) {
    std::cout << event_type_name(type) << " " << Store::key_of(*now)
              << (before ? " (had it)" : "") << std::endl;
  });
  boost::asio::co_spawn(ioc, informer.run(), boost::asio::detached);
  ioc.run();
}
