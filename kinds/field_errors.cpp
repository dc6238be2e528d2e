#include "kinds/field_errors.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/validation.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace kwatch::kinds::field_errors {

namespace json = boost::json;
using apimachinery::array_member;
using apimachinery::go_quote;
using apimachinery::label_value_errors;
using apimachinery::object_member;
using apimachinery::qualified_name_errors;
using apimachinery::string_at;

namespace {

void add(Causes& causes, std::string type, std::string message, std::string field) {
  causes.push_back({std::move(type), std::move(message), std::move(field)});
}

const json::value* value_at(const json::object* obj, std::string_view key) {
  if (obj == nullptr) return nullptr;
  const json::value* v = obj->if_contains(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

}  // namespace

std::string index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::vector<std::string> string_items(const json::object* obj, std::string_view key) {
  std::vector<std::string> out;
  if (const json::array* a = array_member(obj, key)) {
    out.reserve(a->size());
    for (const auto& v : *a) out.emplace_back(v.is_string() ? std::string_view(v.get_string()) : "");
  }
  return out;
}

void required(Causes& causes, std::string field, std::string_view detail) {
  std::string message = "Required value";
  if (!detail.empty()) message += ": " + std::string(detail);
  add(causes, "FieldValueRequired", std::move(message), std::move(field));
}

void invalid(Causes& causes, std::string field, const std::string& shown, std::string_view detail) {
  std::string message = "Invalid value: " + shown;
  if (!detail.empty()) message += ": " + std::string(detail);
  add(causes, "FieldValueInvalid", std::move(message), std::move(field));
}

void forbidden(Causes& causes, std::string field, std::string_view detail) {
  add(causes, "FieldValueForbidden", "Forbidden: " + std::string(detail), std::move(field));
}

void not_supported(Causes& causes, std::string field, const std::string& value,
                   std::initializer_list<std::string_view> supported) {
  std::string message = "Unsupported value: " + go_quote(value) + ": supported values: ";
  bool first = true;
  for (auto s : supported) {
    if (!first) message += ", ";
    first = false;
    message += go_quote(s);
  }
  add(causes, "FieldValueNotSupported", std::move(message), std::move(field));
}

void duplicate(Causes& causes, std::string field, const std::string& shown) {
  add(causes, "FieldValueDuplicate", "Duplicate value: " + shown, std::move(field));
}

void too_many(Causes& causes, std::string field, std::size_t actual, std::size_t limit) {
  add(causes, "FieldValueTooMany",
      "Too many: " + std::to_string(actual) + ": must have at most " + std::to_string(limit) +
          " items",
      std::move(field));
}

void too_long(Causes& causes, std::string field, std::size_t limit) {
  add(causes, "FieldValueTooLong",
      "Too long: may not be more than " + std::to_string(limit) + (limit == 1 ? " byte" : " bytes"),
      std::move(field));
}

std::string go_strings(const std::vector<std::string>& items, std::string_view type) {
  std::string out = "[]" + std::string(type) + "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += go_quote(items[i]);
  }
  return out + "}";
}

void immutable(Causes& causes, std::string field, const std::string& shown) {
  invalid(causes, std::move(field), shown, "field is immutable");
}

void check_label_selector(const json::object& selector, const std::string& path, Causes& causes) {
  if (const json::object* labels = object_member(&selector, "matchLabels")) {
    for (const auto& [key, value] : *labels) {
      for (const auto& e : qualified_name_errors(key)) {
        invalid(causes, path + ".matchLabels", go_quote(key), e);
      }
      const std::string_view v = value.is_string() ? std::string_view(value.get_string()) : "";
      for (const auto& e : label_value_errors(v)) {
        invalid(causes, path + ".matchLabels", go_quote(v), e);
      }
    }
  }
  const json::value* exprs = value_at(&selector, "matchExpressions");
  if (exprs == nullptr || !exprs->is_array()) return;
  std::size_t i = 0;
  for (const auto& e : exprs->get_array()) {
    const std::string at = path + ".matchExpressions[" + std::to_string(i++) + "]";
    const json::object* expr = e.if_object();
    const std::string op = string_at(expr, "operator");
    const json::value* values = value_at(expr, "values");
    const std::size_t n = values != nullptr && values->is_array() ? values->get_array().size() : 0;
    if (op == "In" || op == "NotIn") {
      if (n == 0) required(causes, at + ".values", "must be specified when `operator` is 'In' or 'NotIn'");
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (n > 0) {
        forbidden(causes, at + ".values",
                  "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
      }
    } else {
      invalid(causes, at + ".operator", go_quote(op), "not a valid selector operator");
    }
    const std::string key = string_at(expr, "key");
    for (const auto& err : qualified_name_errors(key)) invalid(causes, at + ".key", go_quote(key), err);
    for (std::size_t j = 0; j < n; ++j) {
      const json::value& v = values->get_array()[j];
      const std::string_view s = v.is_string() ? std::string_view(v.get_string()) : "";
      for (const auto& err : label_value_errors(s)) {
        invalid(causes, at + ".values[" + std::to_string(j) + "]", go_quote(s), err);
      }
    }
  }
}

}  // namespace kwatch::kinds::field_errors
