#include "watch/event_window.hpp"

#include <gtest/gtest.h>

namespace kwatch::watch {
namespace {

using Clock = EventWindow::Clock;

EventPtr event(std::int64_t rv, Clock::time_point at) {
  auto e = std::make_shared<CachedEvent>();
  e->resource_version = rv;
  e->recorded = at;
  return e;
}

std::vector<std::int64_t> versions(const std::vector<EventPtr>& events) {
  std::vector<std::int64_t> out;
  for (const auto& e : events) out.push_back(e->resource_version);
  return out;
}

TEST(EventWindow, EventsSinceAVersionAreFoundByBinarySearch) {
  EventWindow w(8, 8);
  w.reset(10);
  const auto t = Clock::now();
  for (std::int64_t rv : {12, 15, 16, 20}) w.push(event(rv, t), t);
  EXPECT_EQ(versions(*w.since(10)), (std::vector<std::int64_t>{12, 15, 16, 20}));
  EXPECT_EQ(versions(*w.since(15)), (std::vector<std::int64_t>{16, 20}));
  EXPECT_EQ(versions(*w.since(17)), (std::vector<std::int64_t>{20}));
  EXPECT_TRUE(w.since(20)->empty());
  EXPECT_FALSE(w.since(9));
}

TEST(EventWindow, EventsAreNumberedInPushOrderAndReadOnFromANumber) {
  EventWindow w(4, 4);
  w.reset(0);
  const auto t = Clock::now();
  // Two events of one revision (one transaction): numbers tell them apart.
  for (std::int64_t rv : {3, 3, 5, 8}) w.push(event(rv, t), t);
  EXPECT_EQ(w.first_sequence(), 0u);
  EXPECT_EQ(w.next_sequence(), 4u);
  std::vector<EventPtr> out;
  ASSERT_TRUE(w.read(1, 2, out));
  EXPECT_EQ(versions(out), (std::vector<std::int64_t>{3, 5}));
  out.clear();
  ASSERT_TRUE(w.read(4, 10, out));  // caught up: nothing yet, but not gone
  EXPECT_TRUE(out.empty());
  for (std::int64_t rv : {9, 10}) w.push(event(rv, t), t);  // evicts events 0 and 1
  EXPECT_EQ(w.first_sequence(), 2u);
  EXPECT_FALSE(w.read(1, 10, out));
  ASSERT_TRUE(w.read(2, 10, out));
  EXPECT_EQ(versions(out), (std::vector<std::int64_t>{5, 8, 9, 10}));
  // A re-list empties the window; numbering goes on.
  w.reset(20);
  EXPECT_EQ(w.first_sequence(), 6u);
  EXPECT_FALSE(w.read(5, 10, out));
}

TEST(EventWindow, FullWindowOfFreshEventsDoublesUpToTheUpperBound) {
  EventWindow w(4, 16);
  w.reset(0);
  const auto t = Clock::now();
  for (int rv = 1; rv <= 20; ++rv) w.push(event(rv, t), t);
  EXPECT_EQ(w.capacity(), 16u);
  EXPECT_EQ(w.size(), 16u);
  EXPECT_EQ(w.start_resource_version(), 4);
  EXPECT_FALSE(w.since(3));
  EXPECT_EQ(w.since(4)->size(), 16u);
}

TEST(EventWindow, FullWindowOfStaleEventsEvictsInsteadOfGrowing) {
  EventWindow w(4, 16);
  w.reset(0);
  const auto old = Clock::now() - std::chrono::minutes(5);
  for (int rv = 1; rv <= 4; ++rv) w.push(event(rv, old), old + std::chrono::seconds(rv));
  const auto now = Clock::now();
  w.push(event(5, now), now);
  EXPECT_EQ(w.capacity(), 4u);
  EXPECT_EQ(versions(*w.since(1)), (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_FALSE(w.since(0));
}

TEST(EventWindow, WindowShrinksWhenEvenItsNewestQuarterIsStale) {
  EventWindow w(4, 64);
  w.reset(0);
  const auto t0 = Clock::now() - std::chrono::minutes(10);
  for (int rv = 1; rv <= 16; ++rv) w.push(event(rv, t0), t0);  // grows to 16 while fresh
  ASSERT_EQ(w.capacity(), 16u);
  const auto now = Clock::now();
  w.push(event(17, now), now);
  EXPECT_EQ(w.capacity(), 8u);
  EXPECT_EQ(versions(*w.since(w.start_resource_version())).back(), 17);
  EXPECT_EQ(w.size(), 8u);
}

TEST(EventWindow, ResetForgetsEventsAndStartsAtTheListVersion) {
  EventWindow w(4, 4);
  const auto t = Clock::now();
  w.push(event(3, t), t);
  w.reset(50);
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.since(49));
  EXPECT_TRUE(w.since(50)->empty());
}

}  // namespace
}  // namespace kwatch::watch
