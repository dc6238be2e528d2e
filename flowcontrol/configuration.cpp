#include "flowcontrol/configuration.hpp"

#include "apimachinery/json_members.hpp"
#include "base/sha256.hpp"

#include <algorithm>

namespace kwatch::flowcontrol {

namespace json = boost::json;
using apimachinery::array_member;
using apimachinery::object_member;
using apimachinery::string_at;
using apimachinery::strings_at;

namespace {

std::optional<std::int32_t> int_at(const json::object* obj, std::string_view key) {
  const json::value* v = obj != nullptr ? obj->if_contains(key) : nullptr;
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_int64()) {
    const auto n = v->get_int64();
    if (n < INT32_MIN || n > INT32_MAX) return std::nullopt;
    return static_cast<std::int32_t>(n);
  }
  if (v->is_uint64()) {
    return v->get_uint64() > INT32_MAX ? std::nullopt
                                       : std::optional<std::int32_t>(v->get_uint64());
  }
  return std::nullopt;
}

std::optional<Subject> parse_subject(const json::object& s) {
  Subject out;
  const std::string kind = string_at(s, "kind");
  if (kind == "User") {
    const json::object* u = object_member(s, "user");
    if (u == nullptr) return std::nullopt;
    out.kind = Subject::Kind::user;
    out.name = string_at(u, "name");
  } else if (kind == "Group") {
    const json::object* g = object_member(s, "group");
    if (g == nullptr) return std::nullopt;
    out.kind = Subject::Kind::group;
    out.name = string_at(g, "name");
  } else if (kind == "ServiceAccount") {
    const json::object* sa = object_member(s, "serviceAccount");
    if (sa == nullptr) return std::nullopt;
    out.kind = Subject::Kind::service_account;
    out.name = string_at(sa, "name");
    out.namespace_ = string_at(sa, "namespace");
  } else {
    return std::nullopt;
  }
  return out;
}

// kube's containsString: the wildcard counts only as the list's sole member.
bool contains(const std::vector<std::string>& list, std::string_view x, std::string_view all) {
  if (list.size() == 1 && list[0] == all) return true;
  return std::find(list.begin(), list.end(), x) != list.end();
}

bool matches_subject(const Subject& s, const apimachinery::UserInfo& user) {
  switch (s.kind) {
    case Subject::Kind::user:
      return s.name == "*" || s.name == user.name;
    case Subject::Kind::group:
      return s.name == "*" ||
             std::find(user.groups.begin(), user.groups.end(), s.name) != user.groups.end();
    case Subject::Kind::service_account: {
      constexpr std::string_view kPrefix = "system:serviceaccount:";
      if (s.name == "*") {
        // Every service account of the namespace: the name continues with "<ns>:".
        std::string_view rest(user.name);
        if (!rest.starts_with(kPrefix)) return false;
        rest.remove_prefix(kPrefix.size());
        if (!rest.starts_with(s.namespace_)) return false;
        rest.remove_prefix(s.namespace_.size());
        return rest.starts_with(":");
      }
      return user.name == std::string(kPrefix) + s.namespace_ + ":" + s.name;
    }
  }
  return false;
}

bool matches_url(const std::vector<std::string>& urls, const std::string& path) {
  for (const auto& rule : urls) {
    if (rule == "*" || rule == path) return true;
    // A rule names its path and everything under it, with or without a trailing '*'.
    std::string prefix = rule;
    if (prefix.ends_with('*')) prefix.pop_back();
    if (!prefix.ends_with('/')) prefix += '/';
    if (path.starts_with(prefix)) return true;
  }
  return false;
}

bool matches_rules(const PolicyRules& rules, const RequestDigest& r) {
  if (r.user == nullptr) return false;
  if (std::none_of(rules.subjects.begin(), rules.subjects.end(),
                   [&](const Subject& s) { return matches_subject(s, *r.user); })) {
    return false;
  }
  if (r.resource_request) {
    const std::string resource =
        r.subresource.empty() ? r.resource : r.resource + "/" + r.subresource;
    return std::any_of(rules.resource_rules.begin(), rules.resource_rules.end(),
                       [&](const ResourceRule& rr) {
                         if (!contains(rr.verbs, r.verb, "*") ||
                             !contains(rr.resources, resource, "*") ||
                             !contains(rr.api_groups, r.api_group, "*")) {
                           return false;
                         }
                         if (r.namespace_.empty()) return rr.cluster_scope;
                         return contains(rr.namespaces, r.namespace_, "*");
                       });
  }
  return std::any_of(rules.non_resource_rules.begin(), rules.non_resource_rules.end(),
                     [&](const NonResourceRule& nr) {
                       return contains(nr.verbs, r.verb, "*") && matches_url(nr.urls, r.path);
                     });
}

}  // namespace

std::optional<FlowSchema> parse_flow_schema(const json::object& object) {
  const json::object* metadata = object_member(object, "metadata");
  const json::object* spec = object_member(object, "spec");
  if (metadata == nullptr || spec == nullptr) return std::nullopt;
  FlowSchema out;
  out.name = string_at(metadata, "name");
  out.uid = string_at(metadata, "uid");
  out.priority_level = string_at(object_member(spec, "priorityLevelConfiguration"), "name");
  if (out.name.empty() || out.priority_level.empty()) return std::nullopt;
  if (spec->contains("matchingPrecedence")) {
    auto p = int_at(spec, "matchingPrecedence");
    if (!p) return std::nullopt;
    out.matching_precedence = *p;
  }
  if (const json::object* d = object_member(spec, "distinguisherMethod")) {
    const std::string type = string_at(d, "type");
    if (type == "ByUser") {
      out.distinguisher = Distinguisher::by_user;
    } else if (type == "ByNamespace") {
      out.distinguisher = Distinguisher::by_namespace;
    } else {
      return std::nullopt;
    }
  }
  if (const json::array* rules = array_member(*spec, "rules")) {
    for (const auto& rv : *rules) {
      if (!rv.is_object()) return std::nullopt;
      const json::object& r = rv.get_object();
      PolicyRules pr;
      if (const json::array* subjects = array_member(r, "subjects")) {
        for (const auto& s : *subjects) {
          if (!s.is_object()) return std::nullopt;
          auto subject = parse_subject(s.get_object());
          if (!subject) return std::nullopt;
          pr.subjects.push_back(std::move(*subject));
        }
      }
      if (const json::array* rrs = array_member(r, "resourceRules")) {
        for (const auto& v : *rrs) {
          if (!v.is_object()) return std::nullopt;
          const json::object& o = v.get_object();
          ResourceRule rr;
          rr.verbs = strings_at(o, "verbs");
          rr.api_groups = strings_at(o, "apiGroups");
          rr.resources = strings_at(o, "resources");
          rr.namespaces = strings_at(o, "namespaces");
          const json::value* cs = o.if_contains("clusterScope");
          rr.cluster_scope = cs != nullptr && cs->is_bool() && cs->get_bool();
          pr.resource_rules.push_back(std::move(rr));
        }
      }
      if (const json::array* nrs = array_member(r, "nonResourceRules")) {
        for (const auto& v : *nrs) {
          if (!v.is_object()) return std::nullopt;
          NonResourceRule nr;
          nr.verbs = strings_at(v.get_object(), "verbs");
          nr.urls = strings_at(v.get_object(), "nonResourceURLs");
          pr.non_resource_rules.push_back(std::move(nr));
        }
      }
      out.rules.push_back(std::move(pr));
    }
  }
  return out;
}

std::optional<PriorityLevel> parse_priority_level(const json::object& object) {
  const json::object* metadata = object_member(object, "metadata");
  const json::object* spec = object_member(object, "spec");
  if (metadata == nullptr || spec == nullptr) return std::nullopt;
  PriorityLevel out;
  out.name = string_at(metadata, "name");
  out.uid = string_at(metadata, "uid");
  if (out.name.empty()) return std::nullopt;
  const std::string type = string_at(spec, "type");
  // The dispatcher does not cope with a level switching between exempt and limited, so (as in
  // kube) only the level named "exempt" may be, and must be, of type Exempt.
  if ((type == "Exempt") != (out.name == kExempt)) return std::nullopt;
  if (type == "Exempt") {
    const json::object* e = object_member(spec, "exempt");
    if (e == nullptr || spec->contains("limited")) return std::nullopt;
    out.exempt = true;
    out.nominal_shares = int_at(e, "nominalConcurrencyShares").value_or(0);
    out.lendable_percent = int_at(e, "lendablePercent");
  } else if (type == "Limited") {
    const json::object* l = object_member(spec, "limited");
    if (l == nullptr || spec->contains("exempt")) return std::nullopt;
    out.nominal_shares = int_at(l, "nominalConcurrencyShares").value_or(30);
    out.lendable_percent = int_at(l, "lendablePercent");
    out.borrowing_limit_percent = int_at(l, "borrowingLimitPercent");
    const json::object* response = object_member(l, "limitResponse");
    const std::string response_type = string_at(response, "type");
    const json::object* queuing = object_member(response, "queuing");
    if (response_type == "Queue") {
      if (queuing == nullptr) return std::nullopt;
      out.queues = int_at(queuing, "queues").value_or(64);
      out.hand_size = int_at(queuing, "handSize").value_or(8);
      out.queue_length_limit = int_at(queuing, "queueLengthLimit").value_or(50);
      if (out.queues < 1 || out.hand_size < 1 || out.hand_size > out.queues ||
          out.queue_length_limit < 1) {
        return std::nullopt;
      }
    } else if (response_type != "Reject" || queuing != nullptr) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (out.nominal_shares < 0) return std::nullopt;
  // Exempt requests (probes, system:masters) always run at the I/O threads' priority.
  out.low_cpu_priority =
      !out.exempt && string_at(object_member(metadata, "annotations"), kLowCpuPriority) == "low";
  return out;
}

bool matches(const FlowSchema& schema, const RequestDigest& request) {
  return std::any_of(schema.rules.begin(), schema.rules.end(),
                     [&](const PolicyRules& r) { return matches_rules(r, request); });
}

std::string flow_distinguisher(const FlowSchema& schema, const RequestDigest& request) {
  switch (schema.distinguisher) {
    case Distinguisher::none:
      return "";
    case Distinguisher::by_user:
      return request.user != nullptr ? request.user->name : "";
    case Distinguisher::by_namespace:
      return request.namespace_;
  }
  return "";
}

std::uint64_t flow_hash(const std::string& schema_name, const std::string& distinguisher) {
  std::string text = schema_name;
  text.push_back('\0');
  text += distinguisher;
  const base::Sha256 sum = base::sha256(text);
  std::uint64_t h = 0;
  for (int i = 7; i >= 0; --i) h = (h << 8) | sum[i];
  return h;
}

}  // namespace kwatch::flowcontrol
