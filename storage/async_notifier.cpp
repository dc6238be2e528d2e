#include "storage/async_notifier.hpp"

namespace kwatch::storage::detail {

namespace asio = boost::asio;
using boost::system::error_code;

void AsyncNotifier::complete(Waiter waiter, error_code ec) {
  auto work = waiter.work;
  asio::post(work, [h = std::move(waiter.handler), slot = waiter.slot, ec]() mutable {
    // The slot belongs to the type-erased handler; our cancellation handler in it must not
    // outlive the operation.
    if (slot.is_connected()) slot.clear();
    std::move(h)(ec);
  });
}

void AsyncNotifier::notify() {
  std::unique_lock lock(mutex_);
  if (!waiter_) {
    notified_ = true;
    return;
  }
  Waiter w = std::move(*waiter_);
  waiter_.reset();
  lock.unlock();
  complete(std::move(w), {});
}

void AsyncNotifier::clear() {
  std::lock_guard lock(mutex_);
  notified_ = false;
}

void AsyncNotifier::CancelWait::operator()(asio::cancellation_type type) const {
  if (type == asio::cancellation_type::none) return;
  auto n = notifier.lock();
  if (!n) return;
  std::unique_lock lock(n->mutex_);
  if (!n->waiter_) return;  // already completing
  Waiter w = std::move(*n->waiter_);
  n->waiter_.reset();
  lock.unlock();
  complete(std::move(w), asio::error::operation_aborted);
}

void AsyncNotifier::start_wait(std::shared_ptr<AsyncNotifier> self,
                               asio::any_completion_handler<void(error_code)> handler,
                               asio::any_io_executor work) {
  // Boost 1.81's any_completion_handler recurses forever on move assignment, so Waiters are only
  // ever move-constructed (and emplaced). It also takes over the handler's cancellation slot and
  // offers its own, which is where our cancellation handler must go.
  auto slot = asio::get_associated_cancellation_slot(handler);
  std::unique_lock lock(mutex_);
  if (notified_) {
    notified_ = false;
    lock.unlock();
    complete(Waiter{std::move(handler), std::move(work), {}}, {});
    return;
  }
  // Install the cancellation handler before publishing the waiter: once published, a notifier
  // may complete it and clear the slot from the handler's executor.
  if (slot.is_connected()) slot.template emplace<CancelWait>(CancelWait{self});
  waiter_.emplace(Waiter{std::move(handler), std::move(work), slot});
}

}  // namespace kwatch::storage::detail
