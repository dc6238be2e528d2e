#include "flowcontrol/queue_set.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace kwatch::flowcontrol {
namespace {

using namespace std::chrono_literals;
using RequestPtr = QueueSet::RequestPtr;
using Decision = QueueSet::Decision;

RequestPtr request(std::uint64_t hash, int seats = 1, std::string flow = "f") {
  auto r = std::make_shared<QueueSet::Request>();
  r->hash = hash;
  r->work.initial_seats = seats;
  r->flow_schema = std::move(flow);
  return r;
}

struct Fixture {
  explicit Fixture(QueueSet::Config config, int limit) : qs(config) {
    std::vector<RequestPtr> none;
    qs.set_concurrency_limit(limit, now, none);
  }
  Decision start(const RequestPtr& r) { return qs.start(r, now, dispatched); }
  void finish(const RequestPtr& r) { qs.finish(r, now += 1ms, dispatched); }
  Clock::time_point now = Clock::now();
  QueueSet qs;
  std::vector<RequestPtr> dispatched;
};

TEST(ShuffleSharding, DealsDistinctCardsInTheDeck) {
  std::vector<int> hand;
  for (std::uint64_t h = 0; h < 20000; h += 7) {
    QueueSet::deal(h * 0x9E3779B97F4A7C15ULL, 128, 6, hand);
    ASSERT_EQ(hand.size(), 6u);
    std::set<int> distinct(hand.begin(), hand.end());
    EXPECT_EQ(distinct.size(), 6u);
    for (int c : hand) EXPECT_TRUE(c >= 0 && c < 128) << c;
  }
  // The same hash deals the same hand.
  std::vector<int> again;
  QueueSet::deal(42, 64, 8, hand);
  QueueSet::deal(42, 64, 8, again);
  EXPECT_EQ(hand, again);
}

TEST(QueueSet, RunsAtOnceUnderTheLimitThenQueues) {
  Fixture f({false, 8, 2, 3}, 2);
  auto a = request(1), b = request(2), c = request(3);
  EXPECT_EQ(f.start(a), Decision::execute);
  EXPECT_EQ(f.start(b), Decision::execute);
  EXPECT_EQ(f.start(c), Decision::wait);
  EXPECT_EQ(f.qs.seats_in_use(), 2);
  EXPECT_EQ(f.qs.waiting(), 1);
  f.finish(a);
  ASSERT_EQ(f.dispatched.size(), 1u);
  EXPECT_EQ(f.dispatched[0], c);
  EXPECT_EQ(c->state, QueueSet::Request::State::executing);
  EXPECT_EQ(f.qs.counts().dispatched, 3u);
}

TEST(QueueSet, RejectsWhenTheChosenQueueIsFullAndEverySeatTaken) {
  // One queue: every request lands in it.
  Fixture f({false, 1, 1, 2}, 1);
  EXPECT_EQ(f.start(request(1)), Decision::execute);
  EXPECT_EQ(f.start(request(1)), Decision::wait);
  EXPECT_EQ(f.start(request(1)), Decision::wait);
  EXPECT_EQ(f.start(request(1)), Decision::reject);
  EXPECT_EQ(f.qs.counts().rejected, 1u);
}

TEST(QueueSet, WithoutQueuesRejectsWhatDoesNotFit) {
  Fixture f({false, 0, 0, 0}, 2);
  EXPECT_EQ(f.start(request(1)), Decision::execute);
  EXPECT_EQ(f.start(request(1)), Decision::execute);
  EXPECT_EQ(f.start(request(1)), Decision::reject);
}

TEST(QueueSet, ExemptAdmitsEverything) {
  Fixture f({true, 0, 0, 0}, 0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(f.start(request(i, 5)), Decision::execute);
  EXPECT_EQ(f.qs.seats_in_use(), 500);
}

TEST(QueueSet, AWideRequestRunsAloneAndWaitsForTheOthers) {
  Fixture f({false, 4, 1, 10}, 4);
  auto small = request(1);
  auto wide = request(2, 10);  // wider than the whole limit
  EXPECT_EQ(f.start(small), Decision::execute);
  EXPECT_EQ(f.start(wide), Decision::wait);
  f.finish(small);
  ASSERT_EQ(f.dispatched.size(), 1u);
  EXPECT_EQ(f.dispatched[0], wide);
  EXPECT_EQ(f.qs.seats_in_use(), 10);
}

TEST(QueueSet, AQuietFlowOvertakesABusyOne) {
  // Two queues, a hand of one: hashes 0 and 1 deal different queues of two.
  Fixture f({false, 2, 1, 100}, 1);
  std::vector<int> h0, h1;
  QueueSet::deal(0, 2, 1, h0);
  QueueSet::deal(1, 2, 1, h1);
  ASSERT_NE(h0, h1);
  auto running = request(0);
  ASSERT_EQ(f.start(running), Decision::execute);
  std::vector<RequestPtr> busy;
  for (int i = 0; i < 20; ++i) {
    busy.push_back(request(0));
    ASSERT_EQ(f.start(busy.back()), Decision::wait);
  }
  auto quiet = request(1);
  ASSERT_EQ(f.start(quiet), Decision::wait);
  // The busy flow's queue has 20 waiting; the quiet one arrived last but goes first or second.
  f.finish(running);
  ASSERT_EQ(f.dispatched.size(), 1u);
  RequestPtr next = f.dispatched.back();
  if (next != quiet) {
    f.finish(next);
    ASSERT_EQ(f.dispatched.size(), 2u);
    next = f.dispatched.back();
  }
  EXPECT_EQ(next, quiet);
}

TEST(QueueSet, FifoWithinAQueue) {
  Fixture f({false, 1, 1, 10}, 1);
  auto first = request(5);
  ASSERT_EQ(f.start(first), Decision::execute);
  auto a = request(5), b = request(5);
  f.start(a);
  f.start(b);
  f.finish(first);
  f.finish(f.dispatched.back());
  ASSERT_EQ(f.dispatched.size(), 2u);
  EXPECT_EQ(f.dispatched[0], a);
  EXPECT_EQ(f.dispatched[1], b);
}

TEST(QueueSet, CancelTakesAWaiterOutOnlyWhileItWaits) {
  Fixture f({false, 1, 1, 10}, 1);
  auto running = request(1), waiter = request(1);
  f.start(running);
  ASSERT_EQ(f.start(waiter), Decision::wait);
  EXPECT_TRUE(f.qs.cancel(waiter, f.now, true));
  EXPECT_EQ(f.qs.waiting(), 0);
  EXPECT_EQ(f.qs.counts().timed_out, 1u);
  EXPECT_FALSE(f.qs.cancel(running, f.now, true));
  f.finish(running);
  EXPECT_TRUE(f.dispatched.empty());
  EXPECT_TRUE(f.qs.idle());
}

TEST(QueueSet, RaisingTheLimitDispatchesWaiters) {
  Fixture f({false, 4, 2, 10}, 1);
  f.start(request(1));
  auto w = request(2);
  ASSERT_EQ(f.start(w), Decision::wait);
  f.qs.set_concurrency_limit(2, f.now, f.dispatched);
  ASSERT_EQ(f.dispatched.size(), 1u);
  EXPECT_EQ(f.dispatched[0], w);
}

TEST(QueueSet, FewerQueuesDrainBeforeTheyGo) {
  Fixture f({false, 8, 2, 10}, 1);
  auto running = request(3);
  f.start(running);
  std::vector<RequestPtr> waiting;
  for (int i = 0; i < 8; ++i) {
    waiting.push_back(request(static_cast<std::uint64_t>(i) * 977));
    f.start(waiting.back());
  }
  const auto held = f.qs.queues().size();
  EXPECT_GE(held, 2u);
  f.qs.configure({false, 2, 1, 10}, f.now, f.dispatched);
  // Everything still runs, one at a time; then no queue is left.
  RequestPtr current = running;
  for (int i = 0; i < 8; ++i) {
    f.finish(current);
    ASSERT_EQ(f.dispatched.size(), static_cast<std::size_t>(i + 1));
    current = f.dispatched.back();
  }
  f.finish(current);
  EXPECT_TRUE(f.qs.idle());
  EXPECT_TRUE(f.qs.queues().empty());
  // New requests are dealt among the two queues now configured.
  for (std::uint64_t h = 0; h < 15; ++h) {
    auto r = request(h * 7919);
    ASSERT_NE(f.start(r), Decision::reject);
    ASSERT_LT(r->queue->index, 2);
  }
}

TEST(QueueSet, TenMillionQueuesCostNothingUntilUsed) {
  // kube's validation allows 10^7 queues: nothing may be proportional to that.
  Fixture f({false, 10'000'000, 8, 50}, 1);
  EXPECT_TRUE(f.qs.queues().empty());
  auto a = request(1), b = request(2), c = request(3);
  EXPECT_EQ(f.start(a), Decision::execute);
  EXPECT_EQ(f.start(b), Decision::wait);
  EXPECT_EQ(f.start(c), Decision::wait);
  EXPECT_LE(f.qs.queues().size(), 3u);
  f.finish(a);
  f.finish(f.dispatched.back());
  f.finish(f.dispatched.back());
  EXPECT_TRUE(f.qs.queues().empty());
}

TEST(DemandIntegrator, AverageDeviationAndPeak) {
  DemandIntegrator d;
  const auto t0 = Clock::now();
  d.set(0, t0);
  d.set(10, t0 + 1s);
  d.set(0, t0 + 2s);
  const auto r = d.reset(t0 + 4s);
  EXPECT_DOUBLE_EQ(r.max, 10);
  EXPECT_NEAR(r.average, 2.5, 1e-9);  // 10 for 1 s of 4
  EXPECT_NEAR(r.deviation, std::sqrt(25.0 - 6.25), 1e-9);
}

}  // namespace
}  // namespace kwatch::flowcontrol
