#include "watch/cache_follower.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kwatch::watch {

namespace asio = boost::asio;

asio::awaitable<void> follow_cache(CacheFollower f) {
  asio::steady_timer retry(co_await asio::this_coro::executor);
  while (f.keep_going()) {
    watch::WatchRequest request;
    request.prefix = f.prefix;
    request.internal = true;
    request.deadline = std::chrono::steady_clock::now() + f.watch_lifetime;
    auto session = co_await f.cacher->watch(std::move(request));
    if (!session || (*session)->error()) {
      // Not ready yet (start-up or a re-list): try again shortly.
      retry.expires_after(std::chrono::milliseconds(100));
      co_await retry.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    if (f.on_start) co_await f.on_start((*session)->start_resource_version());
    std::vector<watch::WatchFrame> frames;
    while (f.keep_going()) {
      auto next = co_await (*session)->next(frames);
      if (!next) break;
      co_await f.on_frames(frames);
    }
  }
}

boost::asio::awaitable<void> mark_changes(std::shared_ptr<Cacher> cacher, std::string prefix,
                                          std::atomic<bool>& changed,
                                          std::function<bool()> keep_going) {
  CacheFollower follower;
  follower.cacher = std::move(cacher);
  follower.prefix = std::move(prefix);
  follower.keep_going = std::move(keep_going);
  follower.on_start = [&changed](std::int64_t) -> boost::asio::awaitable<void> {
    changed = true;
    co_return;
  };
  follower.on_frames = [&changed](const std::vector<WatchFrame>&) -> boost::asio::awaitable<void> {
    changed = true;
    co_return;
  };
  co_await follow_cache(std::move(follower));
}

}  // namespace kwatch::watch
