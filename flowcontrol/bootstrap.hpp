// kube's bootstrap configuration of API Priority and Fairness: the mandatory objects (the
// `exempt` and `catch-all` FlowSchemas and PriorityLevelConfigurations, which must always exist)
// and the suggested ones (system, node-high, leader-election, workload-high, workload-low,
// global-default levels and the FlowSchemas that feed them), as flowcontrol.apiserver.k8s.io/v1
// objects with every default filled in; and how a server keeps them (kube's ensurer): what to
// create, update and delete given what is stored.
// Pure: no I/O.
#pragma once

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace kwatch::flowcontrol {

struct BootstrapObjects {
  std::vector<boost::json::object> mandatory_levels, mandatory_schemas;
  std::vector<boost::json::object> suggested_levels, suggested_schemas;
};
const BootstrapObjects& bootstrap_objects();

// What keeping one resource's bootstrap objects asks for, given the objects stored.
struct EnsurePlan {
  std::vector<boost::json::object> create;
  std::vector<boost::json::object> update;  // stored objects with the bootstrap spec and
                                            // annotation put in (resourceVersion kept)
  std::vector<std::string> remove;          // names
};
// kube's rules (its annotation is kinds::kAutoUpdateAnnotation): a mandatory object is created when missing and its spec always restored; a
// suggested one is created when missing and its spec restored unless its annotation says
// "false" (an object without the annotation is restored only while its generation is 1,
// i.e. nobody has changed it); an object that is neither mandatory nor suggested but carries the
// annotation "true" was put there by a server and is deleted.
EnsurePlan plan_bootstrap(const std::vector<boost::json::object>& stored,
                          const std::vector<boost::json::object>& mandatory,
                          const std::vector<boost::json::object>& suggested);

}  // namespace kwatch::flowcontrol
