// The completion handler of every task root (`co_spawn`): a task that ends by an exception is
// logged once, naming what it was. Safe from any thread.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>

namespace kwatch::base {

inline void log_task_failure(std::exception_ptr e, const char* what) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("{} failed: {}", what, ex.what());
  }
}

}  // namespace kwatch::base
