#include "client/informer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kwatch::client {

namespace asio = boost::asio;

Informer::Informer(std::shared_ptr<HttpClient> client, ReflectorOptions options,
                   std::chrono::milliseconds resync_period,
                   Store::Representation representation)
    : client_(std::move(client)),
      store_(std::make_shared<Store>(representation)),
      resync_period_(resync_period) {
  reflector_ = std::make_shared<Reflector>(
      client_, store_, std::move(options),
      [this](EventType type, const Store::Object& object, const Store::Object& previous) {
        notify(type, object, previous);
      });
}

Informer::~Informer() { stop(); }

std::size_t Informer::add_handler(Handler handler, std::size_t capacity) {
  auto listener = std::make_unique<Listener>();
  listener->handler = std::move(handler);
  listener->capacity = std::max<std::size_t>(1, capacity);
  Listener* raw = listener.get();
  listeners_.push_back(std::move(listener));
  raw->thread = std::thread([this, raw] { serve(*raw); });
  return listeners_.size() - 1;
}

void Informer::notify(EventType type, const Store::Object& object, const Store::Object& previous) {
  for (auto& l : listeners_) {
    bool wake = false;
    {
      std::lock_guard lock(l->mutex);
      wake = l->idle;
      l->idle = false;  // one wake-up per idle spell
      if (l->queue.size() + l->in_hand < l->capacity && l->overflowed.empty()) {
        l->queue.push_back({type, object, previous});
      } else {
        // Full: the latest change of this object replaces any kept before it.
        ++l->stats.overflows;
        auto key = Store::key_of(*object);
        auto it = l->overflowed.find(key);
        if (it == l->overflowed.end()) {
          l->overflowed.emplace(std::move(key), Notification{type, object, previous});
        } else {
          // An object added and changed while full is still an addition to this handler.
          const EventType first = it->second.type;
          it->second = Notification{
              first == EventType::added && type != EventType::deleted ? EventType::added : type,
              object, first == EventType::added ? nullptr : it->second.previous};
        }
      }
      l->stats.backlog = l->queue.size() + l->in_hand + l->overflowed.size();
      l->stats.max_backlog = std::max(l->stats.max_backlog, l->stats.backlog);
    }
    // A busy handler's thread takes what is queued when it is done: no wake-up per change.
    if (wake) l->wake.notify_one();
  }
}

void Informer::serve(Listener& l) {
  std::unique_lock lock(l.mutex);
  std::deque<Notification> batch;
  for (;;) {
    l.idle = true;
    l.wake.wait(lock, [&] { return stopped_ || !l.queue.empty() || !l.overflowed.empty(); });
    l.idle = false;
    if (stopped_) return;
    // Everything queued at once; the overflow (kept per object) one at a time, after it.
    if (!l.queue.empty()) {
      batch.swap(l.queue);
    } else {
      batch.push_back(std::move(l.overflowed.begin()->second));
      l.overflowed.erase(l.overflowed.begin());
    }
    l.in_hand = batch.size();
    lock.unlock();
    for (auto& n : batch) {
      if (stopped_) return;
      l.handler(n.type, n.object, n.previous);
      n = Notification{};
      std::lock_guard counted(l.mutex);
      ++l.stats.delivered;
      --l.in_hand;
      l.stats.backlog = l.queue.size() + l.in_hand + l.overflowed.size();
    }
    batch.clear();
    lock.lock();
  }
}

asio::awaitable<void> Informer::resync_loop() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto next = std::chrono::steady_clock::now() + resync_period_;
  while (!stopped_) {
    // In slices, so that stop() ends this soon.
    timer.expires_after(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), next - std::chrono::steady_clock::now()));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (stopped_ || std::chrono::steady_clock::now() < next) continue;
    next += resync_period_;
    if (!has_synced()) continue;
    for (const auto& object : store_->list()) notify(EventType::modified, object, object);
  }
  resyncing_ = false;
}

asio::awaitable<void> Informer::run() {
  if (resync_period_.count() > 0) {
    resyncing_ = true;
    asio::co_spawn(co_await asio::this_coro::executor, resync_loop(), asio::detached);
  }
  co_await reflector_->run();
  // The resync task refers to this informer: it ends before run() does.
  asio::steady_timer wait(co_await asio::this_coro::executor);
  while (resyncing_) {
    wait.expires_after(std::chrono::milliseconds(10));
    co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

void Informer::stop() {
  if (stopped_.exchange(true)) return;
  reflector_->stop();
  for (auto& l : listeners_) {
    {
      std::lock_guard lock(l->mutex);
    }
    l->wake.notify_all();
  }
  for (auto& l : listeners_) {
    if (l->thread.joinable()) l->thread.join();
  }
}

bool Informer::wait_for_cache_sync(std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!has_synced()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

HandlerStats Informer::stats(std::size_t handler) const {
  auto& l = *listeners_.at(handler);
  std::lock_guard lock(l.mutex);
  return l.stats;
}

}  // namespace kwatch::client
