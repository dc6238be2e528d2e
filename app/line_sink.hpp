// The server's log sink when its output is not a terminal (a file, a pipe, a container's log):
// each line is formatted by the calling thread and written with one write(2), with no lock in
// user space. spdlog's own sinks format and write under one mutex, so a thread preempted while
// logging (the low-priority threads at the lowest CPU priority are, often) held every other
// thread's log line, and with it that thread's request, until it ran again.
//
// Lines stay whole: the kernel writes one write(2) to a file at one offset, and to a pipe at
// once up to PIPE_BUF (4 KiB) bytes; a longer line to a pipe is written in parts that other
// lines may come between, as with any writer.
#pragma once

#include <spdlog/sinks/sink.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace kwatch::app {

class LineSink final : public spdlog::sinks::sink {
 public:
  explicit LineSink(int fd);

  void log(const spdlog::details::log_msg& msg) override;
  void flush() override {}  // nothing is buffered
  void set_pattern(const std::string& pattern) override;
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override;

 private:
  // A copy of the formatter for the calling thread (formatters cache the time and are not
  // shared between threads), made again when the pattern changes.
  spdlog::formatter& own_formatter();

  const int fd_;
  const std::uint64_t id_;  // tells this sink's per-thread formatters from another's
  std::atomic<std::uint64_t> generation_{0};
  std::mutex formatter_mutex_;  // guards formatter_, the one the per-thread copies come from
  std::unique_ptr<spdlog::formatter> formatter_;
};

}  // namespace kwatch::app
