// API Priority and Fairness's configuration as the dispatcher reads it: FlowSchemas (which
// requests go to which priority level, and how they are split into flows) and
// PriorityLevelConfigurations (how many seats a level gets, and how it queues), read from their
// flowcontrol.apiserver.k8s.io/v1 objects; and a request's digest (who asks for what, as kube's
// RequestInfo names it) matched against a FlowSchema's rules with kube's semantics.
// Pure: no I/O, no state.
#pragma once

#include "apimachinery/user_info.hpp"
#include "kinds/flow_control.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::flowcontrol {

struct Subject {
  enum class Kind { user, group, service_account };
  Kind kind = Kind::user;
  std::string name;       // "*": every user, group, or service account of the namespace
  std::string namespace_;  // service accounts only
};

struct ResourceRule {
  std::vector<std::string> verbs, api_groups, resources, namespaces;
  bool cluster_scope = false;
};

struct NonResourceRule {
  std::vector<std::string> verbs, urls;
};

struct PolicyRules {
  std::vector<Subject> subjects;
  std::vector<ResourceRule> resource_rules;
  std::vector<NonResourceRule> non_resource_rules;
};

enum class Distinguisher { none, by_user, by_namespace };

struct FlowSchema {
  std::string name, uid;
  std::string priority_level;
  std::int32_t matching_precedence = 1000;
  Distinguisher distinguisher = Distinguisher::none;
  std::vector<PolicyRules> rules;
};

struct PriorityLevel {
  std::string name, uid;
  bool exempt = false;
  std::int32_t nominal_shares = 30;
  std::optional<std::int32_t> lendable_percent;
  std::optional<std::int32_t> borrowing_limit_percent;  // none: may borrow without limit
  // Limited levels: queues == 0 means limitResponse Reject (no queuing).
  std::int32_t queues = 0, hand_size = 0, queue_length_limit = 0;
  // kwatch's annotation kLowCpuPriority set to "low" on a Limited level: its requests are
  // handled, and their answers written, on the server's low-priority threads (OS nice 19), so
  // the CPU they take yields to every other level's whenever those want it. APF itself shares
  // seats, not CPU.
  bool low_cpu_priority = false;
};

// The annotation a PriorityLevelConfiguration is marked with for the above.
inline constexpr std::string_view kLowCpuPriority = "flowcontrol.kwatch.io/cpu-priority";

// The object read, or nullopt when it breaks a rule the dispatcher relies on (kube ignores such
// objects as its config controller does: validation keeps them out of storage anyway).
std::optional<FlowSchema> parse_flow_schema(const boost::json::object& object);
std::optional<PriorityLevel> parse_priority_level(const boost::json::object& object);

// A request as classification sees it: kube's RequestInfo and user.
struct RequestDigest {
  const apimachinery::UserInfo* user = nullptr;
  bool resource_request = false;
  std::string verb;  // get list watch create update patch delete deletecollection; else the
                     // lowercase method for a non-resource path
  std::string api_group, api_version, resource, subresource, namespace_, name;
  std::string path;
};

bool matches(const FlowSchema& schema, const RequestDigest& request);
// The flow a request belongs to within its schema (empty when the schema does not split).
std::string flow_distinguisher(const FlowSchema& schema, const RequestDigest& request);
// kube's hash of (schema, distinguisher): the first 8 bytes of SHA-256 over
// name NUL distinguisher, little-endian; the same flow deals the same hand of queues on every
// replica.
std::uint64_t flow_hash(const std::string& schema_name, const std::string& distinguisher);

// The names kube gives the two objects that always exist (a FlowSchema and a level each).
inline constexpr std::string_view kExempt = kinds::kFlowSchemaNameExempt;
inline constexpr std::string_view kCatchAll = kinds::kFlowSchemaNameCatchAll;

}  // namespace kwatch::flowcontrol
