#include "registry/json_path.hpp"

namespace kwatch::registry {

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

}  // namespace kwatch::registry
