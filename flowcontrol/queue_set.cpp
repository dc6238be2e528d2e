#include "flowcontrol/queue_set.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kwatch::flowcontrol {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// ---- DemandIntegrator ----

void DemandIntegrator::advance(Clock::time_point now) {
  if (!started_) {
    started_ = true;
    last_ = now;
    return;
  }
  const double dt = std::max(0.0, seconds(now - last_));
  integral_ += value_ * dt;
  integral_squares_ += value_ * value_ * dt;
  seconds_ += dt;
  last_ = now;
}

void DemandIntegrator::set(double value, Clock::time_point now) {
  advance(now);
  value_ = value;
  max_ = std::max(max_, value);
}

DemandIntegrator::Results DemandIntegrator::reset(Clock::time_point now) {
  advance(now);
  Results out;
  out.max = std::max(max_, value_);
  if (seconds_ > 0) {
    out.average = integral_ / seconds_;
    out.deviation = std::sqrt(std::max(0.0, integral_squares_ / seconds_ - out.average * out.average));
  } else {
    out.average = value_;
  }
  integral_ = integral_squares_ = seconds_ = 0;
  max_ = value_;
  return out;
}

// ---- QueueSet ----

QueueSet::QueueSet(Config config) : config_(config) {}

QueueSet::Queue* QueueSet::queue_at(int index) {
  auto& q = queues_[index];
  if (!q) {
    q = std::make_unique<Queue>();
    q->index = index;
    q->next_dispatch_r = r_;  // a queue that held nothing starts now
  }
  return q.get();
}

void QueueSet::deal(std::uint64_t hash, int deck, int hand, std::vector<int>& out) {
  // Mixed-radix digits of the hash pick the i-th card among the deck - i cards still unpicked;
  // each is then shifted past the cards picked before it that it does not fall below.
  out.clear();
  int digits[64];
  hand = std::min({hand, deck, 64});
  for (int i = 0; i < hand; ++i) {
    const auto base = static_cast<std::uint64_t>(deck - i);
    digits[i] = static_cast<int>(hash % base);
    hash /= base;
  }
  for (int i = 0; i < hand; ++i) {
    int card = digits[i];
    for (int j = i; j > 0; --j) {
      if (card >= digits[j - 1]) ++card;
    }
    out.push_back(card);
  }
}

double QueueSet::total_work(const Request& r) {
  return r.work.initial_seats * seconds(kEstimatedServiceTime) +
         r.work.final_seats * seconds(r.work.additional_latency);
}

double QueueSet::virtual_time_ratio() const {
  // Every queue that exists holds a request, so all of them are active.
  const auto active = queues_.size();
  if (active == 0) return 0;
  return std::min<double>(seats_in_use_ + seats_waiting_, limit_) / static_cast<double>(active);
}

void QueueSet::sync_time(Clock::time_point now) {
  if (!started_) {
    started_ = true;
    last_ = now;
    return;
  }
  if (now <= last_) return;
  r_ += virtual_time_ratio() * seconds(now - last_);
  last_ = now;
}

void QueueSet::note_demand(Clock::time_point now) {
  demand_.set(seats_in_use_ + seats_waiting_, now);
}

void QueueSet::configure(Config config, Clock::time_point now,
                         std::vector<RequestPtr>& dispatched) {
  sync_time(now);
  // Queues beyond a smaller count are no longer dealt; they drain and go.
  config_ = config;
  dispatch(dispatched, now);
}

void QueueSet::set_concurrency_limit(int limit, Clock::time_point now,
                                     std::vector<RequestPtr>& dispatched) {
  sync_time(now);
  limit_ = std::max(0, limit);
  dispatch(dispatched, now);
}

bool QueueSet::fits(int seats) const {
  if (config_.exempt) return true;
  // A request wider than the whole limit runs alone.
  if (seats > limit_) return executing_ == 0;
  return seats_in_use_ + seats <= limit_;
}

QueueSet::Queue* QueueSet::choose_queue(const Request& request) {
  deal(request.hash, config_.queues, config_.hand_size, hand_);
  if (hand_.empty()) return nullptr;
  // Start at a rotating offset so that ties do not always go to the same queue.
  const std::size_t offset = enqueues_++ % hand_.size();
  int best = -1;
  double least = std::numeric_limits<double>::max();
  for (std::size_t i = 0; i < hand_.size(); ++i) {
    const int index = hand_[(offset + i) % hand_.size()];
    auto it = queues_.find(index);
    const double work = it == queues_.end() ? 0 : it->second->waiting_work;
    if (work < least) {
      least = work;
      best = index;
    }
  }
  return queue_at(best);
}

QueueSet::Decision QueueSet::start(const RequestPtr& request, Clock::time_point now,
                                   std::vector<RequestPtr>& dispatched) {
  sync_time(now);
  request->arrival = now;
  request->arrival_r = r_;
  if (config_.exempt || config_.queues < 1) {
    if (!fits(request->work.max_seats())) {
      ++counts_.rejected;
      return Decision::reject;
    }
    request->state = Request::State::executing;
    request->queue = nullptr;
    request->start = now;
    ++executing_;
    seats_in_use_ += request->work.max_seats();
    running_.push_back(request);
    ++counts_.dispatched;
    note_demand(now);
    return Decision::execute;
  }
  Queue* queue = choose_queue(*request);
  if (queue == nullptr ||
      (seats_in_use_ >= limit_ &&
       static_cast<int>(queue->waiting.size()) >= config_.queue_length_limit)) {
    if (queue != nullptr) drop_if_idle(queue);
    ++counts_.rejected;
    return Decision::reject;
  }
  request->queue = queue;
  request->state = Request::State::waiting;
  queue->waiting.push_back(request);
  queue->waiting_initial_seats += request->work.initial_seats;
  queue->waiting_max_seats += request->work.max_seats();
  queue->waiting_work += total_work(*request);
  ++waiting_;
  seats_waiting_ += request->work.max_seats();
  bound_next_dispatch(*queue);
  note_demand(now);
  const std::size_t before = dispatched.size();
  dispatch(dispatched, now);
  // Dispatched at once: the caller need not wait for it.
  for (std::size_t i = before; i < dispatched.size(); ++i) {
    if (dispatched[i] == request) {
      dispatched.erase(dispatched.begin() + static_cast<std::ptrdiff_t>(i));
      return Decision::execute;
    }
  }
  return Decision::wait;
}

void QueueSet::bound_next_dispatch(Queue& queue) {
  // The queue's virtual start never lags its oldest request's arrival (no credit for idleness).
  if (!queue.waiting.empty() && queue.next_dispatch_r < queue.waiting.front()->arrival_r) {
    queue.next_dispatch_r = queue.waiting.front()->arrival_r;
  }
}

void QueueSet::dispatch(std::vector<RequestPtr>& dispatched, Clock::time_point now) {
  while (waiting_ > 0 && seats_in_use_ < limit_ && dispatch_one(dispatched, now)) {
  }
}

bool QueueSet::dispatch_one(std::vector<RequestPtr>& dispatched, Clock::time_point now) {
  // The queue whose oldest request would finish first in virtual time; on a tie, the first
  // after the one served last (round robin).
  Queue* best = nullptr;
  double least = std::numeric_limits<double>::max();
  bool best_after = false;
  for (const auto& [index, q] : queues_) {
    if (q->waiting.empty()) continue;
    const double finish = q->next_dispatch_r + total_work(*q->waiting.front());
    const bool after = index > robin_;
    if (finish < least || (finish == least && after && !best_after)) {
      least = finish;
      best = q.get();
      best_after = after;
    }
  }
  if (best == nullptr) return false;
  RequestPtr request = best->waiting.front();
  if (!fits(request->work.max_seats())) return false;
  best->waiting.pop_front();
  best->waiting_initial_seats -= request->work.initial_seats;
  best->waiting_max_seats -= request->work.max_seats();
  best->waiting_work -= total_work(*request);
  if (best->waiting.empty()) best->waiting_work = 0;  // no drift from float sums
  --waiting_;
  seats_waiting_ -= request->work.max_seats();
  robin_ = best->index;
  request->state = Request::State::executing;
  request->start = now;
  ++executing_;
  seats_in_use_ += request->work.max_seats();
  ++best->executing;
  best->seats_in_use += request->work.max_seats();
  best->next_dispatch_r += total_work(*request);
  bound_next_dispatch(*best);
  running_.push_back(request);
  ++counts_.dispatched;
  note_demand(now);
  dispatched.push_back(std::move(request));
  return true;
}

void QueueSet::finish(const RequestPtr& request, Clock::time_point now,
                      std::vector<RequestPtr>& dispatched) {
  if (request->state != Request::State::executing) return;
  sync_time(now);
  request->state = Request::State::done;
  --executing_;
  seats_in_use_ -= request->work.max_seats();
  auto it = std::find(running_.begin(), running_.end(), request);
  if (it != running_.end()) {
    *it = std::move(running_.back());
    running_.pop_back();
  }
  if (Queue* q = request->queue) {
    --q->executing;
    q->seats_in_use -= request->work.max_seats();
    // Charged the estimated service time up front; settle with what it took.
    const double actual = seconds(now - request->start);
    q->next_dispatch_r -=
        request->work.initial_seats * (seconds(kEstimatedServiceTime) - actual);
    bound_next_dispatch(*q);
    drop_if_idle(q);
  }
  note_demand(now);
  dispatch(dispatched, now);
}

bool QueueSet::cancel(const RequestPtr& request, Clock::time_point now, bool timed_out) {
  if (request->state != Request::State::waiting) return false;
  sync_time(now);
  Queue* q = request->queue;
  auto it = std::find(q->waiting.begin(), q->waiting.end(), request);
  if (it != q->waiting.end()) q->waiting.erase(it);
  q->waiting_initial_seats -= request->work.initial_seats;
  q->waiting_max_seats -= request->work.max_seats();
  q->waiting_work -= total_work(*request);
  if (q->waiting.empty()) q->waiting_work = 0;
  --waiting_;
  seats_waiting_ -= request->work.max_seats();
  request->state = Request::State::done;
  (timed_out ? counts_.timed_out : counts_.cancelled)++;
  bound_next_dispatch(*q);
  drop_if_idle(q);
  note_demand(now);
  return true;
}

void QueueSet::drop_if_idle(Queue* queue) {
  if (!queue->waiting.empty() || queue->executing > 0) return;
  queues_.erase(queue->index);
}

}  // namespace kwatch::flowcontrol
