#include "apimachinery/json_path.hpp"

#include <boost/json/array.hpp>

namespace kwatch::apimachinery {

namespace json = boost::json;

namespace {

std::string_view strip(std::string_view path) {
  if (path.starts_with('{') && path.ends_with('}')) path = path.substr(1, path.size() - 2);
  if (path.starts_with('.')) path.remove_prefix(1);
  return path;
}

// The next step of `path`, which loses it and its dot.
std::string_view next_step(std::string_view& path) {
  const auto dot = path.find('.');
  const std::string_view step = path.substr(0, dot);
  path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  return step;
}

}  // namespace

const json::value* find_field(const json::object& obj, std::string_view path) {
  path = strip(path);
  if (path.empty()) return nullptr;
  const json::object* current = &obj;
  for (;;) {
    const std::string_view step = next_step(path);
    const json::value* v = current->if_contains(step);
    if (v == nullptr || path.empty()) return v;
    current = v->if_object();
    if (current == nullptr) return nullptr;
  }
}

void set_field(json::object& obj, std::string_view path, json::value value) {
  path = strip(path);
  if (path.empty()) return;
  json::object* current = &obj;
  for (;;) {
    const std::string_view step = next_step(path);
    if (path.empty()) {
      (*current)[step] = std::move(value);
      return;
    }
    json::value& next = (*current)[step];
    if (!next.is_object()) next = json::object();
    current = &next.get_object();
  }
}

bool equal_but_metadata_member(const json::object& a, const json::object& b,
                               std::string_view member) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, av] : a) {
    const json::value* bv = b.if_contains(key);
    if (bv == nullptr) return false;
    if (key != "metadata" || !av.is_object() || !bv->is_object()) {
      if (av != *bv) return false;
      continue;
    }
    const json::object& am = av.get_object();
    const json::object& bm = bv->get_object();
    const std::size_t a_extra = am.contains(member) ? 1 : 0;
    const std::size_t b_extra = bm.contains(member) ? 1 : 0;
    if (am.size() - a_extra != bm.size() - b_extra) return false;
    for (const auto& [mk, mv] : am) {
      if (mk == member) continue;
      const json::value* other = bm.if_contains(mk);
      if (other == nullptr || *other != mv) return false;
    }
  }
  return true;
}

ConditionSet set_condition(boost::json::object& status, std::string_view type,
                           std::string_view value, std::string_view now) {
  boost::json::value& list = status["conditions"];
  if (!list.is_array()) list = boost::json::array();
  boost::json::object* condition = nullptr;
  for (auto& c : list.get_array()) {
    if (c.is_object() && string_member(&c.get_object(), "type") == type) {
      condition = &c.get_object();
      break;
    }
  }
  if (condition == nullptr) {
    condition = &list.get_array().emplace_back(boost::json::object()).get_object();
    (*condition)["type"] = type;
  }
  const bool changed = string_member(condition, "status") != value;
  (*condition)["status"] = value;
  if (changed || string_member(condition, "lastTransitionTime").empty()) {
    (*condition)["lastTransitionTime"] = now;
  }
  return {*condition, changed};
}

}  // namespace kwatch::apimachinery
