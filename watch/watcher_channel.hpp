// A watcher's channel: the frames the dispatcher hands it, waiting for its session on the
// transport's strand. Asio's concurrent channel, with a buffer that holds no memory while it is
// empty (asio's default, a std::deque, allocates about 600 bytes at construction: most of what an
// idle watch costs the cacher) and keeps little once drained.
// Thread-safety: the channel's (any thread sends, the session's strand receives).
#pragma once

#include "watch/watch_types.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/experimental/basic_concurrent_channel.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

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

// asio's channel traits for a channel of one signature `R(error_code, Args...)`, buffering in a
// RingQueue; cancellation and closing come as that signature with default Args, as with asio's
// own traits.
template <class... Signatures>
struct RingChannelTraits {
  template <class... NewSignatures>
  struct rebind {
    using other = RingChannelTraits<NewSignatures...>;
  };
};

template <class R, class... Args>
struct RingChannelTraits<R(boost::system::error_code, Args...)> {
  template <class... NewSignatures>
  struct rebind {
    using other = RingChannelTraits<NewSignatures...>;
  };
  template <class Element>
  struct container {
    using type = RingQueue<Element>;
  };
  using receive_cancelled_signature = R(boost::system::error_code, Args...);
  template <class F>
  static void invoke_receive_cancelled(F f) {
    const boost::system::error_code e = boost::asio::experimental::error::channel_cancelled;
    std::move(f)(e, std::decay_t<Args>()...);
  }
  using receive_closed_signature = R(boost::system::error_code, Args...);
  template <class F>
  static void invoke_receive_closed(F f) {
    const boost::system::error_code e = boost::asio::experimental::error::channel_closed;
    std::move(f)(e, std::decay_t<Args>()...);
  }
};

using WatcherChannel =
    boost::asio::experimental::basic_concurrent_channel<boost::asio::any_io_executor,
                                                        RingChannelTraits<>,
                                                        void(boost::system::error_code, WatchFrame)>;

}  // namespace kwatch::watch
