#include "registry/eviction.hpp"

#include "apimachinery/json_path.hpp"
#include "apimachinery/label_selector.hpp"
#include "registry/list_query.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "base/timestamps.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <vector>

namespace kwatch::registry {

using kinds::ResourceInfo;
using kinds::Scheme;
using apimachinery::ApiError;
using apimachinery::find_field;
using apimachinery::set_condition;
using apimachinery::ApiResult;
using apimachinery::Cause;
using base::Errc;
using apimachinery::label_selector_from_json;
using apimachinery::object_member;
using apimachinery::string_member;

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Attempts at a compare-and-swap that keeps losing to other writers before giving up.
constexpr int kAttempts = 20;
// Pods evicted but not yet confirmed gone by the budget's controller, at most.
constexpr std::size_t kMaxDisruptedPods = 2000;

std::int64_t int_field(const json::object& obj, std::string_view path) {
  const json::value* v = find_field(obj, path);
  return v != nullptr && v->is_int64() ? v->get_int64() : 0;
}

bool pod_ready(const json::object& pod) {
  const json::value* conditions = find_field(pod, "status.conditions");
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const auto& c : conditions->get_array()) {
    if (!c.is_object()) continue;
    const json::object& o = c.get_object();
    if (string_member(&o, "type") == "Ready") return string_member(&o, "status") == "True";
  }
  return false;
}

// canIgnorePDB: terminal, pending or already being deleted.
bool budget_ignored(const json::object& pod, std::string_view phase) {
  return phase == "Succeeded" || phase == "Failed" || phase == "Pending" ||
         find_field(pod, "metadata.deletionTimestamp") != nullptr;
}

ApiError budget_refusal(const std::string& cause, int retry_after) {
  ApiError e(Errc::too_many_requests,
             "Cannot evict pod as it would violate the pod's disruption budget.",
             {Cause{"DisruptionBudget", cause, ""}});
  e.retry_after_seconds = retry_after;
  return e;
}

ApiError still_processed(const std::string& budget) {
  return budget_refusal(
      "The disruption budget " + budget + " is still being processed by the server.", 10);
}

ApiError budget_forbidden(const std::string& budget, const std::string& why) {
  ApiError e(Errc::forbidden, "poddisruptionbudget.policy \"" + budget + "\" is forbidden: " + why);
  e.name = budget;
  e.group = "policy";
  e.kind = "poddisruptionbudget";
  return e;
}

// The budgets of the pod's namespace whose selector matches it; an empty or invalid selector
// matches nothing.
asio::awaitable<ApiResult<std::vector<json::object>>> budgets_of(ResourceStore& store,
                                                                 const ResourceInfo& budgets,
                                                                 const std::string& ns,
                                                                 const json::object& pod) {
  auto list = co_await store.list(budgets, ns, CompiledListQuery{});
  if (!list) co_return list.error();
  const json::object* labels = nullptr;
  if (const json::value* l = find_field(pod, "metadata.labels")) labels = l->if_object();
  static const json::object kNoLabels;
  std::vector<json::object> out;
  if (const json::value* items = list->if_contains("items"); items && items->is_array()) {
    for (const auto& item : items->get_array()) {
      if (!item.is_object()) continue;
      const json::value* selector = find_field(item.get_object(), "spec.selector");
      if (selector == nullptr || !selector->is_object()) continue;
      auto compiled = label_selector_from_json(selector->get_object());
      if (!compiled || compiled->empty()) continue;
      if (compiled->matches(labels != nullptr ? labels : &kNoLabels)) {
        out.push_back(item.get_object());
      }
    }
  }
  co_return out;
}

// checkAndDecrement: one disruption taken from `budget` (written unless a dry run), or why not.
asio::awaitable<ApiResult<void>> take_disruption(ResourceStore& store, const ResourceInfo& budgets,
                                                 const std::string& ns, json::object budget,
                                                 const std::string& pod_name, bool dry_run) {
  const std::string name(string_member(object_member(budget, "metadata"), "name"));
  if (int_field(budget, "status.observedGeneration") < int_field(budget, "metadata.generation")) {
    co_return still_processed(name);
  }
  const std::int64_t allowed = int_field(budget, "status.disruptionsAllowed");
  if (allowed < 0) co_return budget_forbidden(name, "pdb disruptions allowed is negative");
  const json::value* disrupted = find_field(budget, "status.disruptedPods");
  if (disrupted != nullptr && disrupted->is_object() &&
      disrupted->get_object().size() > kMaxDisruptedPods) {
    co_return budget_forbidden(
        name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller");
  }
  if (allowed == 0) {
    co_return budget_refusal("The disruption budget " + name + " needs " +
                                 std::to_string(int_field(budget, "status.desiredHealthy")) +
                                 " healthy pods and has " +
                                 std::to_string(int_field(budget, "status.currentHealthy")) +
                                 " currently",
                             0);
  }
  if (dry_run) co_return ApiResult<void>();
  json::value& status_value = budget["status"];
  if (!status_value.is_object()) status_value = json::object();
  json::object& status = status_value.get_object();
  status["disruptionsAllowed"] = allowed - 1;
  if (allowed - 1 == 0) {
    // The DisruptionAllowed condition turns False (its transition time when it changes).
    json::object& condition =
        set_condition(status, "DisruptionAllowed", "False", base::now_rfc3339()).condition;
    if (!condition.contains("message")) condition["message"] = "";
    condition["reason"] = "InsufficientPods";
    condition["observedGeneration"] = int_field(budget, "status.observedGeneration");
  }
  json::value& pods = status["disruptedPods"];
  if (!pods.is_object()) pods = json::object();
  pods.get_object()[pod_name] = base::now_rfc3339();
  WriteQuery query;
  query.subresource = "status";
  auto written = co_await store.update(budgets, ns, name, std::move(budget), std::move(query));
  if (!written) co_return written.error();
  co_return ApiResult<void>();
}

}  // namespace

asio::awaitable<ApiResult<void>> evict_pod(ResourceStore& store, const Scheme& scheme,
                                           std::string ns, std::string name,
                                           const json::object& eviction, DeleteQuery del) {
  if (string_member(object_member(eviction, "metadata"), "name") != name) {
    co_return ApiError(Errc::bad_request, "name in URL does not match name in Eviction object");
  }
  auto pods = scheme.find("", "v1", "pods");
  auto budgets = scheme.find("policy", "v1", "poddisruptionbudgets");
  if (pods == nullptr || budgets == nullptr) {
    co_return ApiError(Errc::internal, "pods or poddisruptionbudgets are not served");
  }
  const bool caller_version = del.resource_version.has_value();
  // A pod whose budget does not matter is deleted at once; a conflict (the pod changed since it
  // was read) reads it again, unless the caller named the version it meant.
  json::object pod;
  for (int attempt = 0;; ++attempt) {
    auto got = co_await store.get(*pods, ns, name, "");
    if (!got) co_return got.error();
    pod = std::move(*got);
    const std::string phase(string_member(object_member(pod, "status"), "phase"));
    if (!budget_ignored(pod, phase)) break;
    DeleteQuery now = del;
    const bool settled = phase == "Succeeded" || phase == "Failed" ||
                         find_field(pod, "metadata.deletionTimestamp") != nullptr;
    if (!settled && !caller_version) {
      now.resource_version =
          std::string(string_member(object_member(pod, "metadata"), "resourceVersion"));
    }
    auto removed = co_await store.remove(*pods, ns, name, std::move(now));
    if (removed) co_return ApiResult<void>();
    if (removed.error().code != Errc::conflict || caller_version || attempt + 1 >= kAttempts) {
      co_return removed.error();
    }
  }

  auto matching = co_await budgets_of(store, *budgets, ns, pod);
  if (!matching) co_return matching.error();
  if (matching->size() > 1) {
    co_return ApiError(Errc::internal,
                       "This pod has more than one PodDisruptionBudget, which the eviction "
                       "subresource does not support.");
  }
  bool pin_version = false;
  std::string budget_name;
  if (matching->size() == 1) {
    json::object budget = std::move(matching->front());
    budget_name = std::string(string_member(object_member(budget, "metadata"), "name"));
    const json::value* policy = find_field(budget, "spec.unhealthyPodEvictionPolicy");
    const bool always_allow =
        policy != nullptr && policy->is_string() && policy->get_string() == "AlwaysAllow";
    const std::int64_t desired = int_field(budget, "status.desiredHealthy");
    if (!pod_ready(pod) &&
        (always_allow || (int_field(budget, "status.currentHealthy") >= desired && desired > 0))) {
      // An unready pod does not count towards the budget: no disruption is spent on it.
      pin_version = true;
    } else {
      for (int attempt = 0;; ++attempt) {
        auto taken = co_await take_disruption(store, *budgets, ns, budget, name, del.dry_run);
        if (taken) break;
        if (taken.error().code != Errc::conflict || attempt + 1 >= kAttempts) {
          if (taken.error().code == Errc::conflict) {
            co_return ApiError(Errc::timeout, "couldn't update PodDisruptionBudget \"" +
                                                  budget_name + "\" due to conflicts");
          }
          co_return taken.error();
        }
        auto fresh = co_await store.get(*budgets, ns, budget_name, "");
        if (!fresh) co_return fresh.error();
        budget = std::move(*fresh);
      }
    }
  }
  DeleteQuery final_query = del;
  if (pin_version && !caller_version) {
    final_query.resource_version =
        std::string(string_member(object_member(pod, "metadata"), "resourceVersion"));
  }
  auto removed = co_await store.remove(*pods, ns, name, std::move(final_query));
  if (!removed) {
    if (removed.error().code == Errc::conflict && pin_version && !caller_version) {
      co_return still_processed(budget_name);
    }
    co_return removed.error();
  }
  co_return ApiResult<void>();
}

}  // namespace kwatch::registry
