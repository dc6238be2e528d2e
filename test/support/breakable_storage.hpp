// Storage for tests of what follows it (watch caches and their users): an inner store whose watch
// streams can be made to fail, to fall behind (events held while paused), and to announce
// progress out of order with events as etcd before 3.4.25 does; its lists can be held too.
#pragma once

#include "storage/storage.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace kwatch::test {

// Storage whose watch streams can be made to fail, to force the reflector to re-list.
class BreakableStorage : public storage::Storage {
 public:
  explicit BreakableStorage(std::shared_ptr<storage::Storage> inner) : inner_(std::move(inner)) {}
  // The stream's next read fails with `break_with`, losing the batch it read.
  std::atomic<bool> broken{false};
  std::atomic<base::Errc> break_with{base::Errc::unavailable};
  // So many watch() calls fail with `unavailable` (storage unreachable); `watches` counts them all.
  std::atomic<int> refuse_watches{0};
  std::atomic<int> watches{0};
  // Like etcd < 3.4.25: progress is not ordered with events.
  std::atomic<bool> unordered{false};
  // Events wait while paused (those a stream was already reading too): the cache falls behind.
  std::atomic<bool> paused{false};
  // Events under one prefix wait (as `paused` for all): one cache falls behind the others.
  void hold_events_under(std::string prefix) {
    std::lock_guard lock(mutex_);
    held_prefix_ = std::move(prefix);
  }
  void release_events() { hold_events_under(""); }
  bool holds(const std::string& prefix) const {
    std::lock_guard lock(mutex_);
    return !held_prefix_.empty() && prefix.compare(0, held_prefix_.size(), held_prefix_) == 0;
  }
  // Lists wait while held; `lists` counts those begun.
  std::atomic<bool> hold_lists{false};
  std::atomic<int> lists{0};

  boost::asio::awaitable<base::Result<storage::KeyValue>> get(std::string k, std::int64_t r) override {
    co_return co_await inner_->get(std::move(k), r);
  }
  boost::asio::awaitable<base::Result<storage::ListResult>> list(storage::ListOptions o) override {
    ++lists;
    co_await wait_while(hold_lists);
    co_return co_await inner_->list(std::move(o));
  }
  boost::asio::awaitable<base::Result<storage::TxnResult>> put_if(std::string k, std::int64_t e,
                                                              std::string v) override {
    co_return co_await inner_->put_if(std::move(k), e, std::move(v));
  }
  boost::asio::awaitable<base::Result<storage::TxnResult>> delete_if(std::string k,
                                                                 std::int64_t e) override {
    co_return co_await inner_->delete_if(std::move(k), e);
  }
  boost::asio::awaitable<base::Result<std::int64_t>> current_revision() override {
    co_return co_await inner_->current_revision();
  }
  boost::asio::awaitable<base::Result<void>> compact(std::int64_t r) override {
    co_return co_await inner_->compact(r);
  }
  boost::asio::awaitable<base::Result<std::unique_ptr<storage::WatchStream>>> watch(
      std::string prefix, std::int64_t start, storage::PrevKv prev_kv) override {
    ++watches;
    if (refuse_watches > 0) {
      --refuse_watches;
      co_return base::Errc::unavailable;
    }
    std::string watched = prefix;
    auto s = co_await inner_->watch(std::move(prefix), start, prev_kv);
    if (!s) co_return s.error();
    std::unique_ptr<storage::WatchStream> wrapped =
        std::make_unique<Stream>(std::move(*s), this, std::move(watched));
    co_return wrapped;
  }

 private:
  struct Stream : storage::WatchStream {
    Stream(std::unique_ptr<storage::WatchStream> s, BreakableStorage* owner, std::string prefix)
        : inner(std::move(s)), owner(owner), prefix(std::move(prefix)) {}
    boost::asio::awaitable<base::Result<storage::WatchBatch>> next() override {
      co_await wait_until_free();
      auto b = co_await inner->next();
      co_await wait_until_free();  // a batch read as the pause began waits too
      if (owner->broken.exchange(false)) co_return owner->break_with.load();
      co_return b;
    }
    void request_progress() override { inner->request_progress(); }
    bool progress_is_ordered() const override { return !owner->unordered; }
    boost::asio::awaitable<void> wait_until_free() {
      boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
      while (owner->paused || owner->holds(prefix)) {
        t.expires_after(std::chrono::milliseconds(1));
        co_await t.async_wait(boost::asio::use_awaitable);
      }
    }
    std::unique_ptr<storage::WatchStream> inner;
    BreakableStorage* owner;
    std::string prefix;
  };
  static boost::asio::awaitable<void> wait_while(const std::atomic<bool>& flag) {
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor);
    while (flag) {
      t.expires_after(std::chrono::milliseconds(1));
      co_await t.async_wait(boost::asio::use_awaitable);
    }
  }

  std::shared_ptr<storage::Storage> inner_;
  mutable std::mutex mutex_;
  std::string held_prefix_;
};

}  // namespace kwatch::test
