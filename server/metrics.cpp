#include "server/metrics.hpp"

#include <cstdio>

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

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
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

void Metrics::inc(const std::string& name, const Labels& labels, double by) {
  std::lock_guard lock(mutex_);
  values_[name][key(labels)] += by;
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  values_[name][key(labels)] = value;
}

void Metrics::observe(const std::string& name, const Labels& labels, double seconds) {
  std::lock_guard lock(mutex_);
  Histogram& h = histograms_[name][key(labels)];
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++h.counts[i];
  }
  ++h.count;
  h.sum += seconds;
}

void Metrics::gauge_fn(const std::string& name, const Labels& labels, std::function<double()> fn) {
  std::lock_guard lock(mutex_);
  functions_[name][key(labels)] = std::move(fn);
}

void Metrics::help(const std::string& name, std::string type, std::string text) {
  std::lock_guard lock(mutex_);
  help_[name] = {std::move(type), std::move(text)};
}

double Metrics::value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  if (auto f = functions_.find(name); f != functions_.end()) {
    if (auto it = f->second.find(key(labels)); it != f->second.end()) return it->second();
  }
  auto it = values_.find(name);
  if (it == values_.end()) return 0;
  auto v = it->second.find(key(labels));
  return v == it->second.end() ? 0 : v->second;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
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
    for (const auto& [labels, v] : series) out += name + labels + " " + number(v) + "\n";
  }
  for (const auto& [name, series] : functions_) {
    header(name, "gauge");
    for (const auto& [labels, fn] : series) out += name + labels + " " + number(fn()) + "\n";
  }
  for (const auto& [name, series] : histograms_) {
    header(name, "histogram");
    for (const auto& [labels, h] : series) {
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        out += name + "_bucket" + with_label(labels, "le=\"" + number(kBuckets[i]) + "\"") + " " +
               std::to_string(h.counts[i]) + "\n";
      }
      out += name + "_bucket" + with_label(labels, "le=\"+Inf\"") + " " +
             std::to_string(h.count) + "\n";
      out += name + "_sum" + labels + " " + number(h.sum) + "\n";
      out += name + "_count" + labels + " " + std::to_string(h.count) + "\n";
    }
  }
  return out;
}

}  // namespace kwatch::server
