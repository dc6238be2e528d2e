#include "kinds/storage_kinds.hpp"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/value.hpp>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"
#include "kinds/field_errors.hpp"

namespace kwatch::kinds {

namespace json = boost::json;
using apimachinery::int_member;
using apimachinery::present_member;
namespace fe = field_errors;
using apimachinery::array_member;
using apimachinery::dns1123_subdomain_errors;
using apimachinery::go_quote;
using apimachinery::object_member;
using apimachinery::qualified_name_errors;
using apimachinery::string_at;

namespace {

constexpr std::string_view kNegative = "must be greater than or equal to 0";

// ---- reading the JSON as Go's structs would hold it ----

// The objects of the array under `key`; an element that is none reads as an empty struct.
std::vector<const json::object*> objects_at(const json::object* obj, std::string_view key) {
  static const json::object kEmpty;
  std::vector<const json::object*> out;
  if (const json::array* a = array_member(obj, key)) {
    for (const auto& v : *a) out.push_back(v.is_object() ? &v.get_object() : &kEmpty);
  }
  return out;
}

// A map[string]string member; empty when absent.
std::map<std::string, std::string> string_map(const json::object* obj, std::string_view key) {
  std::map<std::string, std::string> out;
  if (const json::object* m = object_member(obj, key)) {
    for (const auto& [k, v] : *m) {
      out.emplace(std::string(k), v.is_string() ? std::string(v.get_string()) : std::string());
    }
  }
  return out;
}

// ---- how kube 1.34's field errors show a value that is neither string nor number: its
// encoding/json form (the internal storage types have no JSON tags: Go's field names) ----

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '<':
      case '>':
      case '&': {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
        break;
      }
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// A []string: null when absent (nil), [] when empty.
std::string json_strings(const json::object* obj, std::string_view key) {
  const json::array* a = array_member(obj, key);
  if (a == nullptr) return "null";
  std::string out = "[";
  for (std::size_t i = 0; i < a->size(); ++i) {
    if (i > 0) out += ",";
    const json::value& v = (*a)[i];
    out += json_string(v.is_string() ? std::string_view(v.get_string()) : "");
  }
  return out + "]";
}

// storage.CSINodeDriver as encoding/json writes it.
std::string csi_node_driver_json(const json::object& d) {
  std::string out = "{\"Name\":" + json_string(string_at(d, "name")) +
                    ",\"NodeID\":" + json_string(string_at(d, "nodeID")) +
                    ",\"TopologyKeys\":" + json_strings(&d, "topologyKeys") + ",\"Allocatable\":";
  const json::value* a = present_member(&d, "allocatable");
  if (a == nullptr || !a->is_object()) return out + "null}";
  const auto count = int_member(&a->get_object(), "count");
  return out + "{\"Count\":" + (count ? std::to_string(*count) : "null") + "}}";
}

// A *metav1.LabelSelector as encoding/json writes it (its JSON tags, omitempty).
std::string label_selector_json(const json::value* selector) {
  if (selector == nullptr || !selector->is_object()) return "null";
  const json::object& s = selector->get_object();
  std::string out = "{";
  const auto labels = string_map(&s, "matchLabels");
  if (!labels.empty()) {
    out += "\"matchLabels\":{";
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out += ",";
      first = false;
      out += json_string(k) + ":" + json_string(v);
    }
    out += "}";
  }
  const auto exprs = objects_at(&s, "matchExpressions");
  if (!exprs.empty()) {
    if (out.size() > 1) out += ",";
    out += "\"matchExpressions\":[";
    for (std::size_t i = 0; i < exprs.size(); ++i) {
      if (i > 0) out += ",";
      out += "{\"key\":" + json_string(string_at(exprs[i], "key")) +
             ",\"operator\":" + json_string(string_at(exprs[i], "operator"));
      if (!fe::string_items(exprs[i], "values").empty()) {
        out += ",\"values\":" + json_strings(exprs[i], "values");
      }
      out += "}";
    }
    out += "]";
  }
  return out + "}";
}

// ---- apiequality.Semantic.DeepEqual: a nil slice or map equals an empty one; a nil pointer
// equals only a nil pointer ----

bool same_driver(const json::object& a, const json::object& b) {
  if (string_at(a, "nodeID") != string_at(b, "nodeID")) return false;
  if (fe::string_items(&a, "topologyKeys") != fe::string_items(&b, "topologyKeys")) return false;
  const json::value* aa = present_member(&a, "allocatable");
  const json::value* ba = present_member(&b, "allocatable");
  if ((aa == nullptr) != (ba == nullptr)) return false;
  if (aa == nullptr) return true;
  return int_member(aa->if_object(), "count") == int_member(ba->if_object(), "count");
}

bool same_selector(const json::value* a, const json::value* b) {
  if ((a == nullptr) != (b == nullptr)) return false;
  if (a == nullptr) return true;
  const json::object* sa = a->if_object();
  const json::object* sb = b->if_object();
  if (string_map(sa, "matchLabels") != string_map(sb, "matchLabels")) return false;
  const auto ea = objects_at(sa, "matchExpressions");
  const auto eb = objects_at(sb, "matchExpressions");
  if (ea.size() != eb.size()) return false;
  for (std::size_t i = 0; i < ea.size(); ++i) {
    if (string_at(ea[i], "key") != string_at(eb[i], "key") ||
        string_at(ea[i], "operator") != string_at(eb[i], "operator") ||
        fe::string_items(ea[i], "values") != fe::string_items(eb[i], "values")) {
      return false;
    }
  }
  return true;
}

// ---- the checks kube's storage validation shares with core's ----

// core's ValidateCSIDriverName.
void check_csi_driver_name(const std::string& name, const std::string& path, Causes& causes) {
  if (name.empty()) fe::required(causes, path);
  if (name.size() > kCSIDriverNameMaxLength) fe::too_long(causes, path, kCSIDriverNameMaxLength);
  std::string lower = name;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const auto& e : dns1123_subdomain_errors(lower))
    fe::invalid(causes, path, go_quote(name), e);
}

// ValidateQualifiedName: each problem shows the value checked.
void check_qualified_name(const std::string& value, const std::string& path, Causes& causes) {
  for (const auto& e : qualified_name_errors(value)) fe::invalid(causes, path, go_quote(value), e);
}

// Whether a resource.Quantity's text is below zero: a minus sign before a number that is not
// zero ("-0", "-0.0Gi" are zero).
bool negative_quantity(const json::value* v) {
  if (v == nullptr || !v->is_string()) return false;
  const std::string_view s = v->get_string();
  if (s.empty() || s[0] != '-') return false;
  for (std::size_t i = 1;
       i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] >= '1' && s[i] <= '9') return true;
  }
  return false;
}

// metav1validation.ValidateLabelSelector; with `allow_invalid_values`, the values of
// matchExpressions are not checked (AllowInvalidLabelValueInSelector).
void check_selector(const json::value* selector, const std::string& path, bool allow_invalid_values,
                    Causes& causes) {
  if (selector == nullptr || !selector->is_object()) return;
  Causes found;
  fe::check_label_selector(selector->get_object(), path, found);
  for (auto& c : found) {
    const bool expression_value = c.field.starts_with(path + ".matchExpressions[") &&
                                  c.field.find("].values[") != std::string::npos;
    if (allow_invalid_values && expression_value) continue;
    causes.push_back(std::move(c));
  }
}

}  // namespace

void validate_csi_node(const json::object& node, const json::object* old, Causes& causes) {
  const json::object* spec = object_member(node, "spec");
  std::set<std::string> driver_names;
  std::size_t i = 0;
  for (const json::object* driver : objects_at(spec, "drivers")) {
    const std::string path = fe::index("spec.drivers", i++);
    const std::string name = string_at(driver, "name");
    check_csi_driver_name(name, path + ".name", causes);
    const std::string node_id = string_at(driver, "nodeID");
    if (node_id.empty()) fe::required(causes, path + ".nodeID");
    if (node_id.size() > kCSINodeIDMaxLength) {
      fe::invalid(causes, path + ".nodeID", go_quote(node_id),
                  "must be " + std::to_string(kCSINodeIDMaxLength) + " characters or less");
    }
    if (const auto count = int_member(object_member(driver, "allocatable"), "count");
        count && *count < 0) {
      fe::invalid(causes, path + ".allocatable.count", std::to_string(*count), kNegative);
    }
    if (!driver_names.insert(name).second) fe::duplicate(causes, path + ".name", go_quote(name));
    // kube reports the topology keys at the driver's path.
    std::set<std::string> keys;
    for (const std::string& key : fe::string_items(driver, "topologyKeys")) {
      if (key.empty()) fe::required(causes, path);
      if (!keys.insert(key).second) fe::duplicate(causes, path, go_quote(key));
      check_qualified_name(key, path, causes);
    }
  }
  if (old == nullptr) return;
  // A driver the node had keeps all it said; drivers come and go.
  for (const json::object* before : objects_at(object_member(*old, "spec"), "drivers")) {
    for (const json::object* after : objects_at(spec, "drivers")) {
      if (string_at(before, "name") != string_at(after, "name")) continue;
      if (!same_driver(*before, *after)) {
        fe::immutable(causes, "spec.drivers", csi_node_driver_json(*after));
      }
    }
  }
}

void validate_csi_storage_capacity(const json::object& capacity, const json::object* old,
                                   Causes& causes) {
  // An update may keep label values its old selector already had wrong (selectors stored before
  // their values were checked), as kube's strategy allows.
  bool allow_invalid_values = false;
  if (old != nullptr) {
    Causes old_causes;
    check_selector(present_member(old, "nodeTopology"), "nodeTopology", false, old_causes);
    allow_invalid_values = !old_causes.empty();
  }
  check_selector(present_member(&capacity, "nodeTopology"), "nodeTopology", allow_invalid_values, causes);
  const std::string class_name = string_at(capacity, "storageClassName");
  for (const auto& e : dns1123_subdomain_errors(class_name)) {
    fe::invalid(causes, "storageClassName", go_quote(class_name), e);
  }
  if (const json::value* q = present_member(&capacity, "capacity"); negative_quantity(q)) {
    fe::invalid(causes, "capacity", go_quote(q->get_string()), kNegative);
  }
  if (old == nullptr) return;
  // What the CSI GetCapacity call was asked: fixed once written.
  if (!same_selector(present_member(&capacity, "nodeTopology"), present_member(old, "nodeTopology"))) {
    fe::immutable(causes, "nodeTopology", label_selector_json(present_member(&capacity, "nodeTopology")));
  }
  if (class_name != string_at(*old, "storageClassName")) {
    fe::immutable(causes, "storageClassName", go_quote(class_name));
  }
}

void validate_volume_attributes_class(const json::object& vac, const json::object* old,
                                      Causes& causes) {
  const std::string driver = string_at(vac, "driverName");
  const auto parameters = string_map(&vac, "parameters");
  if (old != nullptr) {
    if (driver != string_at(*old, "driverName")) {
      fe::forbidden(causes, "driverName", "updates to driverName are forbidden.");
    }
    if (parameters != string_map(old, "parameters")) {
      fe::forbidden(causes, "parameters", "updates to parameters are forbidden.");
    }
  }
  // validateProvisioner: a qualified name once lowercased; the lowercased name is shown.
  if (driver.empty()) {
    fe::required(causes, "driverName");
  } else {
    std::string lower = driver;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    check_qualified_name(lower, "driverName", causes);
  }
  // validateParameters with allowEmpty false.
  if (parameters.size() > kMaxParameters) {
    fe::too_long(causes, "parameters", kMaxParameters);
    return;
  }
  std::size_t size = 0;
  for (const auto& [k, v] : parameters) {
    if (k.empty()) fe::invalid(causes, "parameters", go_quote(k), "field can not be empty.");
    size += k.size() + v.size();
  }
  if (size > kMaxParametersSize) fe::too_long(causes, "parameters", kMaxParametersSize);
  if (parameters.empty()) {
    fe::required(causes, "parameters", "must contain at least one key/value pair");
  }
}

}  // namespace kwatch::kinds
