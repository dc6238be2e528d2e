#include "watch/event_window.hpp"

#include <algorithm>

namespace kwatch::watch {

EventWindow::EventWindow(std::size_t lower_bound, std::size_t upper_bound)
    : lower_(std::max<std::size_t>(lower_bound, 1)),
      upper_(std::max(upper_bound, std::max<std::size_t>(lower_bound, 1))),
      ring_(lower_) {}

void EventWindow::resize(std::size_t capacity) {
  // Keeps the newest events that fit; evicted ones move the window's start forward.
  std::vector<EventPtr> next(capacity);
  const std::size_t keep = std::min(size_, capacity);
  const std::size_t drop = size_ - keep;
  if (drop > 0) start_rv_ = at(drop - 1)->resource_version;
  for (std::size_t i = 0; i < keep; ++i) next[i] = at(drop + i);
  ring_ = std::move(next);
  head_ = 0;
  size_ = keep;
}

void EventWindow::push(EventPtr event, Clock::time_point now) {
  if (size_ == ring_.size()) {
    const auto oldest = at(0)->recorded;
    const auto quarter = at(size_ - std::max<std::size_t>(size_ / 4, 1))->recorded;
    if (now - oldest < kFreshness && ring_.size() < upper_) {
      resize(std::min(ring_.size() * 2, upper_));
    } else if (now - quarter > kFreshness && ring_.size() > lower_) {
      resize(std::max(ring_.size() / 2, lower_));
    }
  }
  if (size_ == ring_.size()) {
    start_rv_ = at(0)->resource_version;
    ring_[head_] = nullptr;
    head_ = (head_ + 1) % ring_.size();
    --size_;
  }
  ring_[(head_ + size_) % ring_.size()] = std::move(event);
  ++size_;
  ++pushed_;
}

bool EventWindow::read(std::uint64_t from, std::size_t limit, std::vector<EventPtr>& out) const {
  const std::uint64_t first = first_sequence();
  if (from < first) return false;
  for (std::uint64_t seq = from; seq < pushed_ && limit > 0; ++seq, --limit) {
    out.push_back(at(static_cast<std::size_t>(seq - first)));
  }
  return true;
}

std::optional<std::vector<EventPtr>> EventWindow::since(std::int64_t rv) const {
  if (rv < start_rv_) return std::nullopt;
  // Binary search for the first event above `rv`.
  std::size_t lo = 0, hi = size_;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (at(mid)->resource_version <= rv) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  std::vector<EventPtr> out;
  out.reserve(size_ - lo);
  for (std::size_t i = lo; i < size_; ++i) out.push_back(at(i));
  return out;
}

void EventWindow::reset(std::int64_t rv) {
  std::fill(ring_.begin(), ring_.end(), nullptr);
  head_ = 0;
  size_ = 0;
  start_rv_ = rv;
}

}  // namespace kwatch::watch
