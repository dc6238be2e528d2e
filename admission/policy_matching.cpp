#include "admission/policy_matching.hpp"

#include "apimachinery/json_members.hpp"
#include "kinds/scheme.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>

namespace kwatch::admission {

namespace json = boost::json;
using apimachinery::LabelSelector;
using apimachinery::array_member;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::strings_at;

namespace {

constexpr std::uint8_t kCreate = 1, kUpdate = 2, kDelete = 4, kConnect = 8;

std::uint8_t operation_bit(std::string_view op) {
  if (op == "CREATE") return kCreate;
  if (op == "UPDATE") return kUpdate;
  if (op == "DELETE") return kDelete;
  if (op == "CONNECT") return kConnect;
  if (op == "*") return kCreate | kUpdate | kDelete | kConnect;
  return 0;
}

CompiledRule compile_rule(const json::object& rule) {
  CompiledRule out;
  for (const auto& op : strings_at(rule, "operations")) out.operations |= operation_bit(op);
  out.groups = strings_at(rule, "apiGroups");
  out.versions = strings_at(rule, "apiVersions");
  for (const auto& r : strings_at(rule, "resources")) {
    const auto slash = r.find('/');
    if (slash == std::string::npos) {
      out.resources.push_back({r, ""});
    } else {
      out.resources.push_back({r.substr(0, slash), r.substr(slash + 1)});
    }
  }
  out.names = strings_at(rule, "resourceNames");
  const std::string scope = string_at(rule, "scope");
  if (scope == "Cluster") out.scope = CompiledRule::Scope::cluster;
  if (scope == "Namespaced") out.scope = CompiledRule::Scope::namespaced;
  return out;
}

std::vector<CompiledRule> compile_rules(const json::object& match, std::string_view key) {
  std::vector<CompiledRule> out;
  if (const json::array* rules = array_member(match, key)) {
    for (const auto& r : *rules) {
      if (r.is_object()) out.push_back(compile_rule(r.get_object()));
    }
  }
  return out;
}

bool listed(const std::vector<std::string>& values, std::string_view v) {
  return std::any_of(values.begin(), values.end(),
                     [&](const std::string& s) { return s == "*" || s == v; });
}

bool is_namespaces(const kinds::ResourceInfo& info) {
  return info.group.empty() && info.resource == "namespaces";
}

// Everything but group and version: scope, operation, resource and subresource, name.
bool matches_shape(const CompiledRule& rule, const MatchRequest& r) {
  if ((rule.operations & operation_bit(r.operation)) == 0) return false;
  switch (rule.scope) {
    case CompiledRule::Scope::any:
      break;
    case CompiledRule::Scope::cluster:
      if (!is_namespaces(*r.info) && !r.ns.empty()) return false;
      break;
    case CompiledRule::Scope::namespaced:
      if (is_namespaces(*r.info) || r.ns.empty()) return false;
      break;
  }
  const bool resource = std::any_of(rule.resources.begin(), rule.resources.end(), [&](const auto& x) {
    return (x.resource == "*" || x.resource == r.info->resource) &&
           (x.subresource == "*" || x.subresource == r.subresource);
  });
  if (!resource) return false;
  return rule.names.empty() ||
         std::find(rule.names.begin(), rule.names.end(), r.name) != rule.names.end();
}

// The resource `rule` names that `r` matches: the request's own, or under Equivalent one of
// the same stored resource in a group and version the rule lists.
std::shared_ptr<const kinds::ResourceInfo> rule_match(const CompiledRule& rule,
                                                      const MatchRequest& r,
                                                      const kinds::Scheme* scheme,
                                                      bool equivalent) {
  if (!matches_shape(rule, r)) return nullptr;
  const kinds::ResourceInfo& info = *r.info;
  if (listed(rule.groups, info.group) && listed(rule.versions, info.version)) {
    return scheme != nullptr ? scheme->find(info.group, info.version, info.resource)
                             : std::make_shared<const kinds::ResourceInfo>(info);
  }
  if (!equivalent || scheme == nullptr) return nullptr;
  const std::string prefix = info.key_prefix();
  for (const std::string& g : rule.groups) {
    for (const std::string& v : rule.versions) {
      const std::string& group = g == "*" ? info.group : g;
      const std::string& version = v == "*" ? info.version : v;
      auto other = scheme->find(group, version, info.resource);
      if (other && other->key_prefix() == prefix) return other;
    }
  }
  return nullptr;
}

const json::object* labels_of(const json::object* object) {
  return object_member(object_member(object, "metadata"), "labels");
}

}  // namespace

CompiledMatch CompiledMatch::compile(const json::object& match, bool empty_rules_match_all) {
  CompiledMatch out;
  out.empty_rules_match_all_ = empty_rules_match_all;
  out.equivalent_ = string_at(match, "matchPolicy") != "Exact";
  auto selector = [&](std::string_view key, LabelSelector& into) {
    const json::object* s = object_member(match, key);
    if (s == nullptr) return;
    auto compiled = apimachinery::label_selector_from_json(*s);
    if (compiled) {
      into = std::move(*compiled);
    } else if (out.selector_error_.empty()) {
      out.selector_error_ = compiled.error().message;
    }
  };
  selector("namespaceSelector", out.namespace_selector_);
  selector("objectSelector", out.object_selector_);
  out.rules_ = compile_rules(match, "resourceRules");
  out.excluded_ = compile_rules(match, "excludeResourceRules");
  return out;
}

bool CompiledMatch::may_match(std::string_view group, std::string_view resource) const {
  if (rules_.empty()) return empty_rules_match_all_;
  for (const CompiledRule& rule : rules_) {
    // Another group may hold an equivalent resource: under Equivalent only the name counts.
    if (!equivalent_ && !listed(rule.groups, group)) continue;
    for (const auto& x : rule.resources) {
      if (x.resource == "*" || x.resource == resource) return true;
    }
  }
  return false;
}

MatchOutcome CompiledMatch::matches(const MatchRequest& r, const kinds::Scheme* scheme,
                                    const NamespaceLabels& namespace_labels) const {
  MatchOutcome out;
  std::shared_ptr<const kinds::ResourceInfo> matched;
  if (rules_.empty()) {
    if (!empty_rules_match_all_) return out;
    matched = scheme != nullptr ? scheme->find(r.info->group, r.info->version, r.info->resource)
                                : std::make_shared<const kinds::ResourceInfo>(*r.info);
  } else {
    for (const CompiledRule& rule : rules_) {
      matched = rule_match(rule, r, scheme, equivalent_);
      if (matched) break;
    }
    if (!matched) return out;
  }
  for (const CompiledRule& rule : excluded_) {
    if (rule_match(rule, r, scheme, equivalent_)) return out;
  }
  if (!selector_error_.empty()) {
    out.error = selector_error_;
    return out;
  }
  if (!object_selector_.empty() && !object_selector_.matches(labels_of(r.object)) &&
      !object_selector_.matches(labels_of(r.old_object))) {
    return out;
  }
  // Cluster-scoped objects (but namespaces themselves) pass every namespace selector.
  if (!namespace_selector_.empty() && (!r.ns.empty() || is_namespaces(*r.info))) {
    if (is_namespaces(*r.info) && r.subresource.empty()) {
      const json::object* labels = labels_of(r.object != nullptr ? r.object : r.old_object);
      if (!namespace_selector_.matches(labels)) return out;
    } else {
      const std::string_view ns = is_namespaces(*r.info) ? r.name : r.ns;
      auto labels = namespace_labels(ns);
      if (!labels) {
        out.error = "namespaces \"" + std::string(ns) + "\" not found";
        return out;
      }
      if (!namespace_selector_.matches(labels->empty() ? nullptr : &*labels)) return out;
    }
  }
  out.matched = true;
  out.matched_info = std::move(matched);
  return out;
}

}  // namespace kwatch::admission
