#include "auth/rbac_authorizer.hpp"

#include "apimachinery/json_members.hpp"
#include "base/string_map.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <boost/json/array.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <functional>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "apimachinery/label_selector.hpp"

namespace kwatch::auth {

using apimachinery::LabelSelector;
using apimachinery::LabelOperator;
using apimachinery::LabelRequirement;

namespace json = boost::json;

namespace {

constexpr std::string_view kSuperuserGroup = "system:masters";
constexpr std::string_view kServiceAccountPrefix = "system:serviceaccount:";

using base::StringMap;

// A PolicyRule with its lists as read (non-string entries dropped).
struct Rule {
  std::vector<std::string> verbs;
  std::vector<std::string> api_groups;
  std::vector<std::string> resources;
  std::vector<std::string> resource_names;
  std::vector<std::string> urls;
  bool operator==(const Rule&) const = default;
};

bool has(const std::vector<std::string>& set, std::string_view s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Both `has(set, "*")` and `has(set, s)` in one pass.
bool has_or_star(const std::vector<std::string>& set, std::string_view s) {
  for (const auto& e : set) {
    if (e == s || e == "*") return true;
  }
  return false;
}

// kube's ResourceMatches, without building "resource/subresource".
bool resource_matches(const Rule& rule, std::string_view resource, std::string_view sub) {
  for (const std::string& r : rule.resources) {
    std::string_view rv = r;
    if (rv == "*") return true;
    if (sub.empty()) {
      if (rv == resource) return true;
      continue;
    }
    if (rv.size() == resource.size() + 1 + sub.size() && rv.starts_with(resource) &&
        rv[resource.size()] == '/' && rv.ends_with(sub)) {
      return true;
    }
    if (rv.size() == sub.size() + 2 && rv.starts_with("*/") && rv.ends_with(sub)) return true;
  }
  return false;
}

bool url_matches(std::string_view rule_url, std::string_view path) {
  if (rule_url == "*" || rule_url == path) return true;
  if (!rule_url.ends_with('*')) return false;
  while (rule_url.ends_with('*')) rule_url.remove_suffix(1);  // strings.TrimRight(url, "*")
  return path.starts_with(rule_url);
}

// kube's RuleAllows.
bool rule_allows(const RequestAttributes& a, const Rule& rule) {
  if (!has_or_star(rule.verbs, a.verb)) return false;
  if (a.resource_request) {
    if (!has_or_star(rule.api_groups, a.api_group)) return false;
    if (!resource_matches(rule, a.resource, a.subresource)) return false;
    return rule.resource_names.empty() || has(rule.resource_names, a.name);
  }
  for (const auto& u : rule.urls) {
    if (url_matches(u, a.path)) return true;
  }
  return false;
}

// ---- reading stored JSON ----

using apimachinery::array_member;
using apimachinery::object_member;
using apimachinery::string_member;
using apimachinery::strings_at;

Rule read_rule(const json::object& o) {
  return Rule{strings_at(o, "verbs"), strings_at(o, "apiGroups"), strings_at(o, "resources"),
              strings_at(o, "resourceNames"), strings_at(o, "nonResourceURLs")};
}

std::vector<Rule> read_rules(const json::object& role) {
  std::vector<Rule> out;
  if (const auto* a = array_member(role, "rules")) {
    for (const auto& v : *a) {
      if (v.is_object()) out.push_back(read_rule(v.get_object()));
    }
  }
  return out;
}

json::array to_array(const std::vector<std::string>& v) {
  json::array a;
  a.reserve(v.size());
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

// metav1.LabelSelectorAsSelector; nullopt where kube returns an error.
std::optional<LabelSelector> read_selector(const json::object& o) {
  std::vector<LabelRequirement> reqs;
  if (const auto* labels = object_member(o, "matchLabels")) {
    for (const auto& [k, v] : *labels) {
      if (!v.is_string()) return std::nullopt;
      reqs.push_back({std::string(k), LabelOperator::equals, {std::string(v.get_string())}});
    }
  }
  if (const auto* exprs = array_member(o, "matchExpressions")) {
    for (const auto& e : *exprs) {
      if (!e.is_object()) return std::nullopt;
      const auto& eo = e.get_object();
      LabelRequirement r{std::string(string_member(&eo, "key")), LabelOperator::exists,
                         strings_at(eo, "values")};
      std::string_view op = string_member(&eo, "operator");
      if (op == "In" || op == "NotIn") {
        if (r.values.empty()) return std::nullopt;
        r.op = op == "In" ? LabelOperator::in : LabelOperator::not_in;
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!r.values.empty()) return std::nullopt;
        r.op = op == "Exists" ? LabelOperator::exists : LabelOperator::does_not_exist;
      } else {
        return std::nullopt;
      }
      std::sort(r.values.begin(), r.values.end());
      r.values.erase(std::unique(r.values.begin(), r.values.end()), r.values.end());
      reqs.push_back(std::move(r));
    }
  }
  return LabelSelector(std::move(reqs));
}

// ---- subjects ----

struct Subject {
  std::string kind;
  std::string name;
  std::string namespace_;
};

bool user_is(std::string_view user, std::string_view ns, std::string_view name) {
  return user.size() == kServiceAccountPrefix.size() + ns.size() + 1 + name.size() &&
         user.starts_with(kServiceAccountPrefix) &&
         user.substr(kServiceAccountPrefix.size(), ns.size()) == ns &&
         user[kServiceAccountPrefix.size() + ns.size()] == ':' && user.ends_with(name);
}

// kube's appliesToUser; `ns` is the binding's namespace ("" for a ClusterRoleBinding).
bool applies_to(const UserInfo& user, const Subject& s, std::string_view ns) {
  if (s.kind == "User") return user.name == s.name;
  if (s.kind == "Group") return has(user.groups, s.name);
  if (s.kind == "ServiceAccount") {
    std::string_view sa_ns = s.namespace_.empty() ? ns : std::string_view(s.namespace_);
    return !sa_ns.empty() && user_is(user.name, sa_ns, s.name);
  }
  return false;
}

std::string quoted(std::string_view s) {
  // Go's %q; names in RBAC objects are plain DNS-ish strings, so only '"' and '\\' need care.
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

struct Binding {
  std::size_t seq = 0;  // visiting order: ClusterRoleBindings by name, then RoleBindings
  bool cluster = false;
  std::string name;
  std::string namespace_;
  std::string role_kind;
  std::string role_name;
  std::vector<Subject> subjects;
  const std::vector<Rule>* rules = nullptr;  // null: the role does not exist
  std::string error;                         // why `rules` is null, as kube's lister says it

  // kube's clusterRoleBindingDescriber / roleBindingDescriber.
  std::string describe(const UserInfo& user) const {
    const Subject* subject = nullptr;
    for (const auto& s : subjects) {
      if (applies_to(user, s, namespace_)) {
        subject = &s;
        break;
      }
    }
    std::string out = cluster ? "ClusterRoleBinding " + quoted(name)
                              : "RoleBinding " + quoted(name + "/" + namespace_);
    out += " of " + role_kind + " " + quoted(role_name) + " to ";
    if (subject) {
      out += subject->kind + " ";
      if (subject->kind == "ServiceAccount") {
        out += quoted(subject->name + "/" +
                      (subject->namespace_.empty() ? namespace_ : subject->namespace_));
      } else {
        out += quoted(subject->name);
      }
    }
    return out;
  }
};

struct BindingLists {
  StringMap<std::vector<const Binding*>> users;  // user names, service accounts as user names
  StringMap<std::vector<const Binding*>> groups;

  void add(const std::string& key, StringMap<std::vector<const Binding*>>& map, const Binding* b) {
    auto& list = map[key];
    if (list.empty() || list.back() != b) list.push_back(b);
  }
};

const std::vector<const Binding*>* find_list(const StringMap<std::vector<const Binding*>>& map,
                                             std::string_view key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}


// Go's utilerrors.NewAggregate(errs).Error(): one message alone, several deduplicated in [].
std::string aggregate(const std::vector<std::string>& errors) {
  std::vector<std::string_view> seen;
  for (const auto& e : errors) {
    if (std::find(seen.begin(), seen.end(), e) == seen.end()) seen.push_back(e);
  }
  if (seen.size() == 1) return std::string(seen.front());
  std::string out = "[";
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (i) out += ", ";
    out += seen[i];
  }
  return out + "]";
}

}  // namespace

struct RbacPolicy::Index {
  StringMap<std::vector<Rule>> cluster_roles;  // by name, aggregation applied
  StringMap<std::vector<Rule>> roles;          // by "namespace/name"
  std::vector<Binding> bindings;               // seq order; never resized after indexing
  BindingLists cluster;
  StringMap<BindingLists> namespaced;

  // Calls f(binding) for each binding naming `user` (its name or a group) among `lists`, each
  // once, in seq order (a merge of the per-subject lists), until f returns false.
  template <class F>
  static bool visit(const BindingLists& lists, const UserInfo& user, F&& f) {
    using It = std::vector<const Binding*>::const_iterator;
    boost::container::small_vector<std::pair<It, It>, 8> cursors;
    if (const auto* l = find_list(lists.users, user.name))
      cursors.emplace_back(l->begin(), l->end());
    for (const auto& g : user.groups) {
      if (const auto* l = find_list(lists.groups, g)) cursors.emplace_back(l->begin(), l->end());
    }
    if (cursors.size() == 1) {
      for (auto it = cursors[0].first; it != cursors[0].second; ++it) {
        if (!f(**it)) return false;
      }
      return true;
    }
    for (;;) {
      const Binding* next = nullptr;
      for (auto& [it, end] : cursors) {
        if (it != end && (!next || (*it)->seq < next->seq)) next = *it;
      }
      if (!next) return true;
      for (auto& [it, end] : cursors) {
        if (it != end && *it == next) ++it;
      }
      if (!f(*next)) return false;
    }
  }

  // kube's VisitRulesFor: ClusterRoleBindings, then the RoleBindings of `ns`.
  template <class F>
  void visit_bindings(const UserInfo& user, std::string_view ns, F&& f) const {
    if (!visit(cluster, user, f)) return;
    if (ns.empty()) return;
    if (auto it = namespaced.find(ns); it != namespaced.end()) visit(it->second, user, f);
  }

  std::vector<const Rule*> owner_rules(const UserInfo& user, std::string_view ns,
                                       std::vector<std::string>* errors) const {
    std::vector<const Rule*> out;
    visit_bindings(user, ns, [&](const Binding& b) {
      if (!b.rules) {
        if (errors) errors->push_back(b.error);
      } else {
        for (const auto& r : *b.rules) out.push_back(&r);
      }
      return true;
    });
    return out;
  }
};

namespace {

struct ClusterRoleInput {
  std::string name;
  const json::object* labels = nullptr;
  std::vector<Rule> stored;
  std::optional<std::vector<LabelSelector>> selectors;  // set: aggregated
  bool selectors_valid = true;
  enum { unresolved, resolving, resolved } state = unresolved;
  std::vector<Rule> rules;
};

// The aggregation controller's fixpoint: an aggregated role's rules are those of every other
// ClusterRole a selector matches (in name order, first occurrence kept), where those roles'
// own rules are already aggregated. A cycle uses the stored rules of the role being resolved.
const std::vector<Rule>& resolve(std::vector<ClusterRoleInput>& all, ClusterRoleInput& role) {
  if (role.state == ClusterRoleInput::resolved) return role.rules;
  if (role.state == ClusterRoleInput::resolving) return role.stored;
  if (!role.selectors || !role.selectors_valid) {
    role.rules = role.stored;
    role.state = ClusterRoleInput::resolved;
    return role.rules;
  }
  role.state = ClusterRoleInput::resolving;
  std::vector<Rule> out;
  for (const auto& selector : *role.selectors) {
    for (auto& other : all) {  // sorted by name
      if (&other == &role || !selector.matches(other.labels)) continue;
      for (const auto& r : resolve(all, other)) {
        if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
      }
    }
  }
  role.rules = std::move(out);
  role.state = ClusterRoleInput::resolved;
  return role.rules;
}

// Every ClusterRole read, sorted by name (the first of a duplicate name kept), its rules resolved.
std::vector<ClusterRoleInput> resolve_cluster_roles(const std::vector<json::object>& cluster_roles) {
  std::vector<ClusterRoleInput> inputs;
  inputs.reserve(cluster_roles.size());
  for (const auto& o : cluster_roles) {
    const auto* meta = object_member(o, "metadata");
    ClusterRoleInput in;
    in.name = string_member(meta, "name");
    if (in.name.empty()) continue;
    in.labels = meta ? object_member(*meta, "labels") : nullptr;
    in.stored = read_rules(o);
    if (const auto* agg = object_member(o, "aggregationRule")) {
      in.selectors.emplace();
      if (const auto* sels = array_member(*agg, "clusterRoleSelectors")) {
        for (const auto& s : *sels) {
          auto sel = s.is_object() ? read_selector(s.get_object()) : std::nullopt;
          if (!sel)
            in.selectors_valid = false;  // kube's controller errors: rules unchanged
          else
            in.selectors->push_back(std::move(*sel));
        }
      }
    }
    inputs.push_back(std::move(in));
  }
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  inputs.erase(std::unique(inputs.begin(), inputs.end(),
                           [](const auto& a, const auto& b) { return a.name == b.name; }),
               inputs.end());
  for (auto& in : inputs) resolve(inputs, in);
  return inputs;
}

bool read_binding(const json::object& o, bool cluster, Binding& b) {
  const auto* meta = object_member(o, "metadata");
  b.cluster = cluster;
  b.name = string_member(meta, "name");
  b.namespace_ = cluster ? std::string() : std::string(string_member(meta, "namespace"));
  if (b.name.empty() || (!cluster && b.namespace_.empty())) return false;
  const auto* ref = object_member(o, "roleRef");
  b.role_kind = string_member(ref, "kind");
  b.role_name = string_member(ref, "name");
  if (const auto* subjects = array_member(o, "subjects")) {
    for (const auto& v : *subjects) {
      if (!v.is_object()) continue;
      const auto* so = &v.get_object();
      Subject s{std::string(string_member(so, "kind")), std::string(string_member(so, "name")),
                std::string(string_member(so, "namespace"))};
      if (!s.kind.empty() && !s.name.empty()) b.subjects.push_back(std::move(s));
    }
  }
  return true;
}

}  // namespace

RbacPolicy::RbacPolicy(std::unique_ptr<Index> index) : index_(std::move(index)) {}
RbacPolicy::~RbacPolicy() = default;

std::shared_ptr<const RbacPolicy> RbacPolicy::build(
    const std::vector<json::object>& roles, const std::vector<json::object>& cluster_roles,
    const std::vector<json::object>& role_bindings,
    const std::vector<json::object>& cluster_role_bindings) {
  auto index = std::make_unique<Index>();

  // ClusterRoles, aggregation resolved.
  std::vector<ClusterRoleInput> inputs = resolve_cluster_roles(cluster_roles);
  for (auto& in : inputs) index->cluster_roles.emplace(in.name, std::move(in.rules));

  for (const auto& o : roles) {
    const auto* meta = object_member(o, "metadata");
    std::string_view name = string_member(meta, "name");
    std::string_view ns = string_member(meta, "namespace");
    if (name.empty() || ns.empty()) continue;
    index->roles.emplace(std::string(ns) + "/" + std::string(name), read_rules(o));
  }

  // Bindings in visiting order; the per-subject lists then come out sorted by seq.
  auto& bindings = index->bindings;
  bindings.reserve(cluster_role_bindings.size() + role_bindings.size());
  for (const auto& o : cluster_role_bindings) {
    Binding b;
    if (read_binding(o, true, b)) bindings.push_back(std::move(b));
  }
  auto cluster_end = bindings.size();
  for (const auto& o : role_bindings) {
    Binding b;
    if (read_binding(o, false, b)) bindings.push_back(std::move(b));
  }
  std::stable_sort(bindings.begin(), bindings.begin() + cluster_end,
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  std::stable_sort(bindings.begin() + cluster_end, bindings.end(),
                   [](const auto& a, const auto& b) {
                     return std::tie(a.namespace_, a.name) < std::tie(b.namespace_, b.name);
                   });

  for (std::size_t i = 0; i < bindings.size(); ++i) {
    Binding& b = bindings[i];
    b.seq = i;
    if (b.role_kind == "ClusterRole") {
      if (auto it = index->cluster_roles.find(b.role_name); it != index->cluster_roles.end()) {
        b.rules = &it->second;
      } else {
        b.error = "clusterrole.rbac.authorization.k8s.io " + quoted(b.role_name) + " not found";
      }
    } else if (b.role_kind == "Role") {
      auto it = b.namespace_.empty() ? index->roles.end()
                                     : index->roles.find(b.namespace_ + "/" + b.role_name);
      if (it != index->roles.end()) {
        b.rules = &it->second;
      } else {
        b.error = "role.rbac.authorization.k8s.io " + quoted(b.role_name) + " not found";
      }
    } else {
      b.error = "unsupported role reference kind: " + quoted(b.role_kind);
    }

    BindingLists& lists = b.cluster ? index->cluster : index->namespaced[b.namespace_];
    for (const auto& s : b.subjects) {
      if (s.kind == "User") {
        lists.add(s.name, lists.users, &b);
      } else if (s.kind == "Group") {
        lists.add(s.name, lists.groups, &b);
      } else if (s.kind == "ServiceAccount") {
        std::string_view ns = s.namespace_.empty() ? std::string_view(b.namespace_) : s.namespace_;
        if (ns.empty()) continue;
        lists.add(std::string(kServiceAccountPrefix) + std::string(ns) + ":" + s.name, lists.users,
                  &b);
      }
    }
  }

  return std::shared_ptr<const RbacPolicy>(new RbacPolicy(std::move(index)));
}

bool is_superuser(const UserInfo& user) { return has(user.groups, kSuperuserGroup); }

Decision RbacPolicy::authorize(const RequestAttributes& attributes) const {
  if (is_superuser(attributes.user)) return Decision{true, {}};
  const Binding* allowed_by = nullptr;
  boost::container::small_vector<const Binding*, 2> missing;
  index_->visit_bindings(attributes.user, attributes.namespace_, [&](const Binding& b) {
    if (!b.rules) {
      missing.push_back(&b);
      return true;
    }
    for (const auto& rule : *b.rules) {
      if (rule_allows(attributes, rule)) {
        allowed_by = &b;
        return false;
      }
    }
    return true;
  });
  if (allowed_by)
    return Decision{true, "RBAC: allowed by " + allowed_by->describe(attributes.user)};
  if (missing.empty()) return Decision{};
  std::vector<std::string> errors;
  for (const auto* b : missing) errors.push_back(b->error);
  return Decision{false, "RBAC: " + aggregate(errors)};
}

SubjectRules RbacPolicy::rules_for(const UserInfo& user, std::string_view ns) const {
  SubjectRules out;
  std::vector<std::string> errors;
  for (const Rule* r : index_->owner_rules(user, ns, &errors)) {
    if (!r->resources.empty()) {
      json::object o;
      o["verbs"] = to_array(r->verbs);
      if (!r->api_groups.empty()) o["apiGroups"] = to_array(r->api_groups);
      o["resources"] = to_array(r->resources);
      if (!r->resource_names.empty()) o["resourceNames"] = to_array(r->resource_names);
      out.resource_rules.push_back(std::move(o));
    }
    if (!r->urls.empty()) {
      json::object o;
      o["verbs"] = to_array(r->verbs);
      o["nonResourceURLs"] = to_array(r->urls);
      out.non_resource_rules.push_back(std::move(o));
    }
  }
  if (!errors.empty()) out.evaluation_error = aggregate(errors);
  return out;
}

namespace {

// kube's BreakdownRule: one group, resource, verb and name (or one URL and verb) per rule.
void break_down(const Rule& rule, std::vector<Rule>& out) {
  for (const auto& g : rule.api_groups) {
    for (const auto& res : rule.resources) {
      for (const auto& v : rule.verbs) {
        if (rule.resource_names.empty()) {
          out.push_back(Rule{{v}, {g}, {res}, {}, {}});
        } else {
          for (const auto& n : rule.resource_names) out.push_back(Rule{{v}, {g}, {res}, {n}, {}});
        }
      }
    }
  }
  for (const auto& u : rule.urls) {
    for (const auto& v : rule.verbs) out.push_back(Rule{{v}, {}, {}, {}, {u}});
  }
}

bool has_all(const std::vector<std::string>& set, const std::vector<std::string>& items) {
  return std::all_of(items.begin(), items.end(), [&](const auto& i) { return has(set, i); });
}

// kube's resourceCoversAll: `*`, exact, or `*/<subresource>` for a subresource.
bool resources_cover(const std::vector<std::string>& owner, const std::vector<std::string>& sub) {
  if (has(owner, "*") || has_all(owner, sub)) return true;
  for (const auto& path : sub) {
    if (has(owner, path)) continue;
    auto slash = path.find('/');
    if (slash == std::string::npos) return false;
    if (!has(owner, "*/" + path.substr(slash + 1))) return false;
  }
  return true;
}

bool urls_cover(const std::vector<std::string>& owner, const std::vector<std::string>& sub) {
  return std::all_of(sub.begin(), sub.end(), [&](const std::string& path) {
    return std::any_of(owner.begin(), owner.end(), [&](const std::string& o) {
      if (o == path) return true;
      std::string_view prefix = o;
      if (!prefix.ends_with('*')) return false;
      while (prefix.ends_with('*')) prefix.remove_suffix(1);
      return std::string_view(path).starts_with(prefix);
    });
  });
}

// kube's ruleCovers.
bool rule_covers(const Rule& owner, const Rule& sub) {
  bool verbs = has(owner.verbs, "*") || has_all(owner.verbs, sub.verbs);
  bool groups = has(owner.api_groups, "*") || has_all(owner.api_groups, sub.api_groups);
  bool names = sub.resource_names.empty() ? owner.resource_names.empty()
                                          : owner.resource_names.empty() ||
                                                has_all(owner.resource_names, sub.resource_names);
  return verbs && groups && resources_cover(owner.resources, sub.resources) && names &&
         urls_cover(owner.urls, sub.urls);
}

json::object rule_to_json(const Rule& r) {
  json::object o;
  o["verbs"] = to_array(r.verbs);
  if (!r.api_groups.empty()) o["apiGroups"] = to_array(r.api_groups);
  if (!r.resources.empty()) o["resources"] = to_array(r.resources);
  if (!r.resource_names.empty()) o["resourceNames"] = to_array(r.resource_names);
  if (!r.urls.empty()) o["nonResourceURLs"] = to_array(r.urls);
  return o;
}

}  // namespace

std::vector<json::object> RbacPolicy::not_covered(const UserInfo& user, std::string_view ns,
                                                  const std::vector<json::object>& rules) const {
  std::vector<json::object> out;
  if (is_superuser(user)) return out;  // kube's EscalationAllowed
  std::vector<Rule> subrules;
  for (const auto& o : rules) break_down(read_rule(o), subrules);
  if (subrules.empty()) return out;
  auto owner = index_->owner_rules(user, ns, nullptr);
  for (const auto& sub : subrules) {
    bool covered = std::any_of(owner.begin(), owner.end(),
                               [&](const Rule* r) { return rule_covers(*r, sub); });
    if (!covered) out.push_back(rule_to_json(sub));
  }
  return out;
}

std::optional<std::vector<json::object>> RbacPolicy::role_rules(std::string_view kind,
                                                               std::string_view ns,
                                                               std::string_view name) const {
  const std::vector<Rule>* rules = nullptr;
  if (kind == "ClusterRole") {
    if (auto it = index_->cluster_roles.find(name); it != index_->cluster_roles.end()) {
      rules = &it->second;
    }
  } else if (kind == "Role" && !ns.empty()) {
    std::string key = std::string(ns) + "/" + std::string(name);
    if (auto it = index_->roles.find(key); it != index_->roles.end()) rules = &it->second;
  }
  if (rules == nullptr) return std::nullopt;
  std::vector<json::object> out;
  out.reserve(rules->size());
  for (const auto& r : *rules) out.push_back(rule_to_json(r));
  return out;
}

std::vector<AggregatedClusterRole> cluster_roles_to_aggregate(
    const std::vector<json::object>& cluster_roles) {
  std::vector<AggregatedClusterRole> out;
  for (const auto& in : resolve_cluster_roles(cluster_roles)) {
    if (!in.selectors || !in.selectors_valid || in.rules == in.stored) continue;
    json::array rules;
    rules.reserve(in.rules.size());
    for (const auto& r : in.rules) rules.emplace_back(rule_to_json(r));
    out.push_back(AggregatedClusterRole{in.name, std::move(rules)});
  }
  return out;
}

// ---- bootstrap policy ----

namespace {

using Strings = std::vector<std::string>;

const Strings kRead = {"get", "list", "watch"};
const Strings kWrite = {"create", "update", "patch", "delete", "deletecollection"};
const Strings kReadWrite = {"get",    "list",  "watch",  "create",
                            "update", "patch", "delete", "deletecollection"};

json::object rule(const Strings& verbs, const Strings& groups, const Strings& resources) {
  return json::object{{"verbs", to_array(verbs)},
                      {"apiGroups", to_array(groups)},
                      {"resources", to_array(resources)}};
}

json::object url_rule(const Strings& verbs, const Strings& urls) {
  return json::object{{"verbs", to_array(verbs)}, {"nonResourceURLs", to_array(urls)}};
}

json::object bootstrap_metadata(std::string_view name, json::object labels = {}) {
  labels["kubernetes.io/bootstrapping"] = "rbac-defaults";
  return json::object{
      {"name", name},
      {"labels", std::move(labels)},
      {"annotations", json::object{{"rbac.authorization.kubernetes.io/autoupdate", "true"}}}};
}

json::object cluster_role(std::string_view name, std::vector<json::object> rules,
                          json::object labels = {}) {
  json::array a;
  for (auto& r : rules) a.emplace_back(std::move(r));
  return json::object{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                      {"kind", "ClusterRole"},
                      {"metadata", bootstrap_metadata(name, std::move(labels))},
                      {"rules", std::move(a)}};
}

json::object aggregated_role(std::string_view name, std::string_view aggregate_from,
                             json::object labels = {}) {
  auto role = cluster_role(name, {}, std::move(labels));
  role["aggregationRule"] = json::object{
      {"clusterRoleSelectors",
       json::array{json::object{{"matchLabels", json::object{{aggregate_from, "true"}}}}}}};
  return role;
}

constexpr std::string_view kToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin";
constexpr std::string_view kToEdit = "rbac.authorization.k8s.io/aggregate-to-edit";
constexpr std::string_view kToView = "rbac.authorization.k8s.io/aggregate-to-view";

json::object cluster_binding(std::string_view name, const Strings& groups) {
  json::array subjects;
  for (const auto& g : groups) {
    subjects.emplace_back(
        json::object{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Group"}, {"name", g}});
  }
  return json::object{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                      {"kind", "ClusterRoleBinding"},
                      {"metadata", bootstrap_metadata(name)},
                      {"roleRef", json::object{{"apiGroup", "rbac.authorization.k8s.io"},
                                               {"kind", "ClusterRole"},
                                               {"name", name}}},
                      {"subjects", std::move(subjects)}};
}

}  // namespace

std::vector<json::object> bootstrap_cluster_roles() {
  std::vector<json::object> out;
  out.push_back(cluster_role("cluster-admin", {rule({"*"}, {"*"}, {"*"}), url_rule({"*"}, {"*"})}));
  out.push_back(cluster_role(
      "system:discovery",
      {url_rule({"get"}, {"/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi",
                          "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"})}));
  out.push_back(cluster_role("system:basic-user",
                             {rule({"create"}, {"authorization.k8s.io"},
                                   {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}),
                              rule({"create"}, {"authentication.k8s.io"}, {"selfsubjectreviews"})}));
  out.push_back(cluster_role(
      "system:public-info-viewer",
      {url_rule({"get"}, {"/livez", "/readyz", "/healthz", "/version", "/version/"})}));

  // Reading the ServiceAccount issuer's OpenID discovery documents (bound to every account).
  out.push_back(cluster_role(
      "system:service-account-issuer-discovery",
      {url_rule({"get"}, {"/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                          "/openid/v1/jwks", "/openid/v1/jwks/"})}));
  // What a delegating authenticator/authorizer (an aggregated API server, a proxy) needs.
  out.push_back(cluster_role(
      "system:auth-delegator",
      {rule({"create"}, {"authentication.k8s.io"}, {"tokenreviews"}),
       rule({"create"}, {"authorization.k8s.io"}, {"subjectaccessreviews"})}));

  out.push_back(aggregated_role("admin", kToAdmin));
  out.push_back(aggregated_role("edit", kToEdit, json::object{{kToAdmin, "true"}}));
  out.push_back(aggregated_role("view", kToView, json::object{{kToEdit, "true"}}));

  out.push_back(
      cluster_role("system:aggregate-to-admin",
                   {rule({"create"}, {"authorization.k8s.io"}, {"localsubjectaccessreviews"}),
                    rule(kReadWrite, {"rbac.authorization.k8s.io"}, {"roles", "rolebindings"})},
                   json::object{{kToAdmin, "true"}}));
  out.push_back(cluster_role(
      "system:aggregate-to-edit",
      {rule(kRead, {""},
            {"pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets",
             "services/proxy"}),
       rule({"impersonate"}, {""}, {"serviceaccounts"}),
       rule(kWrite, {""}, {"pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"}),
       rule({"create"}, {""}, {"pods/eviction"}),
       rule(kWrite, {""},
            {"replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
             "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"}),
       rule({"create"}, {""}, {"serviceaccounts/token"}),
       rule(kWrite, {"apps"},
            {"statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
             "deployments/rollback", "replicasets", "replicasets/scale"}),
       rule(kWrite, {"autoscaling"}, {"horizontalpodautoscalers"}),
       rule(kWrite, {"batch"}, {"jobs", "cronjobs"}),
       rule(kWrite, {"policy"}, {"poddisruptionbudgets"}),
       rule(kWrite, {"networking.k8s.io"}, {"networkpolicies", "ingresses"})},
      json::object{{kToEdit, "true"}}));
  out.push_back(cluster_role(
      "system:aggregate-to-view",
      {rule(kRead, {""},
            {"pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
             "services", "services/status", "endpoints", "persistentvolumeclaims",
             "persistentvolumeclaims/status", "configmaps"}),
       rule(kRead, {""},
            {"limitranges", "resourcequotas", "bindings", "events", "pods/status",
             "resourcequotas/status", "namespaces/status", "replicationcontrollers/status",
             "pods/log"}),
       rule(kRead, {""}, {"namespaces"}), rule(kRead, {"discovery.k8s.io"}, {"endpointslices"}),
       rule(kRead, {"apps"},
            {"controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
             "daemonsets", "daemonsets/status", "deployments", "deployments/status",
             "deployments/scale", "replicasets", "replicasets/status", "replicasets/scale"}),
       rule(kRead, {"autoscaling"},
            {"horizontalpodautoscalers", "horizontalpodautoscalers/status"}),
       rule(kRead, {"batch"}, {"jobs", "jobs/status", "cronjobs", "cronjobs/status"}),
       rule(kRead, {"policy"}, {"poddisruptionbudgets", "poddisruptionbudgets/status"}),
       rule(kRead, {"networking.k8s.io"}, {"networkpolicies", "ingresses", "ingresses/status"})},
      json::object{{kToView, "true"}}));
  return out;
}

std::optional<json::array> reconciled_bootstrap_rules(const json::object& stored,
                                                     const json::object& bootstrap) {
  const auto* meta = object_member(stored, "metadata");
  const auto* annotations = meta ? object_member(*meta, "annotations") : nullptr;
  if (string_member(annotations, "rbac.authorization.kubernetes.io/autoupdate") != "true") {
    return std::nullopt;
  }
  json::array rules;
  if (const auto* a = array_member(stored, "rules")) rules = *a;
  bool added = false;
  if (const auto* wanted = array_member(bootstrap, "rules")) {
    for (const auto& rule : *wanted) {
      if (std::find(rules.begin(), rules.end(), rule) == rules.end()) {
        rules.push_back(rule);
        added = true;
      }
    }
  }
  if (!added) return std::nullopt;
  return rules;
}

std::vector<json::object> bootstrap_cluster_role_bindings() {
  return {cluster_binding("cluster-admin", {"system:masters"}),
          cluster_binding("system:discovery", {"system:authenticated"}),
          cluster_binding("system:basic-user", {"system:authenticated"}),
          cluster_binding("system:public-info-viewer",
                          {"system:authenticated", "system:unauthenticated"}),
          cluster_binding("system:service-account-issuer-discovery", {"system:serviceaccounts"})};
}

std::vector<json::object> bootstrap_kube_system_roles() {
  json::object metadata = bootstrap_metadata("extension-apiserver-authentication-reader");
  metadata["namespace"] = "kube-system";
  json::object reader = rule(kRead, {""}, {"configmaps"});
  reader["resourceNames"] = json::array{"extension-apiserver-authentication"};
  return {json::object{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                       {"kind", "Role"},
                       {"metadata", std::move(metadata)},
                       {"rules", json::array{std::move(reader)}}}};
}

std::vector<json::object> bootstrap_kube_system_role_bindings() {
  json::object metadata = bootstrap_metadata("system::extension-apiserver-authentication-reader");
  metadata["namespace"] = "kube-system";
  json::array subjects;
  for (const char* user : {"system:kube-controller-manager", "system:kube-scheduler"}) {
    subjects.emplace_back(json::object{
        {"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "User"}, {"name", user}});
  }
  return {json::object{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                       {"kind", "RoleBinding"},
                       {"metadata", std::move(metadata)},
                       {"roleRef", json::object{{"apiGroup", "rbac.authorization.k8s.io"},
                                                {"kind", "Role"},
                                                {"name", "extension-apiserver-authentication-reader"}}},
                       {"subjects", std::move(subjects)}}};
}

}  // namespace kwatch::auth
