#include "server/metrics.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kwatch::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos ||
         text.rfind(line + "\n", 0) == 0;
}

TEST(Metrics, CountersAddAndGaugesSet) {
  Metrics m;
  m.help("requests_total", "counter", "Requests.");
  m.inc("requests_total", {{"verb", "GET"}, {"code", "200"}});
  m.inc("requests_total", {{"verb", "GET"}, {"code", "200"}}, 2);
  m.inc("requests_total", {{"verb", "PUT"}, {"code", "200"}});
  m.set("in_flight", {}, 7);
  m.set("in_flight", {}, 3);
  EXPECT_EQ(m.value("requests_total", {{"verb", "GET"}, {"code", "200"}}), 3);
  EXPECT_EQ(m.value("in_flight", {}), 3);
  EXPECT_EQ(m.value("absent", {}), 0);
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "# HELP requests_total Requests.")) << text;
  EXPECT_TRUE(has_line(text, "# TYPE requests_total counter")) << text;
  EXPECT_TRUE(has_line(text, "requests_total{verb=\"GET\",code=\"200\"} 3")) << text;
  EXPECT_TRUE(has_line(text, "requests_total{verb=\"PUT\",code=\"200\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "in_flight 3")) << text;
}

TEST(Metrics, LabelValuesAreEscaped) {
  Metrics m;
  m.inc("c", {{"path", "a\"b\\c\nd"}});
  EXPECT_TRUE(has_line(m.render(), "c{path=\"a\\\"b\\\\c\\nd\"} 1")) << m.render();
}

TEST(Metrics, HistogramBucketsAreCumulativeAndAgreeWithTheCount) {
  Metrics m;
  m.observe("latency_seconds", {{"verb", "GET"}}, 0.0001);  // first bucket
  m.observe("latency_seconds", {{"verb", "GET"}}, 0.003);   // le=0.005
  m.observe("latency_seconds", {{"verb", "GET"}}, 0.005);   // a bound is in its own bucket
  m.observe("latency_seconds", {{"verb", "GET"}}, 60);      // above every bound
  const std::string text = m.render();
  EXPECT_TRUE(has_line(text, "latency_seconds_bucket{verb=\"GET\",le=\"0.0005\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_bucket{verb=\"GET\",le=\"0.0025\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_bucket{verb=\"GET\",le=\"0.005\"} 3")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_bucket{verb=\"GET\",le=\"5\"} 3")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_count{verb=\"GET\"} 4")) << text;
  EXPECT_TRUE(has_line(text, "latency_seconds_sum{verb=\"GET\"} 60.0081")) << text;
}

TEST(Metrics, GaugeFunctionsAreReadWhenRendered) {
  Metrics m;
  double level = 1;
  m.gauge_fn("watchers", {{"kind", "pods"}}, [&level] { return level; });
  level = 42;
  EXPECT_EQ(m.value("watchers", {{"kind", "pods"}}), 42);
  EXPECT_TRUE(has_line(m.render(), "watchers{kind=\"pods\"} 42")) << m.render();
}

// Updates from many threads, new series among them, while /metrics is read: nothing is lost.
TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  Metrics m;
  constexpr int kThreads = 8;
  constexpr int kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kEach; ++i) {
        m.inc("shared_total", {{"code", "200"}});
        m.inc("own_total", {{"thread", std::to_string(t)}, {"n", std::to_string(i % 50)}});
        m.observe("seconds", {{"verb", "GET"}}, (i % 3) * 0.001);
      }
    });
  }
  std::thread reader([&m] {
    for (int i = 0; i < 50; ++i) (void)m.render();
  });
  for (auto& t : threads) t.join();
  reader.join();
  EXPECT_EQ(m.value("shared_total", {{"code", "200"}}), kThreads * kEach);
  double own = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int n = 0; n < 50; ++n) {
      own += m.value("own_total", {{"thread", std::to_string(t)}, {"n", std::to_string(n)}});
    }
  }
  EXPECT_EQ(own, kThreads * kEach);
  EXPECT_TRUE(has_line(m.render(), "seconds_count{verb=\"GET\"} " +
                                       std::to_string(kThreads * kEach)));
}

}  // namespace
}  // namespace kwatch::server
