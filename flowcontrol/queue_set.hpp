// One priority level's fair queuing, as kube's queueset: requests are dealt to queues by shuffle
// sharding (a flow's hash deals a hand of `hand_size` of the level's queues; the request joins
// the one with the least work waiting), queues are served in order of their virtual finish time
// (kube's fair queuing in seat-seconds: virtual time runs at min(seats asked, limit) / active
// queues per second; a request's work is its seats times the estimated service time plus the
// seats it keeps afterwards times how long), and a request runs once its seats fit under the
// level's current concurrency limit. A request that finds its queue at `queue_length_limit` while
// every seat is taken is rejected; a level without queues rejects at once what does not fit.
// An exempt level admits everything and only counts.
//
// A queue exists only while it holds a request (waiting or executing): kube allows ten million
// queues per level, so nothing here is proportional to the configured count, only to the
// requests held (an empty queue's virtual start is set anew when a request arrives, as kube
// sets it).
//
// Pure: no clocks (the caller passes `now`), no threads, no locks; the caller serializes calls
// and wakes the requests a call dispatched from their queues.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::flowcontrol {

using Clock = std::chrono::steady_clock;

// What a request costs (kube's WorkEstimate): seats while it runs, then `final_seats` for
// `additional_latency` (a write's fan-out to watchers).
struct WorkEstimate {
  int initial_seats = 1;
  int final_seats = 0;
  std::chrono::nanoseconds additional_latency{0};
  int max_seats() const { return initial_seats > final_seats ? initial_seats : final_seats; }
};

// The mean, deviation and peak of a level's seat demand (seats in use plus seats waiting) over
// a period, integrated over time (kube's fairqueuing integrator).
class DemandIntegrator {
 public:
  struct Results {
    double average = 0, deviation = 0, max = 0;
  };
  void set(double value, Clock::time_point now);
  Results reset(Clock::time_point now);

 private:
  void advance(Clock::time_point now);
  double value_ = 0, max_ = 0;
  double integral_ = 0, integral_squares_ = 0;
  double seconds_ = 0;
  Clock::time_point last_{};
  bool started_ = false;
};

class QueueSet {
 public:
  struct Config {
    bool exempt = false;
    int queues = 0;  // 0: no queuing (limitResponse Reject)
    int hand_size = 0;
    int queue_length_limit = 0;
  };

  struct Queue;
  struct Request {
    WorkEstimate work;
    std::string flow_schema, distinguisher;
    std::uint64_t hash = 0;
    // For the debug dump of requests.
    std::string user, verb, path, namespace_, name, api_version, resource, subresource;

    enum class State { new_, waiting, executing, done };
    State state = State::new_;
    Queue* queue = nullptr;  // null: executing without a queue
    double arrival_r = 0;
    Clock::time_point arrival{}, start{};
  };
  using RequestPtr = std::shared_ptr<Request>;

  struct Queue {
    int index = 0;
    std::deque<RequestPtr> waiting;
    int executing = 0;
    int seats_in_use = 0;
    double next_dispatch_r = 0;
    int waiting_initial_seats = 0, waiting_max_seats = 0;
    double waiting_work = 0;
  };

  explicit QueueSet(Config config);

  // Changes the queuing (queues beyond the new count are kept until they drain) and the
  // concurrency limit; requests that now fit are appended to `dispatched`.
  void configure(Config config, Clock::time_point now, std::vector<RequestPtr>& dispatched);
  void set_concurrency_limit(int limit, Clock::time_point now,
                             std::vector<RequestPtr>& dispatched);

  enum class Decision { execute, wait, reject };
  // Admits `request` at once, queues it (then it is in `dispatched` of a later call), or
  // rejects it. `dispatched` may also get others this call let through.
  Decision start(const RequestPtr& request, Clock::time_point now,
                 std::vector<RequestPtr>& dispatched);
  // The request is done; requests that now fit are appended to `dispatched`.
  void finish(const RequestPtr& request, Clock::time_point now,
              std::vector<RequestPtr>& dispatched);
  // A waiting request gives up (its wait ran out, or its client left): removed from its queue.
  // False when it had been dispatched already (the caller then finishes it normally).
  bool cancel(const RequestPtr& request, Clock::time_point now, bool timed_out);

  const Config& config() const { return config_; }
  int concurrency_limit() const { return limit_; }
  int seats_in_use() const { return seats_in_use_; }
  int seats_waiting() const { return seats_waiting_; }
  int executing() const { return executing_; }
  int waiting() const { return waiting_; }
  bool idle() const { return executing_ == 0 && waiting_ == 0; }
  DemandIntegrator& demand() { return demand_; }

  // What the debug endpoints show.
  struct Counts {
    std::uint64_t dispatched = 0, rejected = 0, timed_out = 0, cancelled = 0;
  };
  Counts counts() const { return counts_; }
  // The queues that hold requests now, by index.
  const std::map<int, std::unique_ptr<Queue>>& queues() const { return queues_; }
  // Requests executing with or without a queue (dumps).
  const std::vector<RequestPtr>& executing_requests() const { return running_; }
  double virtual_time() const { return r_; }

  // kube's estimate of a request's service time, by which virtual time is charged up front.
  static constexpr std::chrono::milliseconds kEstimatedServiceTime{3};
  // The queues a hash deals (kube's shuffle-sharding dealer): `hand` distinct indexes below
  // `deck`.
  static void deal(std::uint64_t hash, int deck, int hand, std::vector<int>& out);

 private:
  void sync_time(Clock::time_point now);
  double virtual_time_ratio() const;
  bool fits(int seats) const;
  Queue* choose_queue(const Request& request);
  Queue* queue_at(int index);
  void dispatch(std::vector<RequestPtr>& dispatched, Clock::time_point now);
  bool dispatch_one(std::vector<RequestPtr>& dispatched, Clock::time_point now);
  void bound_next_dispatch(Queue& queue);
  void drop_if_idle(Queue* queue);
  void note_demand(Clock::time_point now);
  static double total_work(const Request& r);

  Config config_;
  int limit_ = 0;
  std::map<int, std::unique_ptr<Queue>> queues_;
  std::vector<RequestPtr> running_;
  std::vector<int> hand_;
  int seats_in_use_ = 0, seats_waiting_ = 0;
  int executing_ = 0, waiting_ = 0;
  double r_ = 0;
  Clock::time_point last_{};
  bool started_ = false;
  std::uint64_t enqueues_ = 0;
  int robin_ = -1;  // the queue served last
  Counts counts_;
  DemandIntegrator demand_;
};

}  // namespace kwatch::flowcontrol
