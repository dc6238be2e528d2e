// StructuralSchema::compile: a schema's JSON into nodes (Parser), then kube's rules for a CRD
// version's schema (Checker: ValidateCustomResourceDefinitionOpenAPISchema and
// ValidateStructural) and its defaults.
#include "schema/structural_schema_tree.hpp"

#include "apimachinery/validation.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>
#include <utility>

namespace kwatch::schema {

using apimachinery::ApiError;
using apimachinery::ApiResult;
using apimachinery::Cause;
using apimachinery::go_quote;
using base::Errc;

namespace json = boost::json;

using detail::Additional;
using detail::aggregate_message;
using detail::as_double;
using detail::check_defaults;
using detail::child;
using detail::drop_repeated_causes;
using detail::duplicate;
using detail::enum_value_text;
using detail::forbidden;
using detail::Format;
using detail::index;
using detail::invalid;
using detail::is_meta_field;
using detail::key;
using detail::kMaxSchemaDepth;
using detail::not_supported;
using detail::quote_strings;
using detail::required;
using detail::SchemaNode;
using detail::SchemaTree;
using detail::string_format;
using detail::value_repr;

// ---- compile: JSON to schema nodes ----

namespace {

std::string short_repr(const json::value& v) {
  std::string s = value_repr(v);
  if (s.size() > 100) s = s.substr(0, 97) + "...";
  return s;
}

// Reads a schema's JSON into nodes. A keyword of the wrong JSON type is a cause in `shape`:
// kube-apiserver fails to decode such a CRD (400); here it is one cause per keyword.
class Parser {
 public:
  Parser(SchemaTree& tree, PatternCache& patterns) : tree_(tree), patterns_(patterns) {}

  std::vector<Cause> shape;
  bool unsupported = false;  // a keyword kube's NewStructural refuses

  const SchemaNode* parse(const json::value& j, const std::string& path, std::size_t depth) {
    if (depth > kMaxSchemaDepth) {
      shape.push_back(invalid(path, "\"\"",
                              "must not nest more than " + std::to_string(kMaxSchemaDepth) +
                                  " schemas"));
      return nullptr;
    }
    const auto* obj = j.if_object();
    if (!obj) {
      shape.push_back(invalid(path, short_repr(j), "must be an object"));
      return nullptr;
    }
    SchemaNode& n = tree_.nodes.emplace_back();
    for (const auto& kv : *obj) read_keyword(n, kv.key(), kv.value(), path, depth);
    finish(n, path);
    return &n;
  }

 private:
  void wrong(const std::string& path, std::string_view k, const json::value& v,
             std::string_view want) {
    shape.push_back(invalid(child(path, k), short_repr(v), std::string("must be ") += want));
  }
  bool read_string(std::string& out, const std::string& path, std::string_view k,
                   const json::value& v) {
    if (const auto* s = v.if_string()) {
      out = std::string(*s);
      return true;
    }
    wrong(path, k, v, "a string");
    return false;
  }
  // x-kubernetes-validations: a list of rule objects, each field of its JSON type.
  void read_validations(SchemaNode& n, const std::string& path, const json::value& v) {
    const std::string at = child(path, "x-kubernetes-validations");
    if (v.is_null()) return;
    const auto* list = v.if_array();
    if (list == nullptr) {
      shape.push_back(invalid(at, short_repr(v), "must be an array"));
      return;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string item = index(at, i);
      const auto* o = (*list)[i].if_object();
      if (o == nullptr) {
        shape.push_back(invalid(item, short_repr((*list)[i]), "must be an object"));
        continue;
      }
      detail::ValidationRule r;
      for (const auto& kv : *o) {
        const std::string_view f = kv.key();
        const json::value& fv = kv.value();
        if (fv.is_null()) continue;
        if (f == "rule") {
          read_string(r.rule, item, f, fv);
        } else if (f == "message") {
          r.has_message = read_string(r.message, item, f, fv);
        } else if (f == "messageExpression") {
          r.has_message_expression = read_string(r.message_expression, item, f, fv);
        } else if (f == "fieldPath") {
          r.has_field_path = read_string(r.field_path, item, f, fv);
        } else if (f == "reason") {
          std::string reason;
          if (read_string(reason, item, f, fv)) r.reason = std::move(reason);
        } else if (f == "optionalOldSelf") {
          bool b = false;
          if (read_bool(b, item, f, fv)) r.optional_old_self = b;
        }
      }
      n.validations.push_back(std::move(r));
    }
  }

  bool read_bool(bool& out, const std::string& path, std::string_view k, const json::value& v) {
    if (v.is_bool()) {
      out = v.get_bool();
      return true;
    }
    wrong(path, k, v, "a boolean");
    return false;
  }
  void read_number(std::optional<double>& out, const std::string& path, std::string_view k,
                   const json::value& v) {
    if (v.is_number()) {
      out = as_double(v);
    } else {
      wrong(path, k, v, "a number");
    }
  }
  void read_int(std::optional<std::int64_t>& out, const std::string& path, std::string_view k,
                const json::value& v) {
    if (v.is_int64()) {
      out = v.get_int64();
    } else {
      wrong(path, k, v, "an integer");
    }
  }
  bool read_strings(std::vector<std::string>& out, const std::string& path, std::string_view k,
                    const json::value& v) {
    const auto* a = v.if_array();
    if (!a) {
      wrong(path, k, v, "an array of strings");
      return false;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* s = (*a)[i].if_string();
      if (!s) {
        shape.push_back(invalid(index(child(path, k), i), short_repr((*a)[i]), "must be a string"));
        continue;
      }
      out.emplace_back(*s);
    }
    return true;
  }
  void read_schemas(std::vector<const SchemaNode*>& out, const std::string& path,
                    std::string_view k, const json::value& v, std::size_t depth) {
    const auto* a = v.if_array();
    if (!a) {
      wrong(path, k, v, "an array of schemas");
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (const auto* s = parse((*a)[i], index(child(path, k), i), depth + 1)) out.push_back(s);
    }
  }

  void read_keyword(SchemaNode& n, std::string_view k, const json::value& v,
                    const std::string& path, std::size_t depth) {
    // Keywords a root `metadata` schema may carry: type, default, properties, example,
    // externalDocs (kube drops the last two from structural schemas).
    bool meta_ok = k == "type" || k == "default" || k == "properties" || k == "example" ||
                   k == "externalDocs";
    bool known = true;
    if (k == "type") {
      read_string(n.type, path, k, v);
    } else if (k == "format") {
      read_string(n.written_format, path, k, v);
    } else if (k == "title") {
      std::string ignored;
      n.has_title = read_string(ignored, path, k, v);
    } else if (k == "description") {
      std::string ignored;
      n.has_description = read_string(ignored, path, k, v);
    } else if (k == "nullable") {
      read_bool(n.nullable, path, k, v);
    } else if (k == "default") {
      if (!v.is_null()) n.default_value.emplace(v);  // `default: null` is no default
    } else if (k == "example") {
      // ignored, as in kube's structural schemas
    } else if (k == "externalDocs") {
      if (v.is_object()) {
        n.has_external_docs = true;
      } else {
        wrong(path, k, v, "an object");
      }
    } else if (k == "properties") {
      const auto* o = v.if_object();
      if (!o) {
        wrong(path, k, v, "an object");
      } else {
        for (const auto& p : *o) {
          if (const auto* s = parse(p.value(), key(child(path, k), p.key()), depth + 1)) {
            n.properties.push_back({std::string(p.key()), s});
          }
        }
      }
    } else if (k == "additionalProperties") {
      if (v.is_bool()) {
        n.additional = v.get_bool() ? Additional::allow : Additional::deny;
      } else if (v.is_object()) {
        n.additional_schema = parse(v, child(path, k), depth + 1);
        if (n.additional_schema) n.additional = Additional::schema;
      } else {
        wrong(path, k, v, "a boolean or an object");
      }
    } else if (k == "items") {
      if (v.is_array()) {
        n.items_is_array = true;
        unsupported = true;
      } else {
        n.items = parse(v, child(path, k), depth + 1);
      }
    } else if (k == "required") {
      read_strings(n.required, path, k, v);
    } else if (k == "enum") {
      if (const auto* a = v.if_array()) {
        n.has_enum = !a->empty();
        for (const auto& e : *a) n.enum_values.push_back(e);
      } else {
        wrong(path, k, v, "an array");
      }
    } else if (k == "minimum") {
      read_number(n.minimum, path, k, v);
    } else if (k == "maximum") {
      read_number(n.maximum, path, k, v);
    } else if (k == "multipleOf") {
      read_number(n.multiple_of, path, k, v);
    } else if (k == "exclusiveMinimum") {
      read_bool(n.exclusive_minimum, path, k, v);
    } else if (k == "exclusiveMaximum") {
      read_bool(n.exclusive_maximum, path, k, v);
    } else if (k == "minLength") {
      read_int(n.min_length, path, k, v);
    } else if (k == "maxLength") {
      read_int(n.max_length, path, k, v);
    } else if (k == "minItems") {
      read_int(n.min_items, path, k, v);
    } else if (k == "maxItems") {
      read_int(n.max_items, path, k, v);
    } else if (k == "minProperties") {
      read_int(n.min_properties, path, k, v);
    } else if (k == "maxProperties") {
      read_int(n.max_properties, path, k, v);
    } else if (k == "uniqueItems") {
      read_bool(n.unique_items, path, k, v);
    } else if (k == "pattern") {
      if (read_string(n.pattern, path, k, v) && !n.pattern.empty()) {
        const PatternCache::Compiled& compiled = patterns_.compile(n.pattern);
        n.regex = compiled.regex;
        n.pattern_error = compiled.error;
        if (!compiled.refused.empty()) shape.push_back(forbidden(child(path, k), compiled.refused));
      }
    } else if (k == "allOf") {
      read_schemas(n.all_of, path, k, v, depth);
    } else if (k == "anyOf") {
      read_schemas(n.any_of, path, k, v, depth);
    } else if (k == "oneOf") {
      read_schemas(n.one_of, path, k, v, depth);
    } else if (k == "not") {
      n.not_ = parse(v, child(path, k), depth + 1);
    } else if (k == "x-kubernetes-preserve-unknown-fields") {
      bool b = false;
      if (read_bool(b, path, k, v)) {
        n.preserve_unknown = b;
        n.preserve_false = !b;
        if (!b) unsupported = true;
      }
    } else if (k == "x-kubernetes-embedded-resource") {
      read_bool(n.embedded, path, k, v);
    } else if (k == "x-kwatch-quantity") {
      read_bool(n.quantity, path, k, v);
    } else if (k == "x-kwatch-resource-list") {
      read_bool(n.resource_list_value, path, k, v);
    } else if (k == "x-kubernetes-int-or-string") {
      read_bool(n.int_or_string, path, k, v);
    } else if (k == "x-kubernetes-list-type") {
      std::string s;
      if (read_string(s, path, k, v)) n.list_type = std::move(s);
    } else if (k == "x-kubernetes-map-type") {
      std::string s;
      if (read_string(s, path, k, v)) n.map_type = std::move(s);
    } else if (k == "x-kubernetes-list-map-keys") {
      read_strings(n.list_map_keys, path, k, v);
    } else if (k == "x-kubernetes-validations") {
      n.has_x_validations = v.is_array() && !v.get_array().empty();
      read_validations(n, path, v);
    } else if (k == "id") {
      n.has_id = true;
      unsupported = true;
    } else if (k == "$schema") {
      n.has_schema = true;
      unsupported = true;
    } else if (k == "$ref") {
      n.has_ref = true;
      unsupported = true;
    } else if (k == "patternProperties") {
      n.has_pattern_properties = v.is_object() && !v.get_object().empty();
      unsupported |= n.has_pattern_properties;
    } else if (k == "dependencies") {
      n.has_dependencies = !v.is_null();
      unsupported |= n.has_dependencies;
    } else if (k == "additionalItems") {
      n.has_additional_items = !v.is_null();
      unsupported |= n.has_additional_items;
    } else if (k == "definitions") {
      n.has_definitions = v.is_object() && !v.get_object().empty();
      unsupported |= n.has_definitions;
    } else {
      known = false;  // dropped, as kube's decoding drops unknown fields
    }
    if (known) {
      ++n.keyword_count;
      if (!meta_ok) ++n.meta_forbidden_keywords;
    }
  }

  static void finish(SchemaNode& n, const std::string& /*path*/) {
    static constexpr std::pair<std::string_view, std::uint8_t> kTypes[] = {
        {"object", detail::kObjectBit},   {"array", detail::kArrayBit},
        {"string", detail::kStringBit},   {"integer", detail::kIntegerBit},
        {"number", detail::kNumberBit},   {"boolean", detail::kBooleanBit},
    };
    if (n.int_or_string) {
      n.type_bits = detail::kIntegerBit | detail::kStringBit;
      n.type_name = "integer,string";
    } else if (!n.type.empty()) {
      for (const auto& [name, bit] : kTypes) {
        if (n.type == name) n.type_bits = bit;
      }
      n.type_name = n.type;
    }
    // kube's StripUnsupportedFormatsPostProcess.
    if (!n.written_format.empty()) {
      std::string_view schema_type = n.int_or_string ? std::string_view{} : n.type;
      if (schema_type.empty() || schema_type == "string") {
        std::string normalized;
        for (char c : n.written_format) {
          if (c != '-') normalized += c;
        }
        bool supported = false;
        Format check = string_format(normalized, supported);
        if (supported) {
          n.format = n.written_format;
          n.format_check = check;
        }
      } else if (schema_type == "integer") {
        if (n.written_format == "int32" || n.written_format == "int64") n.format = n.written_format;
      } else if (schema_type == "number") {
        if (n.written_format == "float" || n.written_format == "double") {
          n.format = n.written_format;
        }
      }
    }
    n.index_properties();
    for (std::uint32_t i = 0; i < n.properties.size(); ++i) {
      if (n.properties[i].node->default_value) n.defaulted.push_back(i);
    }
    for (const auto& e : n.enum_values) n.enum_texts.push_back(enum_value_text(e));
  }

  SchemaTree& tree_;
  PatternCache& patterns_;
};


}  // namespace

// ---- compile: kube's rules for a CRD version's schema ----

namespace {

// Both halves of kube's CRD schema validation: ValidateCustomResourceDefinitionOpenAPISchema
// (`schema`, in traversal order) and ValidateStructural (`structural`, sorted as kube sorts it).
class Checker {
 public:
  explicit Checker(const SchemaCompileOptions& options) : options_(options) {}

  std::vector<Cause> structural;
  std::vector<Cause> schema;

  struct Ssv {  // kube's specStandardValidatorV3 context
    bool allow_defaults = true;
    std::string defaults_reason;
    bool inside_meta = false;
  };

  void crd(const SchemaNode* n, const std::string& path, const Ssv& ssv, bool is_root) {
    if (!n) return;
    ssv_validate(*n, path, ssv);
    if (n->unique_items && !options_.allow_unique_items) {
      schema.push_back(forbidden(child(path, "uniqueItems"),
                                 "uniqueItems cannot be set to true since the runtime complexity "
                                 "becomes quadratic"));
    }
    if (n->additional != Additional::absent) {
      if (!n->properties.empty() &&
          (n->additional == Additional::deny || n->additional == Additional::schema)) {
        schema.push_back(forbidden(child(path, "additionalProperties"),
                                   "additionalProperties and properties are mutual exclusive"));
      }
      Ssv sub = ssv;
      if (ssv.inside_meta) {
        forbid_defaults(sub, "inside additionalProperties applying to object metadata");
      }
      crd(n->additional_schema, child(path, "additionalProperties"), sub, false);
    }
    for (const auto& p : n->properties) {
      Ssv sub = ssv;
      if ((is_root || n->embedded) && is_meta_field(p.name)) {
        sub.inside_meta = true;
        if (is_root) forbid_defaults(sub, "in top-level " + p.name);
      }
      crd(p.node, key(child(path, "properties"), p.name), sub, false);
    }
    crd(n->not_, child(path, "not"), ssv, false);
    for (std::size_t i = 0; i < n->all_of.size(); ++i) {
      crd(n->all_of[i], index(child(path, "allOf"), i), ssv, false);
    }
    for (std::size_t i = 0; i < n->one_of.size(); ++i) {
      crd(n->one_of[i], index(child(path, "oneOf"), i), ssv, false);
    }
    for (std::size_t i = 0; i < n->any_of.size(); ++i) {
      crd(n->any_of[i], index(child(path, "anyOf"), i), ssv, false);
    }
    crd(n->items, child(path, "items"), ssv, false);
    if (n->preserve_false) {
      schema.push_back(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), "false",
                               "must be true or undefined"));
    }
    list_and_map_types(*n, path);
  }

  void ssv_validate(const SchemaNode& n, const std::string& path, const Ssv& ssv) {
    static const std::vector<std::string> kTypes = {"array",  "boolean", "integer",
                                                    "number", "object",  "string"};
    if (!n.type.empty() && std::find(kTypes.begin(), kTypes.end(), n.type) == kTypes.end()) {
      schema.push_back(not_supported(child(path, "type"), go_quote(n.type), kTypes));
    }
    if (n.default_value && !ssv.allow_defaults) {
      std::string detail = "must not be set";
      if (!ssv.defaults_reason.empty()) detail += " " + ssv.defaults_reason;
      schema.push_back(forbidden(child(path, "default"), detail));
    }
    if (n.has_id) schema.push_back(forbidden(child(path, "id"), "id is not supported"));
    if (n.has_additional_items) {
      schema.push_back(
          forbidden(child(path, "additionalItems"), "additionalItems is not supported"));
    }
    if (n.has_pattern_properties) {
      schema.push_back(
          forbidden(child(path, "patternProperties"), "patternProperties is not supported"));
    }
    if (n.has_definitions) {
      schema.push_back(forbidden(child(path, "definitions"), "definitions is not supported"));
    }
    if (n.has_dependencies) {
      schema.push_back(forbidden(child(path, "dependencies"), "dependencies is not supported"));
    }
    if (n.has_ref) schema.push_back(forbidden(child(path, "$ref"), "$ref is not supported"));
    if (n.type == "null") {
      schema.push_back(forbidden(child(path, "type"),
                                 "type cannot be set to null, use nullable as an alternative"));
    }
    if (n.items_is_array) {
      schema.push_back(
          forbidden(child(path, "items"), "items must be a schema object and not an array"));
    }
    if (ssv.inside_meta && n.embedded) {
      schema.push_back(forbidden(child(path, "x-kubernetes-embedded-resource"),
                                 "must not be used inside of resource meta"));
    }
  }

  void list_and_map_types(const SchemaNode& n, const std::string& path) {
    if (n.map_type && n.type != "object") {
      if (n.type.empty()) {
        schema.push_back(required(child(path, "type"),
                                  "must be object if x-kubernetes-map-type is specified"));
      } else {
        schema.push_back(invalid(child(path, "type"), go_quote(n.type),
                                 "must be object if x-kubernetes-map-type is specified"));
      }
    }
    if (n.map_type && *n.map_type != "atomic" && *n.map_type != "granular") {
      schema.push_back(not_supported(child(path, "x-kubernetes-map-type"), go_quote(*n.map_type),
                                     {"atomic", "granular"}));
    }
    if (n.list_type && n.type != "array") {
      if (n.type.empty()) {
        schema.push_back(required(child(path, "type"),
                                  "must be array if x-kubernetes-list-type is specified"));
      } else {
        schema.push_back(invalid(child(path, "type"), go_quote(n.type),
                                 "must be array if x-kubernetes-list-type is specified"));
      }
    } else if (n.list_type && *n.list_type == "set" && n.items) {
      const SchemaNode& is = *n.items;
      if (is.type == "array" && is.list_type && *is.list_type != "atomic") {
        schema.push_back(invalid(child(child(path, "items"), "x-kubernetes-list-type"),
                                 go_quote(*is.list_type),
                                 "must be atomic as item of a list with "
                                 "x-kubernetes-list-type=set"));
      } else if (is.type == "object" && (!is.map_type || *is.map_type != "atomic")) {
        // kube prints the items' list type here, not their map type.
        schema.push_back(invalid(child(child(path, "items"), "x-kubernetes-map-type"),
                                 is.list_type ? go_quote(*is.list_type) : "null",
                                 "must be atomic as item of a list with "
                                 "x-kubernetes-list-type=set"));
      }
    }
    if (n.list_type && *n.list_type != "atomic" && *n.list_type != "set" &&
        *n.list_type != "map") {
      schema.push_back(not_supported(child(path, "x-kubernetes-list-type"),
                                     go_quote(*n.list_type), {"atomic", "set", "map"}));
    }
    if (!n.list_map_keys.empty()) {
      if (!n.list_type) {
        schema.push_back(required(child(path, "x-kubernetes-list-type"),
                                  "must be map if x-kubernetes-list-map-keys is non-empty"));
      } else if (*n.list_type != "map") {
        schema.push_back(invalid(child(path, "x-kubernetes-list-type"), go_quote(*n.list_type),
                                 "must be map if x-kubernetes-list-map-keys is non-empty"));
      }
    }
    if (n.list_type && *n.list_type == "map") {
      if (n.list_map_keys.empty()) {
        schema.push_back(required(child(path, "x-kubernetes-list-map-keys"),
                                  "must not be empty if x-kubernetes-list-type is map"));
      }
      if (!n.items && !n.items_is_array) {
        schema.push_back(required(child(path, "items"),
                                  "must have a schema if x-kubernetes-list-type is map"));
      }
      if (n.items && n.items->type != "object") {
        schema.push_back(invalid(child(child(path, "items"), "type"), go_quote(n.items->type),
                                 "must be object if parent array's x-kubernetes-list-type is map"));
      }
      if (n.items && n.items->type == "object") {
        std::vector<std::string_view> seen;
        for (const auto& k : n.list_map_keys) {
          if (const SchemaNode* p = n.items->property(k)) {
            if (p->type == "array" || p->type == "object") {
              schema.push_back(invalid(
                  child(key(child(child(path, "items"), "properties"), k), "type"),
                  go_quote(n.items->type),
                  "must be a scalar type if parent array's x-kubernetes-list-type is map"));
            }
          } else {
            schema.push_back(invalid(child(path, "x-kubernetes-list-map-keys"),
                                     quote_strings(n.list_map_keys),
                                     "entries must all be names of item properties"));
          }
          if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
            schema.push_back(invalid(child(path, "x-kubernetes-list-map-keys"),
                                     quote_strings(n.list_map_keys),
                                     "must not contain duplicate entries"));
          }
          seen.push_back(k);
        }
      }
    }
    // validateMapListKeysMapSet
    if (n.items && n.list_type && (*n.list_type == "set" || *n.list_type == "map")) {
      if (n.items->nullable) {
        schema.push_back(forbidden(child(child(path, "items"), "nullable"),
                                   "cannot be nullable when x-kubernetes-list-type is " +
                                       *n.list_type));
      }
      if (*n.list_type == "map") {
        for (const auto& k : n.list_map_keys) {
          const SchemaNode* p = n.items->property(k);
          if (!p) continue;
          bool is_required = std::find(n.items->required.begin(), n.items->required.end(), k) !=
                             n.items->required.end();
          std::string pp = key(child(child(path, "items"), "properties"), k);
          if (!is_required && !p->default_value) {
            schema.push_back(required(child(pp, "default"),
                                      "this property is in x-kubernetes-list-map-keys, so it must "
                                      "have a default or be a required property"));
          }
          if (p->nullable) {
            schema.push_back(forbidden(child(pp, "nullable"),
                                       "this property is in x-kubernetes-list-map-keys, so it "
                                       "cannot be nullable"));
          }
        }
      }
    }
  }

  // ---- ValidateStructural ----

  enum class Level { root, item, field };

  void invariants(const SchemaNode* n, Level lvl, const std::string& path) {
    if (!n) return;
    const SchemaNode& s = *n;
    if (s.type == "array" && !s.items) {
      structural.push_back(required(child(path, "items"), "must be specified"));
    }
    invariants(s.items, Level::item, child(path, "items"));
    for (const auto& p : s.properties) {
      invariants(p.node, Level::field, key(child(path, "properties"), p.name));
    }
    if (s.additional != Additional::absent) {
      if (lvl == Level::root) {
        structural.push_back(
            forbidden(child(path, "additionalProperties"), "must not be used at the root"));
      }
      invariants(s.additional_schema, Level::field, child(path, "additionalProperties"));
    }
    if (s.int_or_string && s.preserve_unknown) {
      structural.push_back(invalid(child(path, "x-kubernetes-preserve-unknown-fields"), "true",
                                   "must be false if x-kubernetes-int-or-string is true"));
    }
    if (s.int_or_string && s.embedded) {
      structural.push_back(invalid(child(path, "x-kubernetes-embedded-resource"), "true",
                                   "must be false if x-kubernetes-int-or-string is true"));
    }
    value_validation(s, int_or_string_any_of(s), int_or_string_all_of(s), lvl, path);

    bool check_metadata = lvl == Level::root || s.embedded;
    if (s.embedded && s.type != "object") {
      if (s.type.empty()) {
        structural.push_back(required(child(path, "type"),
                                      "must be object if x-kubernetes-embedded-resource is true"));
      } else {
        structural.push_back(invalid(child(path, "type"), go_quote(s.type),
                                     "must be object if x-kubernetes-embedded-resource is true"));
      }
    } else if (s.type.empty() && !s.int_or_string && !s.preserve_unknown) {
      const char* detail = lvl == Level::root   ? "must not be empty at the root"
                           : lvl == Level::item ? "must not be empty for specified array items"
                                                : "must not be empty for specified object fields";
      structural.push_back(required(child(path, "type"), detail));
    }
    if (s.embedded && s.additional != Additional::absent) {
      structural.push_back(forbidden(child(path, "additionalProperties"),
                                     "must not be used if x-kubernetes-embedded-resource is set"));
    }
    if (lvl == Level::root && !s.type.empty() && s.type != "object") {
      structural.push_back(
          invalid(child(path, "type"), go_quote(s.type), "must be object at the root"));
    }
    if (check_metadata) {
      for (const char* f : {"kind", "apiVersion"}) {
        const SchemaNode* p = s.property(f);
        if (p && p->type != "string") {
          structural.push_back(invalid(child(key(child(path, "properties"), f), "type"),
                                       go_quote(p->type), "must be string"));
        }
      }
    }
    if (const SchemaNode* meta = s.property("metadata")) {
      metadata_invariants(*meta, check_metadata, lvl, key(child(path, "properties"), "metadata"));
    }
    if (s.embedded && !s.preserve_unknown && s.properties.empty()) {
      structural.push_back(required(child(path, "properties"),
                                    "must not be empty if x-kubernetes-embedded-resource is true "
                                    "without x-kubernetes-preserve-unknown-fields"));
    }
  }

  void metadata_invariants(const SchemaNode& s, bool check_metadata, Level lvl,
                           const std::string& path) {
    if (check_metadata && s.type != "object") {
      structural.push_back(invalid(child(path, "type"), go_quote(s.type), "must be object"));
    }
    if (lvl != Level::root) return;
    // Only name and generateName may be restricted; type and default are checked elsewhere.
    bool other_properties = false;
    for (const auto& p : s.properties) {
      if (p.name != "name" && p.name != "generateName") other_properties = true;
    }
    if (other_properties || s.meta_forbidden_keywords > 0) {
      structural.push_back(forbidden(path,
                                     "must not specify anything other than name and "
                                     "generateName, but metadata is implicitly specified"));
    }
  }

  static bool int_or_string_pair(const std::vector<const SchemaNode*>& any_of) {
    return any_of.size() == 2 && any_of[0]->only_type("integer") && any_of[1]->only_type("string");
  }
  static bool int_or_string_any_of(const SchemaNode& s) { return int_or_string_pair(s.any_of); }
  static bool int_or_string_all_of(const SchemaNode& s) {
    return !s.all_of.empty() && int_or_string_pair(s.all_of[0]->any_of);
  }

  void value_validation(const SchemaNode& v, bool skip_any_of, bool skip_first_all_of_any_of,
                        Level lvl, const std::string& path) {
    if (!skip_any_of) {
      for (std::size_t i = 0; i < v.any_of.size(); ++i) {
        nested(v.any_of[i], false, lvl, index(child(path, "anyOf"), i));
      }
    }
    for (std::size_t i = 0; i < v.all_of.size(); ++i) {
      nested(v.all_of[i], skip_first_all_of_any_of && i == 0, lvl, index(child(path, "allOf"), i));
    }
    for (std::size_t i = 0; i < v.one_of.size(); ++i) {
      nested(v.one_of[i], false, lvl, index(child(path, "oneOf"), i));
    }
    nested(v.not_, false, lvl, child(path, "not"));
    if (!v.pattern_error.empty()) {
      structural.push_back(invalid(child(path, "pattern"), go_quote(v.pattern),
                                   "must be a valid regular expression, but isn't: " +
                                       v.pattern_error));
    }
  }

  void nested(const SchemaNode* n, bool skip_any_of, Level lvl, const std::string& path) {
    if (!n) return;
    const SchemaNode& v = *n;
    value_validation(v, skip_any_of, false, lvl, path);
    nested(v.items, false, lvl, child(path, "items"));
    for (const auto& p : v.properties) {
      nested(p.node, false, Level::field, key(child(path, "properties"), p.name));
    }
    auto forbid = [&](bool set, const char* what, const char* detail) {
      if (set) structural.push_back(forbidden(child(path, what), detail));
    };
    forbid(!v.type.empty(), "type", "must be empty to be structural");
    forbid(v.additional != Additional::absent, "additionalProperties",
           "must be undefined to be structural");
    forbid(v.default_value.has_value(), "default", "must be undefined to be structural");
    forbid(v.has_title, "title", "must be empty to be structural");
    forbid(v.has_description, "description", "must be empty to be structural");
    forbid(v.nullable, "nullable", "must be false to be structural");
    forbid(v.has_external_docs, "externalDocs", "must be undefined to be structural");
    forbid(v.preserve_unknown, "x-kubernetes-preserve-unknown-fields",
           "must be false to be structural");
    forbid(v.embedded, "x-kubernetes-embedded-resource", "must be false to be structural");
    forbid(v.int_or_string, "x-kubernetes-int-or-string", "must be false to be structural");
    forbid(!v.list_map_keys.empty(), "x-kubernetes-list-map-keys",
           "must be empty to be structural");
    forbid(v.list_type.has_value(), "x-kubernetes-list-type", "must be undefined to be structural");
    forbid(v.map_type.has_value(), "x-kubernetes-map-type", "must be undefined to be structural");
    forbid(v.has_x_validations, "x-kubernetes-validations", "must be empty to be structural");
    if (v.property("metadata")) {
      structural.push_back(forbidden(key(child(path, "properties"), "metadata"),
                                     "must not be specified in a nested context"));
    }
  }

  // validateStructuralCompleteness: what the root's junctors name must exist in the schema.
  void completeness(const SchemaNode& root, const std::string& path) {
    junctor_completeness(root, &root, path, path);
  }

 private:
  static void forbid_defaults(Ssv& ssv, std::string reason) {
    ssv.allow_defaults = false;
    ssv.defaults_reason = std::move(reason);
  }

  void junctor_completeness(const SchemaNode& v, const SchemaNode* s, const std::string& s_path,
                            const std::string& v_path) {
    nested_completeness(v.not_, s, s_path, child(v_path, "not"));
    for (std::size_t i = 0; i < v.all_of.size(); ++i) {
      nested_completeness(v.all_of[i], s, s_path, index(child(v_path, "allOf"), i));
    }
    for (std::size_t i = 0; i < v.any_of.size(); ++i) {
      nested_completeness(v.any_of[i], s, s_path, index(child(v_path, "anyOf"), i));
    }
    for (std::size_t i = 0; i < v.one_of.size(); ++i) {
      nested_completeness(v.one_of[i], s, s_path, index(child(v_path, "oneOf"), i));
    }
  }

  void nested_completeness(const SchemaNode* v, const SchemaNode* s, const std::string& s_path,
                           const std::string& v_path) {
    if (!v) return;
    if (!s) {
      structural.push_back(required(s_path, "because it is defined in " + v_path));
      return;
    }
    junctor_completeness(*v, s, s_path, v_path);
    nested_completeness(v->items, s->items, child(s_path, "items"), child(v_path, "items"));
    for (const auto& p : v->properties) {
      std::string sp = key(child(s_path, "properties"), p.name);
      std::string vp = key(child(v_path, "properties"), p.name);
      if (const SchemaNode* sf = s->property(p.name)) {
        nested_completeness(p.node, sf, sp, vp);
      } else {
        structural.push_back(required(sp, "because it is defined in " + vp));
      }
    }
  }

  const SchemaCompileOptions& options_;
};


}  // namespace

// ---- compile: the public entry ----

ApiResult<std::shared_ptr<const StructuralSchema>> StructuralSchema::compile(
    const json::value& schema, const SchemaCompileOptions& options) {
  auto tree = std::make_unique<SchemaTree>();
  std::shared_ptr<PatternCache> patterns =
      options.patterns ? options.patterns : std::make_shared<PatternCache>();
  Parser parser(*tree, *patterns);
  const SchemaNode* root = parser.parse(schema, options.path, 0);
  using Result = ApiResult<std::shared_ptr<const StructuralSchema>>;
  auto refuse = [&](std::vector<Cause> causes) -> Result {
    std::string message = aggregate_message(causes);
    return ApiError(Errc::invalid, std::move(message), std::move(causes));
  };
  if (!parser.shape.empty() || !root) return refuse(std::move(parser.shape));

  Checker checker(options);
  std::vector<Cause> causes;
  if (root->nullable) {
    causes.push_back(
        forbidden(child(options.path, "nullable"), "nullable cannot be true at the root"));
  }
  if (!parser.unsupported) {
    // NewStructural refuses the unsupported keywords; ValidateStructural runs only without them.
    checker.invariants(root, Checker::Level::root, options.path);
    checker.completeness(*root, options.path);
    std::stable_sort(checker.structural.begin(), checker.structural.end(),
                     [](const Cause& a, const Cause& b) {
                       return a.field + ": " + a.message < b.field + ": " + b.message;
                     });
  }
  checker.crd(root, options.path, Checker::Ssv{}, true);
  for (auto& c : checker.structural) causes.push_back(std::move(c));
  for (auto& c : checker.schema) causes.push_back(std::move(c));
  if (causes.empty() && parser.unsupported) {
    // Only `$schema` gets here: the other unsupported keywords have causes of their own.
    causes.push_back(invalid(options.path, "\"\"", "OpenAPIV3Schema 'schema' is not supported"));
  }
  if (causes.empty()) check_defaults(*root, options.path, true, false, causes);
  if (causes.empty()) {
    compile_cel_rules(*tree, *root, options.path,
                      detail::CelCompileOptions{options.cel.suppress_per_expression_cost,
                                                options.cel.stored},
                      causes);
  }
  if (!causes.empty()) {
    drop_repeated_causes(causes);
    return refuse(std::move(causes));
  }
  tree->root = root;
  return std::shared_ptr<const StructuralSchema>(new StructuralSchema(std::move(tree)));
}

}  // namespace kwatch::schema
