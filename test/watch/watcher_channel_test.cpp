#include "watch/watcher_channel.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace kwatch::watch {
namespace {

namespace asio = boost::asio;

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

TEST(WatcherChannel, BuffersUpToItsCapacityAndWakesAWaitingReceiver) {
  asio::io_context ioc;
  WatcherChannel channel(ioc.get_executor(), 3);
  auto frame = [] { return WatchFrame{EventType::added, nullptr}; };
  EXPECT_TRUE(channel.try_send(boost::system::error_code{}, frame()));
  EXPECT_TRUE(channel.try_send(boost::system::error_code{}, frame()));
  EXPECT_TRUE(channel.try_send(boost::system::error_code{}, frame()));
  EXPECT_FALSE(channel.try_send(boost::system::error_code{}, frame())) << "beyond its capacity";
  int taken = 0;
  while (channel.try_receive([&](boost::system::error_code, WatchFrame) { ++taken; })) {
  }
  EXPECT_EQ(taken, 3);

  std::vector<EventType> got;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto f = co_await channel.async_receive(asio::use_awaitable);
        got.push_back(f.type);
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  ioc.poll();
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(channel.try_send(boost::system::error_code{}, WatchFrame{EventType::deleted, nullptr}));
  ioc.poll();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], EventType::deleted);
}

}  // namespace
}  // namespace kwatch::watch
