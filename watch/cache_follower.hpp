// How kwatch's own controllers follow a watch cache: an internal watch of one prefix, renewed
// whenever it ends (deadline, slow consumer, re-list) and retried while the cache is not ready;
// every batch of frames goes to the caller. Each new watch starts with the prefix's current
// objects as ADDED events (no resourceVersion: initial events), so a caller that keeps state
// clears it in `on_start`.
//
// Strand: the calling coroutine's; `on_start` and `on_frames` run on it. Cancellation: returns
// when `keep_going` says no, checked before each watch and after each batch.
#pragma once

#include "watch/cacher.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::watch {

struct CacheFollower {
  std::shared_ptr<watch::Cacher> cacher;
  std::string prefix;
  std::chrono::steady_clock::duration watch_lifetime = std::chrono::hours(1);
  std::function<bool()> keep_going;
  // May be empty. Called with the version the new watch's initial state covers.
  std::function<boost::asio::awaitable<void>(std::int64_t start_resource_version)> on_start;
  std::function<boost::asio::awaitable<void>(const std::vector<watch::WatchFrame>& frames)>
      on_frames;
};

boost::asio::awaitable<void> follow_cache(CacheFollower follower);

// Follows the objects under `prefix` only to know that they changed: `changed` is set when a
// watch (re)starts and after every batch, for a component that rebuilds from the cache at its
// own pace. Returns when `keep_going` says no.
boost::asio::awaitable<void> mark_changes(std::shared_ptr<Cacher> cacher, std::string prefix,
                                          std::atomic<bool>& changed,
                                          std::function<bool()> keep_going);

}  // namespace kwatch::watch
