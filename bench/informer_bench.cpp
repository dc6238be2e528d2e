// kwatch-informer-bench: kwatch's C++ Informer as bench/client-informers drives it, beside the
// JavaScript and Python clients (bench/informers/): one informer over a collection with one
// handler that counts events. Prints JSON lines on stdout:
//   {"phase":"start","rss_kib":R}                     before the first list
//   {"phase":"synced","ms":T,"objects":N,"rss_kib":R}  once the list is in the store
//   {"phase":"events","events":E,"last_ms":L}          each time stdin gets a line, and at EOF
// (the heap is trimmed before RSS is read, as the other clients collect their garbage first).
// `events` counts every notification (the list's ADDED ones too); `last_ms` is when the last one
// came, since the start.
//
// Usage: kwatch-informer-bench SERVER_URL PATH [parsed|compact] [PAGE_SIZE (500; 0: unpaged)]
#include "client/informer.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace kwatch::client;
using Clock = std::chrono::steady_clock;

namespace {

long rss_kib() {
  malloc_trim(0);
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

long ms_since(Clock::time_point start) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kwatch-informer-bench SERVER_URL PATH [parsed|compact]\n");
    return 2;
  }
  const auto representation = argc > 3 && std::string(argv[3]) == "compact"
                                  ? Store::Representation::compact
                                  : Store::Representation::parsed;
  ClientConfig config;
  config.server = argv[1];
  asio::io_context ioc;
  auto client = HttpClient::create(ioc.get_executor(), config);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().c_str());
    return 1;
  }
  std::printf("{\"phase\":\"start\",\"rss_kib\":%ld}\n", rss_kib());
  std::fflush(stdout);
  const auto start = Clock::now();
  ReflectorOptions options;
  options.path = argv[2];
  if (argc > 4) options.page_size = static_cast<std::size_t>(std::atol(argv[4]));
  Informer informer(*client, options, std::chrono::milliseconds(0), representation);
  std::atomic<std::uint64_t> events{0};
  std::atomic<long> last_ms{0};
  informer.add_handler(
      [&](EventType, const Store::Object&, const Store::Object&) {
        ++events;
        last_ms = ms_since(start);
      },
      1 << 20);
  asio::co_spawn(ioc, informer.run(), asio::detached);
  std::thread io([&ioc] { ioc.run(); });
  while (!informer.wait_for_cache_sync(std::chrono::milliseconds(100))) {
  }
  const long synced_ms = ms_since(start);
  std::printf("{\"phase\":\"synced\",\"ms\":%ld,\"objects\":%zu,\"rss_kib\":%ld}\n", synced_ms,
              informer.store()->size(), rss_kib());
  std::fflush(stdout);
  std::string line;
  for (;;) {
    const bool more = static_cast<bool>(std::getline(std::cin, line));
    std::printf("{\"phase\":\"events\",\"events\":%llu,\"last_ms\":%ld}\n",
                static_cast<unsigned long long>(events.load()), last_ms.load());
    std::fflush(stdout);
    if (!more) break;
  }
  informer.stop();
  ioc.stop();
  io.join();
}
