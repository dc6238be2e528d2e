#include "watch/watcher_queue.hpp"

#include "watch/object_codec.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kwatch::watch {
namespace {

// Counts live elements, to see that the ring destroys what it moves and pops.
struct Counted {
  static inline int live = 0;
  explicit Counted(int v) : value(std::make_unique<int>(v)) { ++live; }
  Counted(Counted&& o) noexcept : value(std::move(o.value)) { ++live; }
  Counted(const Counted& o) : value(std::make_unique<int>(*o.value)) { ++live; }
  ~Counted() { --live; }
  std::unique_ptr<int> value;
};

TEST(RingQueue, KeepsOrderAcrossWrapsAndGrowth) {
  Counted::live = 0;
  {
    RingQueue<Counted> q;
    int next_in = 0, next_out = 0;
    // Pushes and pops in uneven runs, so the head wraps before and while the ring grows.
    for (int round = 0; round < 50; ++round) {
      for (int i = 0; i < round % 7 + 1; ++i) q.push_back(Counted(next_in++));
      for (int i = 0; i < round % 5 && !q.empty(); ++i) {
        ASSERT_EQ(*q.front().value, next_out++);
        q.pop_front();
      }
      ASSERT_EQ(q.size(), static_cast<std::size_t>(next_in - next_out));
      ASSERT_EQ(Counted::live, next_in - next_out);
    }
    RingQueue<Counted> copied(q);
    RingQueue<Counted> moved(std::move(q));
    EXPECT_TRUE(q.empty());
    while (!moved.empty()) {
      ASSERT_EQ(*moved.front().value, next_out);
      ASSERT_EQ(*copied.front().value, next_out++);
      moved.pop_front();
      copied.pop_front();
    }
    EXPECT_EQ(next_out, next_in);
    moved.push_back(Counted(1));
    moved.clear();
    EXPECT_TRUE(moved.empty());
  }
  EXPECT_EQ(Counted::live, 0);
}

// Two threads taking the lock in turn, often together: each increment is whole.
TEST(TinyLock, KeepsTwoThreadsOutOfEachOther) {
  TinyLock lock;
  long counter = 0;
  auto work = [&] {
    for (int i = 0; i < 200000; ++i) {
      lock.lock();
      counter = counter + 1;
      lock.unlock();
    }
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(counter, 400000);
}

WatchFrame frame(EventType type = EventType::added) { return WatchFrame{type, nullptr}; }

TEST(WatcherQueue, HoldsUpToItsCapacityAndGivesFramesInOrder) {
  WatcherQueue q(3);
  EXPECT_TRUE(q.try_push(frame(EventType::added)));
  EXPECT_TRUE(q.try_push(frame(EventType::modified)));
  EXPECT_TRUE(q.try_push(frame(EventType::deleted)));
  EXPECT_FALSE(q.try_push(frame())) << "beyond its capacity";
  std::vector<WatchFrame> out;
  EXPECT_EQ(q.pop(out, 2), 2u);
  EXPECT_EQ(q.pop(out, 10), 1u);
  EXPECT_EQ(q.pop(out, 10), 0u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].type, EventType::added);
  EXPECT_EQ(out[1].type, EventType::modified);
  EXPECT_EQ(out[2].type, EventType::deleted);
}

TEST(WatcherQueue, CallsItsWaiterOnceWhenAFrameComes) {
  WatcherQueue q(3);
  int calls = 0;
  q.when_ready([&] { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(q.try_push(frame()));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(q.try_push(frame()));
  EXPECT_EQ(calls, 1) << "once per when_ready";
  // Frames already there: called at once.
  q.when_ready([&] { ++calls; });
  EXPECT_EQ(calls, 2);
}

// The deadline's wake can come between the session's last look and its when_ready: it must not
// be lost (the watch would then end only at its next event).
TEST(WatcherQueue, AWakeWithNoWaiterIsKeptForTheNextOne) {
  WatcherQueue q(3);
  q.wake();
  int calls = 0;
  q.when_ready([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  // Seen once: the next waiter waits.
  q.when_ready([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  q.wake();
  EXPECT_EQ(calls, 2);
}

TEST(WatcherQueue, CloseWakesRefusesFramesAndKeepsWhatIsQueued) {
  WatcherQueue q(3);
  EXPECT_TRUE(q.try_push(frame()));
  std::vector<WatchFrame> out;
  EXPECT_EQ(q.pop(out, 10), 1u);
  int calls = 0;
  q.when_ready([&] { ++calls; });
  EXPECT_TRUE(q.try_push(frame()));
  EXPECT_EQ(calls, 1);
  q.close();
  EXPECT_FALSE(q.try_push(frame()));
  q.when_ready([&] { ++calls; });
  EXPECT_EQ(calls, 2) << "closed: at once";
  out.clear();
  EXPECT_EQ(q.pop(out, 10), 1u);
}

TEST(WatcherQueue, AForgottenWaiterIsNeverCalled) {
  WatcherQueue q(3);
  auto held = std::make_shared<int>(0);
  std::weak_ptr<int> watch = held;
  q.when_ready([held = std::move(held)] { ++*held; });
  EXPECT_FALSE(watch.expired());
  q.forget();
  EXPECT_TRUE(watch.expired()) << "what the waiter held is let go";
  EXPECT_TRUE(q.try_push(frame()));
}

// A dispatcher thread pushing while the session's thread pops and waits: every frame arrives,
// in order, and a waiting session is always woken.
TEST(WatcherQueue, APusherAndAWaiterOnTwoThreadsLoseNothing) {
  constexpr int kFrames = 50000;
  WatcherQueue q(64);
  std::atomic<int> wakes{0};
  std::thread pusher([&] {
    for (int i = 0; i < kFrames;) {
      if (q.try_push(WatchFrame{EventType::added, raw_object("{}", i)})) {
        ++i;
      } else {
        std::this_thread::yield();  // full: the session is behind
      }
    }
    q.close();
  });
  std::vector<WatchFrame> out;
  std::int64_t next = 0;
  bool closed = false;
  std::atomic<bool> ready{false};  // outlives every call (one may still be notifying)
  while (!closed) {
    out.clear();
    if (q.pop(out, 512) == 0) {
      ready = false;
      q.when_ready([&] {
        ready = true;
        ready.notify_one();
      });
      ready.wait(false);
      ++wakes;
      out.clear();
      if (q.pop(out, 512) == 0) closed = next == kFrames;
    }
    for (const auto& f : out) ASSERT_EQ(f.object->resource_version, next++);
  }
  pusher.join();
  EXPECT_EQ(next, kFrames);
  EXPECT_GT(wakes.load(), 0);
}

}  // namespace
}  // namespace kwatch::watch
