// A watcher's queue: the frames the dispatcher hands it, waiting for its session on the
// transport's strand, and the one call that wakes the session when more comes. Lighter than an
// asio channel (an executor, a service's bookkeeping and a pending operation per watcher: about
// a sixth of what an idle HTTP/2 watch cost): a four-byte lock, a ring that holds no memory
// while empty, and a callback the waking thread runs.
// Thread-safety: push, close and wake from any thread; pop and when_ready from the session's
// strand, one at a time.
#pragma once

#include "watch/watch_types.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <utility>
#include <vector>

namespace kwatch::watch {

// A first-in first-out ring of `T` that allocates on its first push, doubles when full, and gives
// its memory back when it empties while holding room for more than kKept elements.
template <class T>
class RingQueue {
 public:
  static constexpr std::size_t kKept = 4;

  RingQueue() = default;
  RingQueue(RingQueue&& o) noexcept { take(o); }
  RingQueue& operator=(RingQueue&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  RingQueue(const RingQueue& o) { copy(o); }
  RingQueue& operator=(const RingQueue& o) {
    if (this != &o) {
      release();
      copy(o);
    }
    return *this;
  }
  ~RingQueue() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& front() { return slots_[head_]; }
  void push_back(T value) {
    if (size_ == capacity_) grow();
    ::new (static_cast<void*>(slots_ + (head_ + size_) % capacity_)) T(std::move(value));
    ++size_;
  }
  void pop_front() {
    slots_[head_].~T();
    head_ = (head_ + 1) % capacity_;
    if (--size_ == 0) {
      head_ = 0;
      if (capacity_ > kKept) release();
    }
  }
  void clear() {
    while (size_ > 0) pop_front();
  }

 private:
  void grow() {
    const std::size_t capacity = capacity_ == 0 ? 2 : capacity_ * 2;
    T* slots = static_cast<T*>(::operator new(capacity * sizeof(T), std::align_val_t{alignof(T)}));
    for (std::size_t i = 0; i < size_; ++i) {
      T& from = slots_[(head_ + i) % capacity_];
      ::new (static_cast<void*>(slots + i)) T(std::move(from));
      from.~T();
    }
    free_slots();
    slots_ = slots;
    capacity_ = capacity;
    head_ = 0;
  }
  void free_slots() {
    if (slots_ != nullptr) ::operator delete(slots_, std::align_val_t{alignof(T)});
    slots_ = nullptr;
  }
  void release() {
    for (std::size_t i = 0; i < size_; ++i) slots_[(head_ + i) % capacity_].~T();
    free_slots();
    capacity_ = size_ = head_ = 0;
  }
  void take(RingQueue& o) {
    slots_ = std::exchange(o.slots_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    size_ = std::exchange(o.size_, 0);
    head_ = std::exchange(o.head_, 0);
  }
  void copy(const RingQueue& o) {
    for (std::size_t i = 0; i < o.size_; ++i) push_back(o.slots_[(o.head_ + i) % o.capacity_]);
  }

  T* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::size_t head_ = 0;
};

// A lock for state two threads touch for a few instructions at a time, in four bytes where
// std::mutex takes forty: unlocked, locked, or locked with a thread waiting in the kernel (only
// then does unlocking wake one). Uncontended, a lock and an unlock are one atomic each.
class TinyLock {
 public:
  void lock() noexcept {
    std::uint32_t seen = kUnlocked;
    if (state_.compare_exchange_strong(seen, kLocked, std::memory_order_acquire)) return;
    if (seen != kWaited) seen = state_.exchange(kWaited, std::memory_order_acquire);
    while (seen != kUnlocked) {
      state_.wait(kWaited, std::memory_order_relaxed);
      seen = state_.exchange(kWaited, std::memory_order_acquire);
    }
  }
  void unlock() noexcept {
    if (state_.exchange(kUnlocked, std::memory_order_release) == kWaited) state_.notify_one();
  }

 private:
  static constexpr std::uint32_t kUnlocked = 0;
  static constexpr std::uint32_t kLocked = 1;
  static constexpr std::uint32_t kWaited = 2;
  std::atomic<std::uint32_t> state_{kUnlocked};
};

class WatcherQueue {
 public:
  explicit WatcherQueue(std::size_t capacity) : capacity_(static_cast<std::uint32_t>(capacity)) {}
  WatcherQueue(const WatcherQueue&) = delete;
  WatcherQueue& operator=(const WatcherQueue&) = delete;

  // Adds `frame` unless the queue holds its capacity or is closed, and wakes the waiter.
  bool try_push(WatchFrame frame);
  // No more pushes; wakes the waiter. What is queued can still be taken.
  void close();
  // Wakes the waiter without a frame (the watch reached its deadline or was stopped); if none
  // waits, the next when_ready() is called at once, so a wake is never lost.
  void wake();

  // Moves up to `most` frames to the end of `out`, oldest first; how many.
  std::size_t pop(std::vector<WatchFrame>& out, std::size_t most);
  // `ready` is called once, without the queue's lock, by the thread that next pushes, closes or
  // wakes, or here and now if a frame, a close or a wake is already there. It must be quick and
  // safe on any thread (post to the session's strand). At most one pending.
  void when_ready(std::function<void()> ready);
  // Drops a pending `ready` uncalled (its session is gone).
  void forget();

 private:
  TinyLock lock_;
  std::uint32_t capacity_;
  bool closed_ = false;
  bool woken_ = false;  // a wake() no waiter has seen yet
  RingQueue<WatchFrame> frames_;
  std::function<void()> ready_;
};

}  // namespace kwatch::watch
