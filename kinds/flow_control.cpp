#include "kinds/flow_control.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/field_errors.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::int_member;
namespace fe = field_errors;
using field_errors::go_strings;
using apimachinery::array_member;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

// What kube's validation checks against: shufflesharding.MaxHashBits and
// priorityLevelConfigurationQueuingMaxQueues.
constexpr int kMaxHashBits = 60;
constexpr std::int64_t kMaxQueues = 10 * 1000 * 1000;

// The sets kube prints sorted in "supported values".
constexpr std::string_view kVerbs[] = {"create", "delete", "deletecollection", "get", "list",
                                       "patch",  "proxy",  "update",           "watch"};

// ---- reading the JSON as Go's structs would hold it ----

std::int64_t int_or_zero(const json::object* obj, std::string_view key) {
  return int_member(obj, key).value_or(0);
}

bool bool_at(const json::object* obj, std::string_view key) {
  const json::value* v = obj != nullptr ? obj->if_contains(key) : nullptr;
  return v != nullptr && v->is_bool() && v->get_bool();
}

// The objects of the array under `key`; an element that is none reads as an empty struct.
std::vector<const json::object*> objects_at(const json::object* obj, std::string_view key) {
  static const json::object kEmpty;
  std::vector<const json::object*> out;
  if (const json::array* a = array_member(obj, key)) {
    for (const auto& v : *a) out.push_back(v.is_object() ? &v.get_object() : &kEmpty);
  }
  return out;
}

void set_if_zero(json::object& obj, std::string_view key, std::int64_t value) {
  if (int_or_zero(&obj, key) == 0) obj[key] = value;
}

void set_if_absent(json::object& obj, std::string_view key, std::int64_t value) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr || v->is_null()) obj[key] = value;
}

// ---- Go's %#v of the values kube's messages show ----

// One field of an internal flowcontrol struct, in Go's declaration order.
struct GoType;
enum class GoKind { string, int32, boolean, structure, pointer, strings, structs, int32_pointer };
struct GoField {
  const char* go_name;
  const char* json_name;
  GoKind kind;
  const GoType* type = nullptr;  // structure, pointer, structs
};
struct GoType {
  const char* name;
  std::vector<GoField> fields;
};

const GoType kReference{"flowcontrol.PriorityLevelConfigurationReference",
                        {{"Name", "name", GoKind::string}}};
const GoType kDistinguisher{"flowcontrol.FlowDistinguisherMethod",
                            {{"Type", "type", GoKind::string}}};
const GoType kUserSubject{"flowcontrol.UserSubject", {{"Name", "name", GoKind::string}}};
const GoType kGroupSubject{"flowcontrol.GroupSubject", {{"Name", "name", GoKind::string}}};
const GoType kServiceAccountSubject{"flowcontrol.ServiceAccountSubject",
                                    {{"Namespace", "namespace", GoKind::string},
                                     {"Name", "name", GoKind::string}}};
const GoType kSubject{"flowcontrol.Subject",
                      {{"Kind", "kind", GoKind::string},
                       {"User", "user", GoKind::pointer, &kUserSubject},
                       {"Group", "group", GoKind::pointer, &kGroupSubject},
                       {"ServiceAccount", "serviceAccount", GoKind::pointer,
                        &kServiceAccountSubject}}};
const GoType kResourceRule{"flowcontrol.ResourcePolicyRule",
                           {{"Verbs", "verbs", GoKind::strings},
                            {"APIGroups", "apiGroups", GoKind::strings},
                            {"Resources", "resources", GoKind::strings},
                            {"ClusterScope", "clusterScope", GoKind::boolean},
                            {"Namespaces", "namespaces", GoKind::strings}}};
const GoType kNonResourceRule{"flowcontrol.NonResourcePolicyRule",
                              {{"Verbs", "verbs", GoKind::strings},
                               {"NonResourceURLs", "nonResourceURLs", GoKind::strings}}};
const GoType kRule{"flowcontrol.PolicyRulesWithSubjects",
                   {{"Subjects", "subjects", GoKind::structs, &kSubject},
                    {"ResourceRules", "resourceRules", GoKind::structs, &kResourceRule},
                    {"NonResourceRules", "nonResourceRules", GoKind::structs, &kNonResourceRule}}};
const GoType kFlowSchemaSpec{
    "flowcontrol.FlowSchemaSpec",
    {{"PriorityLevelConfiguration", "priorityLevelConfiguration", GoKind::structure, &kReference},
     {"MatchingPrecedence", "matchingPrecedence", GoKind::int32},
     {"DistinguisherMethod", "distinguisherMethod", GoKind::pointer, &kDistinguisher},
     {"Rules", "rules", GoKind::structs, &kRule}}};
const GoType kQueuing{"flowcontrol.QueuingConfiguration",
                      {{"Queues", "queues", GoKind::int32},
                       {"HandSize", "handSize", GoKind::int32},
                       {"QueueLengthLimit", "queueLengthLimit", GoKind::int32}}};
const GoType kLimitResponse{"flowcontrol.LimitResponse",
                            {{"Type", "type", GoKind::string},
                             {"Queuing", "queuing", GoKind::pointer, &kQueuing}}};
const GoType kLimited{"flowcontrol.LimitedPriorityLevelConfiguration",
                      {{"NominalConcurrencyShares", "nominalConcurrencyShares", GoKind::int32},
                       {"LimitResponse", "limitResponse", GoKind::structure, &kLimitResponse},
                       {"LendablePercent", "lendablePercent", GoKind::int32_pointer},
                       {"BorrowingLimitPercent", "borrowingLimitPercent", GoKind::int32_pointer}}};
const GoType kExempt{"flowcontrol.ExemptPriorityLevelConfiguration",
                     {{"NominalConcurrencyShares", "nominalConcurrencyShares", GoKind::int32_pointer},
                      {"LendablePercent", "lendablePercent", GoKind::int32_pointer}}};
const GoType kPriorityLevelSpec{"flowcontrol.PriorityLevelConfigurationSpec",
                                {{"Type", "type", GoKind::string},
                                 {"Limited", "limited", GoKind::pointer, &kLimited},
                                 {"Exempt", "exempt", GoKind::pointer, &kExempt}}};

// %#v of a struct of `type` held in `obj`. Go prints a pointer inside a struct as its address,
// which means nothing to a reader; kwatch prints what it points to instead (`&T{...}`,
// `(*int32)(5)`), and nil pointers as Go does.
std::string go_struct(const GoType& type, const json::object* obj) {
  std::string out = std::string(type.name) + "{";
  bool first = true;
  for (const GoField& f : type.fields) {
    if (!first) out += ", ";
    first = false;
    out += std::string(f.go_name) + ":";
    const json::value* v = obj != nullptr ? obj->if_contains(f.json_name) : nullptr;
    if (v != nullptr && v->is_null()) v = nullptr;
    switch (f.kind) {
      case GoKind::string:
        out += go_quote(v != nullptr && v->is_string() ? std::string_view(v->get_string()) : "");
        break;
      case GoKind::int32:
        out += std::to_string(int_or_zero(obj, f.json_name));
        break;
      case GoKind::boolean:
        out += bool_at(obj, f.json_name) ? "true" : "false";
        break;
      case GoKind::structure:
        out += go_struct(*f.type, v != nullptr ? v->if_object() : nullptr);
        break;
      case GoKind::pointer:
        if (v == nullptr || !v->is_object()) {
          out += "(*" + std::string(f.type->name) + ")(nil)";
        } else {
          out += "&" + go_struct(*f.type, &v->get_object());
        }
        break;
      case GoKind::int32_pointer:
        if (auto n = int_member(obj, f.json_name)) {
          out += "(*int32)(" + std::to_string(*n) + ")";
        } else {
          out += "(*int32)(nil)";
        }
        break;
      case GoKind::strings:
        if (v == nullptr || !v->is_array()) {
          out += "[]string(nil)";
        } else {
          out += go_strings(fe::string_items(obj, f.json_name));
        }
        break;
      case GoKind::structs:
        if (v == nullptr || !v->is_array()) {
          out += "[]" + std::string(f.type->name) + "(nil)";
        } else {
          out += "[]" + std::string(f.type->name) + "{";
          bool first_item = true;
          for (const json::object* item : objects_at(obj, f.json_name)) {
            if (!first_item) out += ", ";
            first_item = false;
            out += go_struct(*f.type, item);
          }
          out += "}";
        }
        break;
    }
  }
  return out + "}";
}

// The value of `obj` as kube's apiequality.Semantic.DeepEqual compares it: absent and zero
// scalars alike, nil and empty lists alike, a nil pointer unlike a set one.
json::value canonical(const GoType& type, const json::object* obj) {
  json::object out;
  for (const GoField& f : type.fields) {
    const json::value* v = obj != nullptr ? obj->if_contains(f.json_name) : nullptr;
    if (v != nullptr && v->is_null()) v = nullptr;
    switch (f.kind) {
      case GoKind::string:
        out[f.json_name] = v != nullptr && v->is_string() ? v->get_string() : "";
        break;
      case GoKind::int32:
        out[f.json_name] = int_or_zero(obj, f.json_name);
        break;
      case GoKind::boolean:
        out[f.json_name] = bool_at(obj, f.json_name);
        break;
      case GoKind::structure:
        out[f.json_name] = canonical(*f.type, v != nullptr ? v->if_object() : nullptr);
        break;
      case GoKind::pointer:
        out[f.json_name] = v != nullptr && v->is_object() ? canonical(*f.type, &v->get_object())
                                                          : json::value();
        break;
      case GoKind::int32_pointer:
        if (auto n = int_member(obj, f.json_name)) {
          out[f.json_name] = *n;
        } else {
          out[f.json_name] = nullptr;
        }
        break;
      case GoKind::strings: {
        json::array a;
        for (const auto& s : fe::string_items(obj, f.json_name)) a.emplace_back(s);
        out[f.json_name] = std::move(a);
        break;
      }
      case GoKind::structs: {
        json::array a;
        for (const json::object* item : objects_at(obj, f.json_name)) {
          a.push_back(canonical(*f.type, item));
        }
        out[f.json_name] = std::move(a);
        break;
      }
    }
  }
  return out;
}

void not_supported(Causes& causes, std::string field, const std::string& shown,
                   std::initializer_list<std::string_view> supported) {
  std::string message = "Unsupported value: " + shown + ": supported values: ";
  bool first = true;
  for (auto s : supported) {
    if (!first) message += ", ";
    first = false;
    message += go_quote(s);
  }
  causes.push_back({"FieldValueNotSupported", std::move(message), std::move(field)});
}

bool has_wildcard(const std::vector<std::string>& values) {
  return std::find(values.begin(), values.end(), "*") != values.end();
}

// ---- FlowSchema ----

void validate_subject(const json::object& subject, const std::string& path, Causes& causes) {
  const std::string kind = string_at(subject, "kind");
  const json::object* user = object_member(subject, "user");
  const json::object* group = object_member(subject, "group");
  const json::object* sa = object_member(subject, "serviceAccount");
  const auto forbid_user = [&] {
    if (user != nullptr) {
      fe::forbidden(causes, path + ".user", "user is forbidden when subject kind is not 'User'");
    }
  };
  const auto forbid_group = [&] {
    if (group != nullptr) {
      fe::forbidden(causes, path + ".group", "group is forbidden when subject kind is not 'Group'");
    }
  };
  const auto forbid_sa = [&] {
    if (sa != nullptr) {
      fe::forbidden(causes, path + ".serviceAccount",
                    "serviceAccount is forbidden when subject kind is not 'ServiceAccount'");
    }
  };
  if (kind == "ServiceAccount") {
    const std::string at = path + ".serviceAccount";
    if (sa == nullptr) {
      fe::required(causes, at, "serviceAccount is required when subject kind is 'ServiceAccount'");
    } else {
      const std::string name = string_at(sa, "name");
      if (name.empty()) {
        fe::required(causes, at + ".name");
      } else if (name != "*") {
        for (const auto& e : apimachinery::dns1123_subdomain_errors(name)) {
          fe::invalid(causes, at + ".name", go_quote(name), e);
        }
      }
      const std::string ns = string_at(sa, "namespace");
      if (ns.empty()) {
        fe::required(causes, at + ".namespace", "must specify namespace for service account");
      } else {
        for (const auto& e : apimachinery::dns1123_label_errors(ns)) {
          fe::invalid(causes, at + ".namespace", go_quote(ns), e);
        }
      }
    }
    forbid_user();
    forbid_group();
  } else if (kind == "User") {
    if (user == nullptr) {
      fe::required(causes, path + ".user", "user is required when subject kind is 'User'");
    } else if (string_at(user, "name").empty()) {
      fe::required(causes, path + ".user.name");
    }
    forbid_sa();
    forbid_group();
  } else if (kind == "Group") {
    if (group == nullptr) {
      fe::required(causes, path + ".group", "group is required when subject kind is 'Group'");
    } else if (string_at(group, "name").empty()) {
      fe::required(causes, path + ".group.name");
    }
    forbid_sa();
    forbid_user();
  } else {
    not_supported(causes, path + ".kind", go_quote(kind), {"Group", "ServiceAccount", "User"});
  }
}

// The verbs of a resource or non-resource rule: given, `*` alone, else kube's verbs.
void validate_verbs(const json::object& rule, const std::string& path, Causes& causes) {
  const auto verbs = fe::string_items(&rule, "verbs");
  if (verbs.empty()) {
    fe::required(causes, path + ".verbs", "verbs must contain at least one value");
  } else if (has_wildcard(verbs)) {
    if (verbs.size() > 1) {
      fe::invalid(causes, path + ".verbs", go_strings(verbs),
                  "if '*' is present, must not specify other verbs");
    }
  } else {
    const bool all_known = std::all_of(verbs.begin(), verbs.end(), [](const std::string& v) {
      return std::find(std::begin(kVerbs), std::end(kVerbs), v) != std::end(kVerbs);
    });
    if (!all_known) {
      not_supported(causes, path + ".verbs", go_strings(verbs),
                    {"create", "delete", "deletecollection", "get", "list", "patch", "proxy",
                     "update", "watch"});
    }
  }
}

// kube's ValidateNonResourceURLPath: "" when `url` is a valid non-resource URL pattern.
std::string non_resource_url_problem(const std::string& url) {
  if (url.empty()) return "must not be empty";
  if (url == "/") return "";
  if (url.front() != '/') return "must start with slash";
  if (url.find(' ') != std::string::npos) return "must not contain white-space";
  if (url.find("//") != std::string::npos) return "must not contain double slash";
  const auto stars = std::count(url.begin(), url.end(), '*');
  if (stars > 1 || (stars == 1 && url.substr(url.size() - 2) != "/*")) {
    return "wildcard can only do suffix matching";
  }
  return "";
}

void validate_non_resource_rule(const json::object& rule, const std::string& path,
                                Causes& causes) {
  validate_verbs(rule, path, causes);
  const auto urls = fe::string_items(&rule, "nonResourceURLs");
  if (urls.empty()) {
    fe::required(causes, path + ".nonResourceURLs",
                 "nonResourceURLs must contain at least one value");
  } else if (has_wildcard(urls)) {
    if (urls.size() > 1) {
      fe::invalid(causes, path + ".nonResourceURLs", go_strings(urls),
                  "if '*' is present, must not specify other non-resource URLs");
    }
  } else {
    for (std::size_t i = 0; i < urls.size(); ++i) {
      const std::string problem = non_resource_url_problem(urls[i]);
      if (!problem.empty()) {
        fe::invalid(causes, fe::index(path + ".nonResourceURLs", i), go_quote(urls[i]), problem);
      }
    }
  }
}

void validate_resource_rule(const json::object& rule, const std::string& path, Causes& causes) {
  validate_verbs(rule, path, causes);
  const auto groups = fe::string_items(&rule, "apiGroups");
  if (groups.empty()) {
    fe::required(causes, path + ".apiGroups", "resource rules must supply at least one api group");
  } else if (groups.size() > 1 && has_wildcard(groups)) {
    fe::invalid(causes, path + ".apiGroups", go_strings(groups),
                "if '*' is present, must not specify other api groups");
  }
  const auto resources = fe::string_items(&rule, "resources");
  if (resources.empty()) {
    fe::required(causes, path + ".resources", "resource rules must supply at least one resource");
  } else if (resources.size() > 1 && has_wildcard(resources)) {
    fe::invalid(causes, path + ".resources", go_strings(resources),
                "if '*' is present, must not specify other resources");
  }
  const auto namespaces = fe::string_items(&rule, "namespaces");
  if (namespaces.empty() && !bool_at(&rule, "clusterScope")) {
    fe::required(causes, path + ".namespaces",
                 "resource rules that are not cluster scoped must supply at least one namespace");
  } else if (has_wildcard(namespaces)) {
    if (namespaces.size() > 1) {
      fe::invalid(causes, path + ".namespaces", go_strings(namespaces),
                  "if '*' is present, must not specify other namespaces");
    }
  } else {
    for (std::size_t i = 0; i < namespaces.size(); ++i) {
      for (const auto& e : apimachinery::dns1123_label_errors(namespaces[i])) {
        fe::invalid(causes, fe::index(path + ".namespaces", i), go_quote(namespaces[i]),
                    "each member of this list must be '*' or a DNS-1123 label; " + e);
      }
    }
  }
}

void validate_rule(const json::object& rule, const std::string& path, Causes& causes) {
  const auto subjects = objects_at(&rule, "subjects");
  if (subjects.empty()) {
    fe::required(causes, path + ".subjects", "subjects must contain at least one value");
  }
  for (std::size_t i = 0; i < subjects.size(); ++i) {
    validate_subject(*subjects[i], fe::index(path + ".subjects", i), causes);
  }
  const auto resource_rules = objects_at(&rule, "resourceRules");
  const auto non_resource_rules = objects_at(&rule, "nonResourceRules");
  if (resource_rules.empty() && non_resource_rules.empty()) {
    fe::required(causes, path,
                 "at least one of resourceRules and nonResourceRules has to be non-empty");
  }
  for (std::size_t i = 0; i < resource_rules.size(); ++i) {
    validate_resource_rule(*resource_rules[i], fe::index(path + ".resourceRules", i), causes);
  }
  for (std::size_t i = 0; i < non_resource_rules.size(); ++i) {
    validate_non_resource_rule(*non_resource_rules[i], fe::index(path + ".nonResourceRules", i),
                               causes);
  }
}

void validate_flow_schema_spec(const std::string& name, const json::object* spec, Causes& causes) {
  const std::int64_t precedence = int_or_zero(spec, "matchingPrecedence");
  const std::string at = "spec.matchingPrecedence";
  if (precedence <= 0) {
    fe::invalid(causes, at, std::to_string(precedence), "must be a positive value");
  }
  if (precedence > kFlowSchemaMaxMatchingPrecedence) {
    fe::invalid(causes, at, std::to_string(precedence),
                "must not be greater than " + std::to_string(kFlowSchemaMaxMatchingPrecedence));
  }
  if (precedence == 1 && name != kFlowSchemaNameExempt) {
    fe::invalid(causes, at, "1", "only the schema named 'exempt' may have matchingPrecedence 1");
  }
  if (const json::object* method = object_member(spec, "distinguisherMethod")) {
    const std::string type = string_at(method, "type");
    if (type != "ByNamespace" && type != "ByUser") {
      not_supported(causes, "spec.distinguisherMethod.type", go_struct(kDistinguisher, method),
                    {"ByNamespace", "ByUser"});
    }
  }
  const std::string pl = string_at(object_member(spec, "priorityLevelConfiguration"), "name");
  if (pl.empty()) {
    fe::required(causes, "spec.priorityLevelConfiguration.name", "must reference a priority level");
  } else {
    for (const auto& e : apimachinery::dns1123_subdomain_errors(pl)) {
      fe::invalid(causes, "spec.priorityLevelConfiguration.name", go_quote(pl), e);
    }
  }
  const auto rules = objects_at(spec, "rules");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    validate_rule(*rules[i], fe::index("spec.rules", i), causes);
  }
}

// The conditions of a status: types given and not repeated.
void validate_conditions(const json::object& obj, Causes& causes) {
  std::set<std::string> seen;
  const auto conditions = objects_at(object_member(obj, "status"), "conditions");
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    const std::string at = fe::index("status.conditions", i);
    const std::string type = string_at(conditions[i], "type");
    if (!seen.insert(type).second) fe::duplicate(causes, at + ".type", go_quote(type));
    if (type.empty()) fe::required(causes, at + ".type", "must not be empty");
  }
}

// ---- PriorityLevelConfiguration ----

void validate_queuing(const json::object& queuing, const std::string& path, Causes& causes) {
  const std::int64_t limit = int_or_zero(&queuing, "queueLengthLimit");
  if (limit <= 0) {
    fe::invalid(causes, path + ".queueLengthLimit", std::to_string(limit), "must be positive");
  }
  const std::int64_t queues = int_or_zero(&queuing, "queues");
  if (queues <= 0) {
    fe::invalid(causes, path + ".queues", std::to_string(queues), "must be positive");
  } else if (queues > kMaxQueues) {
    fe::invalid(causes, path + ".queues", std::to_string(queues),
                "must not be greater than " + std::to_string(kMaxQueues));
  }
  const std::int64_t hand = int_or_zero(&queuing, "handSize");
  if (hand <= 0) {
    fe::invalid(causes, path + ".handSize", std::to_string(hand), "must be positive");
  } else if (hand > queues) {
    fe::invalid(causes, path + ".handSize", std::to_string(hand),
                "should not be greater than queues (" + std::to_string(queues) + ")");
  } else if (required_entropy_bits(static_cast<int>(queues), static_cast<int>(hand)) >
             kMaxHashBits) {
    fe::invalid(causes, path + ".handSize", std::to_string(hand),
                "required entropy bits of deckSize " + std::to_string(queues) + " and handSize " +
                    std::to_string(hand) + " should not be greater than " +
                    std::to_string(kMaxHashBits));
  }
}

void validate_limit_response(const json::object* response, const std::string& path,
                             Causes& causes) {
  const std::string type = string_at(response, "type");
  const json::object* queuing = object_member(response, "queuing");
  if (type == "Reject") {
    if (queuing != nullptr) {
      fe::forbidden(causes, path + ".queuing",
                    "must be nil if limited.limitResponse.type is not Limited");
    }
  } else if (type == "Queue") {
    if (queuing == nullptr) {
      fe::required(causes, path + ".queuing",
                   "must not be empty if limited.limitResponse.type is Limited");
    } else {
      validate_queuing(*queuing, path + ".queuing", causes);
    }
  } else {
    not_supported(causes, path + ".type", go_quote(type), {"Queue", "Reject"});
  }
}

void validate_percent(const json::object* obj, std::string_view key, const std::string& path,
                      Causes& causes) {
  if (auto p = int_member(obj, key); p && (*p < 0 || *p > 100)) {
    fe::invalid(causes, path + "." + std::string(key), std::to_string(*p),
                "must be between 0 and 100, inclusive");
  }
}

void validate_limited(const json::object& limited, const std::string& path, Causes& causes) {
  const std::int64_t shares = int_or_zero(&limited, "nominalConcurrencyShares");
  if (shares < 0) {
    fe::invalid(causes, path + ".nominalConcurrencyShares", std::to_string(shares),
                "must be a non-negative integer");
  }
  validate_limit_response(object_member(limited, "limitResponse"), path + ".limitResponse",
                          causes);
  validate_percent(&limited, "lendablePercent", path, causes);
  if (auto b = int_member(&limited, "borrowingLimitPercent"); b && *b < 0) {
    fe::invalid(causes, path + ".borrowingLimitPercent", std::to_string(*b),
                "if specified, must be a non-negative integer");
  }
}

void validate_exempt(const json::object& exempt, const std::string& path, Causes& causes) {
  if (auto n = int_member(&exempt, "nominalConcurrencyShares"); n && *n < 0) {
    fe::invalid(causes, path + ".nominalConcurrencyShares", std::to_string(*n),
                "must be a non-negative integer");
  }
  validate_percent(&exempt, "lendablePercent", path, causes);
}

void validate_priority_level_spec(const std::string& name, const json::object* spec,
                                  Causes& causes) {
  const std::string type = string_at(spec, "type");
  if ((name == kPriorityLevelNameExempt) != (type == "Exempt")) {
    fe::invalid(causes, "spec.type", go_quote(type),
                "type must be 'Exempt' if and only if name is 'exempt'");
  }
  const json::object* limited = object_member(spec, "limited");
  const json::object* exempt = object_member(spec, "exempt");
  if (type == "Exempt") {
    if (limited != nullptr) {
      fe::forbidden(causes, "spec.limited", "must be nil if the type is not Limited");
    }
    if (exempt != nullptr) validate_exempt(*exempt, "spec.exempt", causes);
  } else if (type == "Limited") {
    if (exempt != nullptr) fe::forbidden(causes, "spec.exempt", "must be nil if the type is Limited");
    if (limited == nullptr) {
      fe::required(causes, "spec.limited", "must not be empty when type is Limited");
    } else {
      validate_limited(*limited, "spec.limited", causes);
    }
  } else {
    not_supported(causes, "spec.type", go_quote(type), {"Exempt", "Limited"});
  }
}

// ---- the bootstrap objects kube fixes ----

constexpr std::string_view kMandatoryFlowSchemas = R"([
 {"metadata": {"name": "exempt"},
  "spec": {"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1,
   "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
     "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
       "clusterScope": true, "namespaces": ["*"]}],
     "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}},
 {"metadata": {"name": "catch-all"},
  "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 10000,
   "distinguisherMethod": {"type": "ByUser"},
   "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:unauthenticated"}},
                           {"kind": "Group", "group": {"name": "system:authenticated"}}],
     "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
       "clusterScope": true, "namespaces": ["*"]}],
     "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
])";

constexpr std::string_view kMandatoryPriorityLevels = R"([
 {"metadata": {"name": "catch-all"},
  "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
    "limitResponse": {"type": "Reject"}}}},
 {"metadata": {"name": "exempt"},
  "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}
])";

std::vector<json::object> bootstrap_objects(std::string_view text, std::string_view kind,
                                            void (*defaults)(json::object&)) {
  std::vector<json::object> out;
  json::value parsed = json::parse(text);
  for (auto& item : parsed.as_array()) {
    json::object obj = std::move(item.as_object());
    json::object with_type{{"apiVersion", "flowcontrol.apiserver.k8s.io/v1"}, {"kind", kind}};
    for (auto& [k, v] : obj) with_type[k] = std::move(v);
    with_type["metadata"].as_object()["annotations"] =
        json::object{{kAutoUpdateAnnotation, "true"}};
    defaults(with_type);
    out.push_back(std::move(with_type));
  }
  return out;
}

const json::object* mandatory_spec(const std::vector<json::object>& objects,
                                   const std::string& name) {
  for (const json::object& o : objects) {
    if (string_at(object_member(o, "metadata"), "name") == name) return object_member(o, "spec");
  }
  return nullptr;
}

}  // namespace

int required_entropy_bits(int deck_size, int hand_size) {
  return static_cast<int>(std::ceil(std::log2(static_cast<double>(deck_size)) *
                                    static_cast<double>(hand_size)));
}

void default_flow_schema(json::object& fs) {
  json::value& spec = fs["spec"];
  if (!spec.is_object()) spec = json::object();
  set_if_zero(spec.get_object(), "matchingPrecedence", 1000);
}

void default_priority_level_configuration(json::object& pl) {
  json::object* spec = object_member(pl, "spec");
  if (spec == nullptr) return;
  if (json::object* limited = object_member(*spec, "limited")) {
    set_if_absent(*limited, "nominalConcurrencyShares", 30);
    set_if_absent(*limited, "lendablePercent", 0);
    if (json::object* response = object_member(*limited, "limitResponse")) {
      if (json::object* queuing = object_member(*response, "queuing")) {
        set_if_zero(*queuing, "handSize", 8);
        set_if_zero(*queuing, "queues", 64);
        set_if_zero(*queuing, "queueLengthLimit", 50);
      }
    }
  }
  if (json::object* exempt = object_member(*spec, "exempt")) {
    set_if_absent(*exempt, "nominalConcurrencyShares", 0);
    set_if_absent(*exempt, "lendablePercent", 0);
  }
}

std::vector<json::object> mandatory_flow_schemas() {
  return bootstrap_objects(kMandatoryFlowSchemas, "FlowSchema", default_flow_schema);
}

std::vector<json::object> mandatory_priority_level_configurations() {
  return bootstrap_objects(kMandatoryPriorityLevels, "PriorityLevelConfiguration",
                           default_priority_level_configuration);
}

void validate_flow_schema(const json::object& fs, const json::object*, Causes& causes) {
  const std::string name = string_at(object_member(fs, "metadata"), "name");
  const json::object* spec = object_member(fs, "spec");
  validate_flow_schema_spec(name, spec, causes);
  static const std::vector<json::object> kMandatory = mandatory_flow_schemas();
  if (const json::object* fixed = mandatory_spec(kMandatory, name)) {
    if (canonical(kFlowSchemaSpec, spec) != canonical(kFlowSchemaSpec, fixed)) {
      fe::invalid(causes, "spec", go_struct(kFlowSchemaSpec, spec),
                  "spec of '" + name + "' must equal the fixed value");
    }
  }
  validate_conditions(fs, causes);
}

void validate_priority_level_configuration(const json::object& pl, const json::object*,
                                           Causes& causes) {
  const std::string name = string_at(object_member(pl, "metadata"), "name");
  const json::object* spec = object_member(pl, "spec");
  validate_priority_level_spec(name, spec, causes);
  static const std::vector<json::object> kMandatory = mandatory_priority_level_configurations();
  if (const json::object* fixed = mandatory_spec(kMandatory, name)) {
    json::value have = canonical(kPriorityLevelSpec, spec);
    json::value want = canonical(kPriorityLevelSpec, fixed);
    // The exempt level's spec.exempt is the administrator's to tune; the rest is fixed.
    const bool exempt = name == kPriorityLevelNameExempt;
    if (exempt) have.as_object()["exempt"] = want.as_object()["exempt"];
    if (have != want) {
      fe::invalid(causes, "spec", go_struct(kPriorityLevelSpec, spec),
                  "spec of '" + name + "' " +
                      (exempt ? "except the 'spec.exempt' field must equal the fixed value"
                              : "must equal the fixed value"));
    }
  }
  validate_conditions(pl, causes);
}

std::string flow_schema_missing_pl_cell(const json::object& fs) {
  for (const json::object* c : objects_at(object_member(fs, "status"), "conditions")) {
    if (string_at(c, "type") == "Dangling") return string_at(c, "status");
  }
  return "?";
}

std::string flow_schema_distinguisher_cell(const json::object& fs) {
  const json::object* method = object_member(object_member(fs, "spec"), "distinguisherMethod");
  return method != nullptr ? string_at(method, "type") : "<none>";
}

}  // namespace kwatch::kinds
