// x-kubernetes-validations: CEL rules on a structural schema, compiled when a definition is
// written and run at every write of its objects, as kube's apiextensions-apiserver does.
//
// Types: each node's CEL type follows its schema (objects with their properties under kube's
// escaped names, additionalProperties as map(string, T), arrays as lists, the string formats
// byte/duration/date/date-time as bytes/duration/timestamp, int-or-string as dyn); a resource
// root (the object itself, an embedded resource) shows apiVersion, kind and metadata.name /
// metadata.generateName only. Values are read in place (cel::json_view).
//
// Writing a definition checks each rule: its fields (kube's SchemaErrors), then, when the whole
// schema has none, its compilation against `self`/`oldSelf` of the node's type (a bool rule, a
// string messageExpression) and where it may use oldSelf (only where old and new values
// correlate: not inside the items of a list that is not a map list).
//
// Running the rules walks the value with its old value beside it (objects and maps by key, map
// lists by their keys), evaluates each node's rules with kube's budgets (1,000,000 per
// evaluation, 10,000,000 per object) and words each failure as kube does.
#include <boost/json.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "apimachinery/validation.hpp"
#include "cel/checker.hpp"
#include "cel/cost_estimator.hpp"
#include "cel/escaping.hpp"
#include "cel/json_value.hpp"
#include "cel/libraries.hpp"
#include "cel/parser.hpp"
#include "cel/predicate_kernel.hpp"
#include "cel/program.hpp"
#include "cel/read_set.hpp"
#include "schema/structural_schema_tree.hpp"

namespace kwatch::schema::detail {

namespace json = boost::json;
using apimachinery::Cause;
using apimachinery::go_quote;

// kube's limits (k8s.io/apiserver/pkg/apis/cel).
constexpr std::uint64_t kPerCallLimit = 1'000'000;
constexpr std::uint64_t kRuntimeBudget = 10'000'000;
constexpr std::size_t kMaxMessageExpressionBytes = 5 * 1024;
constexpr std::uint64_t kMaxRequestBytes = 3 * 1024 * 1024;
constexpr std::uint64_t kPerExpressionEstimateLimit = 10'000'000;
constexpr std::uint64_t kSchemaEstimateLimit = 100'000'000;

struct CompiledRule {
  const ValidationRule* spec = nullptr;
  std::optional<cel::Program> program;  // none for an empty rule or one that did not compile
  std::optional<cel::Program> message;
  bool uses_old_self = false;
  std::string compile_error;  // the detail of a rule that did not compile
  std::string field_path;     // normalized, "" when absent
};

struct NodeCel {
  cel::TypePtr type;        // self's
  std::string schema_type;  // the node's `type`, quoted into its errors
  std::vector<CompiledRule> rules;
  cel::FieldSlots fields;   // the fields of self that the rules' kernels read from slots
  // The rules as a batch of kernels, for an object without and with an old value.
  std::vector<cel::PredicateKernel::Guard> guards, guards_with_old;
  std::uint32_t guard_locals = 0;  // the comprehension variables the guards need
  // What a batch reads (without and with an old value), from its kernels':
  // `whole`: the variables whose views a batch needs (self, oldSelf) when the fields are in
  // their slots. `memo`: what every rule of the batch reads of self, when all of them have
  // kernels that read only paths of self (cel/read_set.hpp): a value with the same key gets
  // the same answers at the same cost (NodeMemo in RuleRunner).
  struct BatchReads {
    std::uint32_t whole = 0;
    std::optional<cel::ReadSet> memo;
  };
  BatchReads reads, reads_with_old;
  // The node's record in the memo of a validation (RuleRunner::NodeMemo), given at compile
  // time to the first kMemoNodes nodes with a memo; kNoMemo for the rest.
  static constexpr std::uint32_t kNoMemo = ~std::uint32_t{0};
  static constexpr std::uint32_t kMemoNodes = 32;
  std::uint32_t memo_slot = kNoMemo;
};

namespace {

using apimachinery::has_line_break;
using apimachinery::trim_space;

// Go's encoding/json text of a string: HTML-escaped, as the value of kube's error messages is.
std::string go_json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (b < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", b);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The rule as kube 1.34 quotes it in an error's "Invalid value": its internal struct as JSON.
std::string rule_value(const ValidationRule& r) {
  std::string out = "{\"Rule\":" + go_json_string(r.rule) +
                    ",\"Message\":" + go_json_string(r.message) +
                    ",\"MessageExpression\":" + go_json_string(r.message_expression) +
                    ",\"Reason\":" + (r.reason ? go_json_string(*r.reason) : "null") +
                    ",\"FieldPath\":" + go_json_string(r.field_path) + ",\"OptionalOldSelf\":";
  if (r.optional_old_self) {
    out += *r.optional_old_self ? "true" : "false";
  } else {
    out += "null";
  }
  return out + "}";
}

// ---- schema -> CEL types ----

// The fewest bytes a value of this schema takes in a request: what bounds the number of
// elements a list or map without maxItems/maxProperties can have.
std::uint64_t min_serialized_size(const SchemaNode& n) {
  if (n.int_or_string) return 1;
  if (n.type == "array") return 2;
  if (n.type == "object") {
    std::uint64_t size = 2;
    if (n.additional_schema != nullptr) return size;
    for (const auto& name : n.required) {
      const SchemaNode* p = n.property(name);
      if (p == nullptr || p->default_value) continue;
      size += name.size() + min_serialized_size(*p) + 4;
    }
    return size;
  }
  if (n.type == "string") {
    if (n.format == "duration") return 3;
    if (n.format == "date") return 12;
    if (n.format == "date-time") return 21;
    return 2;
  }
  if (n.type == "boolean") return 4;
  return 1;
}

cel::TypePtr bounded(const cel::TypePtr& base, std::uint64_t max_length) {
  auto t = std::make_shared<cel::Type>(*base);
  t->max_length = max_length;
  return t;
}

cel::TypePtr string_type(const SchemaNode& n) {
  const std::uint64_t unbounded = kMaxRequestBytes - 2;
  if (n.format == "byte") {
    return bounded(cel::types::bytes(),
                   n.max_length ? static_cast<std::uint64_t>(*n.max_length) : unbounded);
  }
  if (n.format == "duration") return cel::types::duration();
  if (n.format == "date" || n.format == "date-time") return cel::types::timestamp();
  std::uint64_t longest = unbounded;
  if (n.max_length) {
    longest = static_cast<std::uint64_t>(*n.max_length) * 4;
  } else if (n.has_enum) {
    longest = 0;
    for (const auto& v : n.enum_values) {
      if (v.is_string()) longest = std::max<std::uint64_t>(longest, v.get_string().size());
    }
  }
  return bounded(cel::types::string(), longest);
}

// Lenient: as an admission policy's type checking sees an object, not as a rule's `self`: what
// has no type (preserved unknown fields, an object without properties such as ObjectMeta in the
// built-in schemas) is dyn instead of invisible, and a resource's metadata is all of it.
cel::TypePtr type_of(const SchemaNode& n, bool resource_root, const std::string& name,
                     bool lenient = false);

cel::TypePtr object_type(const SchemaNode& n, bool resource_root, const std::string& name,
                         bool lenient = false) {
  auto t = std::make_shared<cel::Type>();
  t->kind = cel::TypeKind::object;
  t->name = name;
  for (const auto& p : n.properties) {
    if (resource_root && p.name == "metadata") continue;  // replaced below
    auto escaped = cel::escape_property_name(p.name);
    if (!escaped) continue;
    cel::TypePtr field = type_of(*p.node, p.node->embedded, name + "." + *escaped, lenient);
    if (!field) continue;
    if (*escaped != p.name) t->json_names[*escaped] = p.name;
    t->fields[*escaped] = std::move(field);
  }
  if (resource_root && lenient) {
    if (!t->fields.count("apiVersion")) t->fields["apiVersion"] = cel::types::string();
    if (!t->fields.count("kind")) t->fields["kind"] = cel::types::string();
    t->fields["metadata"] = cel::types::dyn();
  } else if (resource_root) {
    // Of a resource, rules see its type and its name only.
    if (!t->fields.count("apiVersion")) t->fields["apiVersion"] = cel::types::string();
    if (!t->fields.count("kind")) t->fields["kind"] = cel::types::string();
    auto meta = std::make_shared<cel::Type>();
    meta->kind = cel::TypeKind::object;
    meta->name = name + ".metadata";
    meta->fields["name"] = cel::types::string();
    meta->fields["generateName"] = cel::types::string();
    t->fields["metadata"] = std::move(meta);
  }
  return t;
}

cel::TypePtr type_of(const SchemaNode& n, bool resource_root, const std::string& name,
                     bool lenient) {
  if (n.int_or_string) {
    auto t = std::make_shared<cel::Type>();
    t->int_or_string = true;
    t->max_length =
        n.max_length ? static_cast<std::uint64_t>(*n.max_length) * 4 : kMaxRequestBytes - 2;
    return t;
  }
  if (resource_root && (n.type == "object" || n.type.empty())) {
    return object_type(n, true, name, lenient);
  }
  if (n.type == "array") {
    if (n.items == nullptr) return nullptr;
    cel::TypePtr item = type_of(*n.items, n.items->embedded, name + ".@idx", lenient);
    if (!item) return nullptr;
    auto t = std::make_shared<cel::Type>(*cel::types::list(item));
    if (n.list_type && *n.list_type == "set") t->list_kind = cel::ListSemantics::Kind::set;
    if (n.list_type && *n.list_type == "map") {
      t->list_kind = cel::ListSemantics::Kind::map;
      for (const auto& k : n.list_map_keys) {
        if (auto escaped = cel::escape_property_name(k)) t->list_keys.push_back(*escaped);
      }
    }
    t->max_elements = n.max_items ? static_cast<std::uint64_t>(*n.max_items)
                                  : (kMaxRequestBytes - 2) / (min_serialized_size(*n.items) + 1);
    return t;
  }
  if (n.type == "object") {
    if (n.additional_schema != nullptr) {
      cel::TypePtr value =
          type_of(*n.additional_schema, n.additional_schema->embedded, name + ".@elem", lenient);
      if (!value) return nullptr;
      // The keys' size is unknown to kube's estimator, which counts it as 0 (its shared string
      // type carries no bound): a rule over the keys costs by the number of entries only.
      auto t = std::make_shared<cel::Type>(*cel::types::map(bounded(cel::types::string(), 0), value));
      t->max_elements =
          n.max_properties ? static_cast<std::uint64_t>(*n.max_properties)
                           : (kMaxRequestBytes - 2) / (min_serialized_size(*n.additional_schema) + 6);
      return t;
    }
    if (lenient && n.properties.empty()) return cel::types::dyn();
    return object_type(n, false, name, lenient);
  }
  if (n.type == "string") return string_type(n);
  if (n.type == "integer") return cel::types::int64();
  if (n.type == "number") return cel::types::float64();
  if (n.type == "boolean") return cel::types::boolean();
  if (lenient) return cel::types::dyn();
  return nullptr;  // no type (preserve-unknown-fields): not visible to rules
}

// ---- fieldPath: `.a.b`, `.a['b.c']`, resolved against the schema ----

// The normalized path (`a.b`, `m[key]`), or nullopt when `text` is not a valid path here.
std::optional<std::string> normalize_field_path(const SchemaNode& node, std::string_view text) {
  const SchemaNode* at = &node;
  std::string out;
  std::size_t i = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    std::string name;
    if (text[i] == '.') {
      ++i;
      const std::size_t start = i;
      while (i < text.size() && text[i] != '.' && text[i] != '[') ++i;
      name = std::string(text.substr(start, i - start));
      if (name.empty()) return std::nullopt;
    } else if (text[i] == '[') {
      if (i + 1 >= text.size() || text[i + 1] != '\'') return std::nullopt;
      i += 2;
      bool closed = false;
      while (i < text.size()) {
        const char c = text[i++];
        if (c == '\\') {
          if (i >= text.size()) return std::nullopt;
          const char e = text[i++];
          const char* escapes = "abfnrtv'\\";
          const char* values = "\a\b\f\n\r\t\v'\\";
          const char* hit = std::strchr(escapes, e);
          if (hit == nullptr || e == '\0') return std::nullopt;
          name += values[hit - escapes];
        } else if (c == '\'') {
          closed = true;
          break;
        } else {
          name += c;
        }
      }
      if (!closed || i >= text.size() || text[i] != ']') return std::nullopt;
      ++i;
    } else {
      return std::nullopt;
    }
    if (at->type != "object") return std::nullopt;
    if (at->additional_schema != nullptr) {
      out += "[" + name + "]";
      at = at->additional_schema;
      continue;
    }
    const SchemaNode* next = at->property(name);
    if (next == nullptr) return std::nullopt;
    if (!out.empty()) out += ".";
    out += name;
    at = next;
  }
  return out;
}

bool mentions_old_self(const cel::Ast& ast) {
  for (const auto& n : ast.nodes) {
    if (n.kind == cel::NodeKind::ident && n.name == "oldSelf") return true;
  }
  return false;
}

// ---- compiling ----

class RuleCompiler {
 public:
  RuleCompiler(const CelCompileOptions& options, std::vector<Cause>& schema_errors,
               std::vector<Cause>& cel_errors)
      : options_(options), schema_errors_(schema_errors), cel_errors_(cel_errors) {}

  // Every node's rules, depth first; `uncorrelatable` is the schema path of the highest list
  // whose items have no old values to compare with ("" while there is none).
  // `cardinality`: how many times the node can occur in one object (the product of the
  // maxItems/maxProperties above it), nullopt when nothing bounds it.
  void walk(SchemaNode& n, const std::string& path, bool resource_root,
            const std::string& uncorrelatable, std::optional<std::uint64_t> cardinality) {
    if (!n.validations.empty()) node(n, path, resource_root, uncorrelatable, cardinality);
    for (auto& p : n.properties) {
      walk(const_cast<SchemaNode&>(*p.node), key(child(path, "properties"), p.name),
           p.node->embedded, uncorrelatable, cardinality);
    }
    const auto times = [&](const std::optional<std::int64_t>& bound) -> std::optional<std::uint64_t> {
      if (!cardinality || !bound) return std::nullopt;
      const auto b = static_cast<std::uint64_t>(std::max<std::int64_t>(*bound, 0));
      return b != 0 && *cardinality > UINT64_MAX / b ? UINT64_MAX : *cardinality * b;
    };
    if (n.additional_schema != nullptr) {
      walk(const_cast<SchemaNode&>(*n.additional_schema), child(path, "additionalProperties"),
           n.additional_schema->embedded, uncorrelatable, times(n.max_properties));
    }
    if (n.items != nullptr) {
      const bool correlated = n.list_type && *n.list_type == "map";
      walk(const_cast<SchemaNode&>(*n.items), child(path, "items"), n.items->embedded,
           uncorrelatable.empty() && !correlated ? path : uncorrelatable, times(n.max_items));
    }
  }

  // The schema's total: past kube's limit, the most expensive rules are named, then the total.
  void check_total(const std::string& root_path) {
    if (total_ <= kSchemaEstimateLimit) return;
    std::stable_sort(costly_.begin(), costly_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t i = 0; i < costly_.size() && i < 4; ++i) {
      cel_errors_.push_back(forbidden(costly_[i].second,
                                      "contributed to estimated rule cost total exceeding cost "
                                      "limit for entire OpenAPIv3 schema"));
    }
    cel_errors_.push_back(forbidden(
        root_path, cost_message("x-kubernetes-validations estimated rule cost total for entire "
                                "OpenAPIv3 schema",
                                total_, kSchemaEstimateLimit)));
  }

  std::vector<std::pair<SchemaNode*, std::shared_ptr<NodeCel>>> compiled;

 private:
  static std::string cost_message(std::string_view what, std::uint64_t cost,
                                  std::uint64_t limit) {
    const double f = static_cast<double>(cost) / static_cast<double>(limit);
    char buf[64];
    if (f > 100) {
      std::snprintf(buf, sizeof buf, "more than 100x");
    } else if (f < 1.5) {
      std::snprintf(buf, sizeof buf, "%fx", f);
    } else {
      std::snprintf(buf, sizeof buf, "%.1fx", f);
    }
    return std::string(what) + " exceeds budget by factor of " + buf +
           " (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
           "arrays, maps, and strings are declared)";
  }

  // Adds one expression's estimated cost to the total (and to the most expensive, for naming).
  void count(std::uint64_t cost, const std::string& at) {
    total_ = total_ > UINT64_MAX - cost ? UINT64_MAX : total_ + cost;
    if (cost >= kSchemaEstimateLimit / 100) costly_.emplace_back(cost, at);
  }

  void node(SchemaNode& n, const std::string& path, bool resource_root,
            const std::string& uncorrelatable, std::optional<std::uint64_t> cardinality) {
    cardinality_ = cardinality.value_or(kMaxRequestBytes / (min_serialized_size(n) + 1));
    const std::string at = child(path, "x-kubernetes-validations");
    auto cel = std::make_shared<NodeCel>();
    cel->schema_type = n.int_or_string && n.type.empty() ? "" : n.type;
    cel->type = type_of(n, resource_root, "selfType");
    for (std::size_t i = 0; i < n.validations.size(); ++i) {
      const ValidationRule& r = n.validations[i];
      const std::string item = index(at, i);
      static_checks(n, r, item);
      CompiledRule compiled_rule;
      compiled_rule.spec = &r;
      if (r.has_field_path && !trim_space(r.field_path).empty()) {
        if (auto fp = normalize_field_path(n, r.field_path)) compiled_rule.field_path = *fp;
      }
      compile(cel->type, r, item, uncorrelatable, cel->fields, compiled_rule);
      cel->rules.push_back(std::move(compiled_rule));
    }
    for (const CompiledRule& rule : cel->rules) {
      // As RuleRunner::run takes them: a rule that did not compile fails, an empty one is
      // passed over, one about oldSelf is passed over when there is none, and one with an
      // optional oldSelf runs in full.
      cel::PredicateKernel::Guard g;
      const bool optional_old = rule.spec->optional_old_self.value_or(false);
      if (rule.compile_error.empty() && !rule.program) g.skip = true;
      if (rule.compile_error.empty() && rule.program && !optional_old) {
        g.kernel = rule.program->predicate_kernel();
      }
      cel->guards_with_old.push_back(g);
      if (rule.compile_error.empty() && rule.program && rule.uses_old_self && !optional_old) {
        g.skip = true;
      }
      cel->guards.push_back(g);
    }
    cel->guard_locals = cel::PredicateKernel::locals_needed(cel->guards_with_old);
    cel->reads = batch_reads(cel->guards, cel->fields);
    cel->reads_with_old = batch_reads(cel->guards_with_old, cel->fields);
    if (cardinality && *cardinality <= 1) {
      // Once per object at most (no list or map above it): nothing to keep an answer for.
      cel->reads.memo.reset();
      cel->reads_with_old.memo.reset();
    }
    if ((cel->reads.memo || cel->reads_with_old.memo) && memo_slots_ < NodeCel::kMemoNodes) {
      cel->memo_slot = memo_slots_++;
    }
    compiled.emplace_back(&n, std::move(cel));
  }

  static NodeCel::BatchReads batch_reads(const std::vector<cel::PredicateKernel::Guard>& guards,
                                        const cel::FieldSlots& slots) {
    NodeCel::BatchReads r;
    cel::ReadSet set;
    bool any = false;
    for (const auto& g : guards) {
      if (g.skip) continue;
      if (g.kernel == nullptr) {
        set.unusable();
        r.whole = ~std::uint32_t{0};
        continue;
      }
      any = true;
      r.whole |= g.kernel->reads().whole;
      if (set.usable()) g.kernel->read_into(set);
    }
    if (any && set.usable() && !set.empty()) {
      set.use_slots(slots);
      r.memo = std::move(set);
    }
    return r;
  }

  // kube's SchemaErrors for one rule: its fields by themselves.
  void static_checks(const SchemaNode& n, const ValidationRule& r, const std::string& item) {
    if (trim_space(r.rule).empty()) {
      schema_errors_.push_back(required(child(item, "rule"), "rule is not specified"));
    } else if (r.has_message && trim_space(r.message).empty()) {
      schema_errors_.push_back(invalid(child(item, "message"), go_quote(r.message),
                                       "must be non-empty if specified"));
    } else if (has_line_break(trim_space(r.message))) {
      schema_errors_.push_back(invalid(child(item, "message"), go_quote(r.message),
                                       "must not contain line breaks"));
    } else if (has_line_break(trim_space(r.rule)) && r.message.empty()) {
      schema_errors_.push_back(required(child(item, "message"),
                                        "message must be specified if rule contains line breaks"));
    }
    if (r.has_message_expression && trim_space(r.message_expression).empty()) {
      schema_errors_.push_back(required(child(item, "messageExpression"),
                                        "messageExpression must be non-empty if specified"));
    }
    if (r.reason && *r.reason != "FieldValueInvalid" && *r.reason != "FieldValueForbidden" &&
        *r.reason != "FieldValueRequired" && *r.reason != "FieldValueDuplicate") {
      schema_errors_.push_back(not_supported(
          child(item, "reason"), go_quote(*r.reason),
          {"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"}));
    }
    if (r.has_field_path) {
      const std::string fp_at = child(item, "fieldPath");
      if (trim_space(r.field_path).empty()) {
        schema_errors_.push_back(invalid(fp_at, go_quote(r.field_path),
                                         "must be non-empty if specified"));
      } else if (has_line_break(r.field_path)) {
        schema_errors_.push_back(invalid(fp_at, go_quote(r.field_path),
                                         "must not contain line breaks"));
      } else if (!normalize_field_path(n, r.field_path)) {
        schema_errors_.push_back(invalid(fp_at, go_quote(r.field_path), "must be a valid path"));
      }
    }
  }

  // Parses and checks one expression; the issues text on failure.
  std::optional<std::string> check_expression(const std::string& source,
                                              const std::vector<cel::TypePtr>& types,
                                              cel::Parsed& parsed, cel::TypePtr& result,
                                              cel::Checked* checked_out) {
    parsed = cel::parse(source);
    if (!parsed.errors.empty()) return cel::format_issues(source, parsed.errors);
    cel::CheckOptions options;
    options.homogeneous_literals = true;
    options.validate_literals = true;
    const cel::Checked checked =
        cel::check(parsed.ast, {"self", "oldSelf"}, types, cel::kubernetes_functions(), options);
    if (!checked.errors.empty()) return cel::format_issues(source, checked.errors);
    result = checked.result;
    *checked_out = checked;
    return std::nullopt;
  }

  void compile(const cel::TypePtr& self_type, const ValidationRule& r, const std::string& item,
               const std::string& uncorrelatable, cel::FieldSlots& fields, CompiledRule& out) {
    if (trim_space(r.rule).empty()) return;
    if (!self_type) {
      out.compile_error = "failed to convert to declType for CEL validation rules";
      cel_errors_.push_back(invalid(child(item, "rule"), rule_value(r), out.compile_error));
      return;
    }
    const bool optional_old = r.optional_old_self.value_or(false);
    const std::vector<cel::TypePtr> types{
        self_type, optional_old ? cel::types::optional(self_type) : self_type};
    const cel::Declarations decls{{"self", "oldSelf"}, &cel::kubernetes_functions()};
    cel::Parsed parsed;
    cel::TypePtr result;
    cel::Checked checked;
    if (auto issues = check_expression(r.rule, types, parsed, result, &checked)) {
      out.compile_error = "compilation failed: " + *issues;
    } else if (result->kind != cel::TypeKind::boolean) {
      out.compile_error = "cel expression must evaluate to a bool";
    }
    if (out.compile_error.empty()) {
      const std::uint64_t estimate = cel::estimate_cost(parsed.ast, checked).max;
      const std::uint64_t cost =
          cardinality_ != 0 && estimate > UINT64_MAX / cardinality_ ? UINT64_MAX
                                                                    : estimate * cardinality_;
      if (!options_.suppress_per_expression_cost && cost > kPerExpressionEstimateLimit) {
        cel_errors_.push_back(forbidden(child(item, "rule"),
                                        cost_message("estimated rule cost", cost,
                                                     kPerExpressionEstimateLimit)));
      }
      count(cost, child(item, "rule"));
    }
    if (!out.compile_error.empty()) {
      cel_errors_.push_back(invalid(child(item, "rule"), rule_value(r), out.compile_error));
    } else {
      cel::Declarations typed = decls;
      typed.node_types = &checked.types;
      typed.self_fields = &fields;
      out.program = cel::Program::compile(parsed.ast, typed);
      out.uses_old_self = mentions_old_self(parsed.ast);
    }
    if (r.has_message_expression && !trim_space(r.message_expression).empty()) {
      // A messageExpression sees oldSelf as it is (never optional).
      const std::vector<cel::TypePtr> message_types{self_type, self_type};
      cel::Parsed message;
      cel::TypePtr message_result;
      cel::Checked message_checked;
      std::string error;
      if (auto issues = check_expression(r.message_expression, message_types, message,
                                         message_result, &message_checked)) {
        error = "messageExpression compilation failed: " + *issues;
      } else if (message_result->kind != cel::TypeKind::string) {
        error = "messageExpression must evaluate to a string";
      }
      if (!error.empty()) {
        cel_errors_.push_back(invalid(child(item, "messageExpression"), rule_value(r), error));
      } else {
        cel::Declarations typed = decls;
        typed.node_types = &message_checked.types;
        out.message = cel::Program::compile(message.ast, typed);
        // A message is evaluated once per failure: its cost is not multiplied by cardinality.
        const std::uint64_t cost = cel::estimate_cost(message.ast, message_checked).max;
        if (!options_.suppress_per_expression_cost && cost > kPerExpressionEstimateLimit) {
          cel_errors_.push_back(forbidden(child(item, "messageExpression"),
                                          cost_message("estimated messageExpression cost", cost,
                                                       kPerExpressionEstimateLimit)));
        }
        count(cost, child(item, "messageExpression"));
      }
    }
    if (!out.program) return;
    if (out.uses_old_self && !uncorrelatable.empty()) {
      cel_errors_.push_back(invalid(child(item, "rule"), go_quote(r.rule),
                                    "oldSelf cannot be used on the uncorrelatable portion of the "
                                    "schema within " + uncorrelatable));
    } else if (r.optional_old_self && !out.uses_old_self) {
      cel_errors_.push_back(invalid(child(item, "optionalOldSelf"),
                                    *r.optional_old_self ? "true" : "false",
                                    "may not be set if oldSelf is not used in rule"));
    }
  }

  const CelCompileOptions& options_;
  std::vector<Cause>& schema_errors_;
  std::vector<Cause>& cel_errors_;
  std::uint64_t cardinality_ = 1;  // of the node being compiled
  std::uint32_t memo_slots_ = 0;   // given to nodes so far (NodeCel::memo_slot)
  std::uint64_t total_ = 0;
  std::vector<std::pair<std::uint64_t, std::string>> costly_;
};

// ---- running ----

// Where a walk is, as a chain of steps on the stack: the text is only built for an error.
struct Path {
  enum class Step : std::uint8_t { root, field, key, index };
  const Path* parent = nullptr;
  Step step = Step::root;
  std::string_view name;  // root: the prefix; field and key: the name
  std::size_t i = 0;

  std::string text() const {
    switch (step) {
      case Step::root: return std::string(name);
      case Step::field: return child(parent->text(), name);
      case Step::key: return key(parent->text(), name);
      case Step::index: return index(parent->text(), i);
    }
    return {};
  }
};

class RuleRunner {
 public:
  RuleRunner(std::vector<Cause>& out, std::vector<std::string>* warnings, bool update)
      : out_(out), warnings_(warnings), update_(update) {}

  // Whether a value equals its old one, asked only when a rule fails (ratcheting): the
  // value's own when it correlates with an old value, else its nearest correlated ancestor's.
  struct Correlation {
    const Correlation* parent = nullptr;
    bool correlated = true;
    const json::value* value = nullptr;
    const json::value* old = nullptr;
    const json::object* old_object = nullptr;  // the root's
    bool unchanged() const {
      if (!correlated) return parent != nullptr && parent->unchanged();
      if (old_object != nullptr) return value->is_object() && value->get_object() == *old_object;
      return old != nullptr && *old == *value;
    }
  };

  // Returns false when validation must stop (a budget ran out).
  // The old value is `old`, or the object `old_object` (the root's).
  bool walk(const SchemaNode& n, const json::value& value, const json::value* old,
            const Path& path, const Correlation& correlation,
            const json::object* old_object = nullptr) {
    if (value.is_null() || !n.rules_below) return true;
    // The node's fields that its rules read, found once: the walk below reads its properties
    // from them too.
    cel::SelfFields filled;
    if (n.cel && !run(*n.cel, value, old, old_object, path, correlation, filled)) return false;
    if (const auto* obj = value.if_object()) {
      const json::object* old_obj = old != nullptr ? old->if_object() : old_object;
      if (n.additional_schema != nullptr) {
        for (const auto& kv : *obj) {
          const json::value* o = old_obj != nullptr ? old_obj->if_contains(kv.key()) : nullptr;
          const Path item{&path, Path::Step::key, kv.key()};
          const Correlation c{&correlation, true, &kv.value(), o};
          if (!walk(*n.additional_schema, kv.value(), o, item, c)) return false;
        }
      }
      const bool slots = filled.arena() != nullptr;
      for (std::size_t k = 0; k < n.rule_properties.size(); ++k) {
        const auto& p = n.properties[n.rule_properties[k]];
        const std::uint8_t slot = slots ? n.rule_property_slots[k] : cel::FieldSlots::kNone;
        const json::value* v = slot != cel::FieldSlots::kNone ? filled.member(slot)
                                                              : cel::find_member(*obj, p.name);
        if (v == nullptr) continue;
        const json::value* o = old_obj != nullptr ? cel::find_member(*old_obj, p.name) : nullptr;
        const Path field{&path, Path::Step::field, p.name};
        const Correlation c{&correlation, true, v, o};
        if (!walk(*p.node, *v, o, field, c)) return false;
      }
    } else if (const auto* arr = value.if_array(); arr != nullptr && n.items != nullptr) {
      const json::array* old_arr = old != nullptr ? old->if_array() : nullptr;
      const bool map_list = !n.list_map_keys.empty() && n.list_type && *n.list_type == "map";
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const json::value* o = nullptr;
        if (map_list && old_arr != nullptr) o = same_keys(n.list_map_keys, (*arr)[i], *old_arr);
        const Path item{&path, Path::Step::index, {}, i};
        // Items of other lists have no old item: their list decides.
        const Correlation c{&correlation, map_list, &(*arr)[i], o};
        if (!walk(*n.items, (*arr)[i], o, item, c)) return false;
      }
    }
    return true;
  }

 private:
  // The first old item of a map list with the same keys as `item`.
  static const json::value* same_keys(const std::vector<std::string>& keys,
                                      const json::value& item, const json::array& old) {
    const auto* obj = item.if_object();
    if (obj == nullptr) return nullptr;
    for (const auto& candidate : old) {
      const auto* c = candidate.if_object();
      if (c == nullptr) continue;
      bool same = true;
      for (const auto& k : keys) {
        const json::value* a = obj->if_contains(k);
        const json::value* b = c->if_contains(k);
        if (a == nullptr || b == nullptr || a->is_structured() || !(*a == *b)) {
          same = false;
          break;
        }
      }
      if (same) return &candidate;
    }
    return nullptr;
  }

  static std::string at(const std::string& path) { return path.empty() ? "<nil>" : path; }

  void fail(const NodeCel& cel, const Path& path, std::string detail) {
    out_.push_back(invalid(at(path.text()), go_quote(cel.schema_type), detail));
  }

  bool out_of_budget(const NodeCel& cel, const Path& path) {
    fail(cel, path,
         "validation failed due to running out of cost budget, no further validation rules will "
         "be run");
    return false;
  }

  // `filled`: the fields of self that the rules read, found once for all of them (left as it
  // is, unfilled, when the node's value is not an object or has too many members).
  bool run(const NodeCel& cel, const json::value& value, const json::value* old_value,
           const json::object* old_object, const Path& path, const Correlation& correlation,
           cel::SelfFields& filled) {
    if (cel.rules.empty()) return true;
    if (remaining_ == 0) return out_of_budget(cel, path);
    cel::JsonArena& arena = arena_;
    const bool has_old = old_value != nullptr || old_object != nullptr;
    const NodeCel::BatchReads& reads = has_old ? cel.reads_with_old : cel.reads;
    cel::SelfFields* self_fields = nullptr;
    if (const auto* obj = value.if_object();
        obj != nullptr && cel.fields.size() != 0 && filled.fill(cel.fields, *obj, arena)) {
      self_fields = &filled;
    }
    // A batch already answered for the same members holds again, at the same cost (as long
    // as the budget still has that much: else it runs, and stops where the budget ends).
    NodeMemo::Node* memo = reads.memo ? memo_.node(cel.memo_slot, has_old) : nullptr;
    cel::ReadKey key;
    if (memo != nullptr && !reads.memo->key(value, self_fields, key)) {
      memo_.unkeyed(*memo);  // counted as a miss: a node of such values stops trying
      memo = nullptr;
    }
    if (memo != nullptr) {
      if (const auto cost = memo_.find(*memo, key); cost && *cost <= remaining_) {
        remaining_ -= *cost;
        return true;
      }
    }
    // The views of self and oldSelf, made when something needs them: a batch that reads only
    // slot fields does not.
    cel::Value self, old_self;
    bool viewed = false;
    const auto view = [&] {
      if (viewed) return;
      viewed = true;
      self = cel::json_view(value, cel.type.get(), arena);
      if (old_value != nullptr) {
        old_self = cel::json_view(*old_value, cel.type.get(), arena);
      } else if (old_object != nullptr) {
        old_self = cel::json_view(*old_object, cel.type.get(), arena);
      }
    };
    if (self_fields == nullptr || reads.whole != 0) view();
    cel::Value plain_vars[2] = {self, old_self};
    const auto& guards = has_old ? cel.guards_with_old : cel.guards;
    const cel::PredicateKernel::JsonVariable json_self{&value, cel.type.get(), &arena};
    for (std::size_t i = 0; i < cel.rules.size(); ++i) {
      // The rules that hold run as one batch, up to the first that does not (or that the
      // kernel cannot decide): that one is taken in full here, then the batch goes on.
      const std::uint64_t before = remaining_;
      const std::size_t from = i;
      i = cel::PredicateKernel::run_while_true(guards, i, cel.guard_locals, plain_vars,
                                               self_fields, kPerCallLimit, remaining_, &json_self);
      if (i == cel.rules.size()) {
        if (memo != nullptr && from == 0) memo_.add(*memo, key, before - remaining_);
        break;
      }
      if (!viewed) {
        view();
        plain_vars[0] = self;
        plain_vars[1] = old_self;
      }
      const CompiledRule& rule = cel.rules[i];
      const ValidationRule& spec = *rule.spec;
      if (!rule.compile_error.empty()) {
        fail(cel, path, "rule compile error: " + rule.compile_error);
        continue;
      }
      if (!rule.program) continue;
      const bool optional_old = spec.optional_old_self.value_or(false);
      if (rule.uses_old_self && !has_old && !optional_old) continue;
      // How kube names the rule in its errors: its message, else its text.
      const auto res = [&] {
        return std::string(
            trim_space(spec.has_message && !spec.message.empty() ? spec.message : spec.rule));
      };
      const std::uint64_t limit = std::min(kPerCallLimit, remaining_);
      std::uint64_t kernel_cost = 0;
      std::optional<bool> held;
      if (!optional_old) {
        // Most rules are decided by the predicate kernel; one that holds costs its cost.
        held = rule.program->decide(plain_vars, limit, kernel_cost, self_fields);
        if (held && *held) {
          remaining_ -= std::min(remaining_, kernel_cost);
          continue;
        }
      }
      cel::EvalResult r;
      r.cost = kernel_cost;
      if (held) {
        r.value = cel::Value::boolean(false);
      } else if (kernel_cost > limit) {
        // The kernel spent what the evaluator may: it is not asked again.
        r.value = cel::Value::error("operation cancelled: actual cost limit exceeded");
      } else {
        cel::Value vars[2] = {self, old_self};
        if (optional_old) {
          vars[1] = has_old ? cel::Value::optional_of(old_self) : cel::Value::optional_none();
        }
        r = rule.program->run(vars, limit);
      }
      const bool over = r.value.is_error() &&
                        r.value.as_text() == "operation cancelled: actual cost limit exceeded";
      if (over && limit < kPerCallLimit) return out_of_budget(cel, path);
      remaining_ -= std::min(remaining_, r.cost);
      if (r.value.is_error()) {
        const std::string err(r.value.as_text());
        if (over) {
          fail(cel, path, "'" + err + "': no further validation rules will be run due to call "
                          "cost exceeds limit for rule: " + res());
          return false;
        }
        if (err.starts_with("no such overload")) {
          fail(cel, path, "'" + err + "': call arguments did not match a supported operator, "
                          "function or macro signature for rule: " + res());
        } else {
          fail(cel, path, err + " evaluating rule: " + res());
        }
        continue;
      }
      if (r.value.is(cel::ValueKind::boolean) && r.value.as_bool()) continue;
      std::string detail;
      if (rule.message) {
        const cel::Value message_vars[2] = {self, old_self};
        const std::uint64_t message_limit = std::min(kPerCallLimit, remaining_);
        const cel::EvalResult m = rule.message->run(message_vars, message_limit);
        const bool message_over = m.value.is_error() &&
            m.value.as_text() == "operation cancelled: actual cost limit exceeded";
        if (message_over && message_limit < kPerCallLimit) {
          fail(cel, path, "messageExpression evaluation failed due to running out of cost "
                          "budget, no further validation rules will be run");
          return false;
        }
        if (message_over) {
          fail(cel, path, "no further validation rules will be run due to call cost exceeds "
                          "limit for messageExpression: " + go_quote(spec.message_expression));
          return false;
        }
        remaining_ -= std::min(remaining_, m.cost);
        if (m.value.is(cel::ValueKind::string)) {
          std::string text(trim_space(m.value.as_text()));
          if (!text.empty() && !has_line_break(text) && text.size() <= kMaxMessageExpressionBytes) {
            detail = std::move(text);
          }
        }
      }
      if (detail.empty()) {
        detail = spec.has_message && !trim_space(spec.message).empty()
                     ? std::string(trim_space(spec.message))
                     : "failed rule: " + res();
      }
      std::string field = path.text();
      if (!rule.field_path.empty()) {
        field = field.empty() ? rule.field_path : field + "." + rule.field_path;
      }
      Cause cause;
      const std::string reason = spec.reason.value_or("FieldValueInvalid");
      if (reason == "FieldValueForbidden") {
        cause = forbidden(at(field), detail);
      } else if (reason == "FieldValueRequired") {
        cause = required(at(field), detail);
      } else if (reason == "FieldValueDuplicate") {
        cause = duplicate(at(field), go_quote(cel.schema_type));
      } else {
        cause = invalid(at(field), go_quote(cel.schema_type), detail);
      }
      // Ratcheting: an unchanged value keeps a rule's complaint as a warning, unless the rule
      // is about the change itself.
      if (update_ && !rule.uses_old_self && correlation.unchanged()) {
        if (warnings_ != nullptr) warnings_->push_back(cause.field + ": " + cause.message);
        continue;
      }
      out_.push_back(std::move(cause));
    }
    return true;
  }

  // Node batches that held, by node and by the key of what their kernels read (NodeCel::
  // BatchReads::memo): the items of a list that agree on it (filters of one type, backends of
  // one kind, rules of one shape) are answered once per validation. A node whose keys keep
  // differing (paths, names) stops being looked up after a few misses.
  //
  // One per thread, reused by every validation on it: a validation starts a new generation,
  // and a node's record from an older one is empty.
  class NodeMemo {
   public:
    struct Node;

    void start() {
      ++generation_;
      members_.clear();
      shapes_.clear();
      counts_ = {};
    }
    const CelMemoCounts& counts() const { return counts_; }

    // The node's record (null when the node has no slot, or gave up).
    Node* node(std::uint32_t slot, bool has_old) {
      if (slot == NodeCel::kNoMemo) return nullptr;
      Node& n = nodes_[slot * 2 + (has_old ? 1 : 0)];
      if (n.generation != generation_) {
        n.generation = generation_;
        n.misses = 0;
        n.hits = 0;
        n.size = 0;
      }
      const bool gave_up = n.misses >= kMisses || (n.hits == 0 && n.misses >= kMissesFirst);
      if (gave_up) return nullptr;
      ++counts_.looked_up;
      return &n;
    }

    // The cost of the batch that held for the same key, or nullopt (a miss).
    std::optional<std::uint64_t> find(Node& n, const cel::ReadKey& key) {
      for (std::size_t i = 0; i < n.size; ++i) {
        const Entry& e = n.entries[i];
        if (cel::ReadKey::same(key, members_.data() + e.first, shapes_.data() + e.first, e.size,
                               e.values)) {
          ++n.hits;
          ++counts_.hits;
          return e.cost;
        }
      }
      ++n.misses;
      ++counts_.misses;
      return std::nullopt;
    }

    void unkeyed(Node& n) {
      ++n.misses;
      ++counts_.misses;
    }

    void add(Node& n, const cel::ReadKey& key, std::uint64_t cost) {
      if (n.size == kPerNode) return;
      n.entries[n.size++] = Entry{cost, key.values, static_cast<std::uint32_t>(members_.size()),
                                  static_cast<std::uint32_t>(key.size)};
      members_.insert(members_.end(), key.members, key.members + key.size);
      shapes_.insert(shapes_.end(), key.shapes, key.shapes + key.size);
    }

    struct Entry {
      std::uint64_t cost;
      std::uint64_t values;
      std::uint32_t first;  // its members, from members_[first]
      std::uint32_t size;
    };
    static constexpr std::size_t kPerNode = 4;
    struct Node {
      std::uint64_t generation = 0;
      std::uint32_t misses = 0;
      std::uint32_t hits = 0;
      std::size_t size = 0;
      Entry entries[kPerNode] = {};
    };

   private:
    // Past this many misses a node is not looked up again in this validation (a hit after a
    // few items is what pays; a list of distinct items would pay for the lookups alone), and
    // past the first few when none of them hit.
    static constexpr std::uint32_t kMisses = 8;
    static constexpr std::uint32_t kMissesFirst = 4;

    std::uint64_t generation_ = 0;
    CelMemoCounts counts_;
    Node nodes_[NodeCel::kMemoNodes * 2];  // by slot, without and with an old value
    std::vector<const json::value*> members_;  // the entries' keys
    std::vector<std::uint64_t> shapes_;
  };

  std::vector<Cause>& out_;
  std::vector<std::string>* warnings_;
  bool update_;
  NodeMemo& memo_ = thread_memo();
  // The views of the object and its old value, for the whole walk (the values live as long):
  // the thread's arena, reused by every validation on the thread.
  cel::JsonArena& arena_ = thread_arena();

  static cel::JsonArena& thread_arena() {
    thread_local cel::JsonArena arena;
    return arena;
  }
  // Validations do not nest on a thread: each starts the thread's memo afresh.
  static NodeMemo& thread_memo() {
    NodeMemo& memo = thread_node_memo();
    memo.start();
    return memo;
  }
  static NodeMemo& thread_node_memo() {
    thread_local NodeMemo memo;
    return memo;
  }

 public:
  static CelMemoCounts last_counts() { return thread_node_memo().counts(); }
  ~RuleRunner() { arena_.clear(); }
  std::uint64_t remaining_ = kRuntimeBudget;
};

}  // namespace

// Whether `n` or a node below it has rules: a walk skips the rest of the object.
bool mark_rules_below(SchemaNode& n) {
  bool below = n.cel != nullptr;
  n.rule_properties.clear();
  n.rule_property_slots.clear();
  for (std::size_t i = 0; i < n.properties.size(); ++i) {
    if (mark_rules_below(const_cast<SchemaNode&>(*n.properties[i].node))) {
      n.rule_properties.push_back(static_cast<std::uint32_t>(i));
      // Read from the node's slots when its rules read the property too.
      n.rule_property_slots.push_back(n.cel != nullptr ? n.cel->fields.find(n.properties[i].name)
                                                       : cel::FieldSlots::kNone);
      below = true;
    }
  }
  if (n.additional_schema != nullptr) {
    below |= mark_rules_below(const_cast<SchemaNode&>(*n.additional_schema));
  }
  if (n.items != nullptr) below |= mark_rules_below(const_cast<SchemaNode&>(*n.items));
  n.rules_below = below;
  return below;
}

bool has_cel_rules(const SchemaTree& tree) {
  return std::any_of(tree.nodes.begin(), tree.nodes.end(),
                     [](const SchemaNode& n) { return n.cel != nullptr; });
}

void compile_cel_rules(SchemaTree& tree, const SchemaNode& root, const std::string& path,
                       const CelCompileOptions& options, std::vector<Cause>& out) {
  (void)tree;
  std::vector<Cause> schema_errors, cel_errors;
  RuleCompiler compiler(options, schema_errors, cel_errors);
  compiler.walk(const_cast<SchemaNode&>(root), path, true, "", std::uint64_t{1});
  if (!options.stored) {
    if (!schema_errors.empty()) {
      for (auto& c : schema_errors) out.push_back(std::move(c));
      return;
    }
    compiler.check_total(path);
    for (auto& c : cel_errors) out.push_back(std::move(c));
  }
  for (auto& [node, cel] : compiler.compiled) node->cel = std::move(cel);
  mark_rules_below(const_cast<SchemaNode&>(root));
}

void validate_cel_rules(const SchemaNode& root, const json::value& value, const json::object* old,
                        const std::string& path_prefix, std::vector<Cause>& out,
                        std::vector<std::string>* warnings) {
  RuleRunner runner(out, warnings, old != nullptr);
  const Path root_path{nullptr, Path::Step::root, path_prefix};
  const RuleRunner::Correlation correlation{nullptr, true, &value, nullptr, old};
  runner.walk(root, value, nullptr, root_path, correlation, old);
}

CelMemoCounts last_cel_memo_counts() { return RuleRunner::last_counts(); }

cel::TypePtr lenient_object_type(const SchemaNode& root, const std::string& name) {
  cel::TypePtr t = type_of(root, /*resource_root=*/true, name, /*lenient=*/true);
  return t ? t : cel::types::dyn();
}

}  // namespace kwatch::schema::detail

namespace kwatch::schema {

cel::TypePtr StructuralSchema::object_cel_type(const std::string& name) const {
  if (tree_ == nullptr || tree_->root == nullptr) return cel::types::dyn();
  return detail::lenient_object_type(*tree_->root, name);
}

}  // namespace kwatch::schema
