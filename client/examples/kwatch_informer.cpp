// kwatch-informer: mirrors one resource through a Reflector and prints every change, one line
// each, as it is applied: `ADDED default/settings 1234`, or the whole object with -o json.
//
//   kwatch-informer configmaps -n default
//   kwatch-informer deployments.apps -A -l app=web -o json
//   kwatch-informer --path /api/v1/nodes
//
// The resource is found as kubectl finds it, by discovery (`/api/v1`, then `/apis`). The mirror
// survives broken connections (it resumes from its last resourceVersion) and re-lists only on
// 410. SIGINT/SIGTERM end it.
#include "client/object_meta.hpp"
#include "client/reflector.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json/serialize.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace kwatch::client;

namespace {

const char* kUsage =
    "usage: kwatch-informer RESOURCE[.GROUP] [-n NAMESPACE | -A] [-l SELECTOR] [--field-selector S]\n"
    "                       [-o name|json] [--context NAME] [--kubeconfig FILE]\n"
    "       kwatch-informer --path /api/v1/... [the same options]\n";

// The collection path of `resource` ("configmaps", "deployments.apps"), by discovery.
asio::awaitable<ApiResult<std::string>> find_path(HttpClient& client, std::string resource,
                                                  std::string ns) {
  std::string group;
  if (auto dot = resource.find('.'); dot != std::string::npos) {
    group = resource.substr(dot + 1);
    resource = resource.substr(0, dot);
  }
  std::vector<std::string> versions;  // group/version prefixes to look in
  if (group.empty()) versions.push_back("/api/v1");
  auto groups = co_await client.get("/apis");
  if (!groups) co_return groups.error();
  for (const auto& g : groups->at("groups").as_array()) {
    const auto& o = g.as_object();
    if (!group.empty() && o.at("name").as_string() != group) continue;
    versions.push_back("/apis/" + std::string(o.at("preferredVersion").at("groupVersion").as_string()));
  }
  for (const auto& prefix : versions) {
    auto list = co_await client.get(prefix);
    if (!list) continue;
    for (const auto& r : list->at("resources").as_array()) {
      const auto& o = r.as_object();
      if (o.at("name").as_string() != resource) continue;
      const bool namespaced = o.at("namespaced").as_bool();
      if (namespaced && !ns.empty()) co_return prefix + "/namespaces/" + ns + "/" + resource;
      co_return prefix + "/" + resource;
    }
  }
  ApiError e;
  e.kind = ApiError::Kind::status;
  e.http_status = 404;
  e.reason = "NotFound";
  e.message = "the server doesn't have a resource type \"" + resource + "\"";
  co_return e;
}

}  // namespace

int main(int argc, char** argv) {
  std::string resource, path, ns, label_selector, field_selector, output = "name", context, kubeconfig;
  bool all_namespaces = false;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "kwatch-informer: %s needs a value\n%s", name, kUsage);
        std::exit(2);
      }
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-n" || a == "--namespace") {
      ns = value("-n");
    } else if (a == "-A" || a == "--all-namespaces") {
      all_namespaces = true;
    } else if (a == "-l" || a == "--selector") {
      label_selector = value("-l");
    } else if (a == "--field-selector") {
      field_selector = value("--field-selector");
    } else if (a == "-o" || a == "--output") {
      output = value("-o");
    } else if (a == "--context") {
      context = value("--context");
    } else if (a == "--kubeconfig") {
      kubeconfig = value("--kubeconfig");
    } else if (a == "--path") {
      path = value("--path");
    } else if (!a.empty() && a[0] != '-' && resource.empty()) {
      resource = a;
    } else {
      std::fprintf(stderr, "kwatch-informer: unexpected argument \"%s\"\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (resource.empty() == path.empty() || (output != "name" && output != "json")) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto config = kubeconfig.empty() ? load_default_kubeconfig(context)
                                   : load_kubeconfig({kubeconfig}, context);
  if (!config) {
    std::fprintf(stderr, "kwatch-informer: %s\n", config.error().c_str());
    return 1;
  }
  if (ns.empty() && !all_namespaces) ns = config->ns;
  if (all_namespaces) ns.clear();

  asio::io_context ioc;
  auto client = HttpClient::create(ioc.get_executor(), *config);
  if (!client) {
    std::fprintf(stderr, "kwatch-informer: %s\n", client.error().c_str());
    return 1;
  }
  int exit_code = 0;
  std::shared_ptr<Reflector> reflector;
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (reflector) {
      reflector->stop();
    } else {
      ioc.stop();
    }
  });
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        if (path.empty()) {
          auto found = co_await find_path(**client, resource, ns);
          if (!found) {
            std::fprintf(stderr, "kwatch-informer: %s\n", found.error().describe().c_str());
            exit_code = 1;
            signals.cancel();
            co_return;
          }
          path = *found;
        }
        ReflectorOptions options;
        options.path = path;
        options.label_selector = label_selector;
        options.field_selector = field_selector;
        auto store = std::make_shared<Store>();
        reflector = std::make_shared<Reflector>(
            *client, store, options,
            [&output](EventType type, const Store::Object& object, const Store::Object&) {
              if (output == "json") {
                json::object line{{"type", event_type_name(type)}, {"object", *object}};
                std::cout << json::serialize(line) << std::endl;
              } else {
                std::cout << event_type_name(type) << " " << Store::key_of(*object) << " "
                          << metadata_string(*object, "resourceVersion") << std::endl;
              }
            });
        co_await reflector->run();
        signals.cancel();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ioc.run();
  return exit_code;
}
