#include "storage/grpc_bridge.hpp"

#include <absl/synchronization/mutex.h>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <utility>

namespace kwatch::storage {

namespace asio = boost::asio;

namespace {

// Installed in the waiting handler's cancellation slot while a step is pending.
struct CancelCall {
  grpc::ClientContext* context;

  void operator()(asio::cancellation_type type) const {
    if (type != asio::cancellation_type::none) context->TryCancel();
  }
};

}  // namespace

void disable_abseil_deadlock_detection() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

struct GrpcBridge::Operation {
  grpc::ClientContext* context;
  std::shared_ptr<const void> keep_alive;  // owns *context and the step's buffers
  asio::any_completion_handler<void(bool)> handler;
  asio::any_io_executor work;
  asio::cancellation_slot slot;

  // Posts the completion; the slot is cleared on the handler's executor, where cancellation is
  // emitted, and `keep_alive` (hence the context the slot handler points at) outlives it.
  void complete(bool ok) {
    auto ex = work;
    asio::post(ex,
               [h = std::move(handler), slot = slot, keep = std::move(keep_alive), ok]() mutable {
                 if (slot.is_connected()) slot.clear();
                 std::move(h)(ok);
               });
  }
};

GrpcBridge::GrpcBridge() : thread_([this] { pump(); }) {}

GrpcBridge::~GrpcBridge() { shutdown(); }

void GrpcBridge::pump() {
  void* tag = nullptr;
  bool ok = false;
  while (queue_.Next(&tag, &ok)) {
    auto* op = static_cast<Operation*>(tag);
    {
      std::lock_guard lock(mutex_);
      pending_.erase(op);
    }
    op->complete(ok);
    delete op;
  }
}

void GrpcBridge::launch(grpc::ClientContext& context, std::shared_ptr<const void> keep_alive,
                        std::function<void(void*)> start,
                        asio::any_completion_handler<void(bool)> handler,
                        asio::any_io_executor work) {
  auto slot = asio::get_associated_cancellation_slot(handler);
  auto* op =
      new Operation{&context, std::move(keep_alive), std::move(handler), std::move(work), {}};
  std::unique_lock lock(mutex_);
  if (closed_) {
    // The queue is shut down: starting a step on it is not allowed.
    lock.unlock();
    op->complete(false);
    delete op;
    return;
  }
  if (slot.is_connected()) {
    op->slot = slot;
    slot.template emplace<CancelCall>(CancelCall{&context});
  }
  pending_.insert(op);
  // Under the lock, so shutdown() cannot shut the queue down between the check and the start.
  start(op);
}

void GrpcBridge::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    for (Operation* op : pending_) op->context->TryCancel();
    queue_.Shutdown();
  }
  // The pump drains every pending tag (each completes, mostly with ok=false) before Next()
  // returns false.
  if (thread_.joinable()) thread_.join();
}

bool GrpcBridge::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace kwatch::storage
