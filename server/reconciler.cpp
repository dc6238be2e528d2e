#include "server/reconciler.hpp"

#include "registry/scheme.hpp"
#include "server/cacher_registry.hpp"
#include "server/task_failure.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <vector>

namespace kwatch::server {

namespace asio = boost::asio;

Reconciler::Reconciler(std::shared_ptr<CacherRegistry> cachers, const registry::ResourceInfo* info,
                       const char* name)
    : cachers_(std::move(cachers)), info_(info), name_(name) {}

Reconciler::Reconciler(std::shared_ptr<CacherRegistry> cachers, const registry::ResourceInfo* info,
                       std::vector<const registry::ResourceInfo*> also, const char* name)
    : cachers_(std::move(cachers)), info_(info), also_(std::move(also)), name_(name) {}

void Reconciler::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  const char* name = name_;
  std::vector<const registry::ResourceInfo*> watched{info_};
  watched.insert(watched.end(), also_.begin(), also_.end());
  for (const registry::ResourceInfo* info : watched) {
    if (info == nullptr) continue;
    asio::co_spawn(strand, [self = shared_from_this(), info]() { return self->run(info); },
                   [name](std::exception_ptr e) { log_task_failure(e, name); });
  }
  asio::co_spawn(strand, [self = shared_from_this()]() { return self->tick(); },
                 [name](std::exception_ptr e) { log_task_failure(e, name); });
}

asio::awaitable<void> Reconciler::run(const registry::ResourceInfo* watched) {
  auto cacher = cachers_->ensure(*watched);
  asio::steady_timer retry(co_await asio::this_coro::executor);
  while (!stopped_) {
    watch::WatchRequest request;
    request.prefix = watched->key_prefix();
    request.internal = true;
    request.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    auto session = co_await cacher->watch(std::move(request));
    if (!session) {
      // Not ready yet (start-up or a re-list): try again shortly.
      retry.expires_after(std::chrono::milliseconds(100));
      co_await retry.async_wait(asio::use_awaitable);
      continue;
    }
    std::vector<watch::WatchFrame> frames;
    for (;;) {
      co_await reconcile();
      if (stopped_) co_return;
      auto next = co_await (*session)->next(frames);
      if (!next) break;
    }
  }
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

}  // namespace kwatch::server
