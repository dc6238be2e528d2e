#include "server/metrics.hpp"

#include <charconv>
#include <mutex>

namespace kwatch::server {

namespace {

std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// The shortest text that reads back as v (0.0005, not 0.00050000000000000001).
std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string with_label(const std::string& labels, const std::string& extra) {
  if (labels.empty()) return "{" + extra + "}";
  return labels.substr(0, labels.size() - 1) + "," + extra + "}";
}

}  // namespace

std::string Metrics::key(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"" + escape(labels[i].second) + "\"";
  }
  return out + "}";
}

template <class V>
V& Metrics::series(Families<V>& families, const std::string& name, const std::string& labels) {
  {
    std::shared_lock lock(mutex_);
    if (auto f = families.find(name); f != families.end()) {
      if (auto it = f->second.find(labels); it != f->second.end()) return it->second;
    }
  }
  std::unique_lock lock(mutex_);
  // Nodes of a std::map stay where they are, and no series is ever removed.
  return families[name].try_emplace(labels).first->second;
}

void Metrics::inc(const std::string& name, const Labels& labels, double by) {
  series(values_, name, key(labels)).fetch_add(by, std::memory_order_relaxed);
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  series(values_, name, key(labels)).store(value, std::memory_order_relaxed);
}

void Metrics::observe(const std::string& name, const Labels& labels, double seconds) {
  Histogram& h = series(histograms_, name, key(labels));
  std::size_t slot = 0;
  while (slot < kBuckets.size() && seconds > kBuckets[slot]) ++slot;
  h.slots[slot].fetch_add(1, std::memory_order_relaxed);
  h.sum.fetch_add(seconds, std::memory_order_relaxed);
}

void Metrics::gauge_fn(const std::string& name, const Labels& labels, std::function<double()> fn) {
  std::unique_lock lock(mutex_);
  functions_[name][key(labels)] = std::move(fn);
}

void Metrics::help(const std::string& name, std::string type, std::string text) {
  std::unique_lock lock(mutex_);
  help_[name] = {std::move(type), std::move(text)};
}

double Metrics::value(const std::string& name, const Labels& labels) const {
  std::shared_lock lock(mutex_);
  if (auto f = functions_.find(name); f != functions_.end()) {
    if (auto it = f->second.find(key(labels)); it != f->second.end()) return it->second();
  }
  auto it = values_.find(name);
  if (it == values_.end()) return 0;
  auto v = it->second.find(key(labels));
  return v == it->second.end() ? 0 : v->second.load(std::memory_order_relaxed);
}

std::string Metrics::render() const {
  std::shared_lock lock(mutex_);
  std::string out;
  auto header = [&](const std::string& name, const char* fallback_type) {
    auto h = help_.find(name);
    if (h != help_.end()) {
      out += "# HELP " + name + " " + h->second.second + "\n";
      out += "# TYPE " + name + " " + h->second.first + "\n";
    } else {
      out += "# TYPE " + name + " " + fallback_type + "\n";
    }
  };
  for (const auto& [name, series] : values_) {
    header(name, "counter");
    for (const auto& [labels, v] : series) {
      out += name + labels + " " + number(v.load(std::memory_order_relaxed)) + "\n";
    }
  }
  for (const auto& [name, series] : functions_) {
    header(name, "gauge");
    for (const auto& [labels, fn] : series) out += name + labels + " " + number(fn()) + "\n";
  }
  for (const auto& [name, series] : histograms_) {
    header(name, "histogram");
    for (const auto& [labels, h] : series) {
      std::uint64_t below = 0;
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        below += h.slots[i].load(std::memory_order_relaxed);
        out += name + "_bucket" + with_label(labels, "le=\"" + number(kBuckets[i]) + "\"") + " " +
               std::to_string(below) + "\n";
      }
      const std::uint64_t count = below + h.slots[kBuckets.size()].load(std::memory_order_relaxed);
      out += name + "_bucket" + with_label(labels, "le=\"+Inf\"") + " " + std::to_string(count) +
             "\n";
      out += name + "_sum" + labels + " " + number(h.sum.load(std::memory_order_relaxed)) + "\n";
      out += name + "_count" + labels + " " + std::to_string(count) + "\n";
    }
  }
  return out;
}

}  // namespace kwatch::server
