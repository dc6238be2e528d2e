// Structural schemas: the OpenAPI v3 subset Kubernetes uses for CustomResourceDefinitions, with
// kube-apiserver's validation, pruning and defaulting, following
// k8s.io/apiextensions-apiserver/pkg/apiserver/schema/{structural,validation,pruning,defaulting,
// listtype} and the k8s.io/kube-openapi validator it runs (Kubernetes 1.30-1.34). Causes carry
// kube's reasons, message texts and field paths.
//
// Lifecycle of a write, as in kube-apiserver's custom resource handler:
//   auto pruned = schema->prune(obj);     // unknown fields out, their paths for Strict or Warn
//   schema->apply_defaults(obj);          // non-nullable nulls without default out, defaults in
//   auto causes = schema->validate(obj);  // 422 Invalid with these causes when not empty
//
// Supported keywords: type, properties, required, items, additionalProperties (bool or schema),
// enum, format, minimum/maximum with the boolean exclusiveMinimum/exclusiveMaximum, multipleOf,
// minLength/maxLength (in runes), minItems/maxItems, minProperties/maxProperties, uniqueItems,
// pattern (Go RE2 syntax, compiled once per distinct text with RE2, within PatternCache's
// budget), nullable, default, allOf/anyOf/oneOf/not (value
// validation only), description/title/example/externalDocs (ignored),
// x-kubernetes-preserve-unknown-fields, -int-or-string, -embedded-resource, -list-type (atomic,
// set, map), -list-map-keys, -map-type, -validations (CEL rules: compiled, cost-checked and run
// as kube does; see cel_rules.cpp).
// Formats: int32/int64 (integer) and float/double (number) are kept but, as in kube, not range
// checked; byte, date, date-time, uuid(3/4/5), ipv4, ipv6, cidr, mac, hostname, hexcolor,
// bsonobjectid and password are checked on strings; kube's other string formats (uri, email,
// duration, quantity, isbn, ...) are accepted unchecked; unknown formats are dropped, as kube does.
//
// compile() refuses what kube refuses in a CRD version's schema, each problem one cause under
// `options.path`: non-structural schemas (missing types, types or defaults under junctors,
// additionalProperties with properties or at the root, metadata beyond name/generateName, ...),
// bad patterns ("must be a valid regular expression, but isn't: error parsing regexp: ..."),
// unsupported keywords ($ref, patternProperties, ...), inconsistent list/map types, defaults
// that do not validate or are not pruned, uniqueItems (kube: "runtime complexity becomes
// quadratic"; allowed with `allow_unique_items`, checked here in linear time).
//
// Deliberate differences from kube: an array never satisfies `type: string` (kube-openapi
// accepts any array for a string with a format); causes that kube would repeat (an allOf branch
// and the schema reporting the same field) are listed once; among failed anyOf/oneOf branches the
// one with the fewest causes is reported (kube: the one with the most passed checks); numbers
// compare by value in enums (kube converts types first, so 1.5 matches an enum of 1); embedded
// resources get apiVersion/kind checks but no ObjectMeta validation.
//
// Work is bounded: every walk follows the schema (at most kMaxSchemaDepth levels) or stops at
// kMaxValueDepth levels of a value; set, map-list and uniqueItems checks go through hash tables
// keyed per process (expected linear time, whatever the input); patterns run in RE2's linear
// time.
//
// Ownership and threads: compile() returns an immutable object behind a shared_ptr; every member
// is const and safe to call from any number of threads at once. The value passed to prune() and
// apply_defaults() belongs to the caller and is modified in place.
#pragma once

#include "apimachinery/api_error.hpp"
#include "cel/types.hpp"

#include <boost/json/fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace re2 {
class RE2;
}

namespace kwatch::schema {

// The `pattern`s of one definition's schemas, each distinct text compiled once and all of them
// within a budget. RE2 turns a Unicode class into hundreds of instructions: `^\pL{100}$` is
// 119,302 of them, 0.9 MiB and 0.1 s to compile, so a definition repeating it on 200 properties
// cost 190 MiB and 20 s per compile. Each pattern is compiled with RE2's max_mem of
// kMaxMemPerPattern (which also bounds the DFA it builds while matching; a bigger program is
// refused), and the programs of the distinct patterns together may hold at most `budget`
// instructions; past either, compile() refuses the pattern with a Forbidden cause at its
// `pattern` field. Schemas compiled with one cache share its RE2s. Definitions already stored are
// served with the limits kwatch had before the budget (kStoredMaxMemPerPattern, no budget), as
// kube compiles stored CEL rules under a larger cost limit than new ones: a definition accepted
// once stays served after an upgrade, and only writes are held to the budget.
// Thread-safety: compile() from one thread at a time (one definition is compiled by one thread);
// the RE2s it hands out are immutable, shared and safe to match from any thread.
class PatternCache {
 public:
  static constexpr std::int64_t kMaxMemPerPattern = std::int64_t{4} << 20;
  static constexpr std::size_t kDefaultBudget = 500'000;
  static constexpr std::int64_t kStoredMaxMemPerPattern = std::int64_t{8} << 20;  // RE2's default
  static constexpr std::size_t kNoBudget = static_cast<std::size_t>(-1);

  struct Compiled {
    std::shared_ptr<const re2::RE2> regex;  // null when the pattern is refused
    std::string error;    // Go's regexp error text ("error parsing regexp: ...") when invalid
    std::string refused;  // why it is too expensive, when it is
  };

  explicit PatternCache(std::size_t budget = kDefaultBudget,
                        std::int64_t max_mem_per_pattern = kMaxMemPerPattern)
      : budget_(budget), max_mem_(max_mem_per_pattern) {}
  // The limits of definitions already stored.
  static std::shared_ptr<PatternCache> for_stored() {
    return std::make_shared<PatternCache>(kNoBudget, kStoredMaxMemPerPattern);
  }

  // The pattern compiled, from the cache when it was compiled before (or offered).
  const Compiled& compile(const std::string& pattern);
  // The patterns `previous` compiled (the same definition before a spec change), for compile()
  // to hand out again instead of compiling them; each counts against the budget once used.
  // forget_offered() drops those not used, so a cache never holds on to its predecessor.
  void offer(const PatternCache& previous);
  void forget_offered() { offered_.clear(); }
  // Distinct patterns compiled, and the RE2 instructions of their programs.
  std::size_t distinct() const { return compiled_.size(); }
  std::size_t instructions() const { return used_; }

 private:
  std::size_t budget_;
  std::int64_t max_mem_;
  std::size_t used_ = 0;
  std::unordered_map<std::string, Compiled> compiled_;
  std::unordered_map<std::string, std::shared_ptr<const re2::RE2>> offered_;
};

struct SchemaCompileOptions {
  // Where the schema sits in the object that carries it, prefixed to every cause's field:
  // "spec.versions[0].schema.openAPIV3Schema", "spec.validation.openAPIV3Schema".
  std::string path = "openAPIV3Schema";
  // kube forbids uniqueItems in CRDs; schemas of built-in kinds may use it.
  bool allow_unique_items = false;
  // Shared by the schemas of one definition (every version's); null: one of its own.
  std::shared_ptr<PatternCache> patterns;
  // x-kubernetes-validations: on a definition update whose schema for this version is
  // unchanged, the per-expression cost limit is not enforced again (kube's ratcheting).
  struct Cel {
    bool suppress_per_expression_cost = false;
    // The schema of a definition already stored: its rules never refuse it (one that does not
    // compile fails when it would run, with kube's "rule compile error"), costs are not limited.
    bool stored = false;
  } cel;
};

namespace detail {
struct SchemaTree;
}

class StructuralSchema {
 public:
  // Deepest nesting of schemas compile() accepts (properties, items, junctors), and deepest
  // level of a value any walk descends to (storage allows 100, see apimachinery/stored_json.hpp).
  static constexpr std::size_t kMaxSchemaDepth = 128;
  static constexpr std::size_t kMaxValueDepth = 256;

  // The compiled schema, or base::Errc::invalid with one cause per problem (kube's order:
  // structural problems sorted, then the others; defaults are only checked on an otherwise valid
  // schema).
  static apimachinery::ApiResult<std::shared_ptr<const StructuralSchema>> compile(
      const boost::json::value& schema, const SchemaCompileOptions& options = {});

  ~StructuralSchema();
  StructuralSchema(const StructuralSchema&) = delete;
  StructuralSchema& operator=(const StructuralSchema&) = delete;

  // Every violation, in kube's order: schema (kube-openapi) causes, then embedded resources, then
  // duplicates in set and map lists. Fields are `path_prefix` joined with kube's path
  // (`spec.containers[0].ports[1].containerPort`; map keys as `spec.labels[app]` where kube writes
  // them so); causes that kube attaches to no field carry `path_prefix`, or "<nil>" without one.
  // Empty when valid. Does not modify `value`.
  //
  // x-kubernetes-validations run after the schema's checks (unless those found a value of the
  // wrong type or a missing required field, as kube skips them then), with `old` as oldSelf on
  // an update. Errors of an unchanged value's rules go to `warnings` instead, when given (kube's
  // ratcheting).
  std::vector<apimachinery::Cause> validate(const boost::json::value& value,
                              std::string_view path_prefix = {},
                              const boost::json::object* old = nullptr,
                              std::vector<std::string>* warnings = nullptr) const;
  // Whether the schema holds x-kubernetes-validations.
  bool has_cel_rules() const { return has_cel_rules_; }

  // The CEL type of a whole object of this schema as an admission policy's type checking sees
  // `object` (named `name`): fields typed by the schema, what has no type (preserved unknown
  // fields, untyped objects such as metadata) dyn.
  cel::TypePtr object_cel_type(const std::string& name) const;

  // Removes the fields the schema does not know, treating `value` as a resource root
  // (apiVersion, kind and metadata are kept, as in embedded resources; preserve-unknown-fields
  // keeps what it covers). Returns the removed fields' paths, sorted, in kube's notation
  // (`spec.bogus`, `spec.containers[0].bogus`) for `unknown field "..."` messages.
  std::vector<std::string> prune(boost::json::value& value) const;

  // Where `value` cannot become kube's Go type, as kube's unstructured converter words it after a
  // strategic merge patch: an object where the schema has a struct (properties) or a map
  // (additionalProperties), a list where it has a list — `cannot restore struct from: string`,
  // `cannot restore map from int64`, `cannot restore slice from map` — at the first such place
  // (struct fields in declaration order); nullopt when there is none. Nodes without a type,
  // preserving unknown fields or int-or-string are not looked into.
  std::optional<std::string> go_conversion_error(const boost::json::value& value) const;

  // kube's structural defaulting: first drops nulls of fields that are neither nullable nor
  // defaulted, then sets the defaults of absent fields (and of non-nullable nulls), recursively,
  // including inside the defaults it just set. Copies default values into `value`'s storage.
  void apply_defaults(boost::json::value& value) const;

  // A built-in kind's resource.Quantity values (x-kwatch-quantity nodes) in the form kube
  // stores them (apimachinery/quantity.hpp: `0.5` -> `500m`, `1024Mi` -> `1Gi`, numbers
  // become strings); Go's decoding error for the first that is not a quantity, leaving the
  // value partly rewritten. Only the branches with quantities below are walked.
  std::optional<std::string> canonicalize_quantities(boost::json::value& value) const;

 private:
  explicit StructuralSchema(std::unique_ptr<detail::SchemaTree> tree);
  std::unique_ptr<detail::SchemaTree> tree_;
  bool has_cel_rules_ = false;
  bool has_quantities_ = false;
};

// `unknown field "<path>"`: a Warning header for fieldValidation=Warn, and, joined with ", "
// after "strict decoding error: ", the 400 message for fieldValidation=Strict.
std::string unknown_field_message(std::string_view path);

}  // namespace kwatch::schema
