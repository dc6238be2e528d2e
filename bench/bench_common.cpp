#include "bench/bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace kwatch::bench {

Nanos now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string object_name(const Workload& w, std::size_t index) {
  if (w.kind == "pods") {
    // The node is part of the name so that an etcd watcher can select one node by key prefix
    // ("pod-node-1-" is not a prefix of "pod-node-12-").
    if (w.nodes > 0) return "pod-node-" + std::to_string(index % w.nodes) + "-" + std::to_string(index);
    return "pod-" + std::to_string(index);
  }
  return "cm-" + std::to_string(index);
}

std::string object_json(const Workload& w, std::size_t index, std::uint64_t version) {
  const std::string name = object_name(w, index);
  std::string head;
  std::string tail;
  if (w.kind == "pods") {
    head = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" +
           w.ns + R"(","labels":{"app":"bench"},"annotations":{"bench/version":")" +
           std::to_string(version) + R"(","bench/payload":")";
    tail = R"("}},"spec":{)";
    if (w.nodes > 0) tail += R"("nodeName":"node-)" + std::to_string(index % w.nodes) + R"(",)";
    tail += R"("containers":[{"name":"c","image":"busybox"}]}})";
  } else {
    head = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
           R"(","namespace":")" + w.ns + R"(","labels":{"app":"bench"}},"data":{"version":")" +
           std::to_string(version) + R"(","payload":")";
    tail = R"("}})";
  }
  // The server adds uid, creationTimestamp, generation and resourceVersion (~150 bytes); the
  // payload fills the rest so that the stored object is about object_size bytes.
  const std::size_t fixed = head.size() + tail.size() + 150;
  const std::size_t pad = w.object_size > fixed ? w.object_size - fixed : 0;
  std::string out;
  out.reserve(head.size() + pad + tail.size());
  out += head;
  for (std::size_t i = 0; i < pad; ++i) out.push_back(static_cast<char>('a' + (i + version) % 26));
  out += tail;
  return out;
}

std::int64_t find_resource_version(const char* data, std::size_t size) {
  static constexpr std::string_view kKey = R"("resourceVersion":")";
  std::string_view text(data, size);
  auto pos = text.find(kKey);
  if (pos == std::string_view::npos) return -1;
  std::int64_t v = 0;
  bool any = false;
  for (pos += kKey.size(); pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
    v = v * 10 + (text[pos] - '0');
    any = true;
  }
  return any ? v : -1;
}

namespace {

// utime+stime in seconds from a /proc stat file, or -1.
double stat_cpu_s(const std::string& path) {
  std::ifstream stat(path);
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = all.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (rest >> field); ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

std::map<int, double> read_thread_cpu(int pid) {
  std::map<int, double> out;
  if (pid <= 0) return out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    double cpu = stat_cpu_s(e.path().string() + "/stat");
    if (cpu >= 0) out[std::atoi(e.path().filename().c_str())] = cpu;
  }
  return out;
}

ProcSample read_proc(int pid) {
  ProcSample out;
  if (pid <= 0) return out;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // The command name may contain spaces: fields are counted after its closing parenthesis.
  auto close = all.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(all.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && (rest >> field); ++i) {  // field 3 is the state
      if (i == 14) utime = std::atof(field.c_str());
      if (i == 15) stime = std::atof(field.c_str());
    }
    out.cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    out.sys_cpu_s = stime / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) out.rss_kib = std::atol(line.c_str() + 6);
  }
  return out;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p% of the samples at or below it.
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

Options::Options(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (!command_.empty()) throw std::invalid_argument("unexpected argument " + a);
      command_ = a;
      continue;
    }
    auto eq = a.find('=');
    if (eq == std::string::npos) {
      values_[a.substr(2)] = "true";
    } else {
      values_[a.substr(2, eq - 2)] = a.substr(eq + 1);
    }
  }
}

std::string Options::str(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

double Options::num(const std::string& key, double fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0') {
    throw std::invalid_argument("--" + key + " wants a number, got " + it->second);
  }
  return v;
}

bool Options::flag(const std::string& key) const {
  auto it = values_.find(key);
  return it != values_.end() && it->second != "false" && it->second != "0";
}

}  // namespace kwatch::bench
