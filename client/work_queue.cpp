#include "client/work_queue.hpp"

#include <algorithm>
#include <cmath>

namespace kwatch::client {

void WorkQueue::queue_locked(const std::string& key) {
  if (shut_down_) return;
  if (processing_.count(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) {
    queue_.push_back(key);
    wake_.notify_one();
  }
}

void WorkQueue::add(const std::string& key) {
  std::lock_guard lock(mutex_);
  queue_locked(key);
}

void WorkQueue::add_after(const std::string& key, Clock::duration delay) {
  std::lock_guard lock(mutex_);
  if (shut_down_) return;
  if (delay <= Clock::duration::zero()) {
    queue_locked(key);
    return;
  }
  delayed_.emplace(Clock::now() + delay, key);
  wake_.notify_all();  // a waiting get() may now have an earlier deadline
}

WorkQueue::Clock::duration WorkQueue::bucket_delay_locked(Clock::time_point now) {
  if (limits_.qps <= 0) return Clock::duration::zero();
  if (!bucket_started_) {
    bucket_started_ = true;
    tokens_ = limits_.burst;
    refilled_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - refilled_).count();
  tokens_ = std::min<double>(limits_.burst, tokens_ + elapsed * limits_.qps);
  refilled_ = now;
  // Take a token now, going into debt when there is none: the debt is the wait.
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens_ / limits_.qps));
}

WorkQueue::Clock::duration WorkQueue::backoff_locked(const std::string& key) const {
  auto it = failures_.find(key);
  const double exp = std::min(60.0, static_cast<double>(it == failures_.end() ? 0 : it->second));
  return std::min<Clock::duration>(
      limits_.max_delay,
      std::chrono::duration_cast<Clock::duration>(limits_.base_delay * std::pow(2.0, exp)));
}

WorkQueue::Clock::duration WorkQueue::backoff(const std::string& key) const {
  std::lock_guard lock(mutex_);
  return backoff_locked(key);
}

void WorkQueue::add_rate_limited(const std::string& key) {
  std::lock_guard lock(mutex_);
  if (shut_down_) return;
  const auto item = backoff_locked(key);
  ++failures_[key];
  const auto now = Clock::now();
  const auto delay = std::max(item, bucket_delay_locked(now));
  delayed_.emplace(now + delay, key);
  wake_.notify_all();
}

void WorkQueue::forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::requeues(const std::string& key) const {
  std::lock_guard lock(mutex_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (shut_down_) return std::nullopt;
    const auto now = Clock::now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      queue_locked(delayed_.begin()->second);
      delayed_.erase(delayed_.begin());
    }
    if (!queue_.empty()) {
      std::string key = std::move(queue_.front());
      queue_.pop_front();
      queued_.erase(key);
      processing_.insert(key);
      return key;
    }
    if (delayed_.empty()) {
      wake_.wait(lock);
    } else {
      wake_.wait_until(lock, delayed_.begin()->first);
    }
  }
}

void WorkQueue::done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.erase(key)) queue_locked(key);
}

void WorkQueue::shut_down() {
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  wake_.notify_all();
}

std::size_t WorkQueue::length() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

}  // namespace kwatch::client
