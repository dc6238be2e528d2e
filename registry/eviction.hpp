// pods/eviction: a pod deleted only when its PodDisruptionBudget allows it, as kube-apiserver's
// eviction subresource decides (what `kubectl drain` and cluster autoscalers post).
//
// A pod that is Pending, Succeeded, Failed or already being deleted is deleted without looking
// at budgets. Otherwise the one budget whose selector matches the pod decides: none, deleted;
// more than one, refused (500); a budget its controller has not caught up with
// (status.observedGeneration < generation), or with no disruptions left, 429 with a
// `DisruptionBudget` cause; else its status.disruptionsAllowed is decremented and the pod
// recorded in status.disruptedPods (a compare-and-swap on the budget, retried on conflicts),
// then the pod deleted. An unready pod is deleted without spending the budget when the budget
// is healthy enough (or its unhealthyPodEvictionPolicy is AlwaysAllow), with the pod's
// resourceVersion as precondition so that it did not turn ready meanwhile.
#pragma once

#include "apimachinery/api_error.hpp"
#include "registry/deletion.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <string>

namespace kwatch::kinds {
class Scheme;
}  // namespace kwatch::kinds

namespace kwatch::registry {

class ResourceStore;

// Evicts pod `ns`/`name`. `eviction` is the posted policy/v1 Eviction, whose metadata.name must
// be `name` (400 otherwise); `del` is its deleteOptions with the request's dryRun. Errors are the
// Status kube answers with; success is nothing (the caller answers 201 Success).
boost::asio::awaitable<apimachinery::ApiResult<void>> evict_pod(ResourceStore& store,
                                                                const kinds::Scheme& scheme,
                                                                std::string ns, std::string name,
                                                                const boost::json::object& eviction,
                                                                DeleteQuery del);

}  // namespace kwatch::registry
