// GrpcBridge: gRPC's asynchronous client API as Asio operations.
//
// One thread pumps a grpc::CompletionQueue. Every gRPC step (unary finish; stream start, read,
// write, writes-done, finish) is started with a tag that is a small operation object; when the
// queue returns the tag, the object posts its completion, `void(bool ok)` with `ok` as the queue
// reported it, to the executor associated with the completion handler, holding outstanding work
// on that executor meanwhile. So coroutines resume on their own I/O threads, never on the queue's.
//
// Only storage/ includes this header (it includes gRPC); nothing above storage/ knows gRPC.
//
// Ownership: the owner keeps the bridge alive while calls use its queue. Each operation holds a
// `keep_alive` reference to whatever owns the call's ClientContext, reader/writer and buffers, and
// drops it only after the completion ran (or was destroyed), so buffers stay valid while gRPC
// writes into them.
// Thread-safety: every member may be called from any thread.
// Cancellation: a step started through `async_step` with a cancellation slot calls
// `ClientContext::TryCancel()` when the slot fires (any type except `none`); the step then
// completes as gRPC reports it (typically ok=false, and the call's status is CANCELLED).
// Shutdown: `shutdown()` (also run by the destructor) cancels every call with a pending step,
// shuts the queue down, drains it and joins the thread. Steps started afterwards complete at once
// with ok=false.
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/async_unary_call.h>
#include <grpcpp/support/status.h>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

namespace kwatch::storage {

// A process-wide setting, made once at start-up before the first gRPC channel: Debian builds
// Abseil with mutex deadlock detection on, so every lock gRPC takes walks a lock graph (a few
// percent of the CPU per etcd request). kwatch has no Abseil mutexes of its own.
void disable_abseil_deadlock_detection();

class GrpcBridge {
 public:
  GrpcBridge();
  ~GrpcBridge();
  GrpcBridge(const GrpcBridge&) = delete;
  GrpcBridge& operator=(const GrpcBridge&) = delete;

  // The queue to hand to `PrepareAsync*` calls. Calls prepared on it must start their steps
  // through this bridge.
  grpc::CompletionQueue* queue() { return &queue_; }

  void shutdown();
  bool closed() const;

  // The one shape every step has: `start(tag)` issues the gRPC operation with `tag`; the
  // completion is `void(bool ok)`.
  template <class Token>
  auto async_step(grpc::ClientContext& context, std::shared_ptr<const void> keep_alive,
                  std::function<void(void*)> start, Token&& token) {
    return boost::asio::async_initiate<Token, void(bool)>(
        [this](auto handler, grpc::ClientContext* context, std::shared_ptr<const void> keep_alive,
               std::function<void(void*)> start) {
          boost::asio::any_io_executor ex = boost::asio::get_associated_executor(handler);
          auto work = boost::asio::prefer(ex, boost::asio::execution::outstanding_work.tracked);
          // Boost 1.81's any_completion_handler must only be move-constructed; it offers the
          // handler's cancellation slot as its own.
          boost::asio::any_completion_handler<void(bool)> erased(std::move(handler));
          launch(*context, std::move(keep_alive), std::move(start), std::move(erased),
                 std::move(work));
        },
        token, &context, std::move(keep_alive), std::move(start));
  }

  // ---- The RPC shapes, each a thin use of async_step. ----

  // Unary call: `prepare(queue)` returns the call's reader (a stub's PrepareAsync<Method>), which
  // is stored in `reader`, started, and finished into `response` and `status`. Preparing inside
  // the step means no call is ever created on a queue that is shut down. gRPC reports ok=true
  // for a unary finish; ok=false means the bridge was closed and `status` is untouched.
  template <class Reader, class Response, class Prepare, class Token>
  auto async_unary(grpc::ClientContext& context, std::unique_ptr<Reader>& reader, Prepare prepare,
                   Response& response, grpc::Status& status, std::shared_ptr<const void> keep_alive,
                   Token&& token) {
    return async_step(
        context, std::move(keep_alive),
        [this, &reader, prepare = std::move(prepare), &response, &status](void* tag) {
          reader = prepare(&queue_);
          reader->StartCall();
          reader->Finish(&response, &status, tag);
        },
        std::forward<Token>(token));
  }

  // Streaming call: `prepare(queue)` returns the reader/writer, stored in `stream` and started.
  template <class Stream, class Prepare, class Token>
  auto async_start_call(grpc::ClientContext& context, std::unique_ptr<Stream>& stream,
                        Prepare prepare, std::shared_ptr<const void> keep_alive, Token&& token) {
    return async_step(
        context, std::move(keep_alive),
        [this, &stream, prepare = std::move(prepare)](void* tag) {
          stream = prepare(&queue_);
          stream->StartCall(tag);
        },
        std::forward<Token>(token));
  }

  template <class Stream, class Message, class Token>
  auto async_read(Stream& stream, grpc::ClientContext& context, Message& message,
                  std::shared_ptr<const void> keep_alive, Token&& token) {
    return async_step(
        context, std::move(keep_alive),
        [&stream, &message](void* tag) { stream.Read(&message, tag); }, std::forward<Token>(token));
  }

  template <class Stream, class Message, class Token>
  auto async_write(Stream& stream, grpc::ClientContext& context, const Message& message,
                   std::shared_ptr<const void> keep_alive, Token&& token) {
    return async_step(
        context, std::move(keep_alive),
        [&stream, &message](void* tag) { stream.Write(message, tag); }, std::forward<Token>(token));
  }

  template <class Stream, class Token>
  auto async_writes_done(Stream& stream, grpc::ClientContext& context,
                         std::shared_ptr<const void> keep_alive, Token&& token) {
    return async_step(
        context, std::move(keep_alive), [&stream](void* tag) { stream.WritesDone(tag); },
        std::forward<Token>(token));
  }

  template <class Stream, class Token>
  auto async_finish_stream(Stream& stream, grpc::ClientContext& context, grpc::Status& status,
                           std::shared_ptr<const void> keep_alive, Token&& token) {
    return async_step(
        context, std::move(keep_alive),
        [&stream, &status](void* tag) { stream.Finish(&status, tag); }, std::forward<Token>(token));
  }

  struct Operation;

 private:
  void launch(grpc::ClientContext& context, std::shared_ptr<const void> keep_alive,
              std::function<void(void*)> start,
              boost::asio::any_completion_handler<void(bool)> handler,
              boost::asio::any_io_executor work);
  void pump();

  grpc::CompletionQueue queue_;
  mutable std::mutex mutex_;
  bool closed_ = false;
  std::unordered_set<Operation*> pending_;  // started, not yet returned by the queue
  std::thread thread_;
};

}  // namespace kwatch::storage
