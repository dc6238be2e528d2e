// How a component keeps configuration that lives in API objects current (the API-defined
// admission plugins' policies, bindings and webhook configurations; API Priority and Fairness's
// FlowSchemas and PriorityLevelConfigurations): the objects of some resources of one group,
// followed in their watch caches and handed over whole after a change.
//
// Changes come in bursts (kubectl apply of a policy and its bindings), so a change only marks
// the set; at most every 100 ms, once every cache has listed, `rebuild` receives every object of
// each resource, parsed, in the order the resources were named. Nothing is read from storage.
// Pure apart from its tasks, which hold what `rebuild` and `keep_going` capture.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {

class CacherRegistry;

struct FollowedResources {
  std::shared_ptr<kinds::Scheme> scheme;
  std::shared_ptr<CacherRegistry> cachers;  // null: nothing is followed
  std::string group, version;
  std::vector<std::string> resources;
};

// Every object of every resource now, parsed; nullopt while a cache has not listed yet.
std::optional<std::vector<std::vector<boost::json::object>>> list_configurations(
    const FollowedResources& followed);

// Starts the tasks on a strand of `executor` (a task failure is logged as `task`); they end once
// `keep_going` says no.
void follow_configurations(boost::asio::any_io_executor executor, FollowedResources followed,
                           std::function<bool()> keep_going,
                           std::function<void(std::vector<std::vector<boost::json::object>>&)> rebuild,
                           const char* task);

}  // namespace kwatch::registry
