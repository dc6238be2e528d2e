#include "flowcontrol/bootstrap.hpp"

#include "apimachinery/json_members.hpp"
#include "kinds/flow_control.hpp"

#include <boost/json/array.hpp>

#include <map>
#include <optional>
#include <set>

namespace kwatch::flowcontrol {

namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

json::object metadata(const char* name) {
  return {{"name", name}, {"annotations", {{kinds::kAutoUpdateAnnotation, "true"}}}};
}

json::object level(const char* name, json::object spec) {
  return {{"apiVersion", "flowcontrol.apiserver.k8s.io/v1"},
          {"kind", "PriorityLevelConfiguration"},
          {"metadata", metadata(name)},
          {"spec", std::move(spec)}};
}

json::object queuing_level(const char* name, int shares, int lendable, int queues, int hand) {
  return level(name, {{"type", "Limited"},
                      {"limited",
                       {{"nominalConcurrencyShares", shares},
                        {"lendablePercent", lendable},
                        {"limitResponse",
                         {{"type", "Queue"},
                          {"queuing",
                           {{"queues", queues}, {"handSize", hand}, {"queueLengthLimit", 50}}}}}}}});
}

json::array strings(std::initializer_list<const char*> values) {
  json::array out;
  for (const char* v : values) out.emplace_back(v);
  return out;
}

json::object group(const char* name) { return {{"kind", "Group"}, {"group", {{"name", name}}}}; }
json::object user(const char* name) { return {{"kind", "User"}, {"user", {{"name", name}}}}; }
json::object kube_system_service_accounts() {
  return {{"kind", "ServiceAccount"},
          {"serviceAccount", {{"name", "*"}, {"namespace", "kube-system"}}}};
}

json::object resource_rule(json::array verbs, json::array groups, json::array resources,
                           bool cluster_scope) {
  return {{"verbs", std::move(verbs)},
          {"apiGroups", std::move(groups)},
          {"resources", std::move(resources)},
          {"clusterScope", cluster_scope},
          {"namespaces", strings({"*"})}};
}

json::object everything_rule() {
  return resource_rule(strings({"*"}), strings({"*"}), strings({"*"}), true);
}

json::object any_path_rule() {
  return {{"verbs", strings({"*"})}, {"nonResourceURLs", strings({"*"})}};
}

// Subjects with every resource and every path.
json::object everything(json::array subjects) {
  return {{"subjects", std::move(subjects)},
          {"resourceRules", json::array{everything_rule()}},
          {"nonResourceRules", json::array{any_path_rule()}}};
}

json::object schema(const char* name, const char* level_name, int precedence,
                    const char* distinguisher, json::object rules) {
  json::object spec{{"priorityLevelConfiguration", {{"name", level_name}}},
                    {"matchingPrecedence", precedence},
                    {"rules", json::array{std::move(rules)}}};
  if (distinguisher != nullptr) spec["distinguisherMethod"] = {{"type", distinguisher}};
  return {{"apiVersion", "flowcontrol.apiserver.k8s.io/v1"},
          {"kind", "FlowSchema"},
          {"metadata", metadata(name)},
          {"spec", std::move(spec)}};
}

BootstrapObjects build() {
  BootstrapObjects b;
  // The mandatory ones are the kinds' own (their specs are fixed there).
  b.mandatory_levels = kinds::mandatory_priority_level_configurations();
  b.mandatory_schemas = kinds::mandatory_flow_schemas();
  b.suggested_levels = {
      queuing_level("system", 30, 33, 64, 6),
      queuing_level("node-high", 40, 25, 64, 6),
      queuing_level("leader-election", 10, 0, 16, 4),
      queuing_level("workload-high", 40, 50, 128, 6),
      queuing_level("workload-low", 100, 90, 128, 6),
      queuing_level("global-default", 20, 50, 128, 6),
  };
  json::object nodes_and_leases{
      {"subjects", json::array{group("system:nodes")}},
      {"resourceRules",
       json::array{resource_rule(strings({"*"}), strings({""}), strings({"nodes", "nodes/status"}),
                                 true),
                   resource_rule(strings({"*"}), strings({"coordination.k8s.io"}),
                                 strings({"leases"}), false)}}};
  json::object leader_election{
      {"subjects", json::array{user("system:kube-controller-manager"),
                               user("system:kube-scheduler"), kube_system_service_accounts()}},
      {"resourceRules",
       json::array{resource_rule(strings({"get", "create", "update"}),
                                 strings({"coordination.k8s.io"}), strings({"leases"}), false)}}};
  json::object probes{
      {"subjects", json::array{group("system:unauthenticated"), group("system:authenticated")}},
      {"nonResourceRules",
       json::array{json::object{{"verbs", strings({"get"})},
                                {"nonResourceURLs", strings({"/healthz", "/readyz", "/livez"})}}}}};
  b.suggested_schemas = {
      schema("system-nodes", "system", 500, "ByUser",
             everything(json::array{group("system:nodes")})),
      schema("system-node-high", "node-high", 400, "ByUser", std::move(nodes_and_leases)),
      schema("probes", "exempt", 2, nullptr, std::move(probes)),
      schema("system-leader-election", "leader-election", 100, "ByUser",
             std::move(leader_election)),
      schema("kube-controller-manager", "workload-high", 800, "ByNamespace",
             everything(json::array{user("system:kube-controller-manager")})),
      schema("kube-scheduler", "workload-high", 800, "ByNamespace",
             everything(json::array{user("system:kube-scheduler")})),
      schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace",
             everything(json::array{kube_system_service_accounts()})),
      schema("service-accounts", "workload-low", 9000, "ByUser",
             everything(json::array{group("system:serviceaccounts")})),
      schema("global-default", "global-default", 9900, "ByUser",
             everything(json::array{group("system:unauthenticated"),
                                    group("system:authenticated")})),
  };
  // As stored: with the kinds' defaults, so that a stored object compares equal to its form here.
  for (auto& o : b.suggested_levels) kinds::default_priority_level_configuration(o);
  for (auto& o : b.suggested_schemas) kinds::default_flow_schema(o);
  return b;
}

// Go's strconv.ParseBool.
std::optional<bool> parse_bool(std::string_view v) {
  if (v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True") return true;
  if (v == "0" || v == "f" || v == "F" || v == "false" || v == "FALSE" || v == "False") {
    return false;
  }
  return std::nullopt;
}

std::optional<std::string> annotation(const json::object& object) {
  const json::object* a = object_member(object_member(object, "metadata"), "annotations");
  const json::value* v = a != nullptr ? a->if_contains(kinds::kAutoUpdateAnnotation) : nullptr;
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

std::int64_t generation(const json::object& object) {
  const json::object* m = object_member(object, "metadata");
  const json::value* g = m != nullptr ? m->if_contains("generation") : nullptr;
  return g != nullptr && g->is_int64() ? g->get_int64() : 0;
}

// What kube's ensurer decides for one stored object against its bootstrap form: the object to
// write back, or nullopt when it is as it should be.
std::optional<json::object> revise(const json::object& stored, const json::object& bootstrap,
                                   bool always_update_spec) {
  const auto current = annotation(stored);
  bool update_spec = always_update_spec;
  if (!update_spec) {
    const auto parsed = current ? parse_bool(*current) : std::nullopt;
    update_spec = parsed ? *parsed : generation(stored) == 1;
  }
  const auto current_bool = current ? parse_bool(*current) : std::nullopt;
  const bool fix_annotation = !(current_bool && *current_bool == update_spec);
  const json::value* stored_spec = stored.if_contains("spec");
  const bool spec_differs =
      update_spec && (stored_spec == nullptr || *stored_spec != bootstrap.at("spec"));
  if (!fix_annotation && !spec_differs) return std::nullopt;
  json::object revised = stored;
  if (spec_differs) revised["spec"] = bootstrap.at("spec");
  if (fix_annotation) {
    json::value& meta = revised["metadata"];
    if (!meta.is_object()) meta = json::object();
    json::value& annotations = meta.get_object()["annotations"];
    if (!annotations.is_object()) annotations = json::object();
    annotations.get_object()[kinds::kAutoUpdateAnnotation] = update_spec ? "true" : "false";
  }
  return revised;
}

}  // namespace

const BootstrapObjects& bootstrap_objects() {
  static const BootstrapObjects objects = build();
  return objects;
}

EnsurePlan plan_bootstrap(const std::vector<json::object>& stored,
                          const std::vector<json::object>& mandatory,
                          const std::vector<json::object>& suggested) {
  std::map<std::string, const json::object*> by_name;
  for (const auto& o : stored) by_name[string_at(object_member(o, "metadata"), "name")] = &o;
  EnsurePlan plan;
  std::set<std::string> wanted;
  auto ensure = [&](const json::object& bootstrap, bool always) {
    const std::string name = string_at(object_member(bootstrap, "metadata"), "name");
    wanted.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      plan.create.push_back(bootstrap);
    } else if (auto revised = revise(*it->second, bootstrap, always)) {
      plan.update.push_back(std::move(*revised));
    }
  };
  for (const auto& o : mandatory) ensure(o, true);
  for (const auto& o : suggested) ensure(o, false);
  for (const auto& [name, object] : by_name) {
    if (wanted.count(name) != 0) continue;
    const auto value = annotation(*object);
    const auto parsed = value ? parse_bool(*value) : std::nullopt;
    if (parsed && *parsed) plan.remove.push_back(name);
  }
  return plan;
}

}  // namespace kwatch::flowcontrol
