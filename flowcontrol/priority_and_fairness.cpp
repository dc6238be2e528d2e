#include "flowcontrol/priority_and_fairness.hpp"

#include "apimachinery/json_members.hpp"
#include "base/task_failure.hpp"
#include "base/timestamps.hpp"
#include "flowcontrol/bootstrap.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <set>

namespace kwatch::flowcontrol {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;

namespace {

using Wake = asio::experimental::concurrent_channel<void(boost::system::error_code)>;

// Go's math.Round: halves away from zero.
int go_round(double x) { return static_cast<int>(std::round(x)); }

// dump_queues lists every configured queue up to this many per level.
constexpr int kMaxDumpedQueues = 4096;

// Requests dropped per second of one level, and the Retry-After they suggest (kube's
// droppedRequestsTracker): doubled, at most every `retry_after` seconds, up to 32 s while at
// least 3 * retry_after were dropped in the last retry_after seconds; one less while fewer than
// retry_after were.
struct DropTracker {
  std::int64_t retry_after = 1;
  std::int64_t updated_at = 0;
  std::int64_t current_second = 0;
  std::int64_t current_count = 0;
  std::deque<std::pair<std::int64_t, std::int64_t>> history;  // (second, dropped)

  void record(std::int64_t now) {
    if (now == current_second) {
      ++current_count;
      return;
    }
    history.emplace_back(current_second, current_count);
    const std::int64_t keep = std::min<std::int64_t>(2 * retry_after, 32);
    while (!history.empty() && now - history.front().first > keep) history.pop_front();
    current_second = now;
    current_count = 1;
    std::int64_t dropped = 0;
    for (auto it = history.rbegin(); it != history.rend(); ++it) {
      if (now - it->first > retry_after) break;
      if (it->first < now) dropped += it->second;
    }
    if (now - updated_at >= retry_after && dropped >= 3 * retry_after) {
      retry_after = std::min<std::int64_t>(retry_after * 2, 32);
      updated_at = now;
    } else if (dropped < retry_after && retry_after > 1) {
      --retry_after;
    }
  }
};

// Go's time.Duration.String for the durations the dumps show.
std::string go_duration(std::chrono::nanoseconds d) {
  const auto ns = d.count();
  if (ns == 0) return "0s";
  char buf[64];
  auto trimmed = [&](double value, const char* unit) {
    std::snprintf(buf, sizeof buf, "%.9f", value);
    std::string s = buf;
    while (s.ends_with('0')) s.pop_back();
    if (s.ends_with('.')) s.pop_back();
    return s + unit;
  };
  if (ns < 1'000) return std::to_string(ns) + "ns";
  if (ns < 1'000'000) return trimmed(static_cast<double>(ns) / 1e3, "µs");
  if (ns < 1'000'000'000) return trimmed(static_cast<double>(ns) / 1e6, "ms");
  return trimmed(static_cast<double>(ns) / 1e9, "s");
}

// Go's RFC3339Nano in UTC: trailing zeros of the fraction dropped.
std::string rfc3339_nano(std::chrono::system_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since - secs).count();
  std::string out = base::rfc3339(static_cast<std::time_t>(secs.count()));  // ends in 'Z'
  if (nanos > 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%09lld", static_cast<long long>(nanos));
    std::string f = frac;
    while (f.ends_with('0')) f.pop_back();
    out.insert(out.size() - 1, f);
  }
  return out;
}

// Rows whose cells are joined by ",\t" and aligned as Go's tabwriter aligns them (minimum cell
// width 8, padding 1, spaces).
std::string tabulate(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i + 1 < row.size(); ++i) {
      if (widths.size() <= i) widths.resize(i + 1, 0);
      widths[i] = std::max(widths[i], row[i].size() + 1 + 1);  // the comma, the padding
    }
  }
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i + 1 == row.size()) {
        out += row[i];
        break;
      }
      std::string cell = row[i] + ",";
      const std::size_t width = std::max<std::size_t>(widths[i], 8);
      // Go counts characters, not bytes ("µs" is one).
      std::size_t chars = 0;
      for (unsigned char c : cell) chars += (c & 0xC0) != 0x80;
      out += cell;
      if (chars < width) out.append(width - chars, ' ');
    }
    out += '\n';
  }
  return out;
}

// kube's computeConcurrencyAllocation: allocations within [lower, upper] proportional to the
// targets, summing to `required` (water-filling by bisection on the proportion).
struct AllocItem {
  double lower = 0, upper = 0, target = 0;
};

std::vector<double> allocate(double required, const std::vector<AllocItem>& items) {
  std::vector<double> out(items.size());
  double low = 0, high = 0;
  for (const auto& i : items) {
    low += i.lower;
    high += i.upper;
  }
  if (required <= low) {
    for (std::size_t k = 0; k < items.size(); ++k) out[k] = items[k].lower;
    return out;
  }
  if (required >= high) {
    for (std::size_t k = 0; k < items.size(); ++k) out[k] = items[k].upper;
    return out;
  }
  auto sum_at = [&](double p) {
    double s = 0;
    for (const auto& i : items) s += std::clamp(std::max(i.target, 0.001) * p, i.lower, i.upper);
    return s;
  };
  double lo = 0, hi = 1;
  while (sum_at(hi) < required && hi < 1e12) hi *= 2;
  for (int round = 0; round < 100; ++round) {
    const double mid = (lo + hi) / 2;
    (sum_at(mid) < required ? lo : hi) = mid;
  }
  for (std::size_t k = 0; k < items.size(); ++k) {
    out[k] = std::clamp(std::max(items[k].target, 0.001) * hi, items[k].lower, items[k].upper);
  }
  return out;
}

}  // namespace

struct PriorityAndFairness::Config {
  std::vector<FlowSchema> schemas;  // in matching order
  std::map<std::string, PriorityLevel, std::less<>> levels;
};

struct PriorityAndFairness::Level {
  explicit Level(PriorityLevel s) : spec(std::move(s)), queues(queue_config(spec)) {}
  static QueueSet::Config queue_config(const PriorityLevel& p) {
    return {p.exempt, p.exempt ? 0 : p.queues, p.hand_size, p.queue_length_limit};
  }
  // Guards everything below: a request admitted or finished locks its own level only, so the
  // levels never wait for each other's requests (nor for a low-priority thread preempted
  // while it held one: kwatch's levels run at different CPU priorities).
  std::mutex mutex;
  PriorityLevel spec;
  QueueSet queues;
  bool quiescing = false;
  bool fresh = true;
  int nominal = 0, lower = 0, upper = 0, current = 0;
  int max_seats = 0;  // 0: the estimator's own bound
  // Seat demand (kube's seatDemandStats).
  int high_watermark = 0;
  double average = 0, deviation = 0, smoothed = 0;
  DropTracker drops;
};

struct PriorityAndFairness::Pending : QueueSet::Request {
  std::shared_ptr<Wake> wake;
  std::chrono::system_clock::time_point arrived_wall{}, started_wall{};
};

PriorityAndFairness::PriorityAndFairness(Options options) : options_(options) {
  const auto& b = bootstrap_objects();
  std::vector<json::object> levels = b.mandatory_levels, schemas = b.mandatory_schemas;
  levels.insert(levels.end(), b.suggested_levels.begin(), b.suggested_levels.end());
  schemas.insert(schemas.end(), b.suggested_schemas.begin(), b.suggested_schemas.end());
  configure(levels, schemas);
}

std::vector<DanglingCondition> PriorityAndFairness::configure(
    const std::vector<json::object>& level_objects, const std::vector<json::object>& schema_objects) {
  auto config = std::make_shared<Config>();
  for (const auto& o : level_objects) {
    if (auto level = parse_priority_level(o)) config->levels[level->name] = std::move(*level);
  }
  // The mandatory levels exist even when their objects do not (yet, or any more).
  const auto& b = bootstrap_objects();
  for (const auto& o : b.mandatory_levels) {
    auto level = parse_priority_level(o);
    if (level && !config->levels.count(level->name)) config->levels[level->name] = *level;
  }
  std::vector<DanglingCondition> conditions;
  bool have_exempt = false, have_catch_all = false;
  for (const auto& o : schema_objects) {
    auto schema = parse_flow_schema(o);
    if (!schema) continue;
    const bool found = config->levels.count(schema->priority_level) != 0;
    DanglingCondition want{schema->name, found ? "False" : "True", found ? "Found" : "NotFound",
                           "This FlowSchema references the PriorityLevelConfiguration object "
                           "named \"" + schema->priority_level + "\"" +
                               (found ? " and it exists" : " but there is no such object")};
    bool same = false;
    if (const json::array* cs = apimachinery::array_member(
            apimachinery::object_member(o, "status"), "conditions")) {
      for (const auto& c : *cs) {
        if (!c.is_object() || apimachinery::string_member(c.get_object(), "type") != "Dangling") {
          continue;
        }
        const auto& co = c.get_object();
        same = apimachinery::string_member(co, "status") == want.status &&
               apimachinery::string_member(co, "reason") == want.reason &&
               apimachinery::string_member(co, "message") == want.message;
      }
    }
    if (!same) conditions.push_back(want);
    if (!found) continue;
    have_exempt = have_exempt || schema->name == kExempt;
    have_catch_all = have_catch_all || schema->name == kCatchAll;
    config->schemas.push_back(std::move(*schema));
  }
  std::sort(config->schemas.begin(), config->schemas.end(),
            [](const FlowSchema& a, const FlowSchema& b) {
              return a.matching_precedence != b.matching_precedence
                         ? a.matching_precedence < b.matching_precedence
                         : a.name < b.name;
            });
  if (!have_exempt) {
    if (auto s = parse_flow_schema(b.mandatory_schemas[0])) {
      config->schemas.insert(config->schemas.begin(), std::move(*s));
    }
  }
  if (!have_catch_all) {
    if (auto s = parse_flow_schema(b.mandatory_schemas[1])) config->schemas.push_back(std::move(*s));
  }

  std::vector<QueueSet::RequestPtr> dispatched;
  {
    std::unique_lock map_lock(levels_mutex_);
    for (const auto& [name, spec] : config->levels) {
      if (!levels_.count(name)) levels_[name] = std::make_shared<Level>(spec);
    }
    const auto held = lock_all_levels();
    const auto now = Clock::now();
    for (const auto& [name, spec] : config->levels) {
      auto& level = levels_[name];
      level->spec = spec;
      level->quiescing = false;
      level->queues.configure(Level::queue_config(spec), now, dispatched);
    }
    // Levels no longer configured keep serving what they hold, then go.
    for (auto it = levels_.begin(); it != levels_.end();) {
      if (config->levels.count(it->first) != 0) {
        ++it;
      } else if (it->second->queues.idle()) {
        it = levels_.erase(it);
      } else {
        it->second->quiescing = true;
        ++it;
      }
    }
    std::atomic_store(&config_, std::shared_ptr<const Config>(config));
    recompute_limits_locked(true);
    for (auto& [name, level] : levels_) {
      level->queues.set_concurrency_limit(level->current, now, dispatched);
    }
  }
  for (auto& r : dispatched) {
    if (auto w = std::static_pointer_cast<Pending>(r)->wake) w->try_send(boost::system::error_code());
  }
  publish_limits();
  return conditions;
}

PriorityAndFairness::AllLevelsLock PriorityAndFairness::lock_all_levels() const {
  AllLevelsLock held;
  held.reserve(levels_.size());
  for (const auto& [name, level] : levels_) {  // in map order
    held.emplace_back(level, std::unique_lock(level->mutex));
  }
  return held;
}

// Nominal limits from the shares; then the current ones from demand (kube's
// finishQueueSetReconfigsLocked and updateBorrowingLocked).
void PriorityAndFairness::recompute_limits_locked(bool initial) {
  const auto now = Clock::now();
  const int server = options_.server_concurrency_limit;
  if (initial) {
    double share_sum = 0;
    for (auto& [name, level] : levels_) share_sum += level->spec.nominal_shares;
    nominal_sum_ = 0;
    for (auto& [name, level] : levels_) {
      // In double: shares and percentages are int32 and their products overflow an int (kube
      // computes in Go's 64-bit int); the results are clamped to a billion seats.
      constexpr double kMost = 1e9;
      const int nominal =
          share_sum > 0
              ? static_cast<int>(std::min(
                    kMost, std::ceil(server * static_cast<double>(level->spec.nominal_shares) /
                                     share_sum)))
              : 0;
      const int lendable =
          level->spec.lendable_percent
              ? go_round(std::min(kMost, nominal * (*level->spec.lendable_percent / 100.0)))
              : 0;
      const int borrowing =
          level->spec.borrowing_limit_percent
              ? go_round(std::min(kMost, nominal * (*level->spec.borrowing_limit_percent / 100.0)))
              : server;
      level->nominal = nominal;
      level->lower = nominal - lendable;
      level->upper = nominal + borrowing;
      nominal_sum_ += nominal;
      level->max_seats = 0;
      if (!level->spec.exempt && level->spec.queues > 0 && level->spec.hand_size > 0) {
        level->max_seats = std::max(
            1, std::min(static_cast<int>(std::ceil(nominal * 0.15)), nominal / level->spec.hand_size));
      }
      if (level->fresh) {
        level->fresh = false;
        level->current = nominal - lendable / 2;
      }
    }
  }
  // Seat demand over the period just ended.
  std::vector<AllocItem> items;
  std::vector<Level*> limited;
  int remaining = nominal_sum_;
  int lower_sum = 0, min_current_sum = 0;
  std::map<Level*, int> exempt_current;
  for (auto& [name, level] : levels_) {
    const auto demand = level->queues.demand().reset(now);
    level->high_watermark = go_round(demand.max);
    level->average = demand.average;
    level->deviation = std::isnan(demand.deviation) ? 0 : demand.deviation;
    const double envelope = level->average + level->deviation;
    // kube's 0.977 per 10 s period, scaled to this period: the same decay in time.
    const double keep = std::pow(
        0.977, std::chrono::duration<double>(options_.borrowing_period).count() / 10.0);
    level->smoothed = std::max(envelope, keep * level->smoothed + (1 - keep) * envelope);
    if (level->spec.exempt) {
      const int c = std::max(level->lower, level->high_watermark);
      exempt_current[level.get()] = c;
      remaining -= c;
      continue;
    }
    const int min_current =
        std::max(level->lower, std::min(level->nominal, level->high_watermark));
    items.push_back({static_cast<double>(min_current), static_cast<double>(level->upper),
                     std::max<double>(min_current, level->smoothed)});
    limited.push_back(level.get());
    lower_sum += level->lower;
    min_current_sum += min_current;
  }
  std::vector<double> allocs;
  double share_fraction = 0;
  if (remaining > lower_sum && remaining <= min_current_sum) {
    share_fraction = static_cast<double>(remaining - lower_sum) / (min_current_sum - lower_sum);
  } else if (remaining > min_current_sum) {
    allocs = allocate(nominal_sum_, items);
  }
  for (std::size_t i = 0; i < limited.size(); ++i) {
    Level* level = limited[i];
    if (remaining <= lower_sum) {
      level->current = level->lower;
    } else if (remaining <= min_current_sum) {
      const int min_current =
          std::max(level->lower, std::min(level->nominal, level->high_watermark));
      level->current = level->lower + go_round((min_current - level->lower) * share_fraction);
    } else {
      level->current = go_round(allocs[i]);
    }
  }
  for (auto& [level, c] : exempt_current) level->current = c;
}

void PriorityAndFairness::adjust_borrowing() {
  std::vector<QueueSet::RequestPtr> dispatched;
  {
    std::shared_lock map_lock(levels_mutex_);  // the map as it is; each level locked below
    const auto held = lock_all_levels();
    recompute_limits_locked(false);
    const auto now = Clock::now();
    for (auto& [name, level] : levels_) {
      level->queues.set_concurrency_limit(level->current, now, dispatched);
    }
  }
  for (auto& r : dispatched) {
    if (auto w = std::static_pointer_cast<Pending>(r)->wake) w->try_send(boost::system::error_code());
  }
  publish_limits();
}

void PriorityAndFairness::start(asio::any_io_executor executor) {
  asio::co_spawn(
      executor,
      [self = shared_from_this()]() -> asio::awaitable<void> {
        asio::steady_timer tick(co_await asio::this_coro::executor);
        while (!self->stopped_) {
          tick.expires_after(self->options_.borrowing_period);
          co_await tick.async_wait(asio::use_awaitable);
          if (!self->stopped_) self->adjust_borrowing();
        }
      },
      [](std::exception_ptr e) { base::log_task_failure(e, "priority and fairness task"); });
}

std::vector<LevelLimits> PriorityAndFairness::limits() const {
  std::shared_lock map_lock(levels_mutex_);
  std::vector<LevelLimits> out;
  for (const auto& [name, level] : levels_) {
    std::lock_guard lock(level->mutex);
    out.push_back({name, level->nominal, level->lower, level->upper, level->current});
  }
  return out;
}

void PriorityAndFairness::on_limits(std::function<void(const std::vector<LevelLimits>&)> observer) {
  {
    std::unique_lock map_lock(levels_mutex_);
    observer_ = std::move(observer);
  }
  publish_limits();
}

void PriorityAndFairness::publish_limits() {
  std::function<void(const std::vector<LevelLimits>&)> observer;
  {
    std::shared_lock map_lock(levels_mutex_);
    observer = observer_;
  }
  if (observer) observer(limits());
}

Classification PriorityAndFairness::classify(const RequestDigest& request) const {
  auto config = this->config();
  const FlowSchema* chosen = nullptr;
  const FlowSchema* catch_all = nullptr;
  for (const auto& s : config->schemas) {
    if (matches(s, request)) {
      chosen = &s;
      break;
    }
    if (s.name == kCatchAll) catch_all = &s;
  }
  if (chosen == nullptr) chosen = catch_all != nullptr ? catch_all : &config->schemas.back();
  Classification c;
  c.flow_schema = chosen->name;
  c.flow_schema_uid = chosen->uid;
  c.priority_level = chosen->priority_level;
  auto level = config->levels.find(chosen->priority_level);
  if (level != config->levels.end()) {
    c.priority_level_uid = level->second.uid;
    c.exempt = level->second.exempt;
    c.low_cpu_priority = level->second.low_cpu_priority;
    c.queues = !c.exempt && level->second.queues > 1;
    if (c.queues) c.distinguisher = flow_distinguisher(*chosen, request);
  }
  return c;
}

WorkEstimate PriorityAndFairness::estimate(const Work& work, const std::string& level_name) const {
  std::shared_lock map_lock(levels_mutex_);
  auto it = levels_.find(level_name);
  if (it == levels_.end()) return estimate_for(work, 0);
  std::lock_guard lock(it->second->mutex);
  return estimate_for(work, it->second->max_seats);
}

WorkEstimate PriorityAndFairness::estimate_for(const Work& work, int level_max) const {
  WorkEstimate e;
  switch (work.kind) {
    case Work::Kind::other:
      break;
    case Work::Kind::list: {
      const int max = level_max == 0 || level_max > options_.max_list_seats ? options_.max_list_seats
                                                                           : level_max;
      const std::int64_t stored = work.objects;
      const std::int64_t limited = work.limit > 0 && work.limit < stored ? work.limit : stored;
      // kube assumes the largest objects when it knows none of their sizes.
      const std::int64_t average =
          stored == 0 ? 0 : work.bytes > 0 ? work.bytes / stored : 1'500'000;
      std::int64_t loaded = limited;
      if (work.single) {
        loaded = 1;
      } else if (!work.from_cache && work.selector) {
        loaded = std::max(limited, stored / 2);
      }
      std::int64_t bytes = loaded * average;
      if (work.from_cache) bytes = std::min(bytes, options_.cache_list_max_bytes);
      const auto per = std::max<std::int64_t>(1, options_.bytes_per_seat);
      const auto seats = (bytes + per - 1) / per;
      e.initial_seats = static_cast<int>(std::clamp<std::int64_t>(seats, 1, std::max(1, max)));
      break;
    }
    case Work::Kind::mutating: {
      const int max = level_max == 0 || level_max > options_.max_mutating_seats
                          ? options_.max_mutating_seats
                          : level_max;
      const auto per = std::max(1, options_.watches_per_seat);
      if (work.watchers >= per && max > 0) {
        const auto wanted = (work.watchers + per - 1) / per;
        const int final_seats = static_cast<int>(std::min<std::int64_t>(wanted, max));
        e.final_seats = final_seats;
        // The work kube charges (5 ms per wanted seat) spread over the seats granted.
        e.additional_latency = std::chrono::duration_cast<std::chrono::nanoseconds>(
            options_.event_additional_duration * wanted) / final_seats;
      }
      break;
    }
  }
  return e;
}

asio::awaitable<PriorityAndFairness::Admission> PriorityAndFairness::admit(
    RequestDigest digest, Work work, std::function<void(const Classification&, bool)> queue_note) {
  Admission out;
  out.classification = classify(digest);
  auto pending = std::make_shared<Pending>();
  pending->flow_schema = out.classification.flow_schema;
  pending->distinguisher = out.classification.distinguisher;
  // Only a level with several queues deals a hand (kube hashes the flow only then).
  if (out.classification.queues) {
    pending->hash = flow_hash(out.classification.flow_schema, out.classification.distinguisher);
  }
  pending->user = digest.user != nullptr ? digest.user->name : "";
  pending->verb = digest.verb;
  pending->path = digest.path;
  pending->namespace_ = digest.namespace_;
  pending->name = digest.name;
  pending->api_version =
      digest.api_group.empty() ? digest.api_version : digest.api_group + "/" + digest.api_version;
  pending->resource = digest.resource;
  pending->subresource = digest.subresource;
  pending->arrived_wall = std::chrono::system_clock::now();

  std::shared_ptr<Level> level;
  QueueSet::Decision decision = QueueSet::Decision::reject;
  std::vector<QueueSet::RequestPtr> dispatched;
  auto executor = co_await asio::this_coro::executor;
  {
    // The map shared (only configure changes it), then the request's level alone.
    std::shared_lock map_lock(levels_mutex_);
    auto it = levels_.find(out.classification.priority_level);
    if (it != levels_.end()) {
      level = it->second;
      std::lock_guard lock(level->mutex);
      // Estimated under the lock the admission takes anyway (the level's share bounds it).
      out.work = estimate_for(work, level->max_seats);
      pending->work = out.work;
      decision = level->queues.start(pending, Clock::now(), dispatched);
      if (decision == QueueSet::Decision::wait) {
        pending->wake = std::make_shared<Wake>(executor, 1);
      } else if (decision == QueueSet::Decision::reject) {
        level->drops.record(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
        out.retry_after = static_cast<int>(level->drops.retry_after);
      }
    }
  }
  for (auto& r : dispatched) {
    if (auto w = std::static_pointer_cast<Pending>(r)->wake) w->try_send(boost::system::error_code());
  }
  if (!level) {
    out.reject_reason = "concurrency-limit";
    co_return out;
  }
  if (decision == QueueSet::Decision::reject) {
    out.reject_reason = pending->queue == nullptr && level->spec.queues < 1 ? "concurrency-limit"
                                                                            : "queue-full";
    co_return out;
  }
  if (decision == QueueSet::Decision::wait) {
    out.queued = true;
    if (queue_note) queue_note(out.classification, true);
    const auto began = Clock::now();
    asio::steady_timer deadline(executor);
    deadline.expires_after(options_.wait_limit);
    auto woken = co_await (pending->wake->async_receive(asio::use_awaitable) ||
                           deadline.async_wait(asio::use_awaitable));
    (void)woken;
    out.waited = Clock::now() - began;
    if (queue_note) queue_note(out.classification, false);
    bool gave_up = false;
    {
      std::lock_guard lock(level->mutex);
      gave_up = level->queues.cancel(pending, Clock::now(), true);
      if (gave_up) {
        level->drops.record(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
        out.retry_after = static_cast<int>(level->drops.retry_after);
      }
    }
    if (gave_up) {
      out.reject_reason = "time-out";
      co_return out;
    }
  }
  pending->started_wall = std::chrono::system_clock::now();
  QueueSet::RequestPtr request = pending;
  auto self = shared_from_this();
  out.seat = Seat(static_cast<void*>(pending.get()), [self, level, request](void*) {
    self->finish(level, request);
  });
  co_return out;
}

void PriorityAndFairness::finish(const std::shared_ptr<Level>& level,
                                 const QueueSet::RequestPtr& request) {
  std::vector<QueueSet::RequestPtr> dispatched;
  bool drop_level = false;
  {
    std::lock_guard lock(level->mutex);
    level->queues.finish(request, Clock::now(), dispatched);
    drop_level = level->quiescing && level->queues.idle();
  }
  if (drop_level) {
    // A level no longer configured goes with its last request (the map's lock first, as
    // everywhere, then the level's, which may have taken requests again meanwhile).
    std::unique_lock map_lock(levels_mutex_);
    auto it = levels_.find(level->spec.name);
    if (it != levels_.end() && it->second == level) {
      std::lock_guard lock(level->mutex);
      if (level->quiescing && level->queues.idle()) levels_.erase(it);
    }
  }
  for (auto& r : dispatched) {
    if (auto w = std::static_pointer_cast<Pending>(r)->wake) w->try_send(boost::system::error_code());
  }
}

std::string PriorityAndFairness::dump_priority_levels() const {
  std::vector<std::vector<std::string>> rows{
      {"PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
       "ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests",
       "CancelledRequests"}};
  std::shared_lock map_lock(levels_mutex_);
  for (const auto& [name, level] : levels_) {
    std::lock_guard lock(level->mutex);
    int active = 0;
    for (const auto& [index, q] : level->queues.queues()) active += q->waiting.empty() ? 0 : 1;
    const auto counts = level->queues.counts();
    rows.push_back({name, std::to_string(active), level->queues.idle() ? "true" : "false",
                    level->quiescing ? "true" : "false", std::to_string(level->queues.waiting()),
                    std::to_string(level->queues.executing()), std::to_string(counts.dispatched),
                    std::to_string(counts.rejected), std::to_string(counts.timed_out),
                    std::to_string(counts.cancelled)});
  }
  return tabulate(rows);
}

std::string PriorityAndFairness::dump_queues() const {
  std::vector<std::vector<std::string>> rows{
      {"PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse",
       "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"}};
  auto seat_seconds = [](double v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.8fss", v);
    return std::string(buf);
  };
  std::shared_lock map_lock(levels_mutex_);
  for (const auto& [name, level] : levels_) {
    std::lock_guard lock(level->mutex);
    const auto& held = level->queues.queues();
    auto row = [&](int index, const QueueSet::Queue* q) {
      if (q == nullptr) {
        rows.push_back({name, std::to_string(index), "0", "0", "0", seat_seconds(0), "0", "0",
                        seat_seconds(0)});
        return;
      }
      rows.push_back({name, std::to_string(index), std::to_string(q->waiting.size()),
                      std::to_string(q->executing), std::to_string(q->seats_in_use),
                      seat_seconds(q->next_dispatch_r), std::to_string(q->waiting_initial_seats),
                      std::to_string(q->waiting_max_seats), seat_seconds(q->waiting_work)});
    };
    // Every configured queue, as kube lists them, while that is a readable number; beyond it,
    // the queues that hold requests.
    const int configured = level->queues.config().queues;
    if (configured <= kMaxDumpedQueues) {
      for (int i = 0; i < configured; ++i) {
        auto it = held.find(i);
        row(i, it == held.end() ? nullptr : it->second.get());
      }
      for (auto it = held.lower_bound(configured); it != held.end(); ++it) {
        row(it->first, it->second.get());
      }
    } else {
      for (const auto& [index, q] : held) row(index, q.get());
    }
  }
  return tabulate(rows);
}

std::string PriorityAndFairness::dump_requests(bool details) const {
  std::vector<std::string> header{"PriorityLevelName", "FlowSchemaName",   "QueueIndex",
                                  "RequestIndexInQueue", "FlowDistingsher", "ArriveTime",
                                  "InitialSeats",      "FinalSeats",       "AdditionalLatency",
                                  "StartTime"};
  if (details) {
    for (const char* h : {"UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion",
                          "Resource", "SubResource"}) {
      header.emplace_back(h);
    }
  }
  std::vector<std::vector<std::string>> rows{header};
  auto row = [&](const std::string& level, int queue, int index, const QueueSet::Request& r) {
    const auto& p = static_cast<const Pending&>(r);
    std::vector<std::string> cells{
        level, r.flow_schema, std::to_string(queue), std::to_string(index), r.distinguisher,
        rfc3339_nano(p.arrived_wall), std::to_string(r.work.initial_seats),
        std::to_string(r.work.final_seats), go_duration(r.work.additional_latency),
        rfc3339_nano(p.started_wall == std::chrono::system_clock::time_point{} ? p.arrived_wall
                                                                              : p.started_wall)};
    if (details) {
      for (const std::string* s : {&r.user, &r.verb, &r.path, &r.namespace_, &r.name,
                                   &r.api_version, &r.resource, &r.subresource}) {
        cells.push_back(*s);
      }
    }
    rows.push_back(std::move(cells));
  };
  std::shared_lock map_lock(levels_mutex_);
  for (const auto& [name, level] : levels_) {
    std::lock_guard lock(level->mutex);
    for (const auto& [index, q] : level->queues.queues()) {
      int i = 0;
      for (const auto& r : q->waiting) row(name, index, i++, *r);
    }
    for (const auto& r : level->queues.executing_requests()) {
      row(name, r->queue != nullptr ? r->queue->index : -1, -1, *r);
    }
  }
  return tabulate(rows);
}

}  // namespace kwatch::flowcontrol
