// Reading a storage watch stream in tests: next() with a deadline, and events until a count.
#pragma once

#include "storage/storage.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <vector>

namespace kwatch::storage::test {

// next() with a deadline: the batch, or `timeout` if nothing came.
inline boost::asio::awaitable<Result<WatchBatch>> next_within(WatchStream& stream,
                                                              std::chrono::milliseconds d) {
  using namespace boost::asio::experimental::awaitable_operators;
  boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, d);
  auto r = co_await (stream.next() || t.async_wait(boost::asio::use_awaitable));
  if (r.index() == 1) co_return base::Errc::timeout;
  co_return std::move(std::get<0>(r));
}

// Events until `n` arrived (progress batches skipped), or what went wrong.
inline boost::asio::awaitable<Result<std::vector<Event>>> collect(
    WatchStream& stream, std::size_t n,
    std::chrono::milliseconds d = std::chrono::seconds(5)) {
  std::vector<Event> events;
  const auto until = std::chrono::steady_clock::now() + d;
  while (events.size() < n) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) co_return base::Errc::timeout;
    auto batch = co_await next_within(stream, left);
    if (!batch) co_return batch.error();
    for (auto& e : batch->events) events.push_back(std::move(e));
  }
  co_return events;
}

}  // namespace kwatch::storage::test
