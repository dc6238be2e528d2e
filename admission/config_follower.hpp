// What the API-defined admission plugins share to keep their configuration current: the objects
// of some admissionregistration.k8s.io resources (policies and bindings, webhook
// configurations), followed in their watch caches and handed over whole after a change.
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
#include <string>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::admission {

struct FollowedResources {
  std::shared_ptr<kinds::Scheme> scheme;
  std::shared_ptr<registry::CacherRegistry> cachers;  // null: nothing is followed
  std::string group, version;
  std::vector<std::string> resources;
};

// Starts the tasks on a strand of `executor` (a task failure is logged as `task`); they end once
// `keep_going` says no.
void follow_configurations(boost::asio::any_io_executor executor, FollowedResources followed,
                           std::function<bool()> keep_going,
                           std::function<void(std::vector<std::vector<boost::json::object>>&)> rebuild,
                           const char* task);

}  // namespace kwatch::admission
