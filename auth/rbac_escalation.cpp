#include "auth/rbac_escalation.hpp"

#include "apimachinery/json_path.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace kwatch::auth {

using apimachinery::ApiError;
using base::Errc;
using apimachinery::object_member;
using apimachinery::string_member;

namespace json = boost::json;

namespace {

constexpr std::string_view kGroup = "rbac.authorization.k8s.io";

std::string string_member_copy(const json::object* o, std::string_view key) {
  return std::string(string_member(o, key));
}

std::vector<json::object> rules_of(const json::object& role) {
  std::vector<json::object> rules;
  if (const json::value* r = role.if_contains("rules"); r != nullptr && r->is_array()) {
    for (const auto& rule : r->get_array()) {
      if (rule.is_object()) rules.push_back(rule.get_object());
    }
  }
  return rules;
}

bool has_aggregation_rule(const json::object* role) {
  if (role == nullptr) return false;
  const json::value* v = role->if_contains("aggregationRule");
  return v != nullptr && !v->is_null();
}

// kube's IsOnlyMutatingGCFields: the old object with the new ownerReferences and finalizers is
// the new object (what the server keeps or stamps itself is left out of the comparison).
bool only_gc_fields_change(const json::object& old, const json::object& next) {
  auto normalized = [](json::object o, const json::object& gc_from) {
    json::value& meta = o["metadata"];
    if (!meta.is_object()) meta = json::object();
    json::object& m = meta.get_object();
    for (const char* server_kept : {"resourceVersion", "managedFields", "generation"}) {
      m.erase(server_kept);
    }
    const json::object* from = object_member(gc_from, "metadata");
    for (const char* gc : {"ownerReferences", "finalizers"}) {
      const json::value* v = from != nullptr ? from->if_contains(gc) : nullptr;
      if (v != nullptr) {
        m[gc] = *v;
      } else {
        m.erase(gc);
      }
    }
    return o;
  };
  return normalized(old, next) == normalized(next, next);
}

// Go's %q of a []string: ["a" "b"].
std::string quoted_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ' ';
    out += json::serialize(json::value(items[i]));
  }
  return out + "]";
}

std::vector<std::string> strings_of(const json::object& rule, std::string_view key) {
  std::vector<std::string> out;
  if (const json::value* v = rule.if_contains(key); v != nullptr && v->is_array()) {
    for (const auto& s : v->get_array()) {
      if (s.is_string()) out.emplace_back(s.get_string());
    }
  }
  return out;
}

// kube's CompactRules (one rule per group, resource and name with every verb) and CompactString,
// sorted and without duplicates as kube's sets.String lists them.
std::vector<std::string> describe_missing(const std::vector<json::object>& missing) {
  auto compact = [](const std::vector<std::string>& groups, const std::vector<std::string>& resources,
                    const std::vector<std::string>& urls, const std::vector<std::string>& names,
                    const std::vector<std::string>& verbs) {
    std::string s;
    auto part = [&](const char* label, const std::vector<std::string>& v) {
      if (v.empty()) return;
      if (!s.empty()) s += ", ";
      s += std::string(label) + ":" + quoted_list(v);
    };
    part("APIGroups", groups);
    part("Resources", resources);
    part("NonResourceURLs", urls);
    part("ResourceNames", names);
    part("Verbs", verbs);
    return "{" + s + "}";
  };
  // Simple rules (one group, one resource, at most one name) merged by those, verbs in order.
  std::map<std::tuple<std::string, std::string, std::vector<std::string>>, std::vector<std::string>>
      simple;
  std::set<std::string> out;
  for (const auto& rule : missing) {
    auto groups = strings_of(rule, "apiGroups");
    auto resources = strings_of(rule, "resources");
    auto urls = strings_of(rule, "nonResourceURLs");
    auto names = strings_of(rule, "resourceNames");
    auto verbs = strings_of(rule, "verbs");
    if (groups.size() == 1 && resources.size() == 1 && urls.empty() && names.size() <= 1) {
      auto& merged = simple[{groups[0], resources[0], names}];
      merged.insert(merged.end(), verbs.begin(), verbs.end());
    } else {
      out.insert(compact(groups, resources, urls, names, verbs));
    }
  }
  for (const auto& [key, verbs] : simple) {
    const auto& [group, resource, names] = key;
    out.insert(compact({group}, {resource}, {}, names, verbs));
  }
  return {out.begin(), out.end()};
}

// kube's fullAuthority: every verb on every resource of every group, and on every URL.
const std::vector<json::object>& full_authority() {
  static const std::vector<json::object> rules{
      json::object{{"verbs", json::array{"*"}},
                   {"apiGroups", json::array{"*"}},
                   {"resources", json::array{"*"}}},
      json::object{{"verbs", json::array{"*"}}, {"nonResourceURLs", json::array{"*"}}}};
  return rules;
}

}  // namespace

bool is_rbac_resource(std::string_view group, std::string_view resource) {
  return group == kGroup && (resource == "roles" || resource == "clusterroles" ||
                             resource == "rolebindings" || resource == "clusterrolebindings");
}

RbacAdmission::RbacAdmission(std::shared_ptr<const RbacPolicy> policy, UserInfo user,
                             std::string resource, std::string ns, std::string url_name)
    : policy_(std::move(policy)),
      user_(std::move(user)),
      resource_(std::move(resource)),
      ns_(std::move(ns)),
      url_name_(std::move(url_name)) {}

std::optional<ApiError> RbacAdmission::admit(const json::object* old,
                                             const json::object& next) const {
  if (is_superuser(user_)) return std::nullopt;
  if (old != nullptr && only_gc_fields_change(*old, next)) return std::nullopt;
  if (resource_ == "roles" || resource_ == "clusterroles") return admit_role(old, next);
  return admit_binding(next);
}

ApiError RbacAdmission::forbidden(std::string_view name, std::string reason) const {
  ApiError e(Errc::forbidden, resource_ + "." + std::string(kGroup) + " \"" + std::string(name) +
                                  "\" is forbidden: " + std::move(reason));
  e.name = std::string(name);
  e.group = std::string(kGroup);
  e.kind = resource_;
  return e;
}

std::optional<ApiError> RbacAdmission::admit_role(const json::object* old,
                                                  const json::object& next) const {
  RequestAttributes escalate;
  escalate.user = user_;
  escalate.verb = "escalate";
  escalate.api_group = std::string(kGroup);
  escalate.resource = resource_;
  escalate.namespace_ = ns_;
  escalate.name = url_name_;
  if (policy_->authorize(escalate).allowed) return std::nullopt;

  const std::string name = string_member_copy(object_member(next, "metadata"), "name");
  auto missing = policy_->not_covered(user_, ns_, rules_of(next));
  if (!missing.empty()) {
    std::string reason = "user \"" + user_.name + "\" (groups=" + quoted_list(user_.groups) +
                         ") is attempting to grant RBAC permissions not currently held:";
    for (const auto& line : describe_missing(missing)) reason += "\n" + line;
    return forbidden(name, std::move(reason));
  }
  if (resource_ == "clusterroles" && (has_aggregation_rule(&next) || has_aggregation_rule(old)) &&
      !policy_->not_covered(user_, "", full_authority()).empty()) {
    return forbidden(name, "must have cluster-admin privileges to use the aggregationRule");
  }
  return std::nullopt;
}

std::optional<ApiError> RbacAdmission::admit_binding(const json::object& next) const {
  const json::object* ref = object_member(next, "roleRef");
  const std::string kind = string_member_copy(ref, "kind");
  const std::string role_name = string_member_copy(ref, "name");
  const std::string role_resource = kind == "ClusterRole" ? "clusterroles" : "roles";

  RequestAttributes bind;
  bind.user = user_;
  bind.verb = "bind";
  bind.api_group = string_member_copy(ref, "apiGroup");
  bind.resource = role_resource;
  bind.namespace_ = ns_;
  bind.name = role_name;
  if (policy_->authorize(bind).allowed) return std::nullopt;

  if (kind != "ClusterRole" && kind != "Role") {
    return ApiError(Errc::bad_request, "unsupported role reference kind: \"" + kind + "\"");
  }
  auto rules = policy_->role_rules(kind, ns_, role_name);
  if (!rules) {
    ApiError e(Errc::not_found,
               role_resource + "." + std::string(kGroup) + " \"" + role_name + "\" not found");
    e.name = role_name;
    e.group = std::string(kGroup);
    e.kind = role_resource;
    return e;
  }
  auto missing = policy_->not_covered(user_, ns_, *rules);
  if (missing.empty()) return std::nullopt;
  std::string reason = "user \"" + user_.name + "\" (groups=" + quoted_list(user_.groups) +
                       ") is attempting to grant RBAC permissions not currently held:";
  for (const auto& line : describe_missing(missing)) reason += "\n" + line;
  return forbidden(string_member(object_member(next, "metadata"), "name"), std::move(reason));
}

}  // namespace kwatch::auth
