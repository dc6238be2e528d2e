// Driving an io_context from a test thread: in short slices, until a coroutine has finished or a
// condition holds, each within a deadline (a test waits for what it expects, never for a fixed
// time).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

namespace kwatch::test {

// One slice of the io_context's work (it stops whenever it runs out of work).
inline void turn(boost::asio::io_context& ioc) {
  if (ioc.stopped()) ioc.restart();
  ioc.run_for(std::chrono::milliseconds(10));
}

// Runs `f` on `ioc` to its end and returns its result; a test failure (and T{}) if it has not
// ended within `limit`.
template <class T>
T run_to_end(boost::asio::io_context& ioc, std::function<boost::asio::awaitable<T>()> f,
             std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  std::optional<T> out;
  boost::asio::co_spawn(
      ioc, [&]() -> boost::asio::awaitable<void> { out.emplace(co_await f()); },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!out && std::chrono::steady_clock::now() < deadline) turn(ioc);
  EXPECT_TRUE(out) << "did not finish within the deadline";
  return out ? std::move(*out) : T{};
}

// Turns `ioc` until `condition` holds; false if it does not within `limit`.
inline bool eventually(boost::asio::io_context& ioc, const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    turn(ioc);
  }
  return true;
}

}  // namespace kwatch::test
