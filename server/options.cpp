#include "server/options.hpp"

#include <boost/asio/ip/address.hpp>

#include <charconv>
#include <functional>
#include <map>

namespace kwatch::server {

namespace {

template <class T>
bool parse_number(const std::string& text, T& out, T min, T max) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < static_cast<long long>(min) ||
      v > static_cast<long long>(max)) {
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

bool parse_bool(const std::string& text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
    return true;
  }
  if (text == "false" || text == "0") {
    out = false;
    return true;
  }
  return false;
}

}  // namespace

std::string usage() {
  return R"(kwatch-apiserver: a Kubernetes-compatible API server with a high-performance watch cache.

Usage: kwatch-apiserver [flags]

Flags:
  --bind-address=IP          address to serve plain HTTP on (default 127.0.0.1)
  --port=N                   port to serve plain HTTP on (default 8080; 0 picks a free port)
  --storage-backend=NAME     "memory" (embedded MVCC store, default)
  --data-dir=DIR             persist the embedded store in DIR (default: empty, in memory only)
  --data-dir-fsync=BOOL      fdatasync every write before acknowledging it (default true)
  --io-threads=N             threads serving I/O (default: number of cores)
  --log-level=LEVEL          trace, debug, info, warn, error (default info)
  --default-watch-cache-size=N   initial and smallest event window per resource (default 100)
  --watch-cache-sizes=RES#N,...  fix the event window of these resources at N events
  --watch-bookmark-interval=D    period of watch bookmarks, e.g. 60s, 500ms (default 60s)
  --min-request-timeout=SECONDS  watches without timeoutSeconds last this x (1 + rand) (default 1800)
  --help                     print this help and exit
  --version                  print the version and exit
)";
}

ParseOutcome parse_options(const std::vector<std::string>& args) {
  Options o;
  using Setter = std::function<std::string(const std::string&)>;  // returns an error or ""
  const std::map<std::string, Setter> flags = {
      {"bind-address",
       [&](const std::string& v) -> std::string {
         boost::system::error_code ec;
         boost::asio::ip::make_address(v, ec);
         if (ec) return "invalid IP address";
         o.bind_address = v;
         return "";
       }},
      {"port",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned short>(v, o.port, 0, 65535) ? "" : "must be 0-65535";
       }},
      {"storage-backend",
       [&](const std::string& v) -> std::string {
         if (v != "memory") return "unsupported storage backend (supported: memory)";
         o.storage_backend = v;
         return "";
       }},
      {"data-dir",
       [&](const std::string& v) -> std::string {
         o.data_dir = v;
         return "";
       }},
      {"data-dir-fsync",
       [&](const std::string& v) -> std::string {
         return parse_bool(v, o.fsync) ? "" : "must be true or false";
       }},
      {"io-threads",
       [&](const std::string& v) -> std::string {
         return parse_number<unsigned>(v, o.io_threads, 1, 1024) ? "" : "must be 1-1024";
       }},
      {"default-watch-cache-size",
       [&](const std::string& v) -> std::string {
         return parse_number<std::size_t>(v, o.default_watch_cache_size, 1, 1'000'000)
                    ? ""
                    : "must be 1-1000000";
       }},
      {"watch-cache-sizes",
       [&](const std::string& v) -> std::string {
         std::size_t start = 0;
         while (start <= v.size()) {
           auto comma = v.find(',', start);
           std::string item = v.substr(start, comma == std::string::npos ? std::string::npos
                                                                       : comma - start);
           auto hash = item.find('#');
           std::size_t size = 0;
           if (hash == std::string::npos || hash == 0 ||
               !parse_number<std::size_t>(item.substr(hash + 1), size, 1, 1'000'000)) {
             return "expected resource#size[,resource#size...]";
           }
           o.watch_cache_sizes[item.substr(0, hash)] = size;
           if (comma == std::string::npos) break;
           start = comma + 1;
         }
         return "";
       }},
      {"watch-bookmark-interval",
       [&](const std::string& v) -> std::string {
         std::size_t n = 0;
         const bool ms = v.size() > 2 && v.ends_with("ms");
         const bool s = !ms && v.size() > 1 && v.ends_with("s");
         if ((!ms && !s) ||
             !parse_number<std::size_t>(v.substr(0, v.size() - (ms ? 2 : 1)), n, 1, 86'400'000)) {
           return "expected a duration such as 60s or 500ms";
         }
         o.watch_bookmark_interval = ms ? std::chrono::milliseconds(n) : std::chrono::seconds(n);
         return "";
       }},
      {"min-request-timeout",
       [&](const std::string& v) -> std::string {
         unsigned n = 0;
         if (!parse_number<unsigned>(v, n, 1, 86'400)) return "must be 1-86400 seconds";
         o.min_request_timeout = std::chrono::seconds(n);
         return "";
       }},
      {"log-level",
       [&](const std::string& v) -> std::string {
         if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error" &&
             v != "off") {
           return "must be one of trace, debug, info, warn, error, off";
         }
         o.log_level = v;
         return "";
       }},
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") return ParseHelp{};
    if (arg == "--version") return ParseVersion{};
    if (arg.rfind("--", 0) != 0) return ParseError{"unexpected argument: " + arg};
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) return ParseError{"unknown flag: --" + name};
    if (!has_value) {
      if (i + 1 >= args.size()) return ParseError{"flag needs a value: --" + name};
      value = args[++i];
    }
    if (auto err = it->second(value); !err.empty()) {
      return ParseError{"invalid value \"" + value + "\" for --" + name + ": " + err};
    }
  }
  return o;
}

}  // namespace kwatch::server
