#include "kinds/dynamic_resources.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "cel/checker.hpp"
#include "cel/cost_estimator.hpp"
#include "cel/libraries.hpp"
#include "cel/parser.hpp"
#include "cel/types.hpp"
#include "kinds/field_errors.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::int_member;
using apimachinery::present_member;
namespace fe = field_errors;
using apimachinery::array_member;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

// ---- reading the JSON as Go's structs would hold it ----

std::optional<bool> bool_at(const json::object* obj, std::string_view key) {
  const json::value* v = present_member(obj, key);
  if (v == nullptr || !v->is_bool()) return std::nullopt;
  return v->get_bool();
}

std::optional<std::string> string_ptr_at(const json::object* obj, std::string_view key) {
  const json::value* v = present_member(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
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

std::size_t array_size(const json::object* obj, std::string_view key) {
  const json::array* a = array_member(obj, key);
  return a != nullptr ? a->size() : 0;
}

json::object* object_at(json::object& obj, std::string_view key) {
  json::value* v = obj.if_contains(key);
  return v != nullptr && v->is_object() ? &v->get_object() : nullptr;
}

template <typename F>
void each_object(json::object& obj, std::string_view key, F&& f) {
  json::value* v = obj.if_contains(key);
  if (v == nullptr || !v->is_array()) return;
  for (auto& e : v->get_array()) {
    if (e.is_object()) f(e.get_object());
  }
}

bool equal_members(const json::object* a, const json::object* b, std::string_view key) {
  const json::value* va = present_member(a, key);
  const json::value* vb = present_member(b, key);
  if (va == nullptr || vb == nullptr) return va == vb;
  return *va == *vb;
}

// ---- Go's json.Marshal of kube's internal types, which the messages of immutable fields show.
// Internal types have no JSON tags: keys are Go's field names, nothing is omitted (nil slices
// and pointers are null), an embedded struct's fields are written in its parent.

enum class GoKind {
  string,
  int64,
  boolean,
  string_ptr,
  bool_ptr,
  int64_ptr,
  strings,
  structure,
  struct_ptr,
  structs,
  raw,           // runtime.RawExtension: its JSON, or null
  quantity_map,  // map[QualifiedName]resource.Quantity
  time_ptr,
  object_meta,   // metav1.ObjectMeta, which has JSON tags
};
struct GoType;
struct GoField {
  const char* go_name;
  const char* json_name;
  GoKind kind;
  const GoType* type = nullptr;
};
struct GoType {
  std::vector<GoField> fields;
};

const GoType kCELSelector{{{"Expression", "expression", GoKind::string}}};
const GoType kDeviceSelector{{{"CEL", "cel", GoKind::struct_ptr, &kCELSelector}}};
const GoType kToleration{{{"Key", "key", GoKind::string},
                          {"Operator", "operator", GoKind::string},
                          {"Value", "value", GoKind::string},
                          {"Effect", "effect", GoKind::string},
                          {"TolerationSeconds", "tolerationSeconds", GoKind::int64_ptr}}};
const GoType kCapacityRequirements{{{"Requests", "requests", GoKind::quantity_map}}};
const GoType kExactRequest{{{"DeviceClassName", "deviceClassName", GoKind::string},
                            {"Selectors", "selectors", GoKind::structs, &kDeviceSelector},
                            {"AllocationMode", "allocationMode", GoKind::string},
                            {"Count", "count", GoKind::int64},
                            {"AdminAccess", "adminAccess", GoKind::bool_ptr},
                            {"Tolerations", "tolerations", GoKind::structs, &kToleration},
                            {"Capacity", "capacity", GoKind::struct_ptr, &kCapacityRequirements}}};
const GoType kSubRequest{{{"Name", "name", GoKind::string},
                          {"DeviceClassName", "deviceClassName", GoKind::string},
                          {"Selectors", "selectors", GoKind::structs, &kDeviceSelector},
                          {"AllocationMode", "allocationMode", GoKind::string},
                          {"Count", "count", GoKind::int64},
                          {"Tolerations", "tolerations", GoKind::structs, &kToleration},
                          {"Capacity", "capacity", GoKind::struct_ptr, &kCapacityRequirements}}};
const GoType kRequest{{{"Name", "name", GoKind::string},
                       {"Exactly", "exactly", GoKind::struct_ptr, &kExactRequest},
                       {"FirstAvailable", "firstAvailable", GoKind::structs, &kSubRequest}}};
const GoType kConstraint{{{"Requests", "requests", GoKind::strings},
                          {"MatchAttribute", "matchAttribute", GoKind::string_ptr},
                          {"DistinctAttribute", "distinctAttribute", GoKind::string_ptr}}};
const GoType kOpaque{{{"Driver", "driver", GoKind::string},
                      {"Parameters", "parameters", GoKind::raw}}};
const GoType kClaimConfig{{{"Requests", "requests", GoKind::strings},
                           {"Opaque", "opaque", GoKind::struct_ptr, &kOpaque}}};
const GoType kDeviceClaim{{{"Requests", "requests", GoKind::structs, &kRequest},
                           {"Constraints", "constraints", GoKind::structs, &kConstraint},
                           {"Config", "config", GoKind::structs, &kClaimConfig}}};
const GoType kClaimSpec{{{"Devices", "devices", GoKind::structure, &kDeviceClaim}}};
const GoType kTemplateSpec{{{"ObjectMeta", "metadata", GoKind::object_meta},
                            {"Spec", "spec", GoKind::structure, &kClaimSpec}}};
const GoType kRequirement{{{"Key", "key", GoKind::string},
                           {"Operator", "operator", GoKind::string},
                           {"Values", "values", GoKind::strings}}};
const GoType kSelectorTerm{{{"MatchExpressions", "matchExpressions", GoKind::structs, &kRequirement},
                            {"MatchFields", "matchFields", GoKind::structs, &kRequirement}}};
const GoType kNodeSelector{{{"NodeSelectorTerms", "nodeSelectorTerms", GoKind::structs,
                             &kSelectorTerm}}};
const GoType kAllocationResultEntry{
    {{"Request", "request", GoKind::string},
     {"Driver", "driver", GoKind::string},
     {"Pool", "pool", GoKind::string},
     {"Device", "device", GoKind::string},
     {"AdminAccess", "adminAccess", GoKind::bool_ptr},
     {"Tolerations", "tolerations", GoKind::structs, &kToleration},
     {"BindingConditions", "bindingConditions", GoKind::strings},
     {"BindingFailureConditions", "bindingFailureConditions", GoKind::strings},
     {"ShareID", "shareID", GoKind::string_ptr},
     {"ConsumedCapacity", "consumedCapacity", GoKind::quantity_map}}};
const GoType kAllocationConfig{{{"Source", "source", GoKind::string},
                                {"Requests", "requests", GoKind::strings},
                                {"Opaque", "opaque", GoKind::struct_ptr, &kOpaque}}};
const GoType kDeviceAllocation{{{"Results", "results", GoKind::structs, &kAllocationResultEntry},
                                {"Config", "config", GoKind::structs, &kAllocationConfig}}};
const GoType kAllocationResult{
    {{"Devices", "devices", GoKind::structure, &kDeviceAllocation},
     {"NodeSelector", "nodeSelector", GoKind::struct_ptr, &kNodeSelector},
     {"AllocationTimestamp", "allocationTimestamp", GoKind::time_ptr}}};
const GoType kDeviceAttribute{{{"IntValue", "int", GoKind::int64_ptr},
                               {"BoolValue", "bool", GoKind::bool_ptr},
                               {"StringValue", "string", GoKind::string_ptr},
                               {"VersionValue", "version", GoKind::string_ptr}}};

std::string sorted_json(const json::value& v) {
  if (v.is_object()) {
    std::map<std::string, const json::value*> sorted;
    for (const auto& [k, e] : v.get_object()) sorted.emplace(std::string(k), &e);
    std::string out = "{";
    bool first = true;
    for (const auto& [k, e] : sorted) {
      if (!first) out += ",";
      first = false;
      out += json::serialize(json::value(k)) + ":" + sorted_json(*e);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    bool first = true;
    for (const auto& e : v.get_array()) {
      if (!first) out += ",";
      first = false;
      out += sorted_json(e);
    }
    return out + "]";
  }
  return json::serialize(v);
}

std::string go_json(const GoType& type, const json::object* obj);

std::string go_json_field(const GoField& f, const json::object* obj) {
  const json::value* v = present_member(obj, f.json_name);
  switch (f.kind) {
    case GoKind::string:
      return json::serialize(
          json::value(v != nullptr && v->is_string() ? std::string_view(v->get_string()) : ""));
    case GoKind::int64:
      return std::to_string(int_member(obj, f.json_name).value_or(0));
    case GoKind::boolean:
      return bool_at(obj, f.json_name).value_or(false) ? "true" : "false";
    case GoKind::string_ptr:
    case GoKind::time_ptr:
      return v != nullptr && v->is_string() ? json::serialize(*v) : "null";
    case GoKind::bool_ptr:
      return v != nullptr && v->is_bool() ? (v->get_bool() ? "true" : "false") : "null";
    case GoKind::int64_ptr: {
      auto n = int_member(obj, f.json_name);
      return n ? std::to_string(*n) : "null";
    }
    case GoKind::strings:
    case GoKind::quantity_map:
    case GoKind::raw:
      return v != nullptr ? sorted_json(*v) : "null";
    case GoKind::structure:
      return go_json(*f.type, v != nullptr ? v->if_object() : nullptr);
    case GoKind::struct_ptr:
      return v != nullptr && v->is_object() ? go_json(*f.type, &v->get_object()) : "null";
    case GoKind::structs: {
      if (v == nullptr || !v->is_array()) return "null";
      std::string out = "[";
      bool first = true;
      for (const auto& e : v->get_array()) {
        if (!first) out += ",";
        first = false;
        out += go_json(*f.type, e.if_object());
      }
      return out + "]";
    }
    case GoKind::object_meta: {
      // ObjectMeta's own tags: empty fields left out, but a zero creationTimestamp is null.
      static constexpr std::string_view kOrder[] = {
          "name",      "generateName", "namespace",         "selfLink",
          "uid",       "resourceVersion", "generation",     "creationTimestamp",
          "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
          "ownerReferences",   "finalizers",                 "managedFields"};
      const json::object* meta = v != nullptr ? v->if_object() : nullptr;
      std::string out = "{";
      bool first = true;
      for (auto key : kOrder) {
        const json::value* m = present_member(meta, key);
        std::string text;
        if (key == "creationTimestamp") {
          text = m != nullptr ? json::serialize(*m) : "null";
        } else if (m == nullptr || (m->is_string() && m->get_string().empty()) ||
                   (m->is_object() && m->get_object().empty()) ||
                   (m->is_array() && m->get_array().empty()) ||
                   (m->is_int64() && m->get_int64() == 0)) {
          continue;
        } else {
          text = sorted_json(*m);
        }
        if (!first) out += ",";
        first = false;
        out += "\"" + std::string(key) + "\":" + text;
      }
      return out + "}";
    }
  }
  return "null";
}

std::string go_json(const GoType& type, const json::object* obj) {
  std::string out = "{";
  bool first = true;
  for (const GoField& f : type.fields) {
    if (!first) out += ",";
    first = false;
    out += "\"" + std::string(f.go_name) + "\":" + go_json_field(f, obj);
  }
  return out + "}";
}

// ---- names ----

void dns_label(Causes& causes, const std::string& path, const std::string& value) {
  for (const auto& e : apimachinery::dns1123_label_errors(value)) {
    fe::invalid(causes, path, go_quote(value), e);
  }
}

void dns_subdomain(Causes& causes, const std::string& path, const std::string& value) {
  for (const auto& e : apimachinery::dns1123_subdomain_errors(value)) {
    fe::invalid(causes, path, go_quote(value), e);
  }
}

void too_long(Causes& causes, const std::string& path, std::size_t max) {
  causes.push_back({"FieldValueTooLong",
                    "Too long: may not be more than " + std::to_string(max) +
                        (max == 1 ? " byte" : " bytes"),
                    path});
}

// ValidateCSIDriverName: a driver name is a DNS subdomain in lowercase, at most 63 bytes.
void driver_name(Causes& causes, const std::string& path, const std::string& name) {
  if (name.empty()) fe::required(causes, path);
  if (name.size() > 63) too_long(causes, path, 63);
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& e : apimachinery::dns1123_subdomain_errors(lower)) {
    fe::invalid(causes, path, go_quote(name), e);
  }
}

// validatePoolName: DNS subdomains separated by '/', at most 253 bytes in all.
void pool_name(Causes& causes, const std::string& path, const std::string& name) {
  if (name.empty()) {
    fe::required(causes, path);
    return;
  }
  if (name.size() > 253) too_long(causes, path, 253);
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = name.find('/', start);
    dns_subdomain(causes, path, name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

// validateDeviceClass: a DeviceClass's name.
void device_class_name(Causes& causes, const std::string& path, const std::string& name) {
  if (name.empty()) {
    fe::required(causes, path);
  } else {
    dns_subdomain(causes, path, name);
  }
}

void c_identifier(Causes& causes, const std::string& path, const std::string& id) {
  if (id.size() > 32) too_long(causes, path, 32);
  static const std::regex kIdentifier("[A-Za-z_][A-Za-z0-9_]*");
  if (!std::regex_match(id, kIdentifier)) {
    fe::invalid(causes, path, go_quote(id),
                "a valid C identifier must start with alphabetic character or '_', followed by a "
                "string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
                "'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')");
  }
}

// validateQualifiedName: `<C identifier>` or `<driver name>/<C identifier>`.
void qualified_name(Causes& causes, const std::string& path, const std::string& name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string::npos) {
    c_identifier(causes, path, name);
    return;
  }
  if (name.find('/', slash + 1) != std::string::npos) {
    fe::invalid(causes, path, go_quote(name), "must not contain more than one slash");
    return;
  }
  const std::string domain = name.substr(0, slash);
  const std::string id = name.substr(slash + 1);
  if (domain.empty()) {
    fe::invalid(causes, path, go_quote(""), "the domain must not be empty");
  } else {
    driver_name(causes, path, domain);
  }
  if (id.empty()) {
    fe::invalid(causes, path, go_quote(""), "the name must not be empty");
  } else {
    c_identifier(causes, path, id);
  }
}

void fully_qualified_name(Causes& causes, const std::string& path, const std::string& name) {
  qualified_name(causes, path, name);
  if (name.find('/') == std::string::npos) {
    fe::invalid(causes, path, go_quote(name),
                "a fully qualified name must be a domain and a name separated by a slash");
  }
}

void label_name(Causes& causes, const std::string& path, const std::string& name) {
  for (const auto& e : apimachinery::qualified_name_errors(name)) {
    fe::invalid(causes, path, go_quote(name), e);
  }
}

void label_value(Causes& causes, const std::string& path, const std::string& value) {
  for (const auto& e : apimachinery::label_value_errors(value)) {
    fe::invalid(causes, path, go_quote(value), e);
  }
}

// field.Path.Key: `path[key]`, a key longer than `max` shortened in its middle.
std::string key_path(const std::string& path, const std::string& key, std::size_t max) {
  if (max < 16) max = 16;
  if (key.size() <= max) return path + "[" + key + "]";
  const std::size_t remaining = max - 3;
  return path + "[" + key.substr(0, (remaining + 1) / 2) + "..." +
         key.substr(key.size() - remaining / 2) + "]";
}

// The size check of kube's validateSlice and validateSet: too many items is the only cause.
bool too_many(Causes& causes, const std::string& path, std::size_t n, std::size_t max) {
  if (n <= max) return false;
  fe::too_many(causes, path, n, max);
  return true;
}

// ---- CEL ----

cel::TypePtr with_max(cel::TypePtr t, std::uint64_t n) {
  auto copy = std::make_shared<cel::Type>(*t);
  copy->max_elements = n;
  return copy;
}

cel::TypePtr with_length(cel::TypePtr t, std::uint64_t n) {
  auto copy = std::make_shared<cel::Type>(*t);
  copy->max_length = n;
  return copy;
}

// kube's DRA environment: `device` with its driver, attributes and capacity by domain, bounded
// as kube's estimator bounds them (driver and domain names 63 bytes, attribute names 32, at most
// 32 attributes and capacities, attribute values 64 bytes).
const cel::TypePtr& device_type() {
  static const cel::TypePtr kType = [] {
    const std::uint64_t n = kResourceSliceMaxAttributesAndCapacitiesPerDevice;
    const cel::TypePtr domain = with_length(cel::types::string(), 63);
    const cel::TypePtr name = with_length(cel::types::string(), 32);
    auto t = std::make_shared<cel::Type>();
    t->kind = cel::TypeKind::object;
    t->name = "kubernetes.DRADevice";
    t->fields.emplace("driver", with_length(cel::types::string(), 63));
    t->fields.emplace(
        "attributes",
        with_max(cel::types::map(
                     domain, with_max(cel::types::map(name, with_length(cel::types::dyn(), 64)), n)),
                 n));
    t->fields.emplace(
        "capacity",
        with_max(cel::types::map(domain,
                                 with_max(cel::types::map(name,
                                                          cel::types::opaque("kubernetes.Quantity")),
                                          n)),
                 n));
    return cel::TypePtr(t);
  }();
  return kType;
}

// validateRawExtension: JSON holding an object, at most `max` bytes unless stored before.
void raw_extension(Causes& causes, const std::string& path, const json::value* v, bool stored,
                   std::size_t max) {
  if (v == nullptr) {
    fe::required(causes, path);
    return;
  }
  if (!stored && json::serialize(*v).size() > max) {
    too_long(causes, path, max);
  } else if (!v->is_object()) {
    fe::invalid(causes, path, go_quote("<value omitted>"), "must be a valid JSON object");
  }
}

// ---- ResourceClaim spec ----

// Request names, and each request's subrequest names (empty for an `exactly` request).
using RequestNames = std::map<std::string, std::set<std::string>, std::less<>>;

RequestNames request_names(const json::object* devices) {
  RequestNames out;
  for (const json::object* r : objects_at(devices, "requests")) {
    auto& subs = out[string_at(r, "name")];
    for (const json::object* s : objects_at(r, "firstAvailable")) subs.insert(string_at(s, "name"));
  }
  return out;
}

bool has_request(const RequestNames& names, const std::string& ref) {
  const std::size_t slash = ref.find('/');
  if (slash == std::string::npos) return names.count(ref) > 0;
  if (ref.find('/', slash + 1) != std::string::npos) return false;
  auto it = names.find(ref.substr(0, slash));
  return it != names.end() && it->second.count(ref.substr(slash + 1)) > 0;
}

constexpr std::string_view kRequestRefDetail =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";

// validateRequestNameRef over a set of references (at most 32, no duplicates).
void request_refs(Causes& causes, const std::string& path, const json::object* obj,
                  const RequestNames& names) {
  const auto refs = fe::string_items(obj, "requests");
  if (too_many(causes, path, refs.size(), kDeviceRequestsMaxSize)) return;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const std::string at = fe::index(path, i);
    const std::string& ref = refs[i];
    if (std::count(ref.begin(), ref.end(), '/') > 1) {
      fe::invalid(causes, at, go_quote(ref), kRequestRefDetail);
    } else {
      const std::size_t slash = ref.find('/');
      dns_label(causes, at, ref.substr(0, slash));
      if (slash != std::string::npos) dns_label(causes, at, ref.substr(slash + 1));
      if (!has_request(names, ref)) fe::invalid(causes, at, go_quote(ref), kRequestRefDetail);
    }
  }
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (!seen.insert(refs[i]).second) fe::duplicate(causes, fe::index(path, i), go_quote(refs[i]));
  }
}

void selectors(Causes& causes, const std::string& path, const json::object* owner, bool stored) {
  const auto items = objects_at(owner, "selectors");
  if (too_many(causes, path, items.size(), kDeviceSelectorsMaxSize)) return;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string at = fe::index(path, i);
    const json::object* cel = object_member(items[i], "cel");
    if (cel == nullptr) {
      fe::required(causes, at + ".cel");
    } else if (!stored) {
      validate_device_selector_expression(string_at(cel, "expression"), at + ".cel.expression",
                                          causes);
    }
  }
}

void allocation_mode(Causes& causes, const std::string& path, const json::object* request) {
  const std::string mode = string_at(request, "allocationMode");
  const std::int64_t count = int_member(request, "count").value_or(0);
  if (mode == "All") {
    if (count != 0) {
      fe::invalid(causes, path + ".count", std::to_string(count),
                  "must not be specified when allocationMode is 'All'");
    }
  } else if (mode == "ExactCount") {
    if (count <= 0) {
      fe::invalid(causes, path + ".count", std::to_string(count), "must be greater than zero");
    }
  } else {
    fe::not_supported(causes, path + ".allocationMode", mode, {"All", "ExactCount"});
  }
}

void opaque_configuration(Causes& causes, const std::string& path, const json::object* config,
                          bool stored) {
  const json::object* opaque = object_member(config, "opaque");
  if (opaque == nullptr) {
    fe::required(causes, path + ".opaque");
    return;
  }
  driver_name(causes, path + ".opaque.driver", string_at(opaque, "driver"));
  raw_extension(causes, path + ".opaque.parameters", present_member(opaque, "parameters"), stored,
                kOpaqueParametersMaxLength);
}

// A set of objects keyed by their name: each name's duplicates.
void duplicate_names(Causes& causes, const std::string& path,
                     const std::vector<const json::object*>& items) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string name = string_at(items[i], "name");
    if (!seen.insert(name).second) fe::duplicate(causes, fe::index(path, i), go_quote(name));
  }
}

void device_request(Causes& causes, const std::string& path, const json::object* request,
                    bool stored) {
  dns_label(causes, path + ".name", string_at(request, "name"));
  const json::object* exactly = object_member(request, "exactly");
  const std::size_t first = array_size(request, "firstAvailable");
  if (exactly == nullptr && first == 0) {
    fe::required(causes, path, "exactly one of `exactly` or `firstAvailable` is required");
  } else if (exactly != nullptr && first > 0) {
    fe::invalid(causes, path, "null",
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields "
                "are set");
  } else if (first > 0) {
    const std::string at = path + ".firstAvailable";
    const auto subs = objects_at(request, "firstAvailable");
    if (too_many(causes, at, subs.size(), kFirstAvailableDeviceRequestMaxSize)) return;
    for (std::size_t i = 0; i < subs.size(); ++i) {
      const std::string sub = fe::index(at, i);
      dns_label(causes, sub + ".name", string_at(subs[i], "name"));
      device_class_name(causes, sub + ".deviceClassName", string_at(subs[i], "deviceClassName"));
      selectors(causes, sub + ".selectors", subs[i], stored);
      allocation_mode(causes, sub, subs[i]);
    }
    duplicate_names(causes, at, subs);
  } else {
    const std::string at = path + ".exactly";
    device_class_name(causes, at + ".deviceClassName", string_at(exactly, "deviceClassName"));
    selectors(causes, at + ".selectors", exactly, stored);
    allocation_mode(causes, at, exactly);
  }
}

// validateDeviceClaim.
void device_claim(Causes& causes, const std::string& path, const json::object* devices,
                  bool stored) {
  const RequestNames names = request_names(devices);
  const auto requests = objects_at(devices, "requests");
  const std::string requests_path = path + ".requests";
  if (!too_many(causes, requests_path, requests.size(), kDeviceRequestsMaxSize)) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      device_request(causes, fe::index(requests_path, i), requests[i], stored);
    }
    duplicate_names(causes, requests_path, requests);
  }
  const auto constraints = objects_at(devices, "constraints");
  const std::string constraints_path = path + ".constraints";
  if (!too_many(causes, constraints_path, constraints.size(), kDeviceConstraintsMaxSize)) {
    for (std::size_t i = 0; i < constraints.size(); ++i) {
      const std::string at = fe::index(constraints_path, i);
      request_refs(causes, at + ".requests", constraints[i], names);
      if (auto match = string_ptr_at(constraints[i], "matchAttribute")) {
        fully_qualified_name(causes, at + ".matchAttribute", *match);
      } else {
        fe::required(causes, at + ".matchAttribute");
      }
    }
  }
  const auto configs = objects_at(devices, "config");
  const std::string config_path = path + ".config";
  if (!too_many(causes, config_path, configs.size(), kDeviceConfigMaxSize)) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const std::string at = fe::index(config_path, i);
      request_refs(causes, at + ".requests", configs[i], names);
      opaque_configuration(causes, at, configs[i], stored);
    }
  }
}

// ---- node selection ----

void node_name(Causes& causes, const std::string& path, const std::string& name) {
  dns_subdomain(causes, path, name);
}

// ValidateNodeSelector without invalid label values allowed.
void node_selector(Causes& causes, const std::string& path, const json::object* selector) {
  const std::string terms_path = path + ".nodeSelectorTerms";
  const auto terms = objects_at(selector, "nodeSelectorTerms");
  if (terms.empty()) {
    fe::required(causes, terms_path, "must have at least one node selector term");
    return;
  }
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const std::string term = fe::index(terms_path, i);
    const auto exprs = objects_at(terms[i], "matchExpressions");
    for (std::size_t j = 0; j < exprs.size(); ++j) {
      const std::string at = fe::index(term + ".matchExpressions", j);
      const std::string op = string_at(exprs[j], "operator");
      const auto values = fe::string_items(exprs[j], "values");
      if (op == "In" || op == "NotIn") {
        if (values.empty()) {
          fe::required(causes, at + ".values",
                       "must be specified when `operator` is 'In' or 'NotIn'");
        }
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (!values.empty()) {
          fe::forbidden(causes, at + ".values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
        }
      } else if (op == "Gt" || op == "Lt") {
        if (values.size() != 1) {
          fe::required(causes, at + ".values",
                       "must be specified single value when `operator` is 'Lt' or 'Gt'");
        }
      } else {
        fe::invalid(causes, at + ".operator", go_quote(op), "not a valid selector operator");
      }
      label_name(causes, at + ".key", string_at(exprs[j], "key"));
      for (std::size_t k = 0; k < values.size(); ++k) {
        label_value(causes, fe::index(at + ".values", k), values[k]);
      }
    }
    const auto fields = objects_at(terms[i], "matchFields");
    for (std::size_t j = 0; j < fields.size(); ++j) {
      const std::string at = fe::index(term + ".matchFields", j);
      const std::string op = string_at(fields[j], "operator");
      const auto values = fe::string_items(fields[j], "values");
      if (op == "In" || op == "NotIn") {
        if (values.size() != 1) {
          fe::required(causes, at + ".values",
                       "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                       "selector");
        }
      } else {
        fe::invalid(causes, at + ".operator", go_quote(op), "not a valid selector operator");
      }
      const std::string key = string_at(fields[j], "key");
      if (key != "metadata.name") {
        fe::invalid(causes, at + ".key", go_quote(key), "not a valid field selector key");
      } else {
        for (std::size_t k = 0; k < values.size(); ++k) {
          node_name(causes, fe::index(at + ".values", k), values[k]);
        }
      }
    }
  }
}

// ---- ResourceClaim status ----

std::string device_id(const json::object* o) {
  return string_at(o, "driver") + "/" + string_at(o, "pool") + "/" + string_at(o, "device");
}

// metav1 ValidateCondition for one condition.
void condition(Causes& causes, const std::string& path, const json::object* c) {
  label_name(causes, path + ".type", string_at(c, "type"));
  const std::string status = string_at(c, "status");
  if (status != "True" && status != "False" && status != "Unknown") {
    fe::not_supported(causes, path + ".status", status, {"False", "True", "Unknown"});
  }
  if (auto g = int_member(c, "observedGeneration"); g && *g < 0) {
    fe::invalid(causes, path + ".observedGeneration", std::to_string(*g),
                "must be greater than or equal to zero");
  }
  if (string_at(c, "lastTransitionTime").empty()) {
    fe::required(causes, path + ".lastTransitionTime", "must be set");
  }
  const std::string reason = string_at(c, "reason");
  if (reason.empty()) {
    fe::required(causes, path + ".reason", "must be set");
  } else {
    static const std::regex kReason("[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?");
    if (!std::regex_match(reason, kReason)) {
      fe::invalid(causes, path + ".reason", go_quote(reason),
                  "a condition reason must start with alphabetic character, optionally followed "
                  "by a string of alphanumeric characters or '_,:', and must end with an "
                  "alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  "
                  "or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
                  "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')");
    }
    if (reason.size() > 1024) too_long(causes, path + ".reason", 1024);
  }
  if (string_at(c, "message").size() > 32768) too_long(causes, path + ".message", 32768);
}

// IsValidInterfaceAddress: an IP address with its prefix length, in canonical form.
void interface_address(Causes& causes, const std::string& path, const std::string& value) {
  const std::size_t slash = value.find('/');
  const std::string ip = value.substr(0, slash);
  bool ok = slash != std::string::npos && slash + 1 < value.size();
  const bool v6 = ip.find(':') != std::string::npos;
  if (ok) {
    const std::string prefix = value.substr(slash + 1);
    ok = prefix.size() <= 3 && std::all_of(prefix.begin(), prefix.end(), ::isdigit) &&
         (prefix.size() == 1 || prefix[0] != '0') && std::stoi(prefix) <= (v6 ? 128 : 32);
  }
  if (ok && !v6) {
    static const std::regex kIPv4(
        "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
        "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])");
    ok = std::regex_match(ip, kIPv4);
  } else if (ok) {
    static const std::regex kIPv6("[0-9a-fA-F:.]+");
    ok = std::regex_match(ip, kIPv6) && ip.find(":::") == std::string::npos;
  }
  if (!ok) {
    fe::invalid(causes, path, go_quote(value),
                "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)");
  }
}

void device_status(Causes& causes, const std::string& path, const json::object* d,
                   const std::set<std::string>& allocated) {
  driver_name(causes, path + ".driver", string_at(d, "driver"));
  pool_name(causes, path + ".pool", string_at(d, "pool"));
  dns_label(causes, path + ".device", string_at(d, "device"));
  const std::string id = device_id(d);
  if (allocated.count(id) == 0) {
    fe::invalid(causes, path, go_quote(id), "must be an allocated device in the claim");
  }
  const auto conditions = objects_at(d, "conditions");
  if (conditions.size() > kAllocatedDeviceStatusMaxConditions) {
    fe::too_many(causes, path + ".conditions", conditions.size(),
                 kAllocatedDeviceStatusMaxConditions);
  }
  std::set<std::string> types;
  for (std::size_t i = 0; i < conditions.size(); ++i) {
    const std::string at = fe::index(path + ".conditions", i);
    condition(causes, at, conditions[i]);
    const std::string type = string_at(conditions[i], "type");
    if (!types.insert(type).second) fe::duplicate(causes, at + ".type", go_quote(type));
  }
  if (const json::value* data = present_member(d, "data")) {
    raw_extension(causes, path + ".data", data, false, 10 * 1024);
  }
  if (const json::object* net = object_member(d, "networkData")) {
    const std::string at = path + ".networkData";
    if (string_at(net, "interfaceName").size() > 256) too_long(causes, at + ".interfaceName", 256);
    if (string_at(net, "hardwareAddress").size() > 128) {
      too_long(causes, at + ".hardwareAddress", 128);
    }
    const auto ips = fe::string_items(net, "ips");
    if (!too_many(causes, at + ".ips", ips.size(), 16)) {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < ips.size(); ++i) {
        interface_address(causes, fe::index(at + ".ips", i), ips[i]);
      }
      for (std::size_t i = 0; i < ips.size(); ++i) {
        if (!seen.insert(ips[i]).second) {
          fe::duplicate(causes, fe::index(at + ".ips", i), go_quote(ips[i]));
        }
      }
    }
  }
}

// validateAllocationResult: a new allocation's results and configuration.
void allocation_result(Causes& causes, const std::string& path, const json::object* allocation,
                       const RequestNames& names) {
  const json::object* devices = object_member(allocation, "devices");
  const auto results = objects_at(devices, "results");
  const std::string results_path = path + ".devices.results";
  if (!too_many(causes, results_path, results.size(), kAllocationResultsMaxSize)) {
    for (std::size_t i = 0; i < results.size(); ++i) {
      const std::string at = fe::index(results_path, i);
      const std::string request = string_at(results[i], "request");
      const std::string request_path = at + ".request";
      if (std::count(request.begin(), request.end(), '/') > 1) {
        fe::invalid(causes, request_path, go_quote(request), kRequestRefDetail);
      } else {
        const std::size_t slash = request.find('/');
        dns_label(causes, request_path, request.substr(0, slash));
        if (slash != std::string::npos) dns_label(causes, request_path, request.substr(slash + 1));
        if (!has_request(names, request)) {
          fe::invalid(causes, request_path, go_quote(request), kRequestRefDetail);
        }
      }
      driver_name(causes, at + ".driver", string_at(results[i], "driver"));
      pool_name(causes, at + ".pool", string_at(results[i], "pool"));
      dns_label(causes, at + ".device", string_at(results[i], "device"));
    }
  }
  const auto configs = objects_at(devices, "config");
  const std::string config_path = path + ".devices.config";
  if (!too_many(causes, config_path, configs.size(), 2 * kDeviceConfigMaxSize)) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const std::string at = fe::index(config_path, i);
      const std::string source = string_at(configs[i], "source");
      if (source.empty()) {
        fe::required(causes, at + ".source");
      } else if (source != "FromClaim" && source != "FromClass") {
        fe::not_supported(causes, at + ".source", source, {"FromClaim", "FromClass"});
      }
      request_refs(causes, at + ".requests", configs[i], names);
      opaque_configuration(causes, at, configs[i], false);
    }
  }
  if (const json::object* selector = object_member(allocation, "nodeSelector")) {
    node_selector(causes, path + ".nodeSelector", selector);
  }
}

bool deleted(const json::object& obj) {
  return !string_at(object_member(obj, "metadata"), "deletionTimestamp").empty();
}

// ---- ResourceSlice ----

void device_attribute(Causes& causes, const std::string& path, const json::object* attribute) {
  int set = 0;
  if (present_member(attribute, "bool") != nullptr) ++set;
  if (present_member(attribute, "int") != nullptr) ++set;
  if (auto s = string_ptr_at(attribute, "string")) {
    ++set;
    if (s->size() > 64) too_long(causes, path + ".string", 64);
  }
  if (auto v = string_ptr_at(attribute, "version")) {
    ++set;
    static const std::regex kSemver(
        "(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)"
        "(-(0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(\\.(0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
        "(\\+[0-9a-zA-Z-]+(\\.[0-9a-zA-Z-]+)*)?");
    if (!std::regex_match(*v, kSemver)) {
      fe::invalid(causes, path + ".version", go_quote(*v),
                  "must be a string compatible with semver.org spec 2.0.0");
    }
    if (v->size() > 64) too_long(causes, path + ".version", 64);
  }
  if (set == 0) {
    fe::invalid(causes, path, go_quote(""), "exactly one value must be specified");
  } else if (set > 1) {
    fe::invalid(causes, path, go_json(kDeviceAttribute, attribute),
                "exactly one value must be specified");
  }
}

void device(Causes& causes, const std::string& path, const json::object* d) {
  dns_label(causes, path + ".name", string_at(d, "name"));
  const json::object* attributes = object_member(d, "attributes");
  const json::object* capacity = object_member(d, "capacity");
  const std::size_t n =
      (attributes != nullptr ? attributes->size() : 0) + (capacity != nullptr ? capacity->size() : 0);
  if (n > kResourceSliceMaxAttributesAndCapacitiesPerDevice) {
    fe::invalid(causes, path, std::to_string(n),
                "the total number of attributes and capacities must not exceed " +
                    std::to_string(kResourceSliceMaxAttributesAndCapacitiesPerDevice));
  }
  constexpr std::size_t kMaxKeyLength = 63 + 1 + 32;
  if (attributes != nullptr) {
    for (const auto& [key, value] : *attributes) {
      const std::string k(key);
      qualified_name(causes, path + ".attributes", k);
      device_attribute(causes, key_path(path + ".attributes", k, kMaxKeyLength),
                       value.if_object());
    }
  }
  if (capacity != nullptr) {
    for (const auto& [key, value] : *capacity) {
      qualified_name(causes, path + ".capacity", std::string(key));
    }
  }
}

// ---- defaults ----

void default_request_fields(json::object& request) {
  json::value& mode = request["allocationMode"];
  if (!mode.is_string() || mode.get_string().empty()) mode = "ExactCount";
  if (mode.get_string() == "ExactCount" && int_member(&request, "count").value_or(0) == 0) {
    request["count"] = 1;
  }
  each_object(request, "tolerations", [](json::object& t) {
    json::value* op = t.if_contains("operator");
    if (op == nullptr || op->is_null() || (op->is_string() && op->get_string().empty())) {
      t["operator"] = "Equal";
    }
  });
  // DRADeviceTaints and DRAConsumableCapacity are off in 1.34.
  request.erase("tolerations");
  request.erase("capacity");
}

void default_device_claim(json::object* devices) {
  if (devices == nullptr) return;
  each_object(*devices, "requests", [](json::object& request) {
    if (json::object* exactly = object_at(request, "exactly")) default_request_fields(*exactly);
    each_object(request, "firstAvailable", default_request_fields);
  });
  each_object(*devices, "constraints", [](json::object& c) { c.erase("distinctAttribute"); });
}

void drop_disabled_status_fields(json::object& claim) {
  json::object* status = object_at(claim, "status");
  if (status == nullptr) return;
  if (json::object* allocation = object_at(*status, "allocation")) {
    allocation->erase("allocationTimestamp");
    if (json::object* devices = object_at(*allocation, "devices")) {
      each_object(*devices, "results", [](json::object& r) {
        for (auto key : {"tolerations", "bindingConditions", "bindingFailureConditions",
                         "shareID", "consumedCapacity"}) {
          r.erase(key);
        }
      });
    }
  }
  each_object(*status, "devices", [](json::object& d) { d.erase("shareID"); });
}

}  // namespace

void validate_device_selector_expression(const std::string& expression, const std::string& path,
                                         Causes& causes) {
  if (expression.size() > kCELSelectorExpressionMaxLength) {
    too_long(causes, path, kCELSelectorExpressionMaxLength);
    return;
  }
  const cel::Parsed parsed = cel::parse(expression);
  if (!parsed.errors.empty()) {
    fe::invalid(causes, path, go_quote(expression),
                "compilation failed: " + cel::format_issues(expression, parsed.errors));
    return;
  }
  cel::CheckOptions options;
  options.homogeneous_literals = true;
  options.validate_literals = true;
  const cel::Checked checked = cel::check(parsed.ast, {"device"}, {device_type()},
                                          cel::kubernetes_functions(), options);
  if (!checked.errors.empty()) {
    fe::invalid(causes, path, go_quote(expression),
                "compilation failed: " + cel::format_issues(expression, checked.errors));
    return;
  }
  const cel::Type& result = *checked.result;
  if (result.kind != cel::TypeKind::boolean && result.kind != cel::TypeKind::dyn) {
    fe::invalid(causes, path, go_quote(expression),
                "must evaluate to bool or the unknown type, not " + cel::format_type(result));
    return;
  }
  if (cel::estimate_cost(parsed.ast, checked).max > kCELSelectorExpressionMaxCost) {
    fe::forbidden(causes, path, "too complex, exceeds cost limit");
  }
}

// ---- defaults ----

void default_device_class(json::object& dc) {
  // DRAExtendedResource is off in 1.34.
  if (json::object* spec = object_at(dc, "spec")) spec->erase("extendedResourceName");
}

void default_resource_claim(json::object& claim) {
  if (json::object* spec = object_at(claim, "spec")) default_device_claim(object_at(*spec, "devices"));
  drop_disabled_status_fields(claim);
}

void default_resource_claim_template(json::object& tmpl) {
  json::object* spec = object_at(tmpl, "spec");
  json::object* claim_spec = spec != nullptr ? object_at(*spec, "spec") : nullptr;
  if (claim_spec != nullptr) default_device_claim(object_at(*claim_spec, "devices"));
}

void default_resource_slice(json::object& slice) {
  json::object* spec = object_at(slice, "spec");
  if (spec == nullptr) return;
  // DRAPartitionableDevices, DRADeviceTaints, DRADeviceBindingConditions and
  // DRAConsumableCapacity are off in 1.34.
  spec->erase("perDeviceNodeSelection");
  spec->erase("sharedCounters");
  each_object(*spec, "devices", [](json::object& d) {
    for (auto key : {"consumesCounters", "nodeName", "nodeSelector", "allNodes", "taints",
                     "bindsToNode", "bindingConditions", "bindingFailureConditions",
                     "allowMultipleAllocations"}) {
      d.erase(key);
    }
    if (json::object* capacity = object_at(d, "capacity")) {
      for (auto& [key, value] : *capacity) {
        if (value.is_object()) value.get_object().erase("requestPolicy");
      }
    }
  });
}

void keep_resource_claim_owned_fields(json::object& claim, const json::object& old,
                                      std::string_view subresource) {
  if (subresource != "status") return;
  json::object* status = object_at(claim, "status");
  json::value* devices = status != nullptr ? status->if_contains("devices") : nullptr;
  if (devices == nullptr || !devices->is_array()) return;
  const auto ids = [](const json::object* s) {
    std::set<std::string> out;
    const json::object* allocation = object_member(s, "allocation");
    for (const json::object* r : objects_at(object_member(allocation, "devices"), "results")) {
      out.insert(device_id(r));
    }
    return out;
  };
  std::set<std::string> deallocated = ids(object_member(old, "status"));
  for (const auto& id : ids(status)) deallocated.erase(id);
  json::array kept;
  for (auto& d : devices->get_array()) {
    if (!d.is_object() || deallocated.count(device_id(&d.get_object())) == 0) {
      kept.push_back(std::move(d));
    }
  }
  if (kept.empty()) {
    status->erase("devices");
  } else {
    *devices = std::move(kept);
  }
}

// ---- validation ----

void validate_device_class(const json::object& dc, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(dc, "spec");
  const json::object* old_spec = old != nullptr ? object_member(*old, "spec") : nullptr;
  // Selectors and configuration exactly as stored before are not judged again.
  const bool selectors_stored = old != nullptr && equal_members(spec, old_spec, "selectors");
  const bool config_stored = old != nullptr && equal_members(spec, old_spec, "config");
  selectors(causes, "spec.selectors", spec, selectors_stored);
  const auto configs = objects_at(spec, "config");
  if (!too_many(causes, "spec.config", configs.size(), kDeviceConfigMaxSize)) {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      opaque_configuration(causes, fe::index("spec.config", i), configs[i], config_stored);
    }
  }
}

void validate_resource_claim(const json::object& claim, const json::object* old, Causes& causes) {
  // An update is judged by the path it was written through (validate_resource_claim_update_path):
  // kube's /status strategy does not look at the spec.
  if (old != nullptr) return;
  device_claim(causes, "spec.devices", object_member(object_member(claim, "spec"), "devices"),
               false);
}

void validate_resource_claim_template(const json::object& tmpl, const json::object* old,
                                      Causes& causes) {
  // kube validates the whole template on every write, then an update's immutable spec.
  const json::object* spec = object_member(tmpl, "spec");
  // ValidateTemplateObjectMeta: the claims' labels and annotations.
  const json::object* meta = object_member(spec, "metadata");
  if (const json::object* labels = object_member(meta, "labels")) {
    for (const auto& [key, value] : *labels) {
      label_name(causes, "spec.metadata.labels", std::string(key));
      label_value(causes, "spec.metadata.labels",
                  value.is_string() ? std::string(value.get_string()) : "");
    }
  }
  if (const json::object* annotations = object_member(meta, "annotations")) {
    std::size_t total = 0;
    for (const auto& [key, value] : *annotations) {
      const std::string k(key);
      std::string lower = k;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const auto& e : apimachinery::qualified_name_errors(lower)) {
        fe::invalid(causes, "spec.metadata.annotations", go_quote(k), e);
      }
      total += k.size() + (value.is_string() ? value.get_string().size() : 0);
    }
    if (total > 256 * 1024) too_long(causes, "spec.metadata.annotations", 256 * 1024);
  }
  device_claim(causes, "spec.spec.devices",
               object_member(object_member(spec, "spec"), "devices"), false);
  if (old != nullptr && !equal_members(&tmpl, old, "spec")) {
    fe::immutable(causes, "spec", go_json(kTemplateSpec, spec));
  }
}

void validate_resource_claim_update_path(const json::object& claim, const json::object& old,
                                         std::string_view subresource, Causes& causes) {
  if (subresource.empty()) {
    // kube's ValidateUpdate: the whole claim again, then its immutable spec.
    const json::object* spec = object_member(claim, "spec");
    device_claim(causes, "spec.devices", object_member(spec, "devices"), false);
    if (!equal_members(&claim, &old, "spec")) {
      fe::immutable(causes, "spec", go_json(kClaimSpec, spec));
    }
    return;
  }
  if (subresource != "status") return;
  const json::object* status = object_member(claim, "status");
  const json::object* old_status = object_member(old, "status");
  const json::object* allocation = object_member(status, "allocation");
  const json::object* old_allocation = object_member(old_status, "allocation");

  const auto reserved = objects_at(status, "reservedFor");
  if (!too_many(causes, "status.reservedFor", reserved.size(), kResourceClaimReservedForMaxSize)) {
    std::set<std::string> uids;
    for (std::size_t i = 0; i < reserved.size(); ++i) {
      const std::string at = fe::index("status.reservedFor", i);
      if (string_at(reserved[i], "resource").empty()) fe::required(causes, at + ".resource");
      if (string_at(reserved[i], "name").empty()) fe::required(causes, at + ".name");
      if (string_at(reserved[i], "uid").empty()) fe::required(causes, at + ".uid");
    }
    for (std::size_t i = 0; i < reserved.size(); ++i) {
      const std::string uid = string_at(reserved[i], "uid");
      if (!uids.insert(uid).second) {
        fe::duplicate(causes, fe::index("status.reservedFor", i), go_quote(uid));
      }
    }
  }

  std::set<std::string> allocated;
  for (const json::object* r : objects_at(object_member(allocation, "devices"), "results")) {
    allocated.insert(device_id(r));
  }
  const auto devices = objects_at(status, "devices");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    device_status(causes, fe::index("status.devices", i), devices[i], allocated);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::string id = device_id(devices[i]);
    if (!seen.insert(id).second) fe::duplicate(causes, fe::index("status.devices", i), go_quote(id));
  }

  if (!reserved.empty()) {
    if (allocation == nullptr) {
      fe::forbidden(causes, "status.reservedFor", "may not be specified when `allocated` is not set");
    } else if (deleted(claim)) {
      // Entries may be removed while the claim is being deleted, not added.
      std::set<std::string> before;
      for (const json::object* r : objects_at(old_status, "reservedFor")) {
        before.insert(sorted_json(*r));
      }
      for (const json::object* r : reserved) {
        if (before.count(sorted_json(*r)) == 0) {
          fe::forbidden(causes, "status.reservedFor",
                        "new entries may not be added while `deallocationRequested` or "
                        "`deletionTimestamp` are set");
          break;
        }
      }
    }
  }

  if (old_allocation != nullptr && allocation != nullptr) {
    if (*old_allocation != *allocation) {
      fe::immutable(causes, "status.allocation", go_json(kAllocationResult, allocation));
    }
  } else if (allocation != nullptr) {
    allocation_result(causes, "status.allocation", allocation,
                      request_names(object_member(object_member(claim, "spec"), "devices")));
  }
}

void validate_resource_slice(const json::object& slice, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(slice, "spec");
  const std::string driver = string_at(spec, "driver");
  driver_name(causes, "spec.driver", driver);
  const json::object* pool = object_member(spec, "pool");
  pool_name(causes, "spec.pool.name", string_at(pool, "name"));
  if (const auto count = int_member(pool, "resourceSliceCount").value_or(0); count <= 0) {
    fe::invalid(causes, "spec.pool.resourceSliceCount", std::to_string(count),
                "must be greater than zero");
  }
  if (const auto generation = int_member(pool, "generation").value_or(0); generation < 0) {
    fe::invalid(causes, "spec.pool.generation", std::to_string(generation),
                "must be greater than or equal to zero");
  }
  const std::optional<std::string> node = string_ptr_at(spec, "nodeName");
  if (old != nullptr) {
    const json::object* old_spec = object_member(*old, "spec");
    const std::string pool_name_now = string_at(pool, "name");
    if (pool_name_now != string_at(object_member(old_spec, "pool"), "name")) {
      fe::immutable(causes, "spec.pool.name", go_quote(pool_name_now));
    }
    if (driver != string_at(old_spec, "driver")) fe::immutable(causes, "spec.driver", go_quote(driver));
    if (node != string_ptr_at(old_spec, "nodeName")) {
      fe::immutable(causes, "spec.nodeName", node ? go_quote(*node) : "null");
    }
  }

  std::vector<std::string> set_fields;
  if (node) {
    if (!node->empty()) {
      set_fields.emplace_back("`nodeName`");
      node_name(causes, "spec.nodeName", *node);
    } else {
      fe::invalid(causes, "spec.nodeName", go_quote(""),
                  "must be either unset or set to a non-empty string");
    }
  }
  if (const json::object* selector = object_member(spec, "nodeSelector")) {
    set_fields.emplace_back("`nodeSelector`");
    node_selector(causes, "spec.nodeSelector", selector);
    if (array_size(selector, "nodeSelectorTerms") != 1) {
      const json::value* terms = present_member(selector, "nodeSelectorTerms");
      std::string shown = "null";
      if (terms != nullptr && terms->is_array()) {
        shown = "[";
        bool first = true;
        for (const auto& t : terms->get_array()) {
          if (!first) shown += ",";
          first = false;
          shown += go_json(kSelectorTerm, t.if_object());
        }
        shown += "]";
      }
      fe::invalid(causes, "spec.nodeSelector.nodeSelectorTerms", shown,
                  "must have exactly one node selector term");
    }
  }
  if (auto all = bool_at(spec, "allNodes")) {
    if (*all) {
      set_fields.emplace_back("`allNodes`");
    } else {
      fe::invalid(causes, "spec.allNodes", "false", "must be either unset or set to true");
    }
  }
  constexpr std::string_view kOneOf =
      "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
  if (set_fields.empty()) {
    fe::required(causes, "spec", kOneOf);
  } else if (set_fields.size() > 1) {
    std::string shown = "{";
    for (std::size_t i = 0; i < set_fields.size(); ++i) {
      if (i > 0) shown += ", ";
      shown += set_fields[i];
    }
    fe::invalid(causes, "spec", go_quote(shown + "}"),
                std::string(kOneOf) + ", but multiple fields are set");
  }

  const auto devices = objects_at(spec, "devices");
  if (!too_many(causes, "spec.devices", devices.size(), kResourceSliceMaxDevices)) {
    for (std::size_t i = 0; i < devices.size(); ++i) {
      device(causes, fe::index("spec.devices", i), devices[i]);
    }
    duplicate_names(causes, "spec.devices", devices);
  }
}

std::optional<std::string> admin_access_field(const json::object& obj, std::string_view kind,
                                              const json::object* old,
                                              std::string_view subresource) {
  const auto granted = [](const json::object* claim) -> std::optional<std::string> {
    const json::object* allocation = object_member(object_member(claim, "status"), "allocation");
    const auto results = objects_at(object_member(allocation, "devices"), "results");
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (bool_at(results[i], "adminAccess").value_or(false)) {
        return fe::index("status.allocation.devices.results", i) + ".adminAccess";
      }
    }
    return std::nullopt;
  };
  if (kind == "ResourceClaim" && subresource == "status") {
    if (old != nullptr && granted(old)) return std::nullopt;
    return granted(&obj);
  }
  if (old != nullptr || !subresource.empty()) return std::nullopt;  // the spec is immutable
  const json::object* spec = object_member(obj, "spec");
  if (kind == "ResourceClaimTemplate") spec = object_member(spec, "spec");
  else if (kind != "ResourceClaim") return std::nullopt;
  const auto requests = objects_at(object_member(spec, "devices"), "requests");
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (bool_at(object_member(requests[i], "exactly"), "adminAccess").value_or(false)) {
      return fe::index("spec.devices.requests", i) + ".exactly.adminAccess";
    }
  }
  return std::nullopt;
}

std::string admin_access_detail() {
  return "admin access to devices requires the `" + std::string(kAdminAccessNamespaceLabel) +
         ": true` label on the containing namespace";
}

std::optional<std::string> resource_slice_driver_warning(const json::object& slice) {
  const std::string driver = string_at(object_member(slice, "spec"), "driver");
  if (std::none_of(driver.begin(), driver.end(),
                   [](unsigned char c) { return std::isupper(c) != 0; })) {
    return std::nullopt;
  }
  return "spec.driver: driver names should be lowercase; " + go_quote(driver) +
         " contains uppercase characters";
}

std::string resource_claim_state_cell(const json::object& claim) {
  std::vector<std::string> states;
  const bool is_deleted = deleted(claim);
  if (is_deleted) states.emplace_back("deleted");
  const json::object* status = object_member(claim, "status");
  if (object_member(status, "allocation") == nullptr) {
    if (!is_deleted) states.emplace_back("pending");
  } else {
    states.emplace_back("allocated");
    if (array_size(status, "reservedFor") > 0) states.emplace_back("reserved");
  }
  std::string out;
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (i > 0) out += ",";
    out += states[i];
  }
  return out;
}

}  // namespace kwatch::kinds
