#include "server/request_limits.hpp"

#include "server/metrics.hpp"

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

registry::UserInfo user(std::string name, std::vector<std::string> groups = {}) {
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
  EXPECT_EQ(c.error().code, registry::Errc::too_many_requests);
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
  EXPECT_EQ(three.error().code, registry::Errc::too_many_requests);
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

}  // namespace
}  // namespace kwatch::server
