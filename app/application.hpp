// kwatch-apiserver as one object: from the options it builds storage, the watch caches, the
// controllers and the listeners, runs the I/O and delivery threads, and takes them down in order.
//
// Graceful shutdown, on SIGTERM or SIGINT:
// 1. /readyz fails at once (a load balancer stops sending new connections); everything is still
//    served for --shutdown-delay-duration;
// 2. the listeners close; every response from then on closes its connection, connections waiting
//    for a request are closed; new watches get 429 with Retry-After;
// 3. the controllers stop (no new writes of their own); every client watch stream ends cleanly
//    (the terminal chunk, or a WebSocket close frame), so clients re-watch elsewhere from their
//    last resourceVersion;
// 4. once no connection is left (in-flight requests answered, streams ended), the caches stop,
//    the threads end and storage is closed (the embedded store's log synced): exit code 0.
// Whatever is still open when --shutdown-grace-period (counted from the signal) runs out is cut
// off, and the exit code is 1. A second signal ends the process at once (exit code 1).
//
// Ownership: main owns it. Threads: `start` and `run` on the main thread; `run` adds the I/O and
// delivery threads and returns after they have ended.
#pragma once

#include "app/options.hpp"

#include <memory>

namespace kwatch::app {

class Application {
 public:
  explicit Application(Options options);
  ~Application();
  Application(const Application&) = delete;
  Application& operator=(const Application&) = delete;

  // Builds everything and starts listening. Returns false after logging why it cannot.
  bool start();
  // Serves until shut down; returns the process's exit code.
  int run();

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace kwatch::app
