// The loop of kwatch's built-in controllers that look at every object of a resource: each event
// of that resource's watch cache (and of any other it also watches) wakes one reconcile, and
// while a reconcile says
// it is waiting for something without events of its own (objects held by finalizers elsewhere),
// it runs again every second. One reconcile runs at a time; a wake-up meanwhile makes it run
// once more.
//
// Ownership: shared; the running tasks hold it. Strand: both tasks and every reconcile run on one
// strand, so a controller's state needs no lock. Cancellation: `stop()` ends the tasks at their
// next wait.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <memory>
#include <vector>

namespace kwatch::kinds {
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class CacherRegistry;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class Reconciler : public std::enable_shared_from_this<Reconciler> {
 public:
  // `info` is the watched resource (a built-in one: held, never looked up again); `name` names
  // the reconciler in logs.
  Reconciler(std::shared_ptr<registry::CacherRegistry> cachers,
             std::shared_ptr<const kinds::ResourceInfo> info, const char* name);
  // The same, also woken by the events of `also`.
  Reconciler(std::shared_ptr<registry::CacherRegistry> cachers,
             std::shared_ptr<const kinds::ResourceInfo> info,
             std::vector<std::shared_ptr<const kinds::ResourceInfo>> also, const char* name);
  virtual ~Reconciler() = default;

  // Starts the tasks on a strand of `executor`.
  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }

 protected:
  // Looks at every object and acts; sets `waiting_` when it must look again without an event.
  virtual boost::asio::awaitable<void> reconcile_once() = 0;

  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<const kinds::ResourceInfo> info_;
  bool waiting_ = false;
  std::atomic<bool> stopped_{false};

 private:
  boost::asio::awaitable<void> run(std::shared_ptr<const kinds::ResourceInfo> watched);
  boost::asio::awaitable<void> tick();
  boost::asio::awaitable<void> reconcile();

  std::vector<std::shared_ptr<const kinds::ResourceInfo>> also_;
  const char* name_;
  bool reconciling_ = false;
  bool again_ = false;
};

}  // namespace kwatch::controllers
