// What schema/'s structural-schema files share (not for use outside schema/): the compiled
// form of a schema, and the helpers of its passes. structural_schema.cpp holds the public API,
// schema_compile.cpp turns JSON into nodes under kube's rules for a CRD version's schema,
// schema_values.cpp validates, prunes and defaults values, go_messages.cpp words causes as kube
// does and string_formats.cpp checks the string formats kube checks.
#pragma once

#include "apimachinery/api_error.hpp"
#include "apimachinery/validation.hpp"
#include "schema/structural_schema.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace kwatch::schema::detail {

inline constexpr std::size_t kMaxValueDepth = StructuralSchema::kMaxValueDepth;
inline constexpr std::size_t kMaxSchemaDepth = StructuralSchema::kMaxSchemaDepth;

enum TypeBit : std::uint8_t {
  kObjectBit = 1,
  kArrayBit = 2,
  kStringBit = 4,
  kIntegerBit = 8,
  kNumberBit = 16,
  kBooleanBit = 32,
};

enum class Format : std::uint8_t {
  none,  // absent, dropped, or accepted unchecked
  byte, date, date_time, uuid, uuid3, uuid4, uuid5, ipv4, ipv6, cidr, mac, hostname, hexcolor,
  bsonobjectid,
};

enum class Additional : std::uint8_t { absent, allow, deny, schema };

// One entry of x-kubernetes-validations as written (cel_rules.cpp compiles and runs them).
struct ValidationRule {
  std::string rule, message, message_expression, field_path;
  bool has_message = false, has_message_expression = false, has_field_path = false;
  std::optional<std::string> reason;
  std::optional<bool> optional_old_self;
};

struct NodeCel;  // cel_rules.cpp: a node's compiled rules and CEL type

struct SchemaNode {
  // Generic
  std::string type;  // as written, "" when absent
  std::string format;  // after kube's stripping of unsupported formats
  std::string written_format;
  bool nullable = false;
  bool has_title = false, has_description = false, has_external_docs = false;
  std::optional<boost::json::value> default_value;
  Additional additional = Additional::absent;
  const SchemaNode* additional_schema = nullptr;
  const SchemaNode* items = nullptr;
  struct Property {
    std::string name;
    const SchemaNode* node;
  };
  std::vector<Property> properties;        // declaration order
  std::vector<std::uint32_t> defaulted;    // positions of properties with a default

  // Extensions
  bool preserve_unknown = false;
  bool preserve_false = false;  // x-kubernetes-preserve-unknown-fields: false
  bool embedded = false;
  bool int_or_string = false;
  std::optional<std::string> list_type, map_type;
  std::vector<std::string> list_map_keys;
  bool has_x_validations = false;
  std::vector<ValidationRule> validations;
  std::shared_ptr<const NodeCel> cel;  // set by compile_cel_rules when the node has rules
  bool rules_below = false;            // this node or one under it has rules
  bool quantity = false;               // a built-in kind's resource.Quantity (x-kwatch-quantity)
  bool resource_list_value = false;    // ... in a core/v1 ResourceList: rounded to milli-units
  bool quantities_below = false;       // this node or one under it is one
  std::vector<std::uint32_t> rule_properties;  // the properties with rules below, by index
  std::vector<std::uint8_t> rule_property_slots;  // each one's slot in cel's fields, or 0xFF

  // Value validation
  std::optional<double> minimum, maximum, multiple_of;
  bool exclusive_minimum = false, exclusive_maximum = false;
  std::optional<std::int64_t> min_length, max_length, min_items, max_items, min_properties,
      max_properties;
  std::string pattern;
  std::shared_ptr<const re2::RE2> regex;  // shared with the definition's PatternCache
  std::string pattern_error;  // Go's text for a pattern RE2 refused
  bool unique_items = false;
  bool has_enum = false;
  std::vector<boost::json::value> enum_values;
  std::vector<std::string> enum_texts;
  std::vector<std::string> required;
  std::vector<const SchemaNode*> all_of, any_of, one_of;
  const SchemaNode* not_ = nullptr;

  // Keywords kube does not support (refused by compile()).
  bool has_id = false, has_schema = false, has_ref = false, has_pattern_properties = false,
       has_dependencies = false, has_additional_items = false, has_definitions = false,
       items_is_array = false;

  // Derived
  std::size_t keyword_count = 0;  // recognized keywords present
  std::size_t meta_forbidden_keywords = 0;  // keywords a root `metadata` schema may not have
  std::uint8_t type_bits = 0;
  std::string type_name;  // "integer,string" for int-or-string
  Format format_check = Format::none;

  // The schema of property `name`, or nullptr: every member of every object walked is looked
  // up here, so a few properties are scanned (lengths first) and more go through a table.
  const SchemaNode* property(std::string_view name) const {
    if (slots.empty()) {
      for (const auto& p : properties) {
        if (p.name.size() == name.size() && !name.empty() && p.name[0] == name[0] &&
            std::memcmp(p.name.data(), name.data(), name.size()) == 0) {
          return p.node;
        }
        if (name.empty() && p.name.empty()) return p.node;
      }
      return nullptr;
    }
    std::size_t mask = slots.size() - 1;
    for (std::size_t i = std::hash<std::string_view>{}(name) & mask;; i = (i + 1) & mask) {
      std::uint32_t at = slots[i];
      if (at == kNoSlot) return nullptr;
      if (properties[at].name == name) return properties[at].node;
    }
  }
  static constexpr std::uint32_t kNoSlot = 0xffffffff;
  std::vector<std::uint32_t> slots;  // open addressing over `properties`, when there are many
  void index_properties() {
    if (properties.size() <= 8) return;
    std::size_t cap = 16;
    while (cap < 2 * properties.size()) cap <<= 1;
    slots.assign(cap, kNoSlot);
    for (std::uint32_t p = 0; p < properties.size(); ++p) {
      std::size_t i = std::hash<std::string_view>{}(properties[p].name) & (cap - 1);
      while (slots[i] != kNoSlot) i = (i + 1) & (cap - 1);
      slots[i] = p;
    }
  }
  bool only_type(std::string_view t) const { return keyword_count == 1 && type == t; }
};

struct SchemaTree {
  std::deque<SchemaNode> nodes;
  const SchemaNode* root = nullptr;
};

inline bool is_meta_field(std::string_view k) {
  return k == "apiVersion" || k == "kind" || k == "metadata";
}

// go_messages.cpp: Go's printing of values in kube's messages.
std::string go_float(double d);
std::string go_json_float(double d);
// A JSON number the way kube's decoder holds it: int64 when it fits, float64 otherwise.
inline bool is_go_int(const boost::json::value& v) { return v.is_int64(); }
inline double as_double(const boost::json::value& v) {
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return v.get_double();
}
std::string sharp_v(const boost::json::value& v);
std::string value_repr(const boost::json::value& v);
std::string enum_value_text(const boost::json::value& v);
std::string quote_strings(const std::vector<std::string>& v);

// go_messages.cpp: causes as kube's field.Error builds them, and field paths.
apimachinery::Cause invalid(std::string field, const std::string& value, std::string_view detail);
apimachinery::Cause type_invalid(std::string field, const std::string& value,
                                 std::string_view detail);
apimachinery::Cause required(std::string field, std::string_view detail = {});
apimachinery::Cause forbidden(std::string field, std::string_view detail);
apimachinery::Cause not_supported(std::string field, const std::string& value,
                                  const std::vector<std::string>& allowed);
apimachinery::Cause too_long(std::string field, std::int64_t max);
apimachinery::Cause too_many(std::string field, std::size_t actual, std::int64_t max);
apimachinery::Cause duplicate(std::string field, const std::string& value);
std::string child(const std::string& p, std::string_view name);
std::string key(const std::string& p, std::string_view k);
std::string index(const std::string& p, std::size_t i);
// utilerrors.NewAggregate's text.
std::string aggregate_message(const std::vector<apimachinery::Cause>& causes);
// The same cause (type, field and message) once, in first-seen order.
void drop_repeated_causes(std::vector<apimachinery::Cause>& causes);

// string_formats.cpp
bool format_ok(Format f, std::string_view s);
Format string_format(std::string_view normalized, bool& supported);
std::string go_regexp_error(const re2::RE2& re, const std::string& pattern);

// cel_rules.cpp: x-kubernetes-validations. Compiling checks each rule as kube's CRD validation
// does (its SchemaErrors, then, if there are none, its CELErrors: compile errors and cost
// limits) and attaches the compiled rules to their nodes; validating runs them over a value and
// the old value it replaces.
struct CelCompileOptions {
  // A CRD update whose schema for this version is unchanged: the per-expression cost limit is
  // not enforced again (the total is).
  bool suppress_per_expression_cost = false;
  bool stored = false;  // never refuse: compile errors fail at run time
};
void compile_cel_rules(SchemaTree& tree, const SchemaNode& root, const std::string& path,
                       const CelCompileOptions& options, std::vector<apimachinery::Cause>& out);
void validate_cel_rules(const SchemaNode& root, const boost::json::value& value,
                        const boost::json::object* old, const std::string& path_prefix,
                        std::vector<apimachinery::Cause>& out,
                        std::vector<std::string>* warnings);
bool has_cel_rules(const SchemaTree& tree);
// schema_values.cpp: whether `n` or a node below it is a quantity (SchemaNode::quantities_below).
bool mark_quantities_below(SchemaNode& n);
bool mark_rules_below(SchemaNode& n);
// What the calling thread's last validate_cel_rules did with kept answers (a node's batch
// answered once per key, RuleRunner's memo): the values it keyed or tried to, the keys found
// kept, and the misses (a value that could not be keyed counts as one). For tests of its bounds.
struct CelMemoCounts {
  std::uint64_t looked_up = 0, hits = 0, misses = 0;
};
CelMemoCounts last_cel_memo_counts();

// schema_values.cpp: structuraldefaulting.ValidateDefaults.
void check_defaults(const SchemaNode& s, const std::string& path, bool resource_root,
                    bool inside_meta, std::vector<apimachinery::Cause>& out);

}  // namespace kwatch::schema::detail
