// A level-triggered wake-up flag with at most one waiting coroutine, usable from any thread:
// `notify()` completes the waiter (on its own executor) or, with none, leaves the flag set for the
// next wait. The storage backends use it to wake a pending WatchStream::next().
//
// Ownership: shared (the waiter's cancellation handler holds a weak reference). Thread-safety:
// `notify`, `clear` and the wait may race freely. Cancellation: a cancelled wait completes with
// `operation_aborted`; the flag is left as it was.
//
// Internal to storage/: include only from .cpp files.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <memory>
#include <mutex>
#include <optional>

namespace kwatch::storage::detail {

class AsyncNotifier {
 public:
  virtual ~AsyncNotifier() = default;

  void notify();
  void clear();

  // A suspended wait: its handler, a tracked executor that keeps its io_context running, and the
  // slot holding our cancellation handler.
  struct Waiter {
    boost::asio::any_completion_handler<void(boost::system::error_code)> handler;
    boost::asio::any_io_executor work;
    boost::asio::cancellation_slot slot;
  };

  // Implementation of `async_wait_notified`; not for direct use.
  void start_wait(std::shared_ptr<AsyncNotifier> self,
                  boost::asio::any_completion_handler<void(boost::system::error_code)> handler,
                  boost::asio::any_io_executor work);

 private:
  struct CancelWait {
    std::weak_ptr<AsyncNotifier> notifier;
    void operator()(boost::asio::cancellation_type type) const;
  };
  static void complete(Waiter waiter, boost::system::error_code ec);

  std::mutex mutex_;
  bool notified_ = false;
  std::optional<Waiter> waiter_;
};

// Completes when `notifier` is notified (at once if it was since the last wait or clear).
template <class Token>
auto async_wait_notified(std::shared_ptr<AsyncNotifier> notifier, Token&& token) {
  namespace asio = boost::asio;
  return asio::async_initiate<Token, void(boost::system::error_code)>(
      [](auto handler, std::shared_ptr<AsyncNotifier> n) {
        asio::any_io_executor ex = asio::get_associated_executor(handler);
        auto work = asio::prefer(ex, asio::execution::outstanding_work.tracked);
        AsyncNotifier* raw = n.get();
        raw->start_wait(std::move(n), std::move(handler), std::move(work));
      },
      token, std::move(notifier));
}

}  // namespace kwatch::storage::detail
