#include "watch/watcher_queue.hpp"

#include <mutex>

namespace kwatch::watch {

bool WatcherQueue::try_push(WatchFrame frame) {
  std::function<void()> ready;
  {
    std::lock_guard guard(lock_);
    if (closed_ || frames_.size() >= capacity_) return false;
    frames_.push_back(std::move(frame));
    ready.swap(ready_);
  }
  if (ready) ready();
  return true;
}

void WatcherQueue::close() {
  std::function<void()> ready;
  {
    std::lock_guard guard(lock_);
    closed_ = true;
    ready.swap(ready_);
  }
  if (ready) ready();
}

void WatcherQueue::wake() {
  std::function<void()> ready;
  {
    std::lock_guard guard(lock_);
    if (ready_) {
      ready.swap(ready_);
    } else {
      woken_ = true;
    }
  }
  if (ready) ready();
}

std::size_t WatcherQueue::pop(std::vector<WatchFrame>& out, std::size_t most) {
  std::lock_guard guard(lock_);
  std::size_t n = 0;
  for (; n < most && !frames_.empty(); ++n) {
    out.push_back(std::move(frames_.front()));
    frames_.pop_front();
  }
  return n;
}

void WatcherQueue::when_ready(std::function<void()> ready) {
  {
    std::lock_guard guard(lock_);
    if (!closed_ && !woken_ && frames_.empty()) {
      ready_ = std::move(ready);
      return;
    }
    woken_ = false;
  }
  ready();
}

void WatcherQueue::forget() {
  std::function<void()> dropped;
  std::lock_guard guard(lock_);
  dropped.swap(ready_);
  // Destroyed after the lock is released (declared first): it may hold what takes other locks.
}

}  // namespace kwatch::watch
