// kwatch-mirror-probe: an Informer over one collection, for test/e2e/client_mirror_test.py. Each
// line on stdin ("dump") prints one JSON line: whether it has synced, the store as
// {"namespace/name": resourceVersion}, the same built from the handler's notifications alone,
// the reflector's counters, and how many notifications came out of order (a resourceVersion
// below the last one the handler saw for that object; the same one comes again after a re-list,
// as client-go's informers deliver every listed object again). EOF stops it (exit 0).
//
// Usage: kwatch-mirror-probe KUBECONFIG PATH [REQUEST_TIMEOUT_MS [stream|list [chunked|websocket]]]
#include "client/informer.hpp"
#include "client/kubeconfig.hpp"
#include "client/object_meta.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace kwatch::client;

namespace {

std::string version_of(const json::object& o) { return metadata_string(o, "resourceVersion"); }

std::int64_t number(const std::string& s) {
  std::int64_t n = 0;
  std::from_chars(s.data(), s.data() + s.size(), n);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kwatch-mirror-probe KUBECONFIG PATH [REQUEST_TIMEOUT_MS]\n");
    return 2;
  }
  auto config = load_kubeconfig({argv[1]});
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().c_str());
    return 1;
  }
  HttpClient::Options client_options;
  if (argc > 3) client_options.request_timeout = std::chrono::milliseconds(std::atol(argv[3]));
  asio::io_context ioc;
  auto client = HttpClient::create(ioc.get_executor(), *config, client_options);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().c_str());
    return 1;
  }
  ReflectorOptions options;
  options.path = argv[2];
  options.page_size = 100;  // several pages per list
  options.streaming_list = !(argc > 4 && std::string(argv[4]) == "list");
  if (argc > 5 && std::string(argv[5]) == "websocket") options.transport = WatchTransport::websocket;
  options.initial_backoff = std::chrono::milliseconds(50);
  options.max_backoff = std::chrono::milliseconds(1000);
  Informer informer(*client, options);

  std::mutex mutex;
  std::map<std::string, std::string> seen;  // by the handler: key -> resourceVersion
  std::map<std::string, std::int64_t> last;  // the highest version the handler saw per key
  std::uint64_t out_of_order = 0;
  std::uint64_t notifications = 0;
  informer.add_handler([&](EventType type, const Store::Object& object, const Store::Object&) {
    const std::string key = Store::key_of(*object);
    const std::string rv = version_of(*object);
    std::lock_guard lock(mutex);
    ++notifications;
    auto& highest = last[key];
    // A DELETED after a re-list carries the last known state: its version is not newer.
    if (type != EventType::deleted && number(rv) < highest) ++out_of_order;
    highest = std::max(highest, number(rv));
    if (type == EventType::deleted) {
      seen.erase(key);
    } else {
      seen[key] = rv;
    }
  });
  // A second handler, slow (2 ms per change) with a small queue: it must not hold up the first
  // (whose view the test checks at each step) and must converge too (latest change per object
  // once its queue overflows).
  std::mutex slow_mutex;
  std::map<std::string, std::string> slow_seen;
  const std::size_t slow = informer.add_handler(
      [&](EventType type, const Store::Object& object, const Store::Object&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::lock_guard lock(slow_mutex);
        if (type == EventType::deleted) {
          slow_seen.erase(Store::key_of(*object));
        } else {
          slow_seen[Store::key_of(*object)] = version_of(*object);
        }
      },
      64);
  asio::co_spawn(ioc, informer.run(), asio::detached);
  std::thread io([&ioc] { ioc.run(); });

  std::string line;
  while (std::getline(std::cin, line)) {
    json::object store;
    for (const auto& o : informer.store()->list()) store[Store::key_of(*o)] = version_of(*o);
    json::object handler;
    json::object out;
    {
      std::lock_guard lock(mutex);
      for (const auto& [key, rv] : seen) handler[key] = rv;
      out["out_of_order"] = out_of_order;
      out["notifications"] = notifications;
    }
    {
      json::object slow_view;
      std::lock_guard lock(slow_mutex);
      for (const auto& [key, rv] : slow_seen) slow_view[key] = rv;
      out["slow_handler"] = std::move(slow_view);
    }
    const HandlerStats stats = informer.stats(slow);
    out["slow_overflows"] = stats.overflows;
    out["slow_backlog"] = stats.backlog;
    out["synced"] = informer.has_synced();
    out["store"] = std::move(store);
    out["handler"] = std::move(handler);
    const auto& c = informer.counters();
    out["lists"] = c.lists.load();
    out["streaming_lists"] = c.streaming_lists.load();
    out["watches"] = c.watches.load();
    out["events"] = c.events.load();
    out["failures"] = c.failures.load();
    std::cout << json::serialize(out) << std::endl;
  }
  informer.stop();
  ioc.stop();
  io.join();
  return 0;
}
