#include "controllers/reconciler.hpp"

#include "kinds/scheme.hpp"
#include "watch/cache_follower.hpp"
#include "registry/cacher_registry.hpp"
#include "base/task_failure.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <vector>

namespace kwatch::controllers {

using base::log_task_failure;
using registry::CacherRegistry;
using watch::CacheFollower;
using watch::follow_cache;
namespace asio = boost::asio;

Reconciler::Reconciler(std::shared_ptr<CacherRegistry> cachers,
                       std::shared_ptr<const kinds::ResourceInfo> info, const char* name)
    : cachers_(std::move(cachers)), info_(std::move(info)), name_(name) {}

Reconciler::Reconciler(std::shared_ptr<CacherRegistry> cachers,
                       std::shared_ptr<const kinds::ResourceInfo> info,
                       std::vector<std::shared_ptr<const kinds::ResourceInfo>> also,
                       const char* name)
    : cachers_(std::move(cachers)), info_(std::move(info)), also_(std::move(also)), name_(name) {}

void Reconciler::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  const char* name = name_;
  std::vector<std::shared_ptr<const kinds::ResourceInfo>> watched{info_};
  watched.insert(watched.end(), also_.begin(), also_.end());
  for (const auto& info : watched) {
    if (info == nullptr) continue;
    asio::co_spawn(strand, [self = shared_from_this(), info]() { return self->run(info); },
                   [name](std::exception_ptr e) { log_task_failure(e, name); });
  }
  asio::co_spawn(strand, [self = shared_from_this()]() { return self->tick(); },
                 [name](std::exception_ptr e) { log_task_failure(e, name); });
}

asio::awaitable<void> Reconciler::run(std::shared_ptr<const kinds::ResourceInfo> watched) {
  // Every batch of events (and each new watch) wakes a full reconcile.
  CacheFollower follower;
  follower.cacher = cachers_->ensure(*watched);
  follower.prefix = watched->key_prefix();
  follower.keep_going = [this] { return !stopped_; };
  follower.on_start = [this](std::int64_t) -> asio::awaitable<void> { co_await reconcile(); };
  follower.on_frames = [this](const std::vector<watch::WatchFrame>&) -> asio::awaitable<void> {
    co_await reconcile();
  };
  co_await follow_cache(std::move(follower));
}

asio::awaitable<void> Reconciler::tick() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopped_) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    if (waiting_) co_await reconcile();
  }
}

asio::awaitable<void> Reconciler::reconcile() {
  // The event loop and the ticker share the strand but may both be suspended inside a
  // reconcile: one runs at a time, and a request meanwhile makes it run once more.
  if (reconciling_) {
    again_ = true;
    co_return;
  }
  reconciling_ = true;
  do {
    again_ = false;
    waiting_ = false;
    co_await reconcile_once();
  } while (again_ && !stopped_);
  reconciling_ = false;
}

}  // namespace kwatch::controllers
