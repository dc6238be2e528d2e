// One member step into a JSON object, for code that reads objects field by field: the member
// as an object, array, string or integer, or nothing (nullptr, "", nullopt) when it is absent
// or of another type.
// Each takes the object by reference or by pointer (null: absent). Pure; inline.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

inline const boost::json::object* object_member(const boost::json::object& obj,
                                                std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

inline boost::json::object* object_member(boost::json::object& obj, std::string_view key) {
  boost::json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_object() : nullptr;
}

inline const boost::json::object* object_member(const boost::json::object* obj,
                                                std::string_view key) {
  return obj != nullptr ? object_member(*obj, key) : nullptr;
}

inline const boost::json::array* array_member(const boost::json::object& obj,
                                              std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  return v != nullptr ? v->if_array() : nullptr;
}

inline const boost::json::array* array_member(const boost::json::object* obj,
                                              std::string_view key) {
  return obj != nullptr ? array_member(*obj, key) : nullptr;
}

// A view into `obj`: valid while that member is.
// The member when it is there and not null (a Go pointer that is not nil).
inline const boost::json::value* present_member(const boost::json::object* obj,
                                                std::string_view key) {
  if (obj == nullptr) return nullptr;
  const boost::json::value* v = obj->if_contains(key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

// An integer member; nullopt when absent, null or not an integer.
inline std::optional<std::int64_t> int_member(const boost::json::object* obj,
                                              std::string_view key) {
  const boost::json::value* v = present_member(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  return std::nullopt;
}

inline std::string_view string_member(const boost::json::object* obj, std::string_view key) {
  const boost::json::value* v = obj != nullptr ? obj->if_contains(key) : nullptr;
  return v != nullptr && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

inline std::string_view string_member(const boost::json::object& obj, std::string_view key) {
  return string_member(&obj, key);
}

// A copy, for a value kept past changes to `obj`.
inline std::string string_at(const boost::json::object* obj, std::string_view key) {
  return std::string(string_member(obj, key));
}

inline std::string string_at(const boost::json::object& obj, std::string_view key) {
  return std::string(string_member(&obj, key));
}

// The strings of the array under `key`, other elements skipped.
inline std::vector<std::string> strings_at(const boost::json::object& obj, std::string_view key) {
  std::vector<std::string> out;
  if (const boost::json::array* a = array_member(obj, key)) {
    out.reserve(a->size());
    for (const auto& v : *a) {
      if (v.is_string()) out.emplace_back(v.get_string());
    }
  }
  return out;
}

// `values` as a JSON array of strings.
inline boost::json::array string_array(const std::vector<std::string>& values) {
  boost::json::array out;
  out.reserve(values.size());
  for (const auto& v : values) out.emplace_back(v);
  return out;
}

}  // namespace kwatch::apimachinery
