// The controllers' work queue: one entry per key, one worker per key at a time (a key added while
// it is being handled comes back after done()), per-key exponential backoff and an overall
// bucket for re-queues, forget(), and shut_down() waking a waiting worker. Delays are checked as
// lower bounds only (a loaded machine may be later, never earlier).
#include "client/work_queue.hpp"

#include <gtest/gtest.h>

#include <thread>

namespace kwatch::client {
namespace {

using namespace std::chrono_literals;
using Clock = WorkQueue::Clock;

TEST(WorkQueue, AKeyIsQueuedOnceAndComesBackIfAddedWhileHandled) {
  WorkQueue q;
  q.add("a");
  q.add("a");
  q.add("b");
  EXPECT_EQ(q.length(), 2u);
  auto first = q.get();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "a");
  q.add("a");  // changed while a worker has it
  EXPECT_EQ(q.length(), 1u) << "not handed to a second worker meanwhile";
  EXPECT_EQ(*q.get(), "b");
  q.done("b");
  q.done("a");
  EXPECT_EQ(q.length(), 1u) << "queued again once done";
  EXPECT_EQ(*q.get(), "a");
  q.done("a");
  EXPECT_EQ(q.length(), 0u);
}

TEST(WorkQueue, FailuresBackOffExponentiallyUntilForgotten) {
  RateLimits limits;
  limits.base_delay = 40ms;
  limits.qps = 0;  // no bucket
  WorkQueue q(limits);
  auto handled_after = [&](const std::string& key) {
    const auto t0 = Clock::now();
    q.add_rate_limited(key);
    auto got = q.get();
    EXPECT_TRUE(got && *got == key);
    q.done(key);
    return Clock::now() - t0;
  };
  EXPECT_GE(handled_after("k"), 40ms);
  EXPECT_GE(handled_after("k"), 80ms);
  EXPECT_GE(handled_after("k"), 160ms);
  EXPECT_EQ(q.requeues("k"), 3);
  EXPECT_EQ(q.backoff("k"), 320ms);
  q.forget("k");
  EXPECT_EQ(q.requeues("k"), 0);
  EXPECT_EQ(q.backoff("k"), 40ms) << "forgotten: from the base delay again";
  EXPECT_GE(handled_after("k"), 40ms);
}

TEST(WorkQueue, TheOverallBucketSpacesRequeuesOfManyKeys) {
  RateLimits limits;
  limits.base_delay = 0ms;
  limits.qps = 20;
  limits.burst = 2;
  WorkQueue q(limits);
  const auto t0 = Clock::now();
  for (int i = 0; i < 6; ++i) q.add_rate_limited("k" + std::to_string(i));
  for (int i = 0; i < 6; ++i) {
    auto got = q.get();
    ASSERT_TRUE(got);
    q.done(*got);
  }
  // Two at once (the burst), then one per 50 ms: the sixth not before 200 ms.
  EXPECT_GE(Clock::now() - t0, 200ms);
}

TEST(WorkQueue, ShutDownWakesAWaitingWorker) {
  WorkQueue q;
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = q.get(); });
  q.add_after("later", 1h);
  q.shut_down();
  worker.join();
  EXPECT_FALSE(got);
  q.add("x");
  EXPECT_EQ(q.length(), 0u) << "nothing is queued after shut_down";
}

}  // namespace
}  // namespace kwatch::client
