// Prometheus metrics: labelled counters, gauges and latency histograms, rendered as text.
//
// Thread-safety: every method may be called from any thread; updates take a short mutex per
// family (requests are counted once each, far below the rate that would make it contend).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kwatch::server {

class Metrics {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  void inc(const std::string& name, const Labels& labels, double by = 1);
  void set(const std::string& name, const Labels& labels, double value);
  void observe(const std::string& name, const Labels& labels, double seconds);
  // A gauge computed when /metrics is read.
  void gauge_fn(const std::string& name, const Labels& labels, std::function<double()> fn);
  void help(const std::string& name, std::string type, std::string text);

  std::string render() const;
  // The current value of a counter or gauge (tests).
  double value(const std::string& name, const Labels& labels) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05,   0.1,   0.25,   0.5,   1,    5};
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  static std::string key(const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, std::pair<std::string, std::string>> help_;  // name -> (type, text)
  std::map<std::string, std::map<std::string, double>> values_;      // name -> labels -> value
  std::map<std::string, std::map<std::string, Histogram>> histograms_;
  std::map<std::string, std::map<std::string, std::function<double()>>> functions_;
};

}  // namespace kwatch::server
