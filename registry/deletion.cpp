#include "registry/deletion.hpp"

#include "apimachinery/json_path.hpp"
#include "kinds/scheme.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <vector>

namespace kwatch::registry {

using kinds::DeletionRule;
using kinds::ResourceInfo;
using apimachinery::object_member;
using apimachinery::string_member;

namespace json = boost::json;

namespace {

std::optional<std::int64_t> int_at(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return static_cast<std::int64_t>(v->get_double());
}

std::vector<std::string> finalizers_of(const json::object& meta) {
  std::vector<std::string> out;
  const json::value* f = meta.if_contains("finalizers");
  if (f == nullptr || !f->is_array()) return out;
  for (const auto& v : f->get_array()) {
    if (v.is_string()) out.emplace_back(v.get_string());
  }
  return out;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// shouldOrphanDependents: an explicit option, then a finalizer already there, then the default.
bool should_orphan(const ResourceInfo& info, const std::vector<std::string>& finalizers,
                   const DeleteQuery& q) {
  if (q.orphan_dependents) return *q.orphan_dependents;
  if (q.propagation) return *q.propagation == Propagation::orphan;
  for (const auto& f : finalizers) {
    if (f == kOrphanFinalizer) return true;
    if (f == kForegroundFinalizer) return false;
  }
  return info.orphans_by_default;
}

// shouldDeleteDependents.
bool should_delete_in_foreground(const std::vector<std::string>& finalizers, const DeleteQuery& q) {
  if (q.orphan_dependents) return false;
  if (q.propagation) return *q.propagation == Propagation::foreground;
  for (const auto& f : finalizers) {
    if (f == kForegroundFinalizer) return true;
    if (f == kOrphanFinalizer) return false;
  }
  return false;
}

// The finalizers after the garbage collector's policy is applied, when they change.
std::optional<std::vector<std::string>> gc_finalizers(const ResourceInfo& info,
                                                      const std::vector<std::string>& current,
                                                      const DeleteQuery& q) {
  std::vector<std::string> next;
  for (const auto& f : current) {
    if (f != kOrphanFinalizer && f != kForegroundFinalizer) next.push_back(f);
  }
  if (should_orphan(info, current, q)) next.emplace_back(kOrphanFinalizer);
  if (should_delete_in_foreground(current, q)) next.emplace_back(kForegroundFinalizer);
  auto a = current, b = next;
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  if (a == b) return std::nullopt;
  return next;
}

json::array to_array(const std::vector<std::string>& list) {
  json::array out;
  for (const auto& s : list) out.emplace_back(s);
  return out;
}

std::string timestamp(std::chrono::system_clock::time_point t) {
  return base::rfc3339(std::chrono::system_clock::to_time_t(t));
}

void bump_generation(json::object& meta) {
  if (auto g = int_at(meta, "generation"); g && *g > 0) meta["generation"] = *g + 1;
}

// markAsDeleting: deletionTimestamp now (unless an earlier one is set), no grace period.
bool mark_as_deleting(json::object& meta, std::chrono::system_clock::time_point now) {
  bool changed = false;
  const json::value* ts = meta.if_contains("deletionTimestamp");
  std::optional<std::chrono::system_clock::time_point> existing;
  if (ts != nullptr && ts->is_string())
    existing = base::parse_rfc3339(std::string(ts->get_string()));
  if (ts == nullptr) bump_generation(meta);
  if (ts == nullptr || (existing && *existing > now)) {
    meta["deletionTimestamp"] = timestamp(now);
    changed = true;
  }
  if (int_at(meta, "deletionGracePeriodSeconds") != std::optional<std::int64_t>(0)) {
    meta["deletionGracePeriodSeconds"] = 0;
    changed = true;
  }
  return changed;
}

// The pod's grace period when nothing is pending yet (the pod strategy's CheckGracefulDelete):
// the request's, else the pod's terminationGracePeriodSeconds; none for a pod on no node or one
// that has finished; negative means one second.
std::int64_t pod_grace_period(const json::object& pod, const DeleteQuery& q) {
  std::int64_t period = 0;
  const json::object* spec = object_member(pod, "spec");
  if (q.grace_period_seconds) {
    period = *q.grace_period_seconds;
  } else if (spec != nullptr) {
    period = int_at(*spec, "terminationGracePeriodSeconds").value_or(0);
  }
  if (string_member(spec, "nodeName").empty()) period = 0;
  const std::string_view phase = string_member(object_member(pod, "status"), "phase");
  if (phase == "Failed" || phase == "Succeeded") period = 0;
  if (period < 0) period = 1;
  return period;
}

DeletionPlan plan_generic(const ResourceInfo& info, json::object current, const DeleteQuery& q,
                          bool gc, std::chrono::system_clock::time_point now) {
  json::object& meta = current["metadata"].as_object();
  const bool deleting = meta.contains("deletionTimestamp");
  bool changed = false;
  bool graceful = false;
  if (info.deletion == DeletionRule::graceful) {
    const std::optional<std::int64_t> pending = int_at(meta, "deletionGracePeriodSeconds");
    if (deleting && pending && *pending > 0) {
      // A grace period is running: a delete may only shorten it, and changes nothing else.
      std::optional<std::int64_t> asked = q.grace_period_seconds;
      if (asked && *asked < 0) asked = 1;
      if (!asked || *asked >= *pending) return {DeletionPlan::Action::keep, std::move(current)};
      auto ts = base::parse_rfc3339(std::string(string_member(&meta, "deletionTimestamp")));
      auto start = ts.value_or(now) - std::chrono::seconds(*pending);
      meta["deletionTimestamp"] = timestamp(start + std::chrono::seconds(*asked));
      meta["deletionGracePeriodSeconds"] = *asked;
      changed = true;
      graceful = *asked > 0;
    } else if (!deleting) {
      const std::int64_t period = pod_grace_period(current, q);
      if (period > 0) {
        meta["deletionTimestamp"] = timestamp(now + std::chrono::seconds(period));
        meta["deletionGracePeriodSeconds"] = period;
        bump_generation(meta);
        changed = true;
        graceful = true;
      }
    }
  }
  std::vector<std::string> finalizers = finalizers_of(meta);
  if (gc) {
    if (auto next = gc_finalizers(info, finalizers, q)) {
      finalizers = std::move(*next);
      meta["finalizers"] = to_array(finalizers);
      changed = true;
    }
  }
  if (graceful) return {DeletionPlan::Action::write, std::move(current)};
  if (!finalizers.empty()) {
    changed = mark_as_deleting(meta, now) || changed;
    return {changed ? DeletionPlan::Action::write : DeletionPlan::Action::keep, std::move(current)};
  }
  return {DeletionPlan::Action::remove, std::move(current)};
}

DeletionPlan plan_namespace(const ResourceInfo& info, json::object current, const DeleteQuery& q,
                            bool gc, std::chrono::system_clock::time_point now) {
  json::object& meta = current["metadata"].as_object();
  if (!meta.contains("deletionTimestamp")) {
    // The first delete starts termination: the namespace controller empties the namespace,
    // removes its `kubernetes` finalizer, and the namespace goes.
    meta["deletionTimestamp"] = timestamp(now);
    json::value& status = current["status"];
    if (!status.is_object()) status = json::object();
    status.get_object()["phase"] = "Terminating";
    std::vector<std::string> finalizers = finalizers_of(meta);
    // The namespace registry's own rules (orphanDependents=false asks for foreground).
    bool orphan = contains(finalizers, kOrphanFinalizer);
    bool foreground = contains(finalizers, kForegroundFinalizer);
    if (q.orphan_dependents) {
      orphan = *q.orphan_dependents;
      foreground = !*q.orphan_dependents;
    } else if (q.propagation) {
      orphan = *q.propagation == Propagation::orphan;
      foreground = *q.propagation == Propagation::foreground;
    }
    std::vector<std::string> next;
    for (const auto& f : finalizers) {
      if (f != kOrphanFinalizer && f != kForegroundFinalizer) next.push_back(f);
    }
    if (orphan) next.emplace_back(kOrphanFinalizer);
    if (foreground) next.emplace_back(kForegroundFinalizer);
    if (!next.empty() || meta.contains("finalizers")) meta["finalizers"] = to_array(next);
    return {DeletionPlan::Action::write, std::move(current)};
  }
  const json::object* spec = object_member(current, "spec");
  const json::value* spec_finalizers = spec != nullptr ? spec->if_contains("finalizers") : nullptr;
  if (spec_finalizers != nullptr && spec_finalizers->is_array() &&
      !spec_finalizers->get_array().empty()) {
    return {DeletionPlan::Action::keep, std::move(current)};
  }
  return plan_generic(info, std::move(current), q, gc, now);
}

}  // namespace

std::optional<Propagation> parse_propagation(std::string_view s) {
  if (s == "Orphan") return Propagation::orphan;
  if (s == "Background") return Propagation::background;
  if (s == "Foreground") return Propagation::foreground;
  return std::nullopt;
}

DeletionPlan plan_deletion(const ResourceInfo& info, json::object current, const DeleteQuery& query,
                           bool garbage_collection, std::chrono::system_clock::time_point now) {
  json::value& meta = current["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (info.deletion == DeletionRule::terminating) {
    return plan_namespace(info, std::move(current), query, garbage_collection, now);
  }
  return plan_generic(info, std::move(current), query, garbage_collection, now);
}

bool deletion_complete(const ResourceInfo& info, const json::object& obj) {
  const json::object* meta = object_member(obj, "metadata");
  if (meta == nullptr || !meta->contains("deletionTimestamp")) return false;
  if (!finalizers_of(*meta).empty()) return false;
  if (auto grace = int_at(*meta, "deletionGracePeriodSeconds"); grace && *grace > 0) return false;
  if (info.deletion == DeletionRule::terminating) {
    const json::object* spec = object_member(obj, "spec");
    const json::value* f = spec != nullptr ? spec->if_contains("finalizers") : nullptr;
    if (f != nullptr && f->is_array() && !f->get_array().empty()) return false;
  }
  return true;
}

}  // namespace kwatch::registry
