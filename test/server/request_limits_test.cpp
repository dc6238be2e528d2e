#include "server/request_limits.hpp"

#include "server/metrics.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <optional>

namespace kwatch::server {
namespace {

auth::UserInfo user(std::string name, std::vector<std::string> groups = {}) {
  return {std::move(name), "", std::move(groups)};
}

TEST(RequestLimits, RefusesOneMoreThanTheLimitWith429AndGivesSlotsBack) {
  auto metrics = std::make_shared<Metrics>();
  auto limits = std::make_shared<RequestLimits>(RequestLimitOptions{2, 1, 0}, metrics);
  auto a = limits->admit(user("a"), false);
  auto b = limits->admit(user("b"), false);
  ASSERT_TRUE(a && b);
  auto c = limits->admit(user("c"), false);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, base::Errc::too_many_requests);
  EXPECT_EQ(c.error().retry_after_seconds, 1);
  EXPECT_EQ(c.error().message, "Too many requests, please try again later.");
  // Writes have their own budget.
  auto w = limits->admit(user("a"), true);
  ASSERT_TRUE(w);
  EXPECT_FALSE(limits->admit(user("b"), true));
  EXPECT_EQ(limits->inflight(false), 2u);
  a->reset();
  EXPECT_EQ(limits->inflight(false), 1u);
  EXPECT_TRUE(limits->admit(user("c"), false));
  EXPECT_EQ(metrics->value("apiserver_dropped_requests_total", {{"request_kind", "readOnly"}}), 1);
  EXPECT_EQ(metrics->value("apiserver_dropped_requests_total", {{"request_kind", "mutating"}}), 1);
}

TEST(RequestLimits, SystemMastersAndZeroLimitsAreNeverRefused) {
  auto limits = std::make_shared<RequestLimits>(RequestLimitOptions{1, 0, 0}, nullptr);
  auto held = limits->admit(user("a"), false);
  ASSERT_TRUE(held);
  EXPECT_TRUE(limits->admit(user("root", {"system:masters"}), false));
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limits->admit(user("w"), true));
}

TEST(RequestLimits, WatchesPerUserAreCountedUntilTheirLeaseEnds) {
  auto limits = std::make_shared<RequestLimits>(RequestLimitOptions{0, 0, 2}, nullptr);
  auto one = limits->admit_watch(user("alice"));
  auto two = limits->admit_watch(user("alice"));
  ASSERT_TRUE(one && two);
  auto three = limits->admit_watch(user("alice"));
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().code, base::Errc::too_many_requests);
  EXPECT_NE(three.error().message.find("--max-watches-per-user"), std::string::npos);
  EXPECT_TRUE(limits->admit_watch(user("bob")));  // another user's budget
  one->reset();
  EXPECT_TRUE(limits->admit_watch(user("alice")));
}

TEST(RequestLimits, ALeaseOutlivesTheLimiterSafely) {
  RequestLimits::Lease lease;
  {
    auto limits = std::make_shared<RequestLimits>(RequestLimitOptions{1, 1, 1}, nullptr);
    lease = *limits->admit_watch(user("alice"));
  }
  lease.reset();  // no use after free (ASan builds check it)
}

namespace asio = boost::asio;

// Runs what is ready (an io_context that ran out of work must be restarted to run again).
void poll(asio::io_context& ioc) {
  ioc.restart();
  ioc.poll();
}

// Starts admit_mutating for `who` on `ioc`; the result lands in `out` once it completes.
void admit_later(asio::io_context& ioc, const std::shared_ptr<RequestLimits>& limits,
                 std::string who,
                 std::optional<apimachinery::ApiResult<RequestLimits::Lease>>& out) {
  asio::co_spawn(
      ioc,
      [limits, who, &out]() -> asio::awaitable<void> {
        out.emplace(co_await limits->admit_mutating(user(who)));
      },
      asio::detached);
}

TEST(RequestLimits, AWriteWaitsInTheQueueForASeatThenTheQueueRefusesWith429) {
  auto metrics = std::make_shared<Metrics>();
  RequestLimitOptions o{0, 1, 0};
  o.mutating_queue_length = 1;
  o.mutating_queue_wait = std::chrono::seconds(30);
  auto limits = std::make_shared<RequestLimits>(o, metrics);
  asio::io_context ioc;
  std::optional<apimachinery::ApiResult<RequestLimits::Lease>> first, second, third;
  admit_later(ioc, limits, "a", first);
  poll(ioc);
  ASSERT_TRUE(first && *first);  // a seat at once
  admit_later(ioc, limits, "b", second);
  poll(ioc);
  EXPECT_FALSE(second);  // queued
  EXPECT_EQ(limits->queued(), 1u);
  admit_later(ioc, limits, "c", third);
  poll(ioc);
  ASSERT_TRUE(third);  // the queue is full: refused at once
  ASSERT_FALSE(*third);
  EXPECT_EQ(third->error().code, base::Errc::too_many_requests);
  EXPECT_EQ(third->error().retry_after_seconds, 1);
  EXPECT_EQ(metrics->value("apiserver_flowcontrol_rejected_requests_total",
                           {{"priority_level", "mutating"}, {"reason", "queue-full"}}),
            1);
  (*first)->reset();  // the seat goes to the queued write
  poll(ioc);
  ASSERT_TRUE(second && *second);
  EXPECT_EQ(limits->queued(), 0u);
  EXPECT_EQ(limits->inflight(true), 1u);
  (*second)->reset();
  EXPECT_EQ(limits->inflight(true), 0u);
}

TEST(RequestLimits, AQueuedWriteIsRefusedWhenItsWaitRunsOut) {
  auto metrics = std::make_shared<Metrics>();
  RequestLimitOptions o{0, 1, 0};
  o.mutating_queue_wait = std::chrono::milliseconds(50);
  auto limits = std::make_shared<RequestLimits>(o, metrics);
  asio::io_context ioc;
  std::optional<apimachinery::ApiResult<RequestLimits::Lease>> held, waiting;
  admit_later(ioc, limits, "a", held);
  admit_later(ioc, limits, "b", waiting);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!waiting && std::chrono::steady_clock::now() < deadline) {
    ioc.run_one_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(waiting);
  ASSERT_FALSE(*waiting);
  EXPECT_EQ(waiting->error().code, base::Errc::too_many_requests);
  EXPECT_EQ(limits->queued(), 0u);
  EXPECT_EQ(metrics->value("apiserver_flowcontrol_rejected_requests_total",
                           {{"priority_level", "mutating"}, {"reason", "time-out"}}),
            1);
  held->value().reset();
  EXPECT_EQ(limits->inflight(true), 0u);
}

TEST(RequestLimits, FanOutSeatsAreTakenEvenWhenAllAreInUseAndKeepWritesQueued) {
  RequestLimitOptions o{0, 3, 0};
  o.watches_per_seat = 10;
  o.max_fanout_seats = 2;
  auto limits = std::make_shared<RequestLimits>(o, nullptr);
  EXPECT_FALSE(limits->charge_fanout(user("a"), 0));  // no watchers: no cost
  EXPECT_FALSE(limits->charge_fanout(user("root", {"system:masters"}), 1000));
  auto one = limits->charge_fanout(user("a"), 5);  // ceil(5/10) = 1 seat
  EXPECT_EQ(limits->inflight(true), 1u);
  auto two = limits->charge_fanout(user("a"), 1000);  // capped at 2
  EXPECT_EQ(limits->inflight(true), 3u);
  auto three = limits->charge_fanout(user("a"), 1000);  // over the limit: the write is done
  EXPECT_EQ(limits->inflight(true), 5u);
  asio::io_context ioc;
  std::optional<apimachinery::ApiResult<RequestLimits::Lease>> write;
  admit_later(ioc, limits, "w", write);
  poll(ioc);
  EXPECT_FALSE(write);  // waits while fan-out holds every seat
  three.reset();
  poll(ioc);
  EXPECT_FALSE(write);  // 3 seats of 3 still held
  two.reset();
  poll(ioc);
  ASSERT_TRUE(write && *write);  // below the limit: the queued write gets its seat
  EXPECT_EQ(limits->inflight(true), 2u);
  one.reset();
  EXPECT_EQ(limits->inflight(true), 1u);
}

}  // namespace
}  // namespace kwatch::server
