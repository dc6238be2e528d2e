#include "app/line_sink.hpp"

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace kwatch::app {
namespace {

// A temporary file the sink writes to; its text read back.
class LogFile {
 public:
  LogFile() : file_(std::tmpfile()) {}
  ~LogFile() { std::fclose(file_); }
  int fd() const { return fileno(file_); }
  std::string text() const {
    std::string out;
    char buf[65536];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd(), buf, sizeof buf, at);
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
  }

 private:
  std::FILE* file_;
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(LineSink, WritesFormattedLinesAndFollowsThePattern) {
  LogFile file;
  auto sink = std::make_shared<LineSink>(file.fd());
  spdlog::logger logger("", sink);
  sink->set_pattern("[%l] %v");
  logger.info("first {}", 1);
  logger.warn("second");
  sink->set_pattern("%v!");
  logger.info("third");
  EXPECT_EQ(lines(file.text()),
            (std::vector<std::string>{"[info] first 1", "[warning] second", "third!"}));
}

// Many threads at once: every line arrives whole, none lost.
TEST(LineSink, LinesFromManyThreadsStayWhole) {
  LogFile file;
  auto sink = std::make_shared<LineSink>(file.fd());
  sink->set_pattern("%v");
  spdlog::logger logger("", sink);
  constexpr int kThreads = 8, kEach = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&logger, t] {
      const std::string filler(100 + t * 37, static_cast<char>('a' + t));
      for (int i = 0; i < kEach; ++i) logger.info("t{} i{} {}", t, i, filler);
    });
  }
  for (auto& t : threads) t.join();
  std::map<int, int> next;
  int whole = 0;
  for (const auto& line : lines(file.text())) {
    int t = -1, i = -1;
    char rest[2048];
    ASSERT_EQ(std::sscanf(line.c_str(), "t%d i%d %2047s", &t, &i, rest), 3) << line;
    ASSERT_EQ(std::string(rest), std::string(100 + t * 37, static_cast<char>('a' + t))) << line;
    EXPECT_EQ(i, next[t]++) << "thread " << t << "'s lines in order";
    ++whole;
  }
  EXPECT_EQ(whole, kThreads * kEach);
}

// A formatter that holds the thread formatting "stall" until released.
class StallingFormatter final : public spdlog::formatter {
 public:
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool entered = false, released = false;
  };
  explicit StallingFormatter(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    if (text == "stall") {
      std::unique_lock lock(gate_->mutex);
      gate_->entered = true;
      gate_->cv.notify_all();
      gate_->cv.wait(lock, [this] { return gate_->released; });
    }
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<StallingFormatter>(gate_);
  }

 private:
  std::shared_ptr<Gate> gate_;
};

// The point of the sink: a thread stopped in the middle of logging (preempted, at the lowest
// CPU priority) holds up no other thread's line.
TEST(LineSink, AThreadStoppedWhileLoggingHoldsNobodyUp) {
  LogFile file;
  auto gate = std::make_shared<StallingFormatter::Gate>();
  auto sink = std::make_shared<LineSink>(file.fd());
  sink->set_formatter(std::make_unique<StallingFormatter>(gate));
  spdlog::logger logger("", sink);
  std::thread staller([&logger] { logger.info("stall"); });
  {
    std::unique_lock lock(gate->mutex);
    gate->cv.wait(lock, [&gate] { return gate->entered; });
  }
  auto other = std::async(std::launch::async, [&logger] { logger.info("other"); });
  const bool done = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  {
    std::lock_guard lock(gate->mutex);
    gate->released = true;
  }
  gate->cv.notify_all();
  staller.join();
  other.wait();
  EXPECT_TRUE(done) << "another thread's line waited for the stalled one";
  EXPECT_EQ(lines(file.text()), (std::vector<std::string>{"other", "stall"}));
}

}  // namespace
}  // namespace kwatch::app
