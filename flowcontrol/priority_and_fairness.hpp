// API Priority and Fairness, the dispatcher (kube's APF config controller and filter core): the
// current FlowSchemas, in matching order, and one fair-queuing QueueSet per priority level.
//
// Each request is classified by the first FlowSchema (lowest matchingPrecedence, then name) whose
// rules match it, which names its priority level and how its flows are told apart; its work is
// estimated in seats; then it runs at once, waits in one of its level's queues (at most
// `wait_limit`), or is refused with 429. The server's concurrency limit
// (--max-requests-inflight + --max-mutating-requests-inflight) is divided among the levels by
// their nominalConcurrencyShares (ceil(limit * shares / sum)); every `borrowing_period` the
// levels' current limits are recomputed from their seat demand as kube does, within
// [nominal - lendable, nominal + borrowing limit], so an idle level's lendable seats serve a
// busy one. The mandatory `exempt` and `catch-all` objects are used even when not stored.
//
// Thread-safety: every method from any thread. A Seat gives its seats back when the last copy
// of it goes (a write's seats stay taken until the watch cache has delivered its event).
#pragma once

#include "apimachinery/api_error.hpp"
#include "flowcontrol/configuration.hpp"
#include "flowcontrol/queue_set.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kwatch::flowcontrol {

struct Options {
  int server_concurrency_limit = 600;
  std::chrono::milliseconds wait_limit{15'000};  // kube: a quarter of its 60 s request timeout
  // kube 1.34's work estimator (SizeBasedListCostEstimate, on by default): a list costs a seat
  // per 100 kB it loads (a list from the cache at most 1 MB at once), at most 100 seats.
  std::int64_t bytes_per_seat = 100'000;
  std::int64_t cache_list_max_bytes = 1'000'000;
  int max_list_seats = 100;
  int watches_per_seat = 10;
  int max_mutating_seats = 10;
  std::chrono::milliseconds event_additional_duration{5};
  // How often the levels' current limits follow their demand. kube: 10 s; kwatch's requests are
  // served from memory in microseconds to milliseconds, so a burst would be over before a
  // busy level could borrow: every second, with kube's smoothing (a five-minute half-life).
  std::chrono::milliseconds borrowing_period{1000};
};

// What a request asks for, for its work estimate.
struct Work {
  enum class Kind { other, list, mutating };
  Kind kind = Kind::other;
  std::int64_t objects = 0;   // list: the objects stored
  std::int64_t bytes = 0;     // list: their serialized size in all
  std::int64_t limit = 0;     // list: ?limit, 0: none
  bool single = false;        // list: of one named object
  bool from_cache = true;     // list: served from the watch cache
  bool selector = false;      // list: a label or field selector
  std::int64_t watchers = 0;  // mutating: watchers its event will reach
};

struct Classification {
  std::string flow_schema, flow_schema_uid;
  std::string priority_level, priority_level_uid;
  std::string distinguisher;
  bool exempt = false;
  bool queues = false;  // the level has more than one queue: the flow deals a hand
  bool low_cpu_priority = false;  // PriorityLevel::low_cpu_priority
};

// The FlowSchema status condition kube's config controller keeps: Dangling says whether the
// priority level the schema names exists.
struct DanglingCondition {
  std::string flow_schema;
  std::string status;  // "True" / "False"
  std::string reason, message;
};

// A level's limits, for the metrics.
struct LevelLimits {
  std::string name;
  int nominal = 0, lower = 0, upper = 0, current = 0;
};

class PriorityAndFairness : public std::enable_shared_from_this<PriorityAndFairness> {
 public:
  explicit PriorityAndFairness(Options options);

  // Replaces the configuration with the stored objects (every FlowSchema and
  // PriorityLevelConfiguration); returns the FlowSchemas whose Dangling condition differs from
  // what is stored.
  std::vector<DanglingCondition> configure(const std::vector<boost::json::object>& levels,
                                           const std::vector<boost::json::object>& schemas);

  Classification classify(const RequestDigest& request) const;

  using Seat = std::shared_ptr<void>;
  struct Admission {
    Classification classification;
    Seat seat;  // null when refused
    std::string reject_reason;  // queue-full, concurrency-limit, time-out, cancelled
    int retry_after = 1;        // seconds, for a refusal
    bool queued = false;
    std::chrono::nanoseconds waited{0};
    WorkEstimate work;
  };
  // `queue_note(classification, true)` when the request joins a queue, `false` when it leaves.
  boost::asio::awaitable<Admission> admit(RequestDigest request, Work work,
                                          std::function<void(const Classification&, bool)> queue_note = nullptr);

  // Recomputes the levels' current limits from their seat demand (every borrowing period).
  void adjust_borrowing();
  // Runs adjust_borrowing every borrowing period on `executor` until stop().
  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }

  std::vector<LevelLimits> limits() const;
  void on_limits(std::function<void(const std::vector<LevelLimits>&)> observer);

  // kube's /debug/api_priority_and_fairness/dump_* texts.
  std::string dump_priority_levels() const;
  std::string dump_queues() const;
  std::string dump_requests(bool details) const;

  // The estimate kube's work estimator gives `work` at `level` (tests).
  WorkEstimate estimate(const Work& work, const std::string& level) const;

 private:
  struct Level;
  struct Pending;
  struct Config;
  std::shared_ptr<const Config> config() const { return std::atomic_load(&config_); }
  void finish(const std::shared_ptr<Level>& level, const QueueSet::RequestPtr& request);
  // With levels_mutex_ held: every level's lock, taken in the map's order (the one order every
  // path that holds more than one takes them in); each level is kept alive until its lock is
  // released, whatever the map drops meanwhile.
  using AllLevelsLock = std::vector<std::pair<std::shared_ptr<Level>, std::unique_lock<std::mutex>>>;
  AllLevelsLock lock_all_levels() const;
  // With levels_mutex_ and every level's lock held.
  void recompute_limits_locked(bool initial);
  void publish_limits();
  WorkEstimate estimate_for(const Work& work, int level_max) const;

  Options options_;
  std::shared_ptr<const Config> config_;
  // Guards the map of levels, nominal_sum_ and observer_: taken shared to find a level (then
  // its own lock is taken: Level::mutex), exclusively to change the map. Always before any
  // level's lock.
  mutable std::shared_mutex levels_mutex_;
  std::map<std::string, std::shared_ptr<Level>> levels_;
  int nominal_sum_ = 0;
  std::function<void(const std::vector<LevelLimits>&)> observer_;
  std::atomic<bool> stopped_{false};
};

}  // namespace kwatch::flowcontrol
