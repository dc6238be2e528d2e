// Memory the client's Store takes per cached object, against the objects' JSON size (#15's goal:
// at most 1.5x): N ConfigMaps of about SIZE bytes of JSON each are parsed and stored as a
// Reflector would store them; the C heap's bytes in use before and after are compared.
// Usage: client_store_memory [N=100000] [SIZE=1024] [parsed|compact]
#include "client/store.hpp"

#include <boost/json/parse.hpp>

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  const long size = argc > 2 ? std::atol(argv[2]) : 1024;
  const bool compact = argc > 3 && std::string(argv[3]) == "compact";
  kwatch::client::Store store(compact ? kwatch::client::Store::Representation::compact
                                      : kwatch::client::Store::Representation::parsed);
  store.add_index("namespace", kwatch::client::Store::by_namespace());
  std::size_t json_bytes = 0;
  const auto before = mallinfo2().uordblks + mallinfo2().hblkhd;
  for (long i = 0; i < n; ++i) {
    std::string text = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench-)" +
                       std::to_string(i) +
                       R"(","namespace":"default","uid":"0f0f0f0f-1111-2222-3333-)" +
                       std::to_string(100000000000 + i) + R"(","resourceVersion":")" +
                       std::to_string(1000 + i) +
                       R"(","creationTimestamp":"2026-11-25T10:00:00Z","labels":{"app":"bench"}},"data":{"payload":")";
    const long pad = size - static_cast<long>(text.size()) - 4;
    text += std::string(static_cast<std::size_t>(pad > 0 ? pad : 0), 'x') + R"("}})";
    json_bytes += text.size();
    store.upsert(boost::json::parse(text).as_object());
  }
  const auto after = mallinfo2().uordblks + mallinfo2().hblkhd;
  std::printf("{\"representation\": \"%s\", \"objects\": %zu, \"json_bytes\": %zu, "
              "\"heap_bytes\": %zu, \"ratio\": %.2f}\n",
              compact ? "compact" : "parsed", store.size(), json_bytes,
              static_cast<std::size_t>(after - before),
              static_cast<double>(after - before) / static_cast<double>(json_bytes));
}
