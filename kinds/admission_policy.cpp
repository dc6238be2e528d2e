#include "kinds/admission_policy.hpp"

#include "kinds/authorizer_library.hpp"
#include "kinds/field_errors.hpp"
#include "kinds/scheme.hpp"
#include "schema/structural_schema.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "cel/checker.hpp"
#include "cel/cost_estimator.hpp"
#include "cel/functions.hpp"
#include "cel/libraries.hpp"
#include "cel/parser.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <set>
#include <span>
#include <string_view>

// The rules and texts follow kube-apiserver 1.34: pkg/apis/admissionregistration/validation and
// k8s.io/apiserver's plugin/cel compiler.

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::Cause;
using apimachinery::array_member;
using apimachinery::go_quote;
using apimachinery::has_line_break;
using apimachinery::trim_space;
using apimachinery::object_member;
using apimachinery::string_at;
using field_errors::check_label_selector;
using field_errors::index;
using field_errors::string_items;
using field_errors::duplicate;
using field_errors::forbidden;
using field_errors::invalid;
using field_errors::not_supported;
using field_errors::required;
using field_errors::too_many;
using Causes = std::vector<Cause>;

namespace {

cel::TypePtr object_type(std::string name,
                         std::initializer_list<std::pair<const char*, cel::TypePtr>> fields) {
  auto t = std::make_shared<cel::Type>();
  t->kind = cel::TypeKind::object;
  t->name = std::move(name);
  for (const auto& [n, type] : fields) t->fields.emplace(n, type);
  return t;
}

cel::TypePtr strings() { return cel::types::list(cel::types::string()); }

// What an expression of one place in a policy may see, and must give.
enum class Place {
  match_condition,
  variable,
  validation,
  message,
  audit_annotation,
  apply_configuration,
  json_patch
};

// jsonpatch.escapeKey(k): `~` as `~0` and `/` as `~1`, for a key in a JSON Patch path.
cel::Value escape_key(std::span<const cel::Value> args, cel::EvalBudget& budget) {
  const std::string_view key = args[0].as_text();
  budget.charge(1 + key.size() / 10);
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return cel::Value::string(std::move(out));
}

// Kube's libraries and the authorizer library: what every policy expression may call.
const cel::FunctionRegistry& policy_functions() {
  static const cel::FunctionRegistry kRegistry = [] {
    cel::FunctionRegistry r = cel::kubernetes_functions();
    add_authorizer_library(r);
    return r;
  }();
  return kRegistry;
}

// And for mutations the JSON Patch library.
const cel::FunctionRegistry& mutation_functions() {
  static const cel::FunctionRegistry kRegistry = [] {
    cel::FunctionRegistry r = policy_functions();
    r.add("jsonpatch.escapeKey", "jsonpatch_escape_key_string", false, "string -> string",
          escape_key);
    return r;
  }();
  return kRegistry;
}

// The message types a mutation builds: `Object` and its fields' types (`Object.spec`,
// `Object.spec.template`, any field), and `JSONPatch`.
cel::TypePtr mutation_message_type(std::string_view name) {
  if (name == "JSONPatch") return json_patch_type();
  if (name != "Object" && !name.starts_with("Object.")) return nullptr;
  auto t = std::make_shared<cel::Type>();
  t->kind = cel::TypeKind::object;
  t->name = std::string(name);
  t->open = true;
  return t;
}

class PolicyCompiler {
 public:
  // `object` and `params` types other than dyn (type checking against a kind's schema).
  struct Types {
    cel::TypePtr object, params;
  };

  PolicyCompiler(bool has_params, bool mutating, Types types = {})
      : has_params_(has_params), mutating_(mutating), types_(std::move(types)) {
    variables_type_ = std::make_shared<cel::Type>();
    variables_type_->kind = cel::TypeKind::object;
    variables_type_->name = "kubernetes.variables";
  }

  PolicyExpression compile(const std::string& source, Place place) const {
    PolicyExpression out;
    out.source = source;
    cel::Parsed parsed = cel::parse(source);
    if (!parsed.errors.empty()) {
      out.compile_error = "compilation failed: " + cel::format_issues(source, parsed.errors);
      return out;
    }
    const auto& all = policy_variable_names();
    for (const cel::Node& node : parsed.ast.nodes) {
      if (node.kind != cel::NodeKind::ident) continue;
      for (std::size_t slot = 0; slot < all.size(); ++slot) {
        if (node.name == all[slot]) out.slots |= 1U << slot;
      }
      // `authorizer.requestResource` is a select on `authorizer` in the tree.
      if (node.name == "authorizer") out.slots |= 1U << slot_request_resource;
    }
    // Names that are not declared here are left out: the checker then reports them as kube's
    // does ("undeclared reference to 'params'").
    const auto& names = policy_variable_names();
    std::vector<std::string> visible;
    std::vector<cel::TypePtr> types;
    for (std::size_t slot = 0; slot < policy_slot_count; ++slot) {
      if (slot == slot_params && !has_params_) continue;
      if ((slot == slot_authorizer || slot == slot_request_resource) && place == Place::message) {
        continue;
      }
      if (slot == slot_variables && place == Place::match_condition) continue;
      visible.push_back(names[slot]);
      types.push_back(type_of_slot(slot));
    }
    cel::CheckOptions options;
    options.homogeneous_literals = true;
    options.validate_literals = true;
    if (mutating_) options.message_type = mutation_message_type;
    const cel::FunctionRegistry& functions =
        mutating_ ? mutation_functions() : policy_functions();
    const cel::Checked checked = cel::check(parsed.ast, visible, types, functions, options);
    if (!checked.errors.empty()) {
      out.compile_error = "compilation failed: " + cel::format_issues(source, checked.errors);
      return out;
    }
    out.result = checked.result;
    if (auto wrong = wrong_result(*checked.result, place)) {
      out.compile_error = *wrong;
      return out;
    }
    out.max_cost = cel::estimate_cost(parsed.ast, checked).max;
    cel::Declarations declarations{names, &functions, &checked.types};
    declarations.message_literals = mutating_;
    out.program = cel::Program::compile(parsed.ast, declarations);
    return out;
  }

  // A variable compiled: later expressions see `variables.<name>` with its type.
  void declare_variable(const std::string& name, const cel::TypePtr& type) {
    variables_type_->fields[name] = type ? type : cel::types::dyn();
  }

 private:
  cel::TypePtr type_of_slot(std::size_t slot) const {
    switch (slot) {
      case slot_request:
        return admission_request_type();
      case slot_namespace_object:
        return namespace_object_type();
      case slot_authorizer:
        return cel::types::opaque("kubernetes.authorization.Authorizer");
      case slot_request_resource:
        return cel::types::opaque("kubernetes.authorization.ResourceCheck");
      case slot_variables:
        return variables_type_;
      case slot_object:
      case slot_old_object:
        return types_.object ? types_.object : cel::types::dyn();
      case slot_params:
        return types_.params ? types_.params : cel::types::dyn();
      default:
        return cel::types::dyn();
    }
  }

  static std::optional<std::string> wrong_result(const cel::Type& t, Place place) {
    if (t.kind == cel::TypeKind::dyn || t.kind == cel::TypeKind::error) return std::nullopt;
    switch (place) {
      case Place::match_condition:
      case Place::validation:
        if (t.kind == cel::TypeKind::boolean) return std::nullopt;
        return "must evaluate to bool but got " + cel::format_type(t);
      case Place::message:
        if (t.kind == cel::TypeKind::string) return std::nullopt;
        return "must evaluate to string but got " + cel::format_type(t);
      case Place::audit_annotation:
        if (t.kind == cel::TypeKind::string || t.kind == cel::TypeKind::null_type) {
          return std::nullopt;
        }
        return "must evaluate to one of [string null_type] but got " + cel::format_type(t);
      case Place::variable:
        return std::nullopt;
      case Place::apply_configuration:
        if (t.kind == cel::TypeKind::object && t.name == "Object") return std::nullopt;
        return "must evaluate to Object but got " + cel::format_type(t);
      case Place::json_patch:
        if (t.kind == cel::TypeKind::list && !t.params.empty() &&
            (t.params[0]->kind == cel::TypeKind::dyn ||
             (t.params[0]->kind == cel::TypeKind::object && t.params[0]->name == "JSONPatch"))) {
          return std::nullopt;
        }
        return "must evaluate to list(JSONPatch) but got " + cel::format_type(t);
    }
    return std::nullopt;
  }

  bool has_params_;
  bool mutating_;
  Types types_;
  std::shared_ptr<cel::Type> variables_type_;
};

const json::array* items(const json::object* obj, std::string_view key) {
  return array_member(obj, key);
}

std::string shown_list(const json::object* obj, std::string_view key) {
  const json::array* a = items(obj, key);
  return a != nullptr ? json::serialize(*a) : "null";
}

bool has_star(const std::vector<std::string>& v) {
  return std::find(v.begin(), v.end(), "*") != v.end();
}

// A CEL compile error as kube's validation reports it: an expression that does not check is an
// Invalid value (the expression) with the compiler's detail.
void report(Causes& causes, const std::string& path, const PolicyExpression& e) {
  if (!e.compile_error.empty()) invalid(causes, path, go_quote(e.source), e.compile_error);
}

// validateResources (subresources allowed).
void check_resources(const std::vector<std::string>& resources, const json::object* rule,
                     const std::string& path, Causes& causes) {
  if (resources.empty()) required(causes, path);
  std::set<std::string> wildcard_subresources_of, resources_with_any_subresource;
  bool double_wildcard = false, single_wildcard = false, plain = false;
  for (std::size_t i = 0; i < resources.size(); ++i) {
    const std::string& r = resources[i];
    if (r.empty()) {
      required(causes, index(path, i));
      continue;
    }
    if (r == "*/*") double_wildcard = true;
    if (r == "*") single_wildcard = true;
    const auto slash = r.find('/');
    if (slash == std::string::npos) {
      plain = r != "*";
      continue;
    }
    const std::string res = r.substr(0, slash), sub = r.substr(slash + 1);
    if (wildcard_subresources_of.contains(res)) {
      invalid(causes, index(path, i), go_quote(r),
              "if '" + res + "/*' is present, must not specify " + r);
    }
    if (resources_with_any_subresource.contains(sub)) {
      invalid(causes, index(path, i), go_quote(r),
              "if '*/" + sub + "' is present, must not specify " + r);
    }
    if (sub == "*") wildcard_subresources_of.insert(res);
    if (res == "*") resources_with_any_subresource.insert(sub);
  }
  if (resources.size() > 1 && double_wildcard) {
    invalid(causes, path, shown_list(rule, "resources"),
            "if '*/*' is present, must not specify other resources");
  }
  if (single_wildcard && plain) {
    invalid(causes, path, shown_list(rule, "resources"),
            "if '*' is present, must not specify other resources without subresources");
  }
}

// validateNamedRuleWithOperations.
void check_rule(const json::object* rule, const std::string& path, Causes& causes) {
  const auto names = string_items(rule, "resourceNames");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (const auto& e : apimachinery::path_segment_errors(names[i])) {
      invalid(causes, index(path + ".resourceNames", i), go_quote(names[i]), e);
    }
    if (!seen.insert(names[i]).second) {
      duplicate(causes, index(path + ".resourceNames", i), go_quote(names[i]));
    }
  }
  const auto operations = string_items(rule, "operations");
  if (operations.empty()) required(causes, path + ".operations");
  if (operations.size() > 1 && has_star(operations)) {
    invalid(causes, path + ".operations", shown_list(rule, "operations"),
            "if '*' is present, must not specify other operations");
  }
  for (std::size_t i = 0; i < operations.size(); ++i) {
    const std::string& op = operations[i];
    if (op != "*" && op != "CREATE" && op != "UPDATE" && op != "DELETE" && op != "CONNECT") {
      not_supported(causes, index(path + ".operations", i), op,
                    {"*", "CONNECT", "CREATE", "DELETE", "UPDATE"});
    }
  }
  const auto groups = string_items(rule, "apiGroups");
  if (groups.empty()) required(causes, path + ".apiGroups");
  if (groups.size() > 1 && has_star(groups)) {
    invalid(causes, path + ".apiGroups", shown_list(rule, "apiGroups"),
            "if '*' is present, must not specify other API groups");
  }
  const auto versions = string_items(rule, "apiVersions");
  if (versions.empty()) required(causes, path + ".apiVersions");
  if (versions.size() > 1 && has_star(versions)) {
    invalid(causes, path + ".apiVersions", shown_list(rule, "apiVersions"),
            "if '*' is present, must not specify other API versions");
  }
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (versions[i].empty()) required(causes, index(path + ".apiVersions", i));
  }
  check_resources(string_items(rule, "resources"), rule, path + ".resources", causes);
  if (rule != nullptr && rule->contains("scope")) {
    const std::string scope = string_at(rule, "scope");
    if (scope != "*" && scope != "Cluster" && scope != "Namespaced") {
      not_supported(causes, path + ".scope", scope, {"*", "Cluster", "Namespaced"});
    }
  }
}

// validateMatchResources.
void check_match_resources(const json::object& match, const std::string& path, Causes& causes) {
  const std::string policy = string_at(match, "matchPolicy");
  if (!match.contains("matchPolicy")) {
    required(causes, path + ".matchPolicy");
  } else if (policy != "Exact" && policy != "Equivalent") {
    not_supported(causes, path + ".matchPolicy", policy, {"Equivalent", "Exact"});
  }
  for (const char* selector : {"namespaceSelector", "objectSelector"}) {
    if (const json::object* s = object_member(match, selector)) {
      check_label_selector(*s, path + "." + selector, causes);
    } else {
      required(causes, path + "." + selector);
    }
  }
  for (const char* rules : {"resourceRules", "excludeResourceRules"}) {
    if (const json::array* a = items(&match, rules)) {
      for (std::size_t i = 0; i < a->size(); ++i) {
        check_rule((*a)[i].if_object(), index(path + "." + rules, i), causes);
      }
    }
  }
}

// A CEL identifier that is not a reserved word (kube's variable names).
bool cel_identifier(std::string_view name) {
  static const std::set<std::string_view> kReserved = {
      "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
      "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
      "void", "while"};
  if (name.empty() || kReserved.contains(name)) return false;
  auto alpha = [](char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

// validateParamKind.
void check_param_kind(const json::object& kind, Causes& causes) {
  const std::string path = "spec.paramKind";
  const std::string api_version = string_at(kind, "apiVersion");
  if (api_version.empty()) {
    required(causes, path + ".apiVersion");
  } else if (std::count(api_version.begin(), api_version.end(), '/') > 1) {
    invalid(causes, path + ".apiVersion", go_quote(api_version),
            "unexpected GroupVersion string: " + api_version);
  } else {
    const auto [group, version] = parse_group_version(api_version);
    if (!group.empty()) {
      std::string joined;
      for (const auto& e : apimachinery::dns1123_subdomain_errors(group)) {
        joined += (joined.empty() ? "" : ",") + e;
      }
      if (!joined.empty()) invalid(causes, path + ".apiVersion", go_quote(group), joined);
    }
    if (version.empty()) {
      invalid(causes, path + ".apiVersion", go_quote(api_version), "version must be specified");
    } else {
      std::string joined;
      for (const auto& e : apimachinery::dns1035_label_errors(version)) {
        joined += (joined.empty() ? "" : ",") + e;
      }
      if (!joined.empty()) invalid(causes, path + ".apiVersion", go_quote(version), joined);
    }
  }
  const std::string kind_name = string_at(kind, "kind");
  if (kind_name.empty()) {
    required(causes, path + ".kind");
  } else {
    std::string lower = kind_name;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string joined;
    for (const auto& e : apimachinery::dns1035_label_errors(lower)) {
      joined += (joined.empty() ? "" : ",") + e;
    }
    if (!joined.empty()) {
      invalid(causes, path + ".kind", go_quote(kind_name),
              "may have mixed case, but should otherwise match: " + joined);
    }
  }
}

// The expressions a stored policy already holds at `list[].field` (an update may keep them).
bool same_match_conditions(const json::object* spec, const json::object* old_spec) {
  auto value = [](const json::object* s, std::string_view key) {
    const json::value* v = s != nullptr ? s->if_contains(key) : nullptr;
    return v != nullptr ? *v : json::value();
  };
  return old_spec != nullptr && value(spec, "paramKind") == value(old_spec, "paramKind") &&
         value(spec, "matchConditions") == value(old_spec, "matchConditions");
}

template <class Fn>
void for_each_object(const json::object* spec, std::string_view key, Fn&& fn) {
  static const json::object kEmpty;
  if (const json::array* a = items(spec, key)) {
    for (const auto& v : *a) fn(v.is_object() ? v.get_object() : kEmpty);
  }
}

// A mutating policy never sees a delete: DELETE (or a rule that would include it) is refused.
void check_no_delete(const json::object& match, const std::string& path, Causes& causes) {
  for (const char* rules : {"resourceRules", "excludeResourceRules"}) {
    if (const json::array* a = items(&match, rules)) {
      for (const auto& rule : *a) {
        for (const auto& op : string_items(rule.if_object(), "operations")) {
          if (op == "DELETE") {
            not_supported(causes, path + "." + rules + ".operations", op,
                          {"*", "CONNECT", "CREATE", "UPDATE"});
          }
        }
      }
    }
  }
}

}  // namespace

void check_admission_rule(const json::object* rule, const std::string& path, Causes& causes) {
  check_rule(rule, path, causes);
}

PolicyExpression compile_webhook_match_condition(const std::string& expression) {
  // kube's webhook environment: the policy variables without params and variables; the result
  // must be a bool (dyn is not enough).
  PolicyCompiler compiler(/*has_params=*/false, /*mutating=*/false);
  PolicyExpression out = compiler.compile(expression, Place::match_condition);
  if (out.compile_error.empty() && out.result && out.result->kind != cel::TypeKind::boolean) {
    out.compile_error = "must evaluate to bool";
    out.program.reset();
  }
  return out;
}

const std::vector<std::string>& policy_variable_names() {
  static const std::vector<std::string> kNames = {
      "object",     "oldObject",  "request", "params", "namespaceObject",
      "authorizer", "authorizer.requestResource", "variables"};
  return kNames;
}

cel::TypePtr admission_request_type() {
  static const cel::TypePtr kType = [] {
    using namespace cel::types;
    auto gvk = object_type("kubernetes.GroupVersionKind",
                           {{"group", string()}, {"version", string()}, {"kind", string()}});
    auto gvr = object_type("kubernetes.GroupVersionResource",
                           {{"group", string()}, {"version", string()}, {"resource", string()}});
    auto user = object_type("kubernetes.UserInfo",
                            {{"username", string()},
                             {"uid", string()},
                             {"groups", strings()},
                             {"extra", map(string(), strings())}});
    return object_type("kubernetes.AdmissionRequest",
                       {{"kind", gvk},
                        {"resource", gvr},
                        {"subResource", string()},
                        {"requestKind", gvk},
                        {"requestResource", gvr},
                        {"requestSubResource", string()},
                        {"name", string()},
                        {"namespace", string()},
                        {"operation", string()},
                        {"userInfo", user},
                        {"dryRun", boolean()},
                        {"options", dyn()}});
  }();
  return kType;
}

cel::TypePtr namespace_object_type() {
  static const cel::TypePtr kType = [] {
    using namespace cel::types;
    auto meta = object_type("kubernetes.NamespaceMetadata",
                            {{"name", string()},
                             {"generateName", string()},
                             {"namespace", string()},
                             {"labels", map(string(), string())},
                             {"annotations", map(string(), string())},
                             {"UID", string()},
                             {"creationTimestamp", timestamp()},
                             {"deletionGracePeriodSeconds", int64()},
                             {"deletionTimestamp", timestamp()},
                             {"generation", int64()},
                             {"resourceVersion", string()},
                             {"finalizers", strings()}});
    auto condition = object_type("kubernetes.NamespaceCondition",
                                 {{"status", string()},
                                  {"type", string()},
                                  {"lastTransitionTime", timestamp()},
                                  {"message", string()},
                                  {"reason", string()}});
    auto spec = object_type("kubernetes.NamespaceSpec", {{"finalizers", strings()}});
    auto status = object_type("kubernetes.NamespaceStatus",
                              {{"conditions", list(condition)}, {"phase", string()}});
    return object_type("kubernetes.Namespace",
                       {{"metadata", meta}, {"spec", spec}, {"status", status}});
  }();
  return kType;
}

cel::TypePtr json_patch_type() {
  static const cel::TypePtr kType =
      object_type("JSONPatch", {{"op", cel::types::string()},
                                {"path", cel::types::string()},
                                {"from", cel::types::string()},
                                {"value", cel::types::dyn()}});
  return kType;
}

namespace {

// What both policy kinds compile alike: identity, params, failure policy, match conditions and
// variables. Returns the compiler, with the variables declared, for the rest.
PolicyCompiler compile_common(const json::object& policy, bool mutating, CompiledPolicy& out,
                              PolicyCompiler::Types types = {}) {
  const json::object* meta = object_member(policy, "metadata");
  const json::object* spec = object_member(policy, "spec");
  out.name = string_at(meta, "name");
  if (const json::value* g = meta != nullptr ? meta->if_contains("generation") : nullptr) {
    if (g->is_int64()) out.generation = g->get_int64();
  }
  const json::object* param_kind = object_member(spec, "paramKind");
  out.has_param_kind = param_kind != nullptr;
  out.param_api_version = string_at(param_kind, "apiVersion");
  out.param_kind = string_at(param_kind, "kind");
  out.fail_closed = string_at(spec, "failurePolicy") != "Ignore";
  PolicyCompiler compiler(out.has_param_kind, mutating, std::move(types));
  for_each_object(spec, "matchConditions", [&](const json::object& c) {
    out.match_conditions.push_back(
        {string_at(c, "name"), compiler.compile(string_at(c, "expression"), Place::match_condition)});
  });
  for_each_object(spec, "variables", [&](const json::object& v) {
    CompiledPolicy::Named named{string_at(v, "name"),
                                compiler.compile(string_at(v, "expression"), Place::variable)};
    compiler.declare_variable(named.name, named.expression.result);
    out.variables.push_back(std::move(named));
  });
  for (const auto& c : out.match_conditions) out.add(c.expression);
  for (const auto& v : out.variables) out.add(v.expression);
  return compiler;
}

// What both policy kinds check alike: failurePolicy, paramKind, matchConstraints, match
// conditions and variables (compiled in `compiled`).
void check_common(const json::object* spec, const json::object* old_spec,
                  const CompiledPolicy& compiled, bool mutating, Causes& causes) {
  const std::string failure = string_at(spec, "failurePolicy");
  if (spec == nullptr || !spec->contains("failurePolicy")) {
    required(causes, "spec.failurePolicy");
  } else if (failure != "Fail" && failure != "Ignore") {
    not_supported(causes, "spec.failurePolicy", failure, {"Fail", "Ignore"});
  }
  const json::object* param_kind = object_member(spec, "paramKind");
  if (param_kind != nullptr) check_param_kind(*param_kind, causes);
  if (const json::object* match = object_member(spec, "matchConstraints")) {
    check_match_resources(*match, "spec.matchConstraints", causes);
    const json::array* rules = items(match, "resourceRules");
    if (rules == nullptr || rules->empty()) {
      required(causes, "spec.matchConstraints.resourceRules");
    }
    if (mutating) check_no_delete(*match, "spec.matchConstraints", causes);
  } else {
    required(causes, "spec.matchConstraints");
  }
  const json::array* conditions = items(spec, "matchConditions");
  if (conditions != nullptr && !same_match_conditions(spec, old_spec)) {
    if (conditions->size() > 64) too_many(causes, "spec.matchConditions", conditions->size(), 64);
    std::set<std::string> names;
    for (std::size_t i = 0; i < conditions->size(); ++i) {
      const json::object* c = (*conditions)[i].if_object();
      const std::string at = index("spec.matchConditions", i);
      const std::string expression = string_at(c, "expression");
      if (trim_space(expression).empty()) {
        required(causes, at + ".expression");
      } else {
        report(causes, at + ".expression", compiled.match_conditions[i].expression);
      }
      const std::string n = string_at(c, "name");
      if (n.empty()) {
        required(causes, at + ".name");
      } else {
        for (const auto& e : apimachinery::qualified_name_errors(n)) {
          invalid(causes, at + ".name", go_quote(n), e);
        }
        if (!names.insert(n).second) duplicate(causes, at + ".name", go_quote(n));
      }
    }
  }
  if (const json::array* variables = items(spec, "variables")) {
    for (std::size_t i = 0; i < variables->size(); ++i) {
      const json::object* v = (*variables)[i].if_object();
      const std::string at = index("spec.variables", i);
      const std::string n = string_at(v, "name");
      if (trim_space(n).empty()) {
        required(causes, at + ".name", "name is not specified");
      } else if (!cel_identifier(n)) {
        invalid(causes, at + ".name", go_quote(n), "name is not a valid CEL identifier");
      }
      if (trim_space(string_at(v, "expression")).empty()) {
        required(causes, at + ".expression", "expression is not specified");
      } else {
        report(causes, at + ".expression", compiled.variables[i].expression);
      }
    }
  }
}

// What both binding kinds check alike: policyName, paramRef, matchResources.
void check_binding_common(const json::object* spec, bool mutating, Causes& causes) {
  const std::string policy = string_at(spec, "policyName");
  if (policy.empty()) {
    required(causes, "spec.policyName");
  } else {
    for (const auto& e : apimachinery::dns1123_subdomain_errors(policy)) {
      invalid(causes, "spec.policyName", go_quote(policy), e);
    }
  }
  if (const json::object* ref = object_member(spec, "paramRef")) {
    const std::string name = string_at(ref, "name");
    const json::object* selector = object_member(ref, "selector");
    if (!name.empty()) {
      for (const auto& e : apimachinery::path_segment_errors(name)) {
        invalid(causes, "spec.paramRef.name", go_quote(name), e);
      }
      if (selector != nullptr) {
        forbidden(causes, "spec.paramRef.name", "name and selector are mutually exclusive");
      }
    }
    if (selector != nullptr) {
      check_label_selector(*selector, "spec.paramRef.selector", causes);
      if (!name.empty()) {
        forbidden(causes, "spec.paramRef.selector", "name and selector are mutually exclusive");
      }
    }
    if (name.empty() && selector == nullptr) {
      required(causes, "spec.paramRef", "one of name or selector must be specified");
    }
    const std::string action = string_at(ref, "parameterNotFoundAction");
    if (action.empty()) {
      required(causes, "spec.paramRef.parameterNotFoundAction");
    } else if (action != "Deny" && action != "Allow") {
      not_supported(causes, "spec.paramRef.parameterNotFoundAction", action, {"Deny", "Allow"});
    }
  }
  if (const json::object* match = object_member(spec, "matchResources")) {
    check_match_resources(*match, "spec.matchResources", causes);
    if (mutating) check_no_delete(*match, "spec.matchResources", causes);
  }
}

}  // namespace

namespace {

std::shared_ptr<const CompiledPolicy> compile_validating(const json::object& policy,
                                                         PolicyCompiler::Types types) {
  auto out = std::make_shared<CompiledPolicy>();
  const json::object* spec = object_member(policy, "spec");
  PolicyCompiler compiler = compile_common(policy, /*mutating=*/false, *out, std::move(types));
  for_each_object(spec, "validations", [&](const json::object& v) {
    CompiledPolicy::Validation validation;
    validation.expression = compiler.compile(string_at(v, "expression"), Place::validation);
    const std::string message_expression = string_at(v, "messageExpression");
    if (!trim_space(message_expression).empty()) {
      validation.message_expression = compiler.compile(message_expression, Place::message);
    }
    validation.message = std::string(trim_space(string_at(v, "message")));
    validation.reason = string_at(v, "reason");
    out->validations.push_back(std::move(validation));
  });
  for_each_object(spec, "auditAnnotations", [&](const json::object& a) {
    out->audit_annotations.push_back(
        {string_at(a, "key"),
         compiler.compile(string_at(a, "valueExpression"), Place::audit_annotation)});
  });
  for (const auto& v : out->validations) {
    out->add(v.expression);
    if (v.message_expression) out->add(*v.message_expression);
  }
  for (const auto& a : out->audit_annotations) out->add(a.value);
  return out;
}

// A resource as kube formats a GroupVersionKind: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
std::string gvk_string(const ResourceInfo& info) {
  return info.group + "/" + info.version + ", Kind=" + info.kind;
}

}  // namespace

std::shared_ptr<const CompiledPolicy> compile_validating_policy(const json::object& policy) {
  return compile_validating(policy, {});
}

std::vector<ExpressionWarning> type_check_validating_policy(const json::object& policy,
                                                            const Scheme& scheme) {
  const json::object* spec = object_member(policy, "spec");
  // The kinds the rules name exactly (no wildcard, no subresource), at most 10, in order.
  std::vector<std::shared_ptr<const ResourceInfo>> kinds;
  if (const json::array* rules = items(object_member(spec, "matchConstraints"), "resourceRules")) {
    for (const auto& rule : *rules) {
      const json::object* r = rule.if_object();
      const auto groups = string_items(r, "apiGroups");
      const auto versions = string_items(r, "apiVersions");
      const auto resources = string_items(r, "resources");
      if (has_star(groups) || has_star(versions) || has_star(resources)) continue;
      for (const auto& g : groups) {
        for (const auto& v : versions) {
          for (const auto& res : resources) {
            if (res.find('/') != std::string::npos) continue;
            auto info = scheme.find(g, v, res);
            if (!info || !info->schema) continue;
            const bool known = std::any_of(kinds.begin(), kinds.end(), [&](const auto& k) {
              return k->group == info->group && k->version == info->version &&
                     k->kind == info->kind;
            });
            if (!known) kinds.push_back(std::move(info));
          }
        }
      }
    }
  }
  std::sort(kinds.begin(), kinds.end(),
            [](const auto& a, const auto& b) { return gvk_string(*a) < gvk_string(*b); });
  if (kinds.size() > 10) kinds.resize(10);
  cel::TypePtr params;
  if (const json::object* param_kind = object_member(spec, "paramKind")) {
    const std::string api_version = string_at(param_kind, "apiVersion");
    const auto [group, version] = parse_group_version(api_version);
    auto info = scheme.find_kind(group, version, string_at(param_kind, "kind"));
    if (info && info->schema) params = info->schema->object_cel_type("params");
  }
  const std::size_t validations = items(spec, "validations") ? items(spec, "validations")->size() : 0;
  std::vector<std::string> expression_pieces(validations), message_pieces(validations);
  for (const auto& info : kinds) {
    const auto typed = compile_validating(
        policy, {info->schema->object_cel_type("object"), params});
    for (std::size_t i = 0; i < typed->validations.size() && i < validations; ++i) {
      const auto& v = typed->validations[i];
      auto note = [&](std::vector<std::string>& pieces, const PolicyExpression& e) {
        if (e.compile_error.empty()) return;
        if (!pieces[i].empty()) pieces[i] += "\n";
        pieces[i] += gvk_string(*info) + ": " + e.compile_error + "\n";
      };
      note(expression_pieces, v.expression);
      if (v.message_expression) note(message_pieces, *v.message_expression);
    }
  }
  std::vector<ExpressionWarning> out;
  for (std::size_t i = 0; i < validations; ++i) {
    const std::string at = index("spec.validations", i);
    if (!expression_pieces[i].empty()) out.push_back({at + ".expression", expression_pieces[i]});
    if (!message_pieces[i].empty()) out.push_back({at + ".messageExpression", message_pieces[i]});
  }
  return out;
}

std::shared_ptr<const CompiledPolicy> compile_mutating_policy(const json::object& policy) {
  auto out = std::make_shared<CompiledPolicy>();
  const json::object* spec = object_member(policy, "spec");
  PolicyCompiler compiler = compile_common(policy, /*mutating=*/true, *out);
  out->reinvoke = string_at(spec, "reinvocationPolicy") == "IfNeeded";
  for_each_object(spec, "mutations", [&](const json::object& m) {
    CompiledPolicy::Mutation mutation;
    mutation.json_patch = string_at(m, "patchType") == "JSONPatch";
    const json::object* holder =
        object_member(m, mutation.json_patch ? "jsonPatch" : "applyConfiguration");
    mutation.expression =
        compiler.compile(string_at(holder, "expression"),
                         mutation.json_patch ? Place::json_patch : Place::apply_configuration);
    out->mutations.push_back(std::move(mutation));
  });
  for (const auto& m : out->mutations) out->add(m.expression);
  return out;
}

void validate_validating_admission_policy(const json::object& policy, const json::object* old,
                                          Causes& causes) {
  const json::object* spec = object_member(policy, "spec");
  const json::object* old_spec = old != nullptr ? object_member(*old, "spec") : nullptr;
  const std::string name = string_at(object_member(policy, "metadata"), "name");
  // Compiled as the plugin compiles them, so that the errors are the plugin's.
  const auto compiled = compile_validating_policy(policy);
  check_common(spec, old_spec, *compiled, /*mutating=*/false, causes);
  const json::array* validations = items(spec, "validations");
  const json::array* annotations = items(spec, "auditAnnotations");
  if ((validations == nullptr || validations->empty()) &&
      (annotations == nullptr || annotations->empty())) {
    constexpr std::string_view kOne = "validations or auditAnnotations must contain at least one item";
    required(causes, "spec.validations", kOne);
    required(causes, "spec.auditAnnotations", kOne);
    return;
  }
  if (validations != nullptr) {
    for (std::size_t i = 0; i < validations->size(); ++i) {
      const json::object* v = (*validations)[i].if_object();
      const std::string at = index("spec.validations", i);
      const auto& c = compiled->validations[i];
      if (trim_space(string_at(v, "expression")).empty()) {
        required(causes, at + ".expression", "expression is not specified");
      } else {
        report(causes, at + ".expression", c.expression);
      }
      const std::string message_expression = string_at(v, "messageExpression");
      if (!message_expression.empty() && trim_space(message_expression).empty()) {
        invalid(causes, at + ".messageExpression", go_quote(message_expression),
                "must be non-empty if specified");
      } else if (c.message_expression) {
        report(causes, at + ".messageExpression", *c.message_expression);
      }
      const std::string message = string_at(v, "message");
      if (!message.empty() && trim_space(message).empty()) {
        invalid(causes, at + ".message", go_quote(message),
                "message must be non-empty if specified");
      } else if (has_line_break(trim_space(message))) {
        invalid(causes, at + ".message", go_quote(message), "message must not contain line breaks");
      }
      if (v != nullptr && v->contains("reason")) {
        const std::string reason = string_at(v, "reason");
        if (reason != "Forbidden" && reason != "Invalid" && reason != "RequestEntityTooLarge") {
          not_supported(causes, at + ".reason", reason,
                        {"Forbidden", "Invalid", "RequestEntityTooLarge"});
        }
      }
    }
  }
  if (annotations != nullptr) {
    if (annotations->size() > 20) {
      invalid(causes, "spec.auditAnnotations", json::serialize(*annotations),
              "must not have more than 20 auditAnnotations");
    }
    std::set<std::string> keys;
    for (std::size_t i = 0; i < annotations->size(); ++i) {
      const json::object* a = (*annotations)[i].if_object();
      const std::string at = index("spec.auditAnnotations", i);
      const std::string key = string_at(a, "key");
      if (name.empty()) {
        invalid(causes, at + ".key", go_quote(key), "requires metadata.name be non-empty");
      } else {
        const std::string qualified = name + "/" + key;
        for (const auto& e : apimachinery::qualified_name_errors(qualified)) {
          invalid(causes, at + ".key", go_quote(qualified), e);
        }
      }
      const std::string value = string_at(a, "valueExpression");
      if (trim_space(value).empty()) {
        required(causes, at + ".valueExpression", "valueExpression is not specified");
      } else if (trim_space(value).size() > 5120) {
        required(causes, at + ".valueExpression", "must not exceed 5120 bytes in length");
      } else {
        report(causes, at + ".valueExpression", compiled->audit_annotations[i].value);
      }
      if (!keys.insert(key).second) duplicate(causes, at + ".key", go_quote(key));
    }
  }
}

void validate_validating_admission_policy_binding(const json::object& binding,
                                                  const json::object* /*old*/, Causes& causes) {
  const json::object* spec = object_member(binding, "spec");
  check_binding_common(spec, /*mutating=*/false, causes);
  const auto actions = string_items(spec, "validationActions");
  if (actions.empty()) {
    required(causes, "spec.validationActions", "at least one validation action is required");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const std::string& a = actions[i];
    const std::string at = index("spec.validationActions", i);
    if (a != "Deny" && a != "Warn" && a != "Audit") {
      not_supported(causes, at, a, {"Audit", "Deny", "Warn"});
    } else if (!seen.insert(a).second) {
      duplicate(causes, at, go_quote(a));
    }
  }
  if (seen.contains("Deny") && seen.contains("Warn")) {
    invalid(causes, "spec.validationActions", shown_list(spec, "validationActions"),
            "must not contain both Deny and Warn (repeating the same validation failure "
            "information in the API response and headers serves no purpose)");
  }
}

void validate_mutating_admission_policy(const json::object& policy, const json::object* old,
                                        Causes& causes) {
  const json::object* spec = object_member(policy, "spec");
  const json::object* old_spec = old != nullptr ? object_member(*old, "spec") : nullptr;
  const auto compiled = compile_mutating_policy(policy);
  check_common(spec, old_spec, *compiled, /*mutating=*/true, causes);
  const json::array* mutations = items(spec, "mutations");
  if (mutations == nullptr || mutations->empty()) {
    required(causes, "spec.mutations", "mutations must contain at least one item");
  } else {
    for (std::size_t i = 0; i < mutations->size(); ++i) {
      const json::object* m = (*mutations)[i].if_object();
      const std::string at = index("spec.mutations", i);
      const std::string type = string_at(m, "patchType");
      const bool has_apply = object_member(m, "applyConfiguration") != nullptr;
      const bool has_patch = object_member(m, "jsonPatch") != nullptr;
      auto check_expression = [&](const char* holder) {
        const std::string path = at + "." + holder;
        if (trim_space(string_at(object_member(m, holder), "expression")).empty()) {
          required(causes, path + ".expression");
        } else {
          report(causes, path + ".expression", compiled->mutations[i].expression);
        }
      };
      if (type.empty()) {
        required(causes, at + ".patchType");
      } else if (type == "JSONPatch") {
        if (!has_patch) {
          required(causes, at + ".jsonPatch", "must be specified when patchType is JSONPatch");
        } else {
          check_expression("jsonPatch");
        }
        if (has_apply) {
          invalid(causes, at + ".applyConfiguration", "{applyConfiguration}",
                  "must not be specified when patchType is JSONPatch");
        }
      } else if (type == "ApplyConfiguration") {
        if (!has_apply) {
          required(causes, at + ".applyConfiguration",
                   "must be specified when patchType is ApplyConfiguration");
        } else {
          check_expression("applyConfiguration");
        }
        if (has_patch) {
          invalid(causes, at + ".jsonPatch", "{jsonPatch}",
                  "must not be specified when patchType is ApplyConfiguration");
        }
      } else {
        not_supported(causes, at + ".patchType", type, {"ApplyConfiguration", "JSONPatch"});
      }
    }
  }
  const std::string reinvocation = string_at(spec, "reinvocationPolicy");
  if (reinvocation.empty()) {
    required(causes, "spec.reinvocationPolicy");
  } else if (reinvocation != "Never" && reinvocation != "IfNeeded") {
    not_supported(causes, "spec.reinvocationPolicy", reinvocation, {"IfNeeded", "Never"});
  }
}

void validate_mutating_admission_policy_binding(const json::object& binding,
                                                const json::object* /*old*/, Causes& causes) {
  check_binding_common(object_member(binding, "spec"), /*mutating=*/true, causes);
}

}  // namespace kwatch::kinds
