#include "controllers/garbage_collector.hpp"

#include "registry/deletion.hpp"
#include "apimachinery/json_path.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "watch/cache_follower.hpp"
#include "registry/cacher_registry.hpp"
#include "base/task_failure.hpp"
#include "apimachinery/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace kwatch::controllers {

using base::log_task_failure;
using registry::CacherRegistry;
using watch::CacheFollower;
using watch::follow_cache;
namespace asio = boost::asio;
namespace json = boost::json;
using kinds::ResourceInfo;

namespace {

using apimachinery::string_at;

bool has_finalizer(const json::object* meta, std::string_view finalizer) {
  const json::value* f = meta != nullptr ? meta->if_contains("finalizers") : nullptr;
  if (f == nullptr || !f->is_array()) return false;
  for (const auto& v : f->get_array()) {
    if (v.is_string() && v.get_string() == finalizer) return true;
  }
  return false;
}

bool being_deleted(const json::object* meta) {
  return meta != nullptr && meta->contains("deletionTimestamp");
}

std::optional<json::object> parse_object(std::string_view text) {
  auto parsed = apimachinery::parse_json(text);
  if (!parsed || !parsed->is_object()) return std::nullopt;
  return std::move(parsed->get_object());
}

// Whether a cached object's text may matter to the collector, before parsing it.
bool mentions(std::string_view text, std::string_view word) {
  return text.find(word) != std::string::npos;
}

}  // namespace

namespace gc {

bool FairQueue::push(const std::string& group, Item item) {
  if (!queued_.insert(item.key).second) return false;
  auto [ns, new_ns] = namespaces_.try_emplace(item.ns);
  if (new_ns) turns_.push_back(item.ns);
  auto [g, new_group] = ns->second.groups.try_emplace(group);
  if (new_group) ns->second.turns.push_back(group);
  g->second.push_back(std::move(item));
  return true;
}

std::optional<FairQueue::Item> FairQueue::pop() {
  if (turns_.empty()) return std::nullopt;
  std::string ns_name = std::move(turns_.front());
  turns_.pop_front();
  auto ns = namespaces_.find(ns_name);
  std::string group = std::move(ns->second.turns.front());
  ns->second.turns.pop_front();
  auto g = ns->second.groups.find(group);
  Item item = std::move(g->second.front());
  g->second.pop_front();
  // A group or namespace with more goes to the back of its line; an emptied one leaves it.
  if (g->second.empty()) {
    ns->second.groups.erase(g);
  } else {
    ns->second.turns.push_back(std::move(group));
  }
  if (ns->second.turns.empty()) {
    namespaces_.erase(ns);
  } else {
    turns_.push_back(std::move(ns_name));
  }
  queued_.erase(item.key);
  return item;
}

std::optional<std::string> dependent_on_wait_cycle(const WaitGraph& waits,
                                                   const std::string& owner) {
  auto first = waits.find(owner);
  if (first == waits.end()) return std::nullopt;
  // One search for the owner from each of its waited-for dependents in turn; a node seen from an
  // earlier one did not lead back to the owner, so it is not searched again.
  std::set<std::string_view> seen;
  for (const std::string& dependent : first->second) {
    std::vector<std::string_view> stack{dependent};
    while (!stack.empty()) {
      const std::string_view uid = stack.back();
      stack.pop_back();
      if (uid == owner) return dependent;
      if (!seen.insert(uid).second) continue;
      auto next = waits.find(std::string(uid));
      if (next == waits.end()) continue;
      for (const std::string& v : next->second) {
        if (v == owner || !seen.count(v)) stack.push_back(v);
      }
    }
  }
  return std::nullopt;
}

ForegroundStep foreground_step(const WaitGraph& waits, const std::string& owner_uid,
                               std::size_t blocking) {
  if (blocking == 0) return {ForegroundStep::Action::finish, {}};
  if (auto dependent = dependent_on_wait_cycle(waits, owner_uid)) {
    return {ForegroundStep::Action::unblock, std::move(*dependent)};
  }
  return {ForegroundStep::Action::wait, {}};
}

std::chrono::milliseconds retry_delay(int failures) {
  constexpr std::chrono::milliseconds kFirst(100);
  constexpr std::chrono::milliseconds kMost(30'000);
  if (failures <= 1) return kFirst;
  if (failures > 16) return kMost;
  return std::min(kMost, std::chrono::milliseconds(kFirst.count() << (failures - 1)));
}

}  // namespace gc

GarbageCollector::GarbageCollector(std::shared_ptr<kinds::Scheme> scheme,
                                   std::shared_ptr<registry::ResourceStore> store,
                                   std::shared_ptr<CacherRegistry> cachers)
    : scheme_(std::move(scheme)), store_(std::move(store)), cachers_(std::move(cachers)) {}

void GarbageCollector::start(asio::any_io_executor executor) {
  strand_.emplace(asio::make_strand(executor));
  std::weak_ptr<GarbageCollector> weak = shared_from_this();
  auto watch_new = [weak](std::shared_ptr<watch::Cacher> cacher) {
    auto self = weak.lock();
    if (!self || self->stopped_) return;
    if (!self->watched_.insert(cacher->options().prefix).second) return;
    asio::co_spawn(*self->strand_, self->watch_cacher(std::move(cacher)),
                   [](std::exception_ptr e) { log_task_failure(e, "garbage collector watch"); });
  };
  // Registered before the existing caches are listed, so none falls between the two.
  cachers_->on_added([strand = *strand_, watch_new](const std::string&,
                                                    const std::shared_ptr<watch::Cacher>& cacher) {
    asio::post(strand, [watch_new, cacher]() { watch_new(cacher); });
  });
  asio::post(*strand_, [self = shared_from_this(), watch_new]() {
    for (auto& [resource, cacher] : self->cachers_->all()) watch_new(cacher);
  });
  asio::co_spawn(*strand_, [self = shared_from_this()]() { return self->work(); },
                 [](std::exception_ptr e) { log_task_failure(e, "garbage collector"); });
}

void GarbageCollector::stop() {
  stopped_ = true;
  if (!strand_) return;
  asio::post(*strand_, [self = shared_from_this()]() {
    if (self->wake_) self->wake_->cancel();
  });
}

std::shared_ptr<const ResourceInfo> GarbageCollector::owner_info(const OwnerRef& ref) const {
  const auto slash = ref.api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : ref.api_version.substr(0, slash);
  const std::string version =
      slash == std::string::npos ? ref.api_version : ref.api_version.substr(slash + 1);
  return scheme_->find_kind(group, version, ref.kind);
}

std::string GarbageCollector::owner_key(const Dependent& d, const OwnerRef& ref) const {
  auto info = owner_info(ref);
  if (info == nullptr) return {};
  return info->key(info->namespaced ? d.ns : "", ref.name);
}

asio::awaitable<void> GarbageCollector::watch_cacher(std::shared_ptr<watch::Cacher> cacher) {
  const std::string prefix = cacher->options().prefix;
  // Only the prefix is kept: a description the scheme replaces (a spec update of a definition)
  // is freed, and every use looks up the current one.
  if (scheme_->find_prefix(prefix) != nullptr) {
    CacheFollower follower;
    follower.cacher = cacher;
    follower.prefix = prefix;
    follower.watch_lifetime = std::chrono::hours(24);
    // Until stopped, or until the cache goes (its definition was deleted: the CRD controller
    // removes the cache before the description). Asked once per batch of events: one map lookup.
    follower.keep_going = [this, &prefix, cacher] {
      return !stopped_ && cachers_->find_prefix(prefix) == cacher;
    };
    // The initial events bring this resource's state again. An owner of this resource that
    // went while it was not followed (before the first watch, or between two) sends no DELETED
    // event: every dependent naming an owner here looks again.
    follower.on_start = [this, &prefix](std::int64_t start) -> asio::awaitable<void> {
      forget_prefix(prefix);
      recheck_owners_under(prefix);
      seen_[prefix] = start;
      co_return;
    };
    follower.on_frames = [this, &prefix](const std::vector<watch::WatchFrame>& frames)
        -> asio::awaitable<void> {
      std::int64_t& seen = seen_[prefix];
      for (const auto& frame : frames) {
        observe(prefix, frame);
        if (frame.object) seen = std::max(seen, frame.object->resource_version);
      }
      co_return;
    };
    co_await follow_cache(std::move(follower));
  }
  forget_prefix(prefix);
  watched_.erase(prefix);
  seen_.erase(prefix);
}

// Each cache's events reach the index on a stream of their own: an owner's deletion may come
// before the creation of a dependent made just before it. Covered once every cache followed has
// applied its events up to `revision` and the index has seen all those it applied.
asio::awaitable<bool> GarbageCollector::index_covers(std::int64_t revision) {
  constexpr auto kLongest = std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + kLongest;
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const std::vector<std::string> prefixes(watched_.begin(), watched_.end());
  for (const auto& prefix : prefixes) {
    for (;;) {
      auto cacher = cachers_->find_prefix(prefix);
      auto seen = seen_.find(prefix);
      if (!cacher || !watched_.count(prefix)) break;  // gone meanwhile: nothing to wait for
      if (seen != seen_.end() && seen->second >= revision) break;
      if (cacher->resource_version() < revision) {
        auto fresh = co_await cacher->wait_until_fresh(revision);
        if (!fresh) co_return false;
        continue;
      }
      if (seen != seen_.end() && cacher->applied_resource_version() <= seen->second) break;
      if (stopped_ || std::chrono::steady_clock::now() >= deadline) co_return false;
      pause.expires_after(std::chrono::milliseconds(2));
      co_await pause.async_wait(asio::use_awaitable);
    }
  }
  co_return true;
}

void GarbageCollector::forget_prefix(const std::string& prefix) {
  std::vector<std::string> keys;
  for (auto it = dependents_.lower_bound(prefix);
       it != dependents_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    keys.push_back(it->first);
  }
  for (const auto& key : keys) unindex(key);
}

void GarbageCollector::recheck_owners_under(const std::string& prefix) {
  for (auto it = by_owner_key_.lower_bound(prefix);
       it != by_owner_key_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    enqueue_all(it->second);
  }
}

void GarbageCollector::index(const std::string& key, Dependent d) {
  for (const auto& ref : d.owners) {
    by_owner_uid_[ref.uid].insert(key);
    if (ref.block) {
      blockers_[ref.uid].insert(key);
      if (d.deleting_dependents) waits_[ref.uid].insert(d.uid);
    }
    if (auto k = owner_key(d, ref); !k.empty()) by_owner_key_[k].insert(key);
  }
  dependents_[key] = std::move(d);
}

void GarbageCollector::unindex(const std::string& key) {
  auto it = dependents_.find(key);
  if (it == dependents_.end()) return;
  auto drop = [](std::map<std::string, std::set<std::string>>& m, const std::string& k,
                 const std::string& member) {
    auto e = m.find(k);
    if (e == m.end()) return;
    e->second.erase(member);
    if (e->second.empty()) m.erase(e);
  };
  for (const auto& ref : it->second.owners) {
    drop(by_owner_uid_, ref.uid, key);
    drop(by_owner_key_, owner_key(it->second, ref), key);
    drop(blockers_, ref.uid, key);
    drop(waits_, ref.uid, it->second.uid);
  }
  dependents_.erase(it);
}

void GarbageCollector::observe(const std::string& prefix, const watch::WatchFrame& frame) {
  if (!frame.object) return;
  if (frame.type != watch::EventType::added && frame.type != watch::EventType::modified &&
      frame.type != watch::EventType::deleted) {
    return;
  }
  const watch::CachedObject& o = *frame.object;
  const std::string key(o.key);
  if (frame.type == watch::EventType::deleted) {
    if (auto it = dependents_.find(key); it != dependents_.end()) {
      // An owner waiting in foreground for this object may go now.
      for (const auto& ref : it->second.owners) enqueue_owner(it->second, ref);
      unindex(key);
    }
    if (auto it = by_owner_key_.find(key); it != by_owner_key_.end()) enqueue_all(it->second);
    fanned_out_.erase(key);
    orphan_cursor_.erase(key);
    return;
  }
  const bool known = dependents_.count(key) > 0;
  const bool owner = by_owner_key_.count(key) > 0;
  const bool references = mentions(o.json, "\"ownerReferences\"");
  const bool gc_finalizer = mentions(o.json, registry::kOrphanFinalizer) ||
                            mentions(o.json, registry::kForegroundFinalizer);
  if (!known && !owner && !references && !gc_finalizer) return;
  auto obj = parse_object(o.json);
  if (!obj) return;
  const json::object* meta = apimachinery::object_member(*obj, "metadata");
  Dependent d;
  d.prefix = prefix;
  d.ns = o.ns;
  d.name = o.name;
  d.uid = string_at(meta, "uid");
  d.revision = o.resource_version;
  d.deleting_dependents =
      being_deleted(meta) && has_finalizer(meta, registry::kForegroundFinalizer);
  if (const json::value* refs = meta != nullptr ? meta->if_contains("ownerReferences") : nullptr;
      refs != nullptr && refs->is_array()) {
    for (const auto& r : refs->get_array()) {
      const json::object* ro = r.if_object();
      if (ro == nullptr) continue;
      OwnerRef ref;
      ref.api_version = string_at(ro, "apiVersion");
      ref.kind = string_at(ro, "kind");
      ref.name = string_at(ro, "name");
      ref.uid = string_at(ro, "uid");
      const json::value* block = ro->if_contains("blockOwnerDeletion");
      ref.block = block != nullptr && block->is_bool() && block->get_bool();
      if (!ref.uid.empty()) d.owners.push_back(std::move(ref));
    }
  }
  bool changed = !known && !d.owners.empty();
  if (known) {
    const Dependent& before = dependents_.at(key);
    auto same = [](const OwnerRef& a, const OwnerRef& b) {
      return a.uid == b.uid && a.block == b.block && a.name == b.name && a.kind == b.kind;
    };
    changed = before.uid != d.uid || before.deleting_dependents != d.deleting_dependents ||
              !std::equal(before.owners.begin(), before.owners.end(), d.owners.begin(),
                          d.owners.end(), same);
    if (changed) {
      // An owner waiting in foreground that this object blocked and blocks no more may go on.
      for (const auto& ref : before.owners) {
        const bool still = before.uid == d.uid &&
                           std::any_of(d.owners.begin(), d.owners.end(), [&](const OwnerRef& r) {
                             return r.uid == ref.uid && r.block;
                           });
        if (ref.block && !still) enqueue_owner(before, ref);
      }
      unindex(key);
    }
  }
  if (changed && !d.owners.empty()) index(key, d);
  if (changed && !d.owners.empty()) enqueue(prefix, key, d.ns);
  if (being_deleted(meta) && (has_finalizer(meta, registry::kOrphanFinalizer) ||
                              has_finalizer(meta, registry::kForegroundFinalizer))) {
    if (has_finalizer(meta, registry::kOrphanFinalizer)) {
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(orphaned_,
                    [now](const auto& e) { return now - e.second.first > std::chrono::minutes(10); });
      orphaned_.try_emplace(d.uid, now, o.resource_version);
    }
    enqueue(prefix, key, d.ns);
  }
  // An owner that changed (re-created, or deleting in foreground): its dependents look again.
  if (owner) {
    if (auto it = by_owner_key_.find(key); it != by_owner_key_.end()) enqueue_all(it->second);
  }
}

void GarbageCollector::enqueue(const std::string& prefix, const std::string& key,
                               const std::string& ns) {
  if (prefix.empty() || key.empty()) return;
  // A dependent waits its turn among its first owner's dependents, so that a large family takes
  // one turn in its namespace like a small one; anything else (an owner's own steps) by itself.
  auto it = dependents_.find(key);
  std::string group = it != dependents_.end() && !it->second.owners.empty()
                          ? "owner " + it->second.owners.front().uid
                          : "object " + key;
  if (queue_.push(group, {prefix, key, ns}) && wake_) wake_->cancel();
}

void GarbageCollector::enqueue_owner(const Dependent& d, const OwnerRef& ref) {
  auto info = owner_info(ref);
  if (info == nullptr) return;
  enqueue(info->key_prefix(), owner_key(d, ref), info->namespaced ? d.ns : std::string());
}

void GarbageCollector::enqueue_all(const std::set<std::string>& keys) {
  for (const auto& key : keys) {
    if (auto it = dependents_.find(key); it != dependents_.end()) {
      enqueue(it->second.prefix, key, it->second.ns);
    }
  }
}

namespace {
// Items processed at once: their storage calls overlap (kube runs 20 attemptToDelete workers).
constexpr std::size_t kWorkers = 8;
}  // namespace

asio::awaitable<void> GarbageCollector::work() {
  wake_ = std::make_unique<asio::steady_timer>(*strand_);
  while (co_await wait_for_work()) {
    std::optional<gc::FairQueue::Item> item = queue_.pop();
    if (!item) continue;
    if (in_flight_.count(item->key)) {
      again_.insert_or_assign(item->key, std::move(*item));  // after the one in flight
      continue;
    }
    in_flight_.insert(item->key);
    asio::co_spawn(*strand_,
                   [self = shared_from_this(), item = std::move(*item)]() mutable {
                     return self->run_item(std::move(item));
                   },
                   [](std::exception_ptr e) { log_task_failure(e, "garbage collector item"); });
    // Lets the watch tasks and the items on this strand in between: a step that needs no storage
    // call completes without suspending, and a run of them would keep every event out.
    co_await asio::post(*strand_, asio::use_awaitable);
  }
}

asio::awaitable<bool> GarbageCollector::wait_for_work() {
  while (!stopped_) {
    const auto now = std::chrono::steady_clock::now();
    while (!retries_.empty() && retries_.begin()->first <= now) {
      gc::FairQueue::Item item = std::move(retries_.begin()->second);
      retries_.erase(retries_.begin());
      enqueue(item.prefix, item.key, item.ns);
    }
    if (!queue_.empty() && in_flight_.size() < kWorkers) co_return true;
    // Nothing to do until an event queues something or an item ends (both cancel the wait), or
    // a retry is due.
    wake_->expires_at(retries_.empty() ? asio::steady_timer::time_point::max()
                                       : retries_.begin()->first);
    co_await wake_->async_wait(asio::as_tuple(asio::use_awaitable));
  }
  co_return false;
}

asio::awaitable<void> GarbageCollector::run_item(gc::FairQueue::Item item) {
  Outcome outcome = Outcome::retry;
  try {
    // Held until the item is done; null when the resource is no longer served.
    if (auto info = scheme_->find_prefix(item.prefix)) {
      outcome = co_await process(*info, item.key);
    } else {
      outcome = Outcome::done;
    }
  } catch (const std::exception& e) {
    spdlog::warn("garbage collector: {}: {}", apimachinery::to_valid_utf8(item.key), e.what());
  }
  in_flight_.erase(item.key);
  if (auto again = again_.find(item.key); again != again_.end()) {
    gc::FairQueue::Item next = std::move(again->second);
    again_.erase(again);
    enqueue(next.prefix, next.key, next.ns);
  }
  if (outcome == Outcome::retry) {
    const int failures = ++failures_[item.key];
    retries_.emplace(std::chrono::steady_clock::now() + gc::retry_delay(failures),
                     std::move(item));
  } else {
    failures_.erase(item.key);
  }
  if (wake_) wake_->cancel();  // a worker is free
}

asio::awaitable<GarbageCollector::Outcome> GarbageCollector::process(const ResourceInfo& info,
                                                                     const std::string& key) {
  auto cacher = cachers_->find(info);
  if (!cacher) co_return Outcome::done;
  watch::ObjectPtr cached = cacher->get(key);
  if (!cached) co_return Outcome::done;
  auto obj = parse_object(cached->json);
  if (!obj) co_return Outcome::done;
  const json::object* meta = apimachinery::object_member(*obj, "metadata");
  if (being_deleted(meta)) {
    if (has_finalizer(meta, registry::kOrphanFinalizer)) {
      co_return co_await orphan_dependents(info, key, *obj);
    }
    if (has_finalizer(meta, registry::kForegroundFinalizer)) {
      co_return co_await delete_dependents(info, key, cached->resource_version, *obj);
    }
    co_return Outcome::done;
  }
  if (dependents_.count(key)) co_return co_await collect(info, key);
  co_return Outcome::done;
}

asio::awaitable<GarbageCollector::Outcome> GarbageCollector::orphan_dependents(
    const ResourceInfo& info, const std::string& key, const json::object& owner) {
  // A batch a turn: an owner with thousands of dependents takes turns with everyone else.
  constexpr std::size_t kBatch = 32;
  const json::object* meta = apimachinery::object_member(owner, "metadata");
  const std::string uid = string_at(meta, "uid");
  auto after = [this, &uid, &key]() -> std::pair<std::set<std::string>::const_iterator,
                                                 std::set<std::string>::const_iterator> {
    auto it = by_owner_uid_.find(uid);
    if (it == by_owner_uid_.end()) return {};
    auto cursor = orphan_cursor_.find(key);
    return {cursor == orphan_cursor_.end() ? it->second.begin()
                                           : it->second.upper_bound(cursor->second),
            it->second.end()};
  };
  std::vector<std::string> batch;
  for (auto [it, end] = after(); it != end && batch.size() < kBatch; ++it) batch.push_back(*it);
  for (const auto& dependent_key : batch) {
    orphan_cursor_[key] = dependent_key;
    auto d = dependents_.find(dependent_key);
    if (d == dependents_.end()) continue;
    const Dependent dependent = d->second;
    std::set<std::string> uids{uid};  // named: GCC 12 mishandles temporaries in a co_await
    co_await edit_references(dependent, std::move(uids), false);
  }
  if (auto [it, end] = after(); it != end) {
    // The next batch, on its next turn.
    enqueue(info.key_prefix(), key, string_at(meta, "namespace"));
    co_return Outcome::done;
  }
  orphan_cursor_.erase(key);
  co_return co_await drop_finalizer(info, owner, registry::kOrphanFinalizer) ? Outcome::done
                                                                              : Outcome::retry;
}

asio::awaitable<GarbageCollector::Outcome> GarbageCollector::delete_dependents(
    const ResourceInfo& info, const std::string& key, std::int64_t revision,
    const json::object& owner) {
  const json::object* meta = apimachinery::object_member(owner, "metadata");
  const std::string uid = string_at(meta, "uid");
  // Each state of the owner queues its dependents once (collect() finds the owner waiting and
  // deletes them), not again on each of its dependents' deletions, which bring it back here.
  // Those deleting in foreground already go on their own.
  auto fanned = fanned_out_.find(key);
  const bool fresh = fanned == fanned_out_.end() || fanned->second != revision ||
                     failures_.count(key) > 0;
  if (fanned == fanned_out_.end() || fanned->second != revision) {
    fanned_out_[key] = revision;
    if (auto it = by_owner_uid_.find(uid); it != by_owner_uid_.end()) {
      for (const auto& dependent_key : it->second) {
        const Dependent& d = dependents_.at(dependent_key);
        if (!d.deleting_dependents) enqueue(d.prefix, dependent_key, d.ns);
      }
    }
  }
  auto blockers = blockers_.find(uid);
  std::size_t blocking = blockers == blockers_.end() ? 0 : blockers->second.size();
  if (blocking == 0) {
    // None blocks, as far as the index knows: believed once it has every dependent made before
    // the owner's deletion (then it looks again, and may find one).
    if (!co_await index_covers(revision)) co_return Outcome::retry;
    blockers = blockers_.find(uid);
    blocking = blockers == blockers_.end() ? 0 : blockers->second.size();
  }
  // A cycle of waits is closed by the event of its last member to start waiting, and that
  // member comes here fresh with it: an owner looked at again unchanged looks for none.
  if (blocking > 0 && !fresh) co_return Outcome::done;
  const gc::ForegroundStep step = gc::foreground_step(waits_, uid, blocking);
  switch (step.action) {
    case gc::ForegroundStep::Action::finish:
      fanned_out_.erase(key);
      co_return co_await drop_finalizer(info, owner, registry::kForegroundFinalizer)
          ? Outcome::done
          : Outcome::retry;
    case gc::ForegroundStep::Action::unblock: {
      std::optional<Dependent> dependent;
      for (const auto& dependent_key : blockers->second) {
        const Dependent& d = dependents_.at(dependent_key);
        if (d.uid == step.dependent) dependent = d;
      }
      if (!dependent) co_return Outcome::done;
      spdlog::info("garbage collector: {}/{} and {}/{} wait for each other to be deleted: the "
                   "reference of {} to {} no longer blocks",
                   dependent->ns, dependent->name, string_at(meta, "namespace"),
                   string_at(meta, "name"), dependent->name, string_at(meta, "name"));
      std::set<std::string> uids{uid};
      co_return co_await edit_references(*dependent, std::move(uids), true) ? Outcome::done
                                                                             : Outcome::retry;
    }
    case gc::ForegroundStep::Action::wait:
      break;
  }
  co_return Outcome::done;
}

asio::awaitable<GarbageCollector::OwnerState> GarbageCollector::owner_state(const Dependent& dependent,
                                                                          const OwnerRef& ref) {
  const std::string& ns = dependent.ns;
  auto info = owner_info(ref);
  // An owner of a kind not served (yet), or a namespaced owner named by a cluster-scoped object:
  // nothing can be concluded, so nothing is deleted.
  if (info == nullptr || (info->namespaced && ns.empty())) co_return OwnerState::solid;
  const std::string owner_ns = info->namespaced ? ns : "";
  auto state_of = [&ref](const json::object& owner) {
    const json::object* meta = apimachinery::object_member(owner, "metadata");
    if (string_at(meta, "uid") != ref.uid) return OwnerState::gone;
    if (being_deleted(meta) && has_finalizer(meta, registry::kForegroundFinalizer)) {
      return OwnerState::waiting;
    }
    return OwnerState::solid;
  };
  if (auto cacher = cachers_->find(*info)) {
    if (auto cached = cacher->get(info->key(owner_ns, ref.name))) {
      if (auto owner = parse_object(cached->json); owner && state_of(*owner) != OwnerState::gone) {
        co_return state_of(*owner);
      }
    }
  }
  // The cache may lag: absence is only believed from storage.
  std::string name = ref.name;
  std::string ns_copy = owner_ns;
  std::string any_version;
  auto stored = co_await store_->get(*info, std::move(ns_copy), std::move(name),
                                     std::move(any_version));
  OwnerState state = OwnerState::solid;  // storage trouble: conclude nothing
  if (stored) {
    state = state_of(*stored);
  } else if (stored.error().code == base::Errc::not_found) {
    state = OwnerState::gone;
  }
  if (auto it = orphaned_.find(ref.uid);
      state == OwnerState::gone && it != orphaned_.end() && dependent.revision < it->second.second) {
    state = OwnerState::orphaned;  // it was there when its owner orphaned its dependents
  }
  co_return state;
}

asio::awaitable<GarbageCollector::Outcome> GarbageCollector::collect(const ResourceInfo& info,
                                                                     const std::string& key) {
  const Dependent d = dependents_.at(key);
  std::set<std::string> stale;  // references to owners that are gone or waiting
  bool solid = false;
  bool waiting = false;
  bool gone = false;
  for (const auto& ref : d.owners) {
    switch (co_await owner_state(d, ref)) {
      case OwnerState::solid:
        solid = true;
        break;
      case OwnerState::waiting:
        waiting = true;
        stale.insert(ref.uid);
        break;
      case OwnerState::gone:
        gone = true;
        stale.insert(ref.uid);
        break;
      case OwnerState::orphaned:
        stale.insert(ref.uid);
        break;
    }
  }
  if (stale.empty()) co_return Outcome::done;
  if (solid || (!gone && !waiting)) {
    // Kept by a live owner, or left by owners that orphaned it: only the references go.
    co_return co_await edit_references(d, std::move(stale), false) ? Outcome::done
                                                                   : Outcome::retry;
  }
  registry::DeleteQuery query;
  query.uid = d.uid;
  auto cacher = cachers_->find(info);
  auto cached = cacher ? cacher->get(key) : nullptr;
  auto obj = cached ? parse_object(cached->json) : std::nullopt;
  const json::object* meta = obj ? apimachinery::object_member(*obj, "metadata") : nullptr;
  if (waiting && by_owner_uid_.count(d.uid)) {
    query.propagation = registry::Propagation::foreground;  // its owner waits for its dependents too
  } else if (has_finalizer(meta, registry::kOrphanFinalizer)) {
    query.propagation = registry::Propagation::orphan;
  } else if (has_finalizer(meta, registry::kForegroundFinalizer)) {
    query.propagation = registry::Propagation::foreground;
  } else {
    query.propagation = registry::Propagation::background;
  }
  std::string ns = d.ns;
  std::string name = d.name;
  auto r = co_await store_->remove(info, std::move(ns), std::move(name), std::move(query));
  if (!r && r.error().code != base::Errc::not_found && r.error().code != base::Errc::conflict) {
    spdlog::warn("garbage collector: cannot delete {}: {}", apimachinery::to_valid_utf8(key),
                 r.error().message);
    co_return Outcome::retry;
  }
  if (r) spdlog::debug("garbage collector deleted {}", apimachinery::to_valid_utf8(key));
  co_return Outcome::done;
}

asio::awaitable<bool> GarbageCollector::drop_finalizer(const ResourceInfo& info,
                                                       const json::object& obj,
                                                       std::string_view finalizer) {
  const json::object* meta = apimachinery::object_member(obj, "metadata");
  const std::string ns = string_at(meta, "namespace");
  const std::string name = string_at(meta, "name");
  for (int attempt = 0; attempt < 5 && !stopped_; ++attempt) {
    std::string ns_copy = ns, name_copy = name, any_version;
    auto current = co_await store_->get(info, std::move(ns_copy), std::move(name_copy),
                                        std::move(any_version));
    if (!current) co_return current.error().code == base::Errc::not_found;
    json::value* f = (*current)["metadata"].as_object().if_contains("finalizers");
    if (f == nullptr || !f->is_array()) co_return true;
    json::array kept;
    for (const auto& v : f->get_array()) {
      if (!(v.is_string() && v.get_string() == finalizer)) kept.push_back(v);
    }
    if (kept.size() == f->get_array().size()) co_return true;
    *f = std::move(kept);
    registry::WriteQuery query;
    std::string ns_arg = ns, name_arg = name;
    auto r = co_await store_->update(info, std::move(ns_arg), std::move(name_arg),
                                     std::move(*current), std::move(query));
    if (r) co_return true;
    if (r.error().code != base::Errc::conflict) {
      spdlog::warn("garbage collector: cannot remove finalizer {} of {}/{}: {}", finalizer, ns,
                   name, r.error().message);
      co_return false;
    }
  }
  co_return false;
}

asio::awaitable<bool> GarbageCollector::edit_references(const Dependent& d,
                                                        std::set<std::string> uids, bool unblock) {
  for (int attempt = 0; attempt < 5 && !stopped_; ++attempt) {
    // The current description: a definition updated since `d` was seen validates the write
    // with its new schema.
    auto info = scheme_->find_prefix(d.prefix);
    if (info == nullptr) co_return true;  // no longer served: nothing to edit
    std::string ns = d.ns, name = d.name, any_version;
    auto current = co_await store_->get(*info, std::move(ns), std::move(name),
                                        std::move(any_version));
    if (!current) co_return current.error().code == base::Errc::not_found;
    json::object& meta = (*current)["metadata"].as_object();
    if (string_at(&meta, "uid") != d.uid) co_return true;  // another object by now
    json::value* refs = meta.if_contains("ownerReferences");
    if (refs == nullptr || !refs->is_array()) co_return true;
    json::array kept;
    bool edited = false;
    for (const auto& r : refs->get_array()) {
      const json::object* ro = r.if_object();
      if (ro == nullptr || !uids.count(string_at(ro, "uid"))) {
        kept.push_back(r);
      } else if (unblock) {
        json::object ref = *ro;
        if (const json::value* b = ref.if_contains("blockOwnerDeletion"); b && b->is_bool() &&
                                                                          b->get_bool()) {
          ref["blockOwnerDeletion"] = false;
          edited = true;
        }
        kept.push_back(std::move(ref));
      } else {
        edited = true;
      }
    }
    if (!edited) co_return true;
    if (kept.empty()) {
      meta.erase("ownerReferences");
    } else {
      *refs = std::move(kept);
    }
    registry::WriteQuery query;
    std::string ns_arg = d.ns, name_arg = d.name;
    auto r = co_await store_->update(*info, std::move(ns_arg), std::move(name_arg),
                                     std::move(*current), std::move(query));
    if (r) co_return true;
    if (r.error().code != base::Errc::conflict) {
      spdlog::warn("garbage collector: cannot remove owner references of {}/{}: {}", d.ns, d.name,
                   r.error().message);
      co_return false;
    }
  }
  co_return false;
}

}  // namespace kwatch::controllers
