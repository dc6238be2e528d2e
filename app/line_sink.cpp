#include "app/line_sink.hpp"

#include <spdlog/pattern_formatter.h>

#include <cerrno>
#include <unistd.h>

namespace kwatch::app {

namespace {

std::atomic<std::uint64_t> next_sink_id{1};

struct ThreadFormatter {
  std::uint64_t sink = 0;
  std::uint64_t generation = 0;
  std::unique_ptr<spdlog::formatter> formatter;
};

}  // namespace

LineSink::LineSink(int fd)
    : fd_(fd),
      id_(next_sink_id.fetch_add(1)),
      formatter_(std::make_unique<spdlog::pattern_formatter>()) {}

void LineSink::set_pattern(const std::string& pattern) {
  set_formatter(std::make_unique<spdlog::pattern_formatter>(pattern));
}

void LineSink::set_formatter(std::unique_ptr<spdlog::formatter> formatter) {
  std::lock_guard lock(formatter_mutex_);
  formatter_ = std::move(formatter);
  generation_.fetch_add(1, std::memory_order_release);
}

spdlog::formatter& LineSink::own_formatter() {
  thread_local ThreadFormatter mine;
  const std::uint64_t generation = generation_.load(std::memory_order_acquire);
  if (mine.sink != id_ || mine.generation != generation || !mine.formatter) {
    std::lock_guard lock(formatter_mutex_);
    mine.formatter = formatter_->clone();
    mine.sink = id_;
    mine.generation = generation;
  }
  return *mine.formatter;
}

void LineSink::log(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t line;
  own_formatter().format(msg, line);
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log that logging failed
    data += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace kwatch::app
