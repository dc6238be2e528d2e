// Prometheus metrics: labelled counters, gauges and latency histograms, rendered as text.
//
// Thread-safety: every method may be called from any thread. An update of a series that exists
// takes the lock shared and adds atomically, so updates never wait for each other, and a thread
// at the lowest CPU priority preempted in the middle of one holds nobody up (only the first
// update of a new series, and help/gauge_fn, take it exclusively).
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <shared_mutex>
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
  // Counts per bucket, not cumulative (the last one is above every bound): rendered as running
  // sums, so the count and the buckets always agree however updates interleave with a read.
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kBuckets.size() + 1> slots{};
    std::atomic<double> sum = 0;
  };
  template <class V>
  using Series = std::map<std::string, V, std::less<>>;  // labels -> value
  template <class V>
  using Families = std::map<std::string, Series<V>, std::less<>>;  // name -> series
  static std::string key(const Labels& labels);
  // The series `name`{labels} of `families`, made if new (the lock taken exclusively then).
  template <class V>
  V& series(Families<V>& families, const std::string& name, const std::string& labels);

  mutable std::shared_mutex mutex_;
  std::map<std::string, std::pair<std::string, std::string>> help_;  // name -> (type, text)
  Families<std::atomic<double>> values_;
  Families<Histogram> histograms_;
  Families<std::function<double()>> functions_;
};

}  // namespace kwatch::server
