// Which requests an admission policy or binding applies to: a MatchResources (namespace and
// object selectors, resource rules, rules that exclude, matchPolicy) compiled once, then asked
// per request, as kube's policy matcher asks (k8s.io/apiserver plugin/policy/matching and the
// webhook rule predicates).
//
// A rule matches when scope, operation, API group, version, resource (with its subresource:
// `pods` is not `pods/status`; `pods/*` is pods and every subresource of it, as kube's matcher
// reads `*`; `*/*` everything) and resource name match. Under matchPolicy Equivalent (the default) a request through another
// version or group of the same stored resource (autoscaling/v1 and v2 HorizontalPodAutoscalers,
// core and events.k8s.io Events) also matches; the match names the resource the rule named.
//
// Pure, apart from the namespace labels the caller supplies; a CompiledMatch is immutable and
// used from any thread.
#pragma once

#include "apimachinery/label_selector.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {
class Scheme;
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::admission {

// One request as the matcher sees it.
struct MatchRequest {
  const kinds::ResourceInfo* info = nullptr;  // the resource the request names
  std::string_view subresource;
  std::string_view ns;    // "" for cluster-scoped objects
  std::string_view name;  // "" on a create whose name the server generates
  std::string_view operation;  // CREATE UPDATE DELETE CONNECT
  const boost::json::object* object = nullptr;      // null on delete
  const boost::json::object* old_object = nullptr;  // null on create
};

struct CompiledRule {
  std::uint8_t operations = 0;  // bits of CREATE, UPDATE, DELETE, CONNECT
  std::vector<std::string> groups, versions;  // "*" for any
  struct Resource {
    std::string resource, subresource;  // either may be "*"; subresource "" for the resource
  };
  std::vector<Resource> resources;
  std::vector<std::string> names;  // empty: any
  enum class Scope : std::uint8_t { any, cluster, namespaced } scope = Scope::any;
};

struct MatchOutcome {
  bool matched = false;
  // The resource the rule named (the request's own, or an equivalent one).
  std::shared_ptr<const kinds::ResourceInfo> matched_info;
  std::string error;  // a selector that cannot be evaluated (then `matched` is false)
};

// The labels of a namespace by name; nullopt when it does not exist.
using NamespaceLabels =
    std::function<std::optional<boost::json::object>(std::string_view namespace_name)>;

class CompiledMatch {
 public:
  // `match` is a MatchResources as stored (defaults set). An empty resourceRules matches every
  // resource when `empty_rules_match_all` (a binding's), nothing otherwise.
  static CompiledMatch compile(const boost::json::object& match, bool empty_rules_match_all);

  // Whether `request` matches. `scheme` finds equivalent resources (may be null: none);
  // `namespace_labels` is asked only when the namespace selector is not empty.
  MatchOutcome matches(const MatchRequest& request, const kinds::Scheme* scheme,
                       const NamespaceLabels& namespace_labels) const;

  // Whether some request to (group, resource) could match (any operation, version, name,
  // selectors): a cheap first look that skips policies about other resources.
  bool may_match(std::string_view group, std::string_view resource) const;

 private:
  apimachinery::LabelSelector namespace_selector_, object_selector_;
  std::string selector_error_;
  std::vector<CompiledRule> rules_, excluded_;
  bool empty_rules_match_all_ = false;
  bool equivalent_ = true;
};

}  // namespace kwatch::admission
