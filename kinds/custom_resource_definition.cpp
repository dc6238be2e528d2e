#include "kinds/custom_resource_definition.hpp"
#include "kinds/field_errors.hpp"

#include "schema/field_type.hpp"
#include "apimachinery/json_path.hpp"
#include "schema/structural_schema.hpp"
#include "apimachinery/validation.hpp"
#include "base/base64.hpp"
#include "base/openssl_files.hpp"
#include "kinds/webhook_configuration.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>
#include <unordered_set>

namespace kwatch::kinds {

using schema::FieldPath;
using schema::FieldTypes;
using schema::PatternCache;
using schema::SchemaCompileOptions;
using schema::StructuralSchema;
using apimachinery::dns1035_label_errors;
using apimachinery::dns1123_subdomain_errors;
using apimachinery::go_quote;
using apimachinery::invalid_error;
using apimachinery::set_condition;
using apimachinery::ApiResult;
using apimachinery::Cause;
using field_errors::index;
using field_errors::string_items;

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxSelectableFields = 8;
constexpr std::string_view kApprovalAnnotation = "api-approved.kubernetes.io";

// ---- reading a CRD that has not been type-checked: wrong types read as absent ----

const json::object& empty_object() {
  static const json::object empty;
  return empty;
}

using apimachinery::object_member;
using apimachinery::array_member;
using apimachinery::string_at;
const json::object& object_or_empty(const json::object& o, std::string_view key) {
  const json::object* p = object_member(o, key);
  return p != nullptr ? *p : empty_object();
}
bool bool_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->get_bool();
}
using apimachinery::strings_at;

// ---- causes, as field.Error's ErrorBody prints them ----

// A bad value: strings quoted as Go's %q, booleans and numbers as they are, compound values as
// JSON (kube marshals its internal struct; kwatch shows the JSON it was sent).
std::string repr(const json::value& v) {
  if (v.is_string()) return go_quote(v.get_string());
  return json::serialize(v);
}
std::string repr(std::string_view s) { return go_quote(s); }
std::string repr_strings(const std::vector<std::string>& v) {
  if (v.empty()) return "null";
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return json::serialize(a);
}

// kube's ValidateCABundle (cert.ParseCertsPEM) of a caBundle as the JSON carries it (base64).
std::optional<std::string> ca_bundle_problem(const std::string& base64) {
  auto pem = base::base64_decode(base64);
  if (!pem) return "illegal base64 data";
  if (base::openssl::count_certificates(*pem) == 0) {
    return "data does not contain any valid RSA or ECDSA certificates";
  }
  return std::nullopt;
}

Cause invalid(std::string field, const std::string& value, std::string_view detail) {
  std::string body = "Invalid value: " + value;
  if (!detail.empty()) {
    body += ": ";
    body += detail;
  }
  return {"FieldValueInvalid", std::move(body), std::move(field)};
}
Cause required(std::string field, std::string_view detail = {}) {
  std::string body = "Required value";
  if (!detail.empty()) {
    body += ": ";
    body += detail;
  }
  return {"FieldValueRequired", std::move(body), std::move(field)};
}
Cause forbidden(std::string field, std::string_view detail) {
  return {"FieldValueForbidden", "Forbidden: " + std::string(detail), std::move(field)};
}
Cause not_supported(std::string field, std::string_view value,
                    std::initializer_list<std::string_view> supported) {
  std::string body = "Unsupported value: " + go_quote(value) + ": supported values: ";
  bool first = true;
  for (auto s : supported) {
    if (!first) body += ", ";
    first = false;
    body += go_quote(s);
  }
  return {"FieldValueNotSupported", std::move(body), std::move(field)};
}
Cause duplicate(std::string field, std::string_view value) {
  return {"FieldValueDuplicate", "Duplicate value: " + go_quote(value), std::move(field)};
}
Cause too_many(std::string field, std::size_t actual, std::size_t max) {
  return {"FieldValueTooMany",
          "Too many: " + std::to_string(actual) + ": must have at most " + std::to_string(max) +
              " items",
          std::move(field)};
}


std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// genericvalidation.NameIsDNSSubdomain: a generateName prefix may end in '-'.
std::vector<std::string> name_is_dns_subdomain(std::string name, bool prefix) {
  if (prefix && name.size() > 1 && name.back() == '-') name.back() = 'a';
  return dns1123_subdomain_errors(name);
}

// ---- the parts of a CRD ----

struct Version {
  const json::object* obj = nullptr;
  std::string name;
  bool served = false;
  bool storage = false;
};

std::vector<Version> versions_of(const json::object& spec) {
  std::vector<Version> out;
  if (const json::array* a = array_member(spec, "versions")) {
    for (const auto& v : *a) {
      const json::object& o = v.is_object() ? v.get_object() : empty_object();
      out.push_back({&o, string_at(o, "name"), bool_at(o, "served"), bool_at(o, "storage")});
    }
  }
  return out;
}

std::string storage_version_of(const json::object& spec) {
  for (const auto& v : versions_of(spec)) {
    if (v.storage) return v.name;
  }
  return {};
}

// The version's openAPIV3Schema, or nullptr when it has none.
const json::value* schema_of(const json::object& version) {
  const json::object* schema = object_member(version, "schema");
  if (schema == nullptr) return nullptr;
  const json::value* v = schema->if_contains("openAPIV3Schema");
  return v != nullptr && !v->is_null() ? v : nullptr;
}

bool condition_true(const json::object& crd, std::string_view type) {
  const json::array* conditions = array_member(object_or_empty(crd, "status"), "conditions");
  if (conditions == nullptr) return false;
  for (const auto& c : *conditions) {
    if (!c.is_object()) continue;
    if (string_at(c.get_object(), "type") == type) return string_at(c.get_object(), "status") == "True";
  }
  return false;
}

// ---- validation, in kube's order ----

class Validator {
 public:
  explicit Validator(std::vector<std::shared_ptr<const StructuralSchema>>* schemas,
                     std::shared_ptr<PatternCache> patterns = nullptr, bool stored = false)
      : schemas_(schemas),
        patterns_(patterns ? std::move(patterns) : std::make_shared<PatternCache>()),
        stored_(stored) {}

  std::vector<Cause> run(const json::object& crd, const json::object* old) {
    old_ = old;
    const json::object& meta = object_or_empty(crd, "metadata");
    const json::object& spec = object_or_empty(crd, "spec");
    const json::object& names = object_or_empty(spec, "names");
    if (old == nullptr) metadata_name(meta, string_at(names, "plural") + "." + string_at(spec, "group"));
    this->spec(spec);
    if (old != nullptr) immutables(spec, *old);
    stored_versions(spec, old);
    api_approval(crd, old);
    if (bool_at(spec, "preserveUnknownFields")) {
      causes_.push_back(invalid("spec.preserveUnknownFields", "true",
                                "cannot set to true, set x-kubernetes-preserve-unknown-fields to "
                                "true in spec.versions[*].schema instead"));
    }
    return std::move(causes_);
  }

 private:
  void metadata_name(const json::object& meta, const std::string& required_name) {
    auto name_fn = [&](const std::string& name, bool prefix) {
      auto errs = name_is_dns_subdomain(name, prefix);
      if (name != required_name) errs.emplace_back("must be spec.names.plural+\".\"+spec.group");
      return errs;
    };
    std::string generate_name = string_at(meta, "generateName");
    if (!generate_name.empty()) {
      for (const auto& msg : name_fn(generate_name, true)) {
        causes_.push_back(invalid("metadata.generateName", repr(generate_name), msg));
      }
    }
    std::string name = string_at(meta, "name");
    if (name.empty()) {
      causes_.push_back(required("metadata.name", "name or generateName is required"));
      return;
    }
    for (const auto& msg : name_fn(name, false)) {
      causes_.push_back(invalid("metadata.name", repr(name), msg));
    }
  }

  void spec(const json::object& spec) {
    std::string group = string_at(spec, "group");
    if (group.empty()) {
      causes_.push_back(required("spec.group"));
    } else if (auto errs = dns1123_subdomain_errors(group); !errs.empty()) {
      causes_.push_back(invalid("spec.group", repr(group), join(errs, ",")));
    } else if (group.find('.') == std::string::npos) {
      causes_.push_back(invalid("spec.group", repr(group), "should be a domain with at least one dot"));
    }

    std::string scope = string_at(spec, "scope");
    if (scope.empty()) {
      causes_.push_back(required("spec.scope"));
    } else if (scope != "Cluster" && scope != "Namespaced") {
      causes_.push_back(not_supported("spec.scope", scope, {"Cluster", "Namespaced"}));
    }

    auto versions = versions_of(spec);
    for (std::size_t i = 0; i < versions.size(); ++i) {
      if (schema_of(*versions[i].obj) == nullptr) {
        causes_.push_back(required(index("spec.versions", i) + ".schema.openAPIV3Schema"));
      }
    }

    // kube validates the internal form of a definition, where a schema that every version
    // shares sits once at spec.validation: its causes are reported there, once.
    hoisted_ = !versions.empty();
    for (const auto& v : versions) {
      const json::value* s = schema_of(*v.obj);
      hoisted_ = hoisted_ && s != nullptr && *s == *schema_of(*versions[0].obj);
    }
    std::size_t storage_count = 0;
    bool unique_names = true;
    std::set<std::string> seen;
    if (schemas_ != nullptr) schemas_->assign(versions.size(), nullptr);
    for (std::size_t i = 0; i < versions.size(); ++i) {
      const Version& v = versions[i];
      if (v.storage) ++storage_count;
      if (!seen.insert(v.name).second) unique_names = false;
      std::string path = index("spec.versions", i);
      if (auto errs = dns1035_label_errors(v.name); !errs.empty()) {
        causes_.push_back(invalid(path + ".name", repr(v.name), join(errs, ",")));
      }
      version(*v.obj, path, i);
    }
    const json::value* versions_value = spec.if_contains("versions");
    std::string versions_repr = versions_value != nullptr ? repr(*versions_value) : "null";
    if (!unique_names) {
      causes_.push_back(invalid("spec.versions", versions_repr, "must contain unique version names"));
    }
    if (storage_count != 1) {
      causes_.push_back(invalid("spec.versions", versions_repr,
                                "must have exactly one version marked as storage version"));
    }

    const json::object& names = object_or_empty(spec, "names");
    for (const char* key : {"plural", "singular", "kind", "listKind"}) {
      if (string_at(names, key).empty()) causes_.push_back(required(std::string("spec.names.") + key));
    }
    this->names(names, "spec.names");
    conversion(spec);
  }

  void names(const json::object& names, const std::string& path) {
    auto label = [&](const char* key) {
      std::string value = string_at(names, key);
      if (value.empty()) return;
      if (auto errs = dns1035_label_errors(value); !errs.empty()) {
        causes_.push_back(invalid(path + "." + key, repr(value), join(errs, ",")));
      }
    };
    auto camel = [&](const char* key) {
      std::string value = string_at(names, key);
      if (value.empty()) return;
      if (auto errs = dns1035_label_errors(lower(value)); !errs.empty()) {
        causes_.push_back(invalid(path + "." + key, repr(value),
                                  "may have mixed case, but should otherwise match: " +
                                      join(errs, ",")));
      }
    };
    label("plural");
    label("singular");
    camel("kind");
    camel("listKind");
    auto short_names = strings_at(names, "shortNames");
    for (std::size_t i = 0; i < short_names.size(); ++i) {
      if (auto errs = dns1035_label_errors(short_names[i]); !errs.empty()) {
        causes_.push_back(invalid(index(path + ".shortNames", i), repr(short_names[i]), join(errs, ",")));
      }
    }
    std::string kind = string_at(names, "kind");
    std::string list_kind = string_at(names, "listKind");
    if (!kind.empty() && kind == list_kind) {
      causes_.push_back(invalid(path + ".listKind", repr(list_kind), "kind and listKind may not be the same"));
    }
    auto categories = strings_at(names, "categories");
    for (std::size_t i = 0; i < categories.size(); ++i) {
      if (auto errs = dns1035_label_errors(categories[i]); !errs.empty()) {
        causes_.push_back(invalid(index(path + ".categories", i), repr(categories[i]), join(errs, ",")));
      }
    }
  }

  // validateCustomResourceDefinitionVersion.
  void version(const json::object& v, const std::string& path, std::size_t i) {
    deprecation_warning(v, path);
    const json::object& subresources = object_or_empty(v, "subresources");
    const json::value* schema = schema_of(v);
    if (schema != nullptr && hoisted_ && i > 0) {
      // The shared schema was checked (and compiled) with the first version.
      if (schemas_ != nullptr) (*schemas_)[i] = (*schemas_)[0];
    } else if (schema != nullptr) {
      std::string schema_path =
          hoisted_ ? "spec.validation.openAPIV3Schema" : path + ".schema.openAPIV3Schema";
      if (subresources.contains("status") && schema->is_object()) {
        status_root(schema->get_object(), schema_path);
      }
      SchemaCompileOptions options{schema_path, false, patterns_};
      // CEL rules: a definition already stored is served whatever its rules (a rule that does
      // not compile fails at its objects' writes), and an update that leaves this version's
      // schema as it was is not held to the per-rule cost limit again, as kube does.
      options.cel.stored = stored_;
      options.cel.suppress_per_expression_cost = unchanged_schema(v, *schema);
      auto compiled = StructuralSchema::compile(*schema, options);
      if (compiled.has_value()) {
        if (schemas_ != nullptr) (*schemas_)[i] = *compiled;
      } else {
        for (auto& c : compiled.error().causes) causes_.push_back(std::move(c));
      }
    }
    scale(subresources, path + ".subresources");
    if (const json::array* columns = array_member(v, "additionalPrinterColumns")) {
      for (std::size_t j = 0; j < columns->size(); ++j) {
        const json::value& c = (*columns)[j];
        column(c.is_object() ? c.get_object() : empty_object(),
               index(path + ".additionalPrinterColumns", j));
      }
    }
    if (const json::array* fields = array_member(v, "selectableFields"); fields && !fields->empty()) {
      if (schema == nullptr) {
        causes_.push_back(invalid(path + ".selectableFields", "\"\"",
                                  "may only be set when `version.schema.openAPIV3Schema` is not "
                                  "included"));
      } else {
        selectable_fields(*fields, *schema, path + ".selectableFields");
      }
    }
  }

  void deprecation_warning(const json::object& v, const std::string& path) {
    const json::value* w = v.if_contains("deprecationWarning");
    if (w == nullptr || w->is_null()) return;
    std::string text = w->is_string() ? std::string(w->get_string()) : std::string();
    std::vector<std::string> errs;
    if (!bool_at(v, "deprecated")) {
      errs.emplace_back("can only be set for deprecated versions");
    } else {
      if (text.size() > 256) errs.emplace_back("must be <= 256 characters long");
      if (text.empty()) errs.emplace_back("must not be an empty string");
      for (std::size_t i = 0; i < text.size(); ++i) {
        auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
          errs.push_back(
              "must only contain printable UTF-8 characters; non-printable character found at "
              "index " + std::to_string(i));
          break;
        }
      }
    }
    for (const auto& e : errs) causes_.push_back(invalid(path + ".deprecationWarning", repr(text), e));
  }

  // With the status subresource, the root schema may only say what stays true once status is
  // validated on its own (kube walks JSONSchemaProps' fields in declaration order).
  void status_root(const json::object& schema, const std::string& path) {
    static constexpr std::string_view kFieldOrder[] = {
        "id", "$schema", "$ref", "description", "type", "nullable", "format", "title", "default",
        "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
        "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
        "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
        "additionalProperties", "patternProperties", "dependencies", "additionalItems",
        "definitions", "externalDocs", "example", "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
        "x-kubernetes-validations"};
    static const std::unordered_set<std::string_view> kAllowed = {
        "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
        "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs",
        "example", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"};
    for (auto key : kFieldOrder) {
      const json::value* v = schema.if_contains(key);
      if (v == nullptr || v->is_null()) continue;
      // Zero values of value fields (false, "") are not set; pointers, lists and maps are.
      bool pointer = key == "default" || key == "example" || key == "$ref" ||
                     key == "x-kubernetes-preserve-unknown-fields" ||
                     key == "x-kubernetes-list-type" || key == "x-kubernetes-map-type";
      if (!pointer && ((v->is_bool() && !v->get_bool()) ||
                       (v->is_string() && v->get_string().empty()))) {
        continue;
      }
      if (key == "type") {
        if (!v->is_string() || v->get_string() != "object") {
          causes_.push_back(invalid(path + ".type", repr(*v),
                                    "only \"object\" is allowed as the type at the root of the "
                                    "schema if the status subresource is enabled"));
          return;
        }
        continue;
      }
      if (!kAllowed.contains(key)) {
        causes_.push_back(invalid(
            path, repr(json::value(schema)),
            "only [Description Type Format Title Maximum ExclusiveMaximum Minimum "
            "ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf "
            "Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] "
            "fields are allowed at the root of the schema if the status subresource is enabled"));
        return;
      }
    }
  }

  // validateSimpleJSONPath.
  bool simple_json_path(const std::string& s, const std::string& field) {
    if (s.empty()) {
      causes_.push_back(invalid(field, repr(s), "must not be empty"));
      return false;
    }
    if (s[0] != '.') {
      causes_.push_back(invalid(field, repr(s), "must be a simple json path starting with ."));
      return false;
    }
    return true;
  }

  void scale(const json::object& subresources, const std::string& path) {
    const json::object* scale = object_member(subresources, "scale");
    if (scale == nullptr) return;
    auto replicas_path = [&](const char* key, std::string_view under, const char* detail) {
      std::string field = path + ".scale." + key;
      std::string value = string_at(*scale, key);
      if (value.empty()) {
        causes_.push_back(required(field));
      } else if (simple_json_path(value, field) && !starts_with(value, under)) {
        causes_.push_back(invalid(field, repr(value), detail));
      }
    };
    replicas_path("specReplicasPath", ".spec.", "should be a json path under .spec");
    replicas_path("statusReplicasPath", ".status.", "should be a json path under .status");
    std::string selector = string_at(*scale, "labelSelectorPath");
    std::string field = path + ".scale.labelSelectorPath";
    if (!selector.empty() && simple_json_path(selector, field) &&
        !starts_with(selector, ".spec.") && !starts_with(selector, ".status.")) {
      causes_.push_back(invalid(field, repr(selector), "should be a json path under either .spec or .status"));
    }
  }

  // ValidateCustomResourceColumnDefinition.
  void column(const json::object& c, const std::string& path) {
    static constexpr std::string_view kTypes = "must be one of boolean,date,integer,number,string";
    if (string_at(c, "name").empty()) causes_.push_back(required(path + ".name"));
    std::string type = string_at(c, "type");
    if (type.empty()) {
      causes_.push_back(required(path + ".type", kTypes));
    } else if (type != "integer" && type != "number" && type != "string" && type != "boolean" &&
               type != "date") {
      causes_.push_back(invalid(path + ".type", repr(type), kTypes));
    }
    std::string format = string_at(c, "format");
    static const std::unordered_set<std::string> kFormats = {
        "int32", "int64", "float", "double", "byte", "date", "date-time", "password"};
    if (!format.empty() && !kFormats.contains(format)) {
      causes_.push_back(invalid(path + ".format", repr(format),
                                "must be one of byte,date,date-time,double,float,int32,int64,password"));
    }
    std::string json_path = string_at(c, "jsonPath");
    if (json_path.empty()) {
      causes_.push_back(required(path + ".JSONPath"));
    } else {
      simple_json_path(json_path, path + ".JSONPath");
    }
  }

  // cel.ValidFieldPath without array notation: the schema a ".a.b" path reaches, or the error.
  struct FieldPath {
    std::string path;  // field.Path's String(): "spec.color"
    std::string root;
    const json::object* schema = nullptr;
    std::string error;
  };
  static FieldPath resolve(std::string_view json_path, const json::object* schema) {
    FieldPath out;
    auto is_delim = [](char c) { return c == '.' || c == '[' || c == ']'; };
    std::size_t pos = 0;
    while (pos < json_path.size()) {
      char c = json_path[pos];
      if (c == '[') return {{}, {}, nullptr, "array notation is not allowed"};
      if (c != '.') {
        std::size_t end = pos;
        while (end < json_path.size() && !is_delim(json_path[end])) ++end;
        if (end == pos) end = pos + 1;
        return {{}, {}, nullptr,
                "expected [ or . but got: " + std::string(json_path.substr(pos, end - pos))};
      }
      ++pos;
      if (pos >= json_path.size()) return {{}, {}, nullptr, "unexpected end of JSON path"};
      std::size_t end = pos;
      while (end < json_path.size() && !is_delim(json_path[end])) ++end;
      if (end == pos) end = pos + 1;  // a delimiter right after '.' is the token itself
      std::string name(json_path.substr(pos, end - pos));
      pos = end;
      const json::object* props = schema != nullptr ? object_member(*schema, "properties") : nullptr;
      const json::value* additional = schema != nullptr ? schema->if_contains("additionalProperties") : nullptr;
      if (props != nullptr) {
        if (!out.path.empty()) out.path += '.';
        out.path += name;
        schema = object_member(*props, name);
        if (schema == nullptr) return {{}, {}, nullptr, "does not refer to a valid field"};
      } else if (additional != nullptr && (additional->is_object() || additional->is_bool())) {
        out.path += "[" + name + "]";
        schema = additional->if_object();
      } else {
        return {{}, {}, nullptr, "does not refer to a valid field"};
      }
      if (out.root.empty()) out.root = name;
    }
    out.schema = schema;
    return out;
  }

  // ValidateCustomResourceSelectableFields.
  void selectable_fields(const json::array& fields, const json::value& schema, const std::string& path) {
    std::set<std::string> unique;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      std::string field = index(path, i) + ".jsonPath";
      std::string json_path = fields[i].is_object() ? string_at(fields[i].get_object(), "jsonPath") : "";
      if (json_path.empty()) {
        causes_.push_back(required(field));
        continue;
      }
      FieldPath found = resolve(json_path, schema.if_object());
      if (!found.error.empty()) {
        causes_.push_back(invalid(field, repr(json_path), "is an invalid path: " + found.error));
        continue;
      }
      if (found.root == "metadata") {
        causes_.push_back(invalid(field, repr(json_path), "must not point to fields in metadata"));
      }
      std::string type = found.schema != nullptr ? string_at(*found.schema, "type") : "";
      if (type != "string" && type != "boolean" && type != "integer") {
        causes_.push_back(invalid(field, repr(json_path),
                                  "must point to a field of type string, boolean or integer. Enum "
                                  "string fields and strings with formats are allowed."));
      }
      if (!unique.insert(found.path).second) causes_.push_back(duplicate(field, json_path));
    }
    if (unique.size() > kMaxSelectableFields) {
      causes_.push_back(too_many(path, unique.size(), kMaxSelectableFields));
    }
  }

  // validateCustomResourceConversion, with the leniency kube's options give an update: review
  // versions none of which kwatch speaks pass when the stored definition's did not either, and
  // a caBundle that is no PEM passes while the stored one is none or the definition is not
  // established yet. Field paths are kube's internal ones (spec.conversion.webhookClientConfig).
  void conversion(const json::object& spec) {
    const json::object* conversion = object_member(spec, "conversion");
    if (conversion == nullptr) return;
    std::string strategy = string_at(*conversion, "strategy");
    const json::object& webhook = object_or_empty(*conversion, "webhook");
    const json::object* client = object_member(webhook, "clientConfig");
    if (strategy.empty()) {
      causes_.push_back(required("spec.conversion.strategy"));
    } else if (strategy != "None" && strategy != "Webhook") {
      causes_.push_back(not_supported("spec.conversion.strategy", strategy, {"None", "Webhook"}));
    }
    const std::string client_path = "spec.conversion.webhookClientConfig";
    if (strategy != "Webhook") {
      if (client != nullptr) {
        causes_.push_back(forbidden(client_path,
                                    "should not be set when strategy is not set to Webhook"));
      }
      if (const json::array* v = array_member(webhook, "conversionReviewVersions"); v && !v->empty()) {
        causes_.push_back(forbidden("spec.conversion.conversionReviewVersions",
                                    "should not be set when strategy is not set to Webhook"));
      }
      return;
    }
    const json::object& old_conversion =
        object_or_empty(object_or_empty(old_ != nullptr ? *old_ : empty_object(), "spec"),
                        "conversion");
    const json::object& old_webhook = object_or_empty(old_conversion, "webhook");
    if (client == nullptr) {
      causes_.push_back(required(client_path, "required when strategy is set to Webhook"));
    } else {
      const json::value* url = client->if_contains("url");
      const json::object* service = object_member(client, "service");
      if ((url != nullptr && !url->is_null()) == (service != nullptr)) {
        causes_.push_back(required(client_path, "exactly one of url or service is required"));
      } else if (service != nullptr) {
        check_webhook_service(*service, client_path + ".service", causes_);
      } else {
        check_webhook_url(string_at(client, "url"), client_path + ".url", causes_);
      }
      const std::string ca = string_at(client, "caBundle");
      if (!ca.empty() && !lenient_ca_bundle(old_webhook)) {
        if (auto problem = ca_bundle_problem(ca)) {
          causes_.push_back(invalid(client_path + ".caBundle", repr(ca), *problem));
        }
      }
    }
    const auto versions = string_items(&webhook, "conversionReviewVersions");
    const std::string at = "spec.conversion.conversionReviewVersions";
    if (versions.empty()) {
      causes_.push_back(required(at));
      return;
    }
    std::set<std::string> seen;
    bool known = false;
    for (std::size_t k = 0; k < versions.size(); ++k) {
      const std::string& v = versions[k];
      if (!seen.insert(v).second) {
        causes_.push_back(invalid(index(at, k), repr(v), "duplicate version"));
        continue;
      }
      for (const auto& e : dns1035_label_errors(v)) {
        causes_.push_back(invalid(index(at, k), repr(v), e));
      }
      known = known || v == "v1" || v == "v1beta1";
    }
    // An update keeps a list kwatch cannot speak if the stored one could not be spoken either.
    bool old_known = true;
    if (old_ != nullptr) {
      const auto old_versions = string_items(&old_webhook, "conversionReviewVersions");
      old_known = old_versions.empty() ||
                  std::any_of(old_versions.begin(), old_versions.end(),
                              [](const std::string& v) { return v == "v1" || v == "v1beta1"; });
    }
    if (!known && old_known) {
      causes_.push_back(invalid(at, repr_strings(versions), "must include at least one of v1, v1beta1"));
    }
  }

  // allowInvalidCABundle, for updates only: not established yet, or the stored caBundle is
  // already no PEM.
  bool lenient_ca_bundle(const json::object& old_webhook) const {
    if (old_ == nullptr) return false;
    if (!condition_true(*old_, "Established")) return true;
    const std::string old_ca = string_at(object_member(old_webhook, "clientConfig"), "caBundle");
    return !old_ca.empty() && ca_bundle_problem(old_ca).has_value();
  }

  void immutables(const json::object& spec, const json::object& old) {
    const json::object& old_spec = object_or_empty(old, "spec");
    const json::object& names = object_or_empty(spec, "names");
    const json::object& old_names = object_or_empty(old_spec, "names");
    auto immutable = [&](const std::string& value, const std::string& old_value, const char* field) {
      if (value != old_value) causes_.push_back(invalid(field, repr(value), "field is immutable"));
    };
    if (condition_true(old, "Established")) {
      immutable(string_at(spec, "scope"), string_at(old_spec, "scope"), "spec.scope");
      immutable(string_at(names, "kind"), string_at(old_names, "kind"), "spec.names.kind");
    }
    immutable(string_at(spec, "group"), string_at(old_spec, "group"), "spec.group");
    immutable(string_at(names, "plural"), string_at(old_names, "plural"), "spec.names.plural");
  }

  // The strategy's storedVersions (PrepareForCreate starts empty, PrepareForUpdate keeps the old
  // status), plus the storage version, then ValidateCustomResourceDefinitionStoredVersions.
  void stored_versions(const json::object& spec, const json::object* old) {
    std::vector<std::string> stored;
    if (old != nullptr) stored = strings_at(object_or_empty(*old, "status"), "storedVersions");
    auto versions = versions_of(spec);
    for (const auto& v : versions) {
      if (v.storage) {
        if (std::find(stored.begin(), stored.end(), v.name) == stored.end()) stored.push_back(v.name);
        break;
      }
    }
    const std::string path = "status.storedVersions";
    if (stored.empty()) {
      causes_.push_back(invalid(path, "null", "must have at least one stored version"));
      return;
    }
    std::vector<bool> in_spec(stored.size(), false);
    for (const auto& v : versions) {
      bool found = false;
      for (std::size_t i = 0; i < stored.size(); ++i) {
        if (stored[i] == v.name) {
          found = true;
          in_spec[i] = true;
        }
      }
      if (v.storage && !found) {
        causes_.push_back(invalid(path, repr_strings(stored), "must have the storage version " + v.name));
      }
    }
    for (std::size_t i = 0; i < stored.size(); ++i) {
      if (in_spec[i]) continue;
      const std::string& v = stored[i];
      causes_.push_back(invalid(
          index(path, i), repr(v),
          "missing from spec.versions; " + v + " was previously a storage version, and must "
          "remain in spec.versions until a storage migration ensures no data remains persisted "
          "in " + v + " and removes " + v + " from status.storedVersions"));
    }
  }

  enum class Approval { invalid, approved, bypassed, missing };
  static Approval approval_state(const json::object& crd, std::string& reason) {
    std::string a = string_at(object_or_empty(object_or_empty(crd, "metadata"), "annotations"),
                              kApprovalAnnotation);
    if (a.empty()) {
      reason = "protected groups must have approval annotation \"api-approved.kubernetes.io\", "
               "see https://github.com/kubernetes/enhancements/pull/1111";
      return Approval::missing;
    }
    if (starts_with(a, "unapproved")) {
      reason = "not approved: " + go_quote(a);
      return Approval::bypassed;
    }
    // url.ParseRequestURI with a scheme and a host.
    auto colon = a.find("://");
    bool scheme_ok = colon != std::string::npos && colon > 0 && std::isalpha(static_cast<unsigned char>(a[0]));
    for (std::size_t i = 0; scheme_ok && i < colon; ++i) {
      char c = a[i];
      scheme_ok = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
    }
    if (scheme_ok && colon + 3 < a.size() && a[colon + 3] != '/' &&
        a.find(' ') == std::string::npos) {
      reason = "approved in " + a;
      return Approval::approved;
    }
    reason = "protected groups must have approval annotation \"api-approved.kubernetes.io\" with "
             "either a URL or a reason starting with \"unapproved\", see "
             "https://github.com/kubernetes/enhancements/pull/1111";
    return Approval::invalid;
  }

  // validateAPIApproval: *.k8s.io and *.kubernetes.io groups belong to the Kubernetes project.
  void api_approval(const json::object& crd, const json::object* old) {
    std::string group = string_at(object_or_empty(crd, "spec"), "group");
    bool is_protected = group == "k8s.io" || ends_with(group, ".k8s.io") ||
                        group == "kubernetes.io" || ends_with(group, ".kubernetes.io");
    if (!is_protected) return;
    std::string reason, old_reason;
    Approval state = approval_state(crd, reason);
    if (old != nullptr && approval_state(*old, old_reason) == state) return;
    std::string field = "metadata.annotations[" + std::string(kApprovalAnnotation) + "]";
    std::string value = string_at(object_or_empty(object_or_empty(crd, "metadata"), "annotations"),
                                  kApprovalAnnotation);
    if (state == Approval::missing) causes_.push_back(required(field, reason));
    if (state == Approval::invalid) causes_.push_back(invalid(field, repr(value), reason));
  }

  std::vector<std::shared_ptr<const StructuralSchema>>* schemas_;
  // Every version's patterns, compiled once per distinct text within one budget.
  std::shared_ptr<PatternCache> patterns_;
  bool stored_ = false;
  bool hoisted_ = false;  // every version has the same schema
  const json::object* old_ = nullptr;

  // Whether the old definition has this version with the same schema.
  bool unchanged_schema(const json::object& version, const json::value& schema) const {
    if (old_ == nullptr) return false;
    const std::string name = string_at(version, "name");
    const json::object& old_spec = object_or_empty(*old_, "spec");
    const json::array* versions = array_member(old_spec, "versions");
    if (versions == nullptr) return false;
    for (const auto& v : *versions) {
      if (!v.is_object() || string_at(v.get_object(), "name") != name) continue;
      const json::value* old_schema = schema_of(v.get_object());
      return old_schema != nullptr && *old_schema == schema;
    }
    return false;
  }
  std::vector<Cause> causes_;
};

// ---- status ----

json::object& status_of(json::object& crd) {
  json::value& s = crd["status"];
  if (!s.is_object()) s = json::object();
  return s.get_object();
}

// SetCRDCondition: the transition time moves only when the status changes (or had none).
void set_condition(json::object& crd, std::string_view type, std::string_view status,
                   std::string_view reason, std::string_view message, std::string_view now) {
  json::object& cond = apimachinery::set_condition(status_of(crd), type, status, now).condition;
  cond["reason"] = reason;
  cond["message"] = message;
}

void add_storage_version(json::object& crd) {
  std::string storage = storage_version_of(object_or_empty(crd, "spec"));
  if (storage.empty()) return;
  json::object& st = status_of(crd);
  json::value& sv = st["storedVersions"];
  if (!sv.is_array()) sv = json::array();
  for (const auto& v : sv.get_array()) {
    if (v.is_string() && v.get_string() == storage) return;
  }
  sv.get_array().emplace_back(storage);
}

}  // namespace

void default_custom_resource_definition(json::object& crd) {
  json::value* spec_value = crd.if_contains("spec");
  if (spec_value == nullptr || !spec_value->is_object()) return;  // validation reports it
  json::object& spec = spec_value->get_object();
  if (json::value* names_value = spec.if_contains("names"); names_value && names_value->is_object()) {
    json::object& names = names_value->get_object();
    std::string kind = string_at(names, "kind");
    if (string_at(names, "singular").empty() && !kind.empty()) names["singular"] = lower(kind);
    if (string_at(names, "listKind").empty() && !kind.empty()) names["listKind"] = kind + "List";
  }
  json::value* conversion = spec.if_contains("conversion");
  if (conversion == nullptr || conversion->is_null()) {
    spec["conversion"] = json::object{{"strategy", "None"}};
  } else if (conversion->is_object()) {
    // SetDefaults_ServiceReference.
    json::object* webhook = nullptr;
    if (json::value* w = conversion->get_object().if_contains("webhook")) webhook = w->if_object();
    json::object* client = nullptr;
    if (webhook != nullptr) {
      if (json::value* c = webhook->if_contains("clientConfig")) client = c->if_object();
    }
    if (client != nullptr) {
      if (json::value* s = client->if_contains("service"); s && s->is_object()) {
        json::value* port = s->get_object().if_contains("port");
        if (port == nullptr || port->is_null()) s->get_object()["port"] = 443;
      }
    }
  }
  const json::object* status = object_member(crd, "status");
  const json::array* stored = status != nullptr ? array_member(*status, "storedVersions") : nullptr;
  if (stored == nullptr || stored->empty()) add_storage_version(crd);
}

void reset_custom_resource_definition_status(json::object& crd) {
  // Go's zero status as its JSON writes it: the accepted names' plural and kind have no
  // omitempty. (Nor has `conditions`, which Go writes as null; the schema the status is then
  // validated by takes no null there, and the CRD controller writes the conditions at once.)
  crd["status"] = json::object{{"acceptedNames", json::object{{"plural", ""}, {"kind", ""}}}};
  add_storage_version(crd);
}

std::vector<Cause> validate_custom_resource_definition(const json::object& crd,
                                                       const json::object* old) {
  return Validator(nullptr).run(crd, old);
}

std::shared_ptr<const ConversionWebhook> conversion_webhook_of(const json::object& crd) {
  const json::object& conversion =
      object_or_empty(object_or_empty(crd, "spec"), "conversion");
  if (string_at(conversion, "strategy") != "Webhook") return nullptr;
  const json::object& webhook = object_or_empty(conversion, "webhook");
  auto out = std::make_shared<ConversionWebhook>();
  out->definition = string_at(object_or_empty(crd, "metadata"), "name");
  CompiledWebhook& client = out->client;
  client.name = "conversion_webhook_for_" + out->definition;
  read_client_config(object_member(webhook, "clientConfig"), client);
  client.timeout = std::chrono::seconds(30);
  client.side_effects = "None";
  for (const auto& v : string_items(&webhook, "conversionReviewVersions")) {
    if (v == "v1" || v == "v1beta1") {
      client.review_version = v;
      break;
    }
  }
  return out;
}

ApiResult<std::vector<ResourceInfo>> custom_resources(const json::object& crd_in,
                                                      const std::string& storage_prefix,
                                                      std::shared_ptr<PatternCache> patterns,
                                                      bool stored) {
  json::object crd = crd_in;
  default_custom_resource_definition(crd);
  std::vector<std::shared_ptr<const StructuralSchema>> schemas;
  auto causes = Validator(&schemas, std::move(patterns), stored).run(crd, nullptr);
  const json::object& meta = object_or_empty(crd, "metadata");
  if (!causes.empty()) {
    return invalid_error("apiextensions.k8s.io", "CustomResourceDefinition",
                         string_at(meta, "name"), std::move(causes));
  }

  const json::object& spec = object_or_empty(crd, "spec");
  const json::object& names = object_or_empty(spec, "names");
  std::string group = string_at(spec, "group");
  std::string plural = string_at(names, "plural");
  std::string storage_version = storage_version_of(spec);
  auto versions = versions_of(spec);
  std::shared_ptr<const ConversionWebhook> webhook = conversion_webhook_of(crd);
  std::vector<ResourceInfo> out;
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const Version& v = versions[i];
    if (!v.served) continue;
    ResourceInfo info;
    info.group = group;
    info.version = v.name;
    info.kind = string_at(names, "kind");
    info.resource = plural;
    info.singular = string_at(names, "singular");
    info.namespaced = string_at(spec, "scope") == "Namespaced";
    info.short_names = strings_at(names, "shortNames");
    info.categories = strings_at(names, "categories");
    if (const json::array* fields = array_member(*v.obj, "selectableFields")) {
      for (const auto& f : *fields) {
        std::string path = f.is_object() ? string_at(f.get_object(), "jsonPath") : "";
        if (starts_with(path, ".")) path.erase(0, 1);
        info.selectable_fields.push_back(std::move(path));
      }
    }
    const json::object& subresources = object_or_empty(*v.obj, "subresources");
    info.has_status = subresources.contains("status");
    info.storage_prefix = storage_prefix;
    info.key_resource = group + "/" + plural;
    info.origin = KindOrigin::custom;
    info.generation = GenerationRule::content;
    info.schema = schemas[i];
    if (const json::value* schema = schema_of(*v.obj)) {
      info.field_types = FieldTypes::of_resource(*schema);
    }
    if (const json::array* columns = array_member(*v.obj, "additionalPrinterColumns")) {
      for (const auto& c : *columns) {
        const json::object& o = c.is_object() ? c.get_object() : empty_object();
        PrinterColumn col;
        col.name = string_at(o, "name");
        col.type = string_at(o, "type");
        col.format = string_at(o, "format");
        col.description = string_at(o, "description");
        col.json_path = string_at(o, "jsonPath");
        if (const json::value* p = o.if_contains("priority"); p && p->is_int64()) {
          col.priority = static_cast<int>(p->get_int64());
        }
        info.printer_columns.push_back(std::move(col));
      }
    }
    if (const json::object* scale = object_member(subresources, "scale")) {
      info.scale = ScaleSubresource{string_at(*scale, "specReplicasPath"),
                                    string_at(*scale, "statusReplicasPath"),
                                    string_at(*scale, "labelSelectorPath"),
                                    ScaleSelector::text};
    }
    info.storage_version = storage_version;
    info.conversion_webhook = webhook;
    out.push_back(std::move(info));
  }
  return out;
}

std::optional<ResourceInfo> custom_resource_storage(const json::object& crd,
                                                    const std::string& storage_prefix) {
  const json::object& spec = object_or_empty(crd, "spec");
  const json::object& names = object_or_empty(spec, "names");
  std::string group = string_at(spec, "group");
  std::string plural = string_at(names, "plural");
  if (group.empty() || plural.empty()) return std::nullopt;
  ResourceInfo info;
  info.group = group;
  info.storage_version = storage_version_of(spec);
  info.version = info.storage_version;
  info.kind = string_at(names, "kind");
  info.resource = plural;
  info.singular = string_at(names, "singular");
  info.namespaced = string_at(spec, "scope") == "Namespaced";
  info.storage_prefix = storage_prefix;
  info.key_resource = group + "/" + plural;
  info.origin = KindOrigin::custom;
  info.generation = GenerationRule::content;
  info.owner = string_at(object_or_empty(crd, "metadata"), "name");
  return info;
}

bool has_true_condition(const json::object& crd, std::string_view type) {
  return condition_true(crd, type);
}

std::optional<std::pair<std::string, std::string>> names_conflict(const json::object& crd,
                                                                  const Scheme& scheme) {
  const json::object& spec = object_or_empty(crd, "spec");
  const json::object& requested = object_or_empty(spec, "names");
  const json::object& accepted = object_or_empty(object_or_empty(crd, "status"), "acceptedNames");
  std::string group = string_at(spec, "group");
  std::string plural = string_at(requested, "plural");

  std::unordered_set<std::string> resources, kinds;
  for (const auto& r : scheme.resources()) {
    if (r->group != group) continue;
    if (r->origin == KindOrigin::custom && r->resource == plural) continue;  // this CRD itself
    for (const std::string* name : {&r->resource, &r->singular}) {
      if (!name->empty()) resources.insert(*name);
    }
    for (const auto& s : r->short_names) resources.insert(s);
    kinds.insert(r->kind);
    kinds.insert(r->list_kind());
  }

  std::optional<std::pair<std::string, std::string>> conflict;
  // equalToAcceptedOrFresh.
  auto check = [&](const std::string& name, const std::string& accepted_name,
                   const std::unordered_set<std::string>& used) -> std::optional<std::string> {
    if (name == accepted_name || !used.contains(name)) return std::nullopt;
    return go_quote(name) + " is already in use";
  };
  if (auto e = check(plural, string_at(accepted, "plural"), resources)) {
    conflict = {"PluralConflict", *e};
  }
  if (auto e = check(string_at(requested, "singular"), string_at(accepted, "singular"), resources)) {
    conflict = {"SingularConflict", *e};
  }
  auto short_names = strings_at(requested, "shortNames");
  auto accepted_short = strings_at(accepted, "shortNames");
  if (short_names != accepted_short) {
    std::vector<std::string> errs;
    for (const auto& s : short_names) {
      if (std::find(accepted_short.begin(), accepted_short.end(), s) != accepted_short.end()) continue;
      if (auto e = check(s, "", resources)) errs.push_back(*e);
    }
    if (!errs.empty()) {
      // utilerrors.NewAggregate: one error as itself, several in brackets.
      conflict = {"ShortNamesConflict", errs.size() == 1 ? errs[0] : "[" + join(errs, ", ") + "]"};
    }
  }
  if (auto e = check(string_at(requested, "kind"), string_at(accepted, "kind"), kinds)) {
    conflict = {"KindConflict", *e};
  }
  if (auto e = check(string_at(requested, "listKind"), string_at(accepted, "listKind"), kinds)) {
    conflict = {"ListKindConflict", *e};
  }
  return conflict;
}

json::object accepted_status(json::object crd, std::string_view now_rfc3339) {
  json::object names = object_or_empty(object_or_empty(crd, "spec"), "names");
  status_of(crd)["acceptedNames"] = std::move(names);
  set_condition(crd, "NamesAccepted", "True", "NoConflicts", "no conflicts found", now_rfc3339);
  set_condition(crd, "Established", "True", "InitialNamesAccepted",
                "the initial names have been accepted", now_rfc3339);
  add_storage_version(crd);
  return crd;
}

json::object rejected_names_status(json::object crd, std::string_view reason,
                                   std::string_view message, std::string_view now_rfc3339) {
  set_condition(crd, "NamesAccepted", "False", reason, message, now_rfc3339);
  if (!condition_true(crd, "Established")) {
    set_condition(crd, "Established", "False", "NotAccepted", "not all names are accepted",
                  now_rfc3339);
  }
  return crd;
}

void set_terminating(json::object& crd, std::string_view now_rfc3339) {
  set_condition(crd, "Terminating", "True", "InstanceDeletionInProgress",
                "CustomResource deletion is in progress", now_rfc3339);
}

}  // namespace kwatch::kinds
