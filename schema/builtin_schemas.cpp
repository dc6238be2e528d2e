#include "schema/builtin_schemas.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace kwatch::schema {

using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;

namespace detail {
// schema/schemas/builtin.json, generated into the build tree at configure time.
extern const std::string_view kBuiltinSchemasJson;
extern const std::string_view kBuiltinDescriptionsJson;
}  // namespace detail

namespace {

namespace json = boost::json;

struct Field {
  std::string name;
  std::string type;
  std::string list;       // x-kubernetes-list-type
  std::vector<std::string> keys;
  std::string map_type;   // x-kubernetes-map-type
  std::string patch;      // patch strategy
  std::string merge_key;
  std::string format;     // overrides the type's format
  json::object checks;    // enum, minimum, maximum, default: copied into the schemas as they are
};

struct Definition {
  std::vector<Field> fields;  // sorted by name
  std::vector<std::string> required;
};

bool is_scalar(std::string_view t) {
  static const std::set<std::string_view> kScalars = {
      "string", "boolean", "integer", "int32",         "int64",    "number",
      "date-time", "byte", "int-or-string", "quantity", "any"};
  return kScalars.count(t) > 0;
}

// "[]T" -> T, "map[T]" -> T; empty when `t` is neither.
std::string_view element_of(std::string_view t, bool& is_list, bool& is_map) {
  is_list = t.starts_with("[]");
  is_map = !is_list && t.starts_with("map[") && t.ends_with("]");
  if (is_list) return t.substr(2);
  if (is_map) return t.substr(4, t.size() - 5);
  return {};
}

std::string_view innermost(std::string_view t) {
  for (;;) {
    bool l = false, m = false;
    auto e = element_of(t, l, m);
    if (!l && !m) return t;
    t = e;
  }
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

const std::vector<std::string> kPatchStrategies = {"merge", "replace", "retainKeys",
                                                   "merge,retainKeys"};

// The scalar part of a structural or OpenAPI schema.
json::object scalar_schema(std::string_view t, bool openapi) {
  json::object s;
  if (t == "string") {
    s["type"] = "string";
  } else if (t == "boolean") {
    s["type"] = "boolean";
  } else if (t == "integer" || t == "int64") {
    s["type"] = "integer";
    s["format"] = "int64";
  } else if (t == "int32") {
    s["type"] = "integer";
    s["format"] = "int32";
  } else if (t == "number") {
    s["type"] = "number";
    s["format"] = "double";
  } else if (t == "date-time") {
    s["type"] = "string";
    s["format"] = "date-time";
  } else if (t == "byte") {
    s["type"] = "string";
    s["format"] = "byte";
  } else if (t == "int-or-string") {
    if (openapi) {
      s["type"] = "string";
      s["format"] = "int-or-string";
    }
    s["x-kubernetes-int-or-string"] = true;
  } else if (t == "quantity") {
    // kube serves resource.Quantity as a string; on the wire numbers are accepted too.
    // Marked for the write-time pass that stores it as kube does (canonicalize_quantities):
    // a key of kwatch's own, which a CRD's stored schema never holds (its kind drops it).
    if (openapi) {
      s["type"] = "string";
    } else {
      s["x-kubernetes-preserve-unknown-fields"] = true;
      s["x-kwatch-quantity"] = true;
    }
  } else {  // any
    if (openapi) s["type"] = "object";
    s["x-kubernetes-preserve-unknown-fields"] = true;
  }
  return s;
}

std::string_view group_key(std::string_view group) { return group == "core" ? "" : group; }

}  // namespace

struct KindSchemas::Data {
  std::vector<Kind> kinds;
  std::map<std::string, Definition, std::less<>> definitions;

  const Kind* find_kind(std::string_view group, std::string_view version,
                        std::string_view kind) const {
    group = group_key(group);
    for (const auto& k : kinds) {
      if (k.group == group && k.version == version && k.kind == kind) return &k;
    }
    return nullptr;
  }

  const Definition& def(std::string_view name) const { return definitions.find(name)->second; }

  // The schema of a field's type: a list or a map wraps its elements' schema, a scalar is its
  // own, a definition is what `definition(name, nested)` makes of it (inlined for structural
  // schemas, referenced for OpenAPI). `nested`: the type is a list's or map's element.
  template <class DefinitionFn>
  json::value type_schema(std::string_view t, const Field* f, bool openapi,
                          const DefinitionFn& definition) const {
    bool is_list = false, is_map = false;
    auto elem = element_of(t, is_list, is_map);
    json::object s;
    if (is_list) {
      s["type"] = "array";
      s["items"] = type_schema(elem, nullptr, openapi, definition);
      if (f && !f->list.empty()) s["x-kubernetes-list-type"] = f->list;
      if (f && !f->keys.empty()) {
        json::array keys;
        for (const auto& k : f->keys) keys.emplace_back(k);
        s["x-kubernetes-list-map-keys"] = std::move(keys);
      }
    } else if (is_map) {
      s["type"] = "object";
      s["additionalProperties"] = type_schema(elem, nullptr, openapi, definition);
      if (f && !f->map_type.empty()) s["x-kubernetes-map-type"] = f->map_type;
    } else if (is_scalar(t)) {
      s = scalar_schema(t, openapi);
    } else {
      s = definition(t, f == nullptr);
    }
    if (f) {
      if (!f->format.empty()) s["format"] = f->format;
      for (const auto& kv : f->checks) s[kv.key()] = kv.value();
      if (openapi && !f->patch.empty()) s["x-kubernetes-patch-strategy"] = f->patch;
      if (openapi && !f->merge_key.empty()) s["x-kubernetes-patch-merge-key"] = f->merge_key;
    }
    return s;
  }

  // ---- structural schemas ----

  json::value structural_type(std::string_view t, const Field* f,
                              std::vector<std::string_view>& stack) const {
    return type_schema(t, f, false, [&](std::string_view name, bool) {
      return structural_object(name, stack, false);
    });
  }

  json::object structural_object(std::string_view name, std::vector<std::string_view>& stack,
                                 bool root) const {
    json::object s;
    s["type"] = "object";
    if (std::find(stack.begin(), stack.end(), name) != stack.end()) {
      s["x-kubernetes-preserve-unknown-fields"] = true;
      return s;
    }
    stack.push_back(name);
    const Definition& d = def(name);
    json::object props;
    for (const auto& f : d.fields) {
      if (root && f.name == "metadata") {
        props["metadata"] = json::object{{"type", "object"}};
      } else if (root && (f.name == "apiVersion" || f.name == "kind")) {
        props[f.name] = json::object{{"type", "string"}};
      } else {
        props[f.name] = structural_type(f.type, &f, stack);
        // A core/v1 ResourceList: kube's SetDefaults_ResourceList rounds its values up to
        // milli-units (canonicalize_quantities).
        if (f.type == "map[quantity]" && name.starts_with("io.k8s.api.core.v1.")) {
          props[f.name].as_object()["additionalProperties"].as_object()["x-kwatch-resource-list"] =
              true;
        }
      }
    }
    if (root) {
      for (const char* k : {"apiVersion", "kind"}) {
        if (!props.contains(k)) props[k] = json::object{{"type", "string"}};
      }
      if (!props.contains("metadata")) props["metadata"] = json::object{{"type", "object"}};
    }
    s["properties"] = std::move(props);
    if (!d.required.empty()) {
      json::array req;
      for (const auto& r : d.required) {
        if (root && r == "metadata") continue;
        req.emplace_back(r);
      }
      if (!req.empty()) s["required"] = std::move(req);
    }
    stack.pop_back();
    return s;
  }

  // ---- OpenAPI components ----

  json::value openapi_type(std::string_view t, const Field* f) const {
    return type_schema(t, f, true, [](std::string_view name, bool nested) {
      std::string ref = "#/components/schemas/" + std::string(name);
      if (nested) return json::object{{"$ref", ref}};
      return json::object{{"allOf", json::array{json::object{{"$ref", ref}}}}};
    });
  }

  json::object openapi_definition(const Definition& d) const {
    json::object s;
    s["type"] = "object";
    json::object props;
    for (const auto& f : d.fields) props[f.name] = openapi_type(f.type, &f);
    s["properties"] = std::move(props);
    if (!d.required.empty()) {
      json::array req;
      for (const auto& r : d.required) req.emplace_back(r);
      s["required"] = std::move(req);
    }
    return s;
  }

  // ---- patch schemas ----

  void add_patch_rules(std::string_view name, const std::string& prefix, PatchSchema& out,
                       std::vector<std::string_view>& stack) const {
    if (std::find(stack.begin(), stack.end(), name) != stack.end()) return;
    stack.push_back(name);
    for (const auto& f : def(name).fields) {
      std::string path = prefix.empty() ? f.name : prefix + "." + f.name;
      if (!f.patch.empty()) {
        PatchRule rule;
        rule.strategy = f.patch == "replace" ? PatchStrategy::replace : PatchStrategy::merge;
        rule.merge_key = f.merge_key;
        rule.retain_keys = f.patch.find("retainKeys") != std::string::npos;
        out.set(path, std::move(rule));
      }
      // Lists step into their elements; map values have no path syntax and carry no rules here.
      std::string_view t = f.type;
      std::string sub = path;
      while (t.starts_with("[]")) {
        t.remove_prefix(2);
        sub += "[]";
      }
      if (!is_scalar(t) && !t.starts_with("map[")) add_patch_rules(t, sub, out, stack);
    }
    stack.pop_back();
  }
};

namespace {

ApiError invalid(std::string message) {
  return ApiError(Errc::invalid, "invalid compact schema: " + std::move(message));
}

const json::string* string_member(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

// Checks a type string; returns the problem or empty.
std::string check_type(std::string_view t,
                       const std::map<std::string, Definition, std::less<>>& definitions) {
  auto inner = innermost(t);
  if (inner.empty()) return "empty type in " + quoted(t);
  if (is_scalar(inner)) return {};
  if (inner.find('.') == std::string_view::npos) return "unknown type " + quoted(t);
  if (!definitions.contains(inner)) return "reference to unknown definition " + quoted(inner);
  return {};
}

ApiResult<Field> parse_field(std::string_view def_name, std::string_view name,
                             const json::value& v) {
  auto where = [&] { return "definition " + quoted(def_name) + " field " + quoted(name) + ": "; };
  Field f;
  f.name = name;
  if (auto* s = v.if_string()) {
    f.type = *s;
    return f;
  }
  auto* o = v.if_object();
  if (!o) return invalid(where() + "must be a type string or an object");
  for (const auto& kv : *o) {
    std::string_view k = kv.key();
    const json::value& x = kv.value();
    auto str = [&](std::string& out) -> bool {
      if (!x.is_string()) return false;
      out = x.get_string();
      return true;
    };
    bool ok = true;
    if (k == "type") {
      ok = str(f.type);
    } else if (k == "list") {
      ok = str(f.list) && (f.list == "atomic" || f.list == "set" || f.list == "map");
    } else if (k == "map") {
      ok = str(f.map_type) && (f.map_type == "atomic" || f.map_type == "granular");
    } else if (k == "patch") {
      ok = str(f.patch) && std::find(kPatchStrategies.begin(), kPatchStrategies.end(),
                                     f.patch) != kPatchStrategies.end();
    } else if (k == "mergeKey") {
      ok = str(f.merge_key);
    } else if (k == "format") {
      ok = str(f.format);
    } else if (k == "keys") {
      ok = x.is_array() && !x.get_array().empty();
      if (ok) {
        for (const auto& e : x.get_array()) {
          if (!e.is_string()) ok = false;
          else f.keys.emplace_back(e.get_string());
        }
      }
    } else if (k == "enum") {
      ok = x.is_array() && !x.get_array().empty();
      if (ok) f.checks["enum"] = x;
    } else if (k == "minimum" || k == "maximum") {
      ok = x.is_number();
      if (ok) f.checks[k] = x;
    } else if (k == "default") {
      f.checks["default"] = x;
    } else {
      return invalid(where() + "unknown attribute " + quoted(k));
    }
    if (!ok) return invalid(where() + "bad value of " + quoted(k) + ": " + json::serialize(x));
  }
  if (f.type.empty()) return invalid(where() + "has no type");
  bool is_list = false, is_map = false;
  element_of(f.type, is_list, is_map);
  if ((!f.list.empty() || !f.keys.empty()) && !is_list) {
    return invalid(where() + "list attributes on the non-list type " + quoted(f.type));
  }
  if (!f.map_type.empty() && !is_map && is_scalar(f.type)) {
    return invalid(where() + "map attribute on the scalar type " + quoted(f.type));
  }
  if (!f.keys.empty() && f.list != "map") {
    return invalid(where() + "list-map keys without \"list\": \"map\"");
  }
  if (f.list == "map" && f.keys.empty()) return invalid(where() + "\"list\": \"map\" without keys");
  return f;
}

}  // namespace

KindSchemas::KindSchemas(std::unique_ptr<Data> data) : data_(std::move(data)) {}
KindSchemas::~KindSchemas() = default;

ApiResult<std::shared_ptr<const KindSchemas>> KindSchemas::load(std::string_view compact_json) {
  boost::system::error_code ec;
  json::value doc = json::parse(compact_json, ec);
  if (ec) return invalid("not JSON: " + ec.message());
  auto* root = doc.if_object();
  if (!root) return invalid("must be an object");
  auto data = std::make_unique<Data>();

  auto* defs = root->if_contains("definitions");
  if (!defs || !defs->is_object()) return invalid("\"definitions\" must be an object");
  for (const auto& kv : defs->get_object()) {
    std::string_view name = kv.key();
    auto* o = kv.value().if_object();
    if (!o) return invalid("definition " + quoted(name) + " must be an object");
    Definition d;
    for (const auto& m : *o) {
      if (m.key() != "fields" && m.key() != "required") {
        return invalid("definition " + quoted(name) + ": unknown member " + quoted(m.key()));
      }
    }
    auto* fields = o->if_contains("fields");
    if (!fields || !fields->is_object()) {
      return invalid("definition " + quoted(name) + ": \"fields\" must be an object");
    }
    for (const auto& f : fields->get_object()) {
      auto field = parse_field(name, f.key(), f.value());
      if (!field) return field.error();
      d.fields.push_back(std::move(*field));
    }
    std::sort(d.fields.begin(), d.fields.end(),
              [](const Field& a, const Field& b) { return a.name < b.name; });
    if (auto* req = o->if_contains("required")) {
      if (!req->is_array()) {
        return invalid("definition " + quoted(name) + ": \"required\" must be an array");
      }
      for (const auto& r : req->get_array()) {
        auto* s = r.if_string();
        bool known = s && std::any_of(d.fields.begin(), d.fields.end(),
                                      [&](const Field& f) { return f.name == *s; });
        if (!known) {
          return invalid("definition " + quoted(name) + ": required " + json::serialize(r) +
                         " is not a field");
        }
        d.required.emplace_back(*s);
      }
    }
    data->definitions.emplace(std::string(name), std::move(d));
  }
  // References, and list-map keys that name fields of the element definition.
  for (const auto& [name, d] : data->definitions) {
    for (const auto& f : d.fields) {
      auto problem = check_type(f.type, data->definitions);
      if (!problem.empty()) {
        return invalid("definition " + quoted(name) + " field " + quoted(f.name) + ": " +
                       problem);
      }
      if (!f.keys.empty()) {
        auto elem = innermost(f.type);
        auto it = data->definitions.find(elem);
        for (const auto& k : f.keys) {
          bool found = it != data->definitions.end() &&
                       std::any_of(it->second.fields.begin(), it->second.fields.end(),
                                   [&](const Field& e) { return e.name == k; });
          if (!found) {
            return invalid("definition " + quoted(name) + " field " + quoted(f.name) +
                           ": list-map key " + quoted(k) + " is not a field of " + quoted(elem));
          }
        }
      }
    }
  }

  auto* kinds = root->if_contains("kinds");
  if (!kinds || !kinds->is_array()) return invalid("\"kinds\" must be an array");
  for (const auto& k : kinds->get_array()) {
    auto* o = k.if_object();
    const json::string *g = nullptr, *v = nullptr, *kind = nullptr, *def = nullptr;
    if (o) {
      g = string_member(*o, "group");
      v = string_member(*o, "version");
      kind = string_member(*o, "kind");
      def = string_member(*o, "definition");
    }
    if (!g || !v || !kind || !def) {
      return invalid("kind " + json::serialize(k) +
                     " needs string group, version, kind and definition");
    }
    if (!data->definitions.contains(std::string_view(*def))) {
      return invalid("kind " + std::string(*g) + "/" + std::string(*v) + " " +
                     std::string(*kind) + ": unknown definition " + quoted(*def));
    }
    data->kinds.push_back({std::string(*g), std::string(*v), std::string(*kind), std::string(*def)});
  }
  return std::shared_ptr<const KindSchemas>(new KindSchemas(std::move(data)));
}

const KindSchemas& KindSchemas::builtin() {
  static const std::shared_ptr<const KindSchemas> schemas = [] {
    auto r = load(detail::kBuiltinSchemasJson);
    if (!r) {
      // The compiled-in form is checked by the tests; a failure here is a build defect.
      std::fprintf(stderr, "kwatch: schema/schemas/builtin.json: %s\n", r.error().message.c_str());
      std::abort();
    }
    return *r;
  }();
  return *schemas;
}

const std::vector<KindSchemas::Kind>& KindSchemas::kinds() const { return data_->kinds; }

const std::string* KindSchemas::definition(std::string_view group, std::string_view version,
                                           std::string_view kind) const {
  const Kind* k = data_->find_kind(group, version, kind);
  return k ? &k->definition : nullptr;
}

std::optional<json::value> KindSchemas::structural_schema(std::string_view group,
                                                          std::string_view version,
                                                          std::string_view kind) const {
  const Kind* k = data_->find_kind(group, version, kind);
  if (!k) return std::nullopt;
  std::vector<std::string_view> stack;
  return json::value(data_->structural_object(k->definition, stack, true));
}

namespace {

// kube's descriptions of the built-in definitions (schema/schemas/descriptions.json), parsed
// once: {"<definition>": {"": the type's, "<field>": the field's}}.
const json::object& builtin_descriptions() {
  static const json::object kDescriptions = [] {
    boost::system::error_code ec;
    json::value v = json::parse(detail::kBuiltinDescriptionsJson, ec);
    return !ec && v.is_object() ? std::move(v.get_object()) : json::object();
  }();
  return kDescriptions;
}

// Sets the description of `definition` (the schema `s`) and of its properties, as kube publishes
// them.
void add_descriptions(std::string_view definition, json::object& s) {
  const json::value* known = builtin_descriptions().if_contains(definition);
  if (known == nullptr || !known->is_object()) return;
  const json::object& texts = known->get_object();
  if (const json::value* d = texts.if_contains("")) s["description"] = *d;
  json::value* props = s.if_contains("properties");
  if (props == nullptr || !props->is_object()) return;
  for (auto& [field, schema] : props->get_object()) {
    const json::value* d = texts.if_contains(field);
    if (d != nullptr && schema.is_object()) schema.get_object()["description"] = *d;
  }
}

}  // namespace

std::string_view builtin_description(std::string_view definition, std::string_view field) {
  const json::value* known = builtin_descriptions().if_contains(definition);
  const json::value* text = known != nullptr && known->is_object()
                                ? known->get_object().if_contains(field)
                                : nullptr;
  return text != nullptr && text->is_string() ? std::string_view(text->get_string())
                                              : std::string_view();
}

json::object KindSchemas::openapi_components(std::string_view group,
                                             std::string_view version) const {
  group = group_key(group);
  json::object out;
  std::map<std::string_view, json::array> gvks;
  std::vector<std::string_view> todo;
  for (const auto& k : data_->kinds) {
    if (k.group != group || k.version != version) continue;
    gvks[k.definition].push_back(
        json::object{{"group", k.group}, {"kind", k.kind}, {"version", k.version}});
    todo.push_back(k.definition);
  }
  // What the operations name besides the kinds: each kind's list (where kube has one), and what
  // deletes and watches answer and a delete takes (server/openapi_paths.hpp).
  static const std::string kOperationDefinitions[] = {
      "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
      "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions",
      "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"};
  if (!todo.empty()) {
    for (const auto& name : kOperationDefinitions) todo.push_back(name);
    for (const auto& k : data_->kinds) {
      if (k.group != group || k.version != version) continue;
      const std::string list = k.definition + "List";
      if (!builtin_descriptions().contains(list)) continue;  // no such kind in kube (Scale)
      json::object l{
          {"type", "object"},
          {"required", json::array{"items"}},
          {"properties",
           json::object{{"apiVersion", json::object{{"type", "string"}}},
                        {"items", json::object{{"type", "array"},
                                               {"items", json::object{{"$ref", "#/components/schemas/" + k.definition}}}}},
                        {"kind", json::object{{"type", "string"}}},
                        {"metadata", json::object{{"allOf", json::array{json::object{
                                         {"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}}}}}}}},
          {"x-kubernetes-group-version-kind",
           json::array{json::object{{"group", k.group}, {"kind", k.kind + "List"}, {"version", k.version}}}}};
      add_descriptions(list, l);
      out[list] = std::move(l);
    }
    json::object patch{{"type", "object"}};
    add_descriptions("io.k8s.apimachinery.pkg.apis.meta.v1.Patch", patch);
    out["io.k8s.apimachinery.pkg.apis.meta.v1.Patch"] = std::move(patch);
  }
  std::set<std::string_view> seen;
  while (!todo.empty()) {
    std::string_view name = todo.back();
    todo.pop_back();
    if (!seen.insert(name).second) continue;
    const Definition& d = data_->def(name);
    json::object s = data_->openapi_definition(d);
    add_descriptions(name, s);
    if (auto it = gvks.find(name); it != gvks.end()) {
      s["x-kubernetes-group-version-kind"] = it->second;
    }
    out[name] = std::move(s);
    for (const auto& f : d.fields) {
      auto inner = innermost(f.type);
      if (!is_scalar(inner)) todo.push_back(inner);
    }
  }
  return out;
}

PatchSchema KindSchemas::patch_schema(std::string_view group, std::string_view version,
                                      std::string_view kind) const {
  PatchSchema out;
  if (const Kind* k = data_->find_kind(group, version, kind)) {
    std::vector<std::string_view> stack;
    data_->add_patch_rules(k->definition, "", out, stack);
  }
  out.merge_list("metadata.ownerReferences", "uid");
  out.merge_list("metadata.finalizers");
  return out;
}

}  // namespace kwatch::schema
