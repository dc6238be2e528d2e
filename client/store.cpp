#include "client/store.hpp"

#include <mutex>

namespace kwatch::client {

namespace json = boost::json;

namespace {

std::string string_at(const json::object* o, std::string_view key) {
  const json::value* v = o != nullptr ? o->if_contains(key) : nullptr;
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

const json::object* metadata_of(const json::object& object) {
  const json::value* m = object.if_contains("metadata");
  return m != nullptr ? m->if_object() : nullptr;
}

}  // namespace

std::string Store::key_of(const json::object& object) {
  const json::object* meta = metadata_of(object);
  const std::string ns = string_at(meta, "namespace");
  const std::string name = string_at(meta, "name");
  return ns.empty() ? name : ns + "/" + name;
}

Store::IndexFn Store::by_namespace() {
  return [](const json::object& o) -> std::vector<std::string> {
    std::string ns = string_at(metadata_of(o), "namespace");
    if (ns.empty()) return {};
    return {std::move(ns)};
  };
}

Store::IndexFn Store::by_label(std::string label) {
  return [label = std::move(label)](const json::object& o) -> std::vector<std::string> {
    const json::object* meta = metadata_of(o);
    const json::value* labels = meta != nullptr ? meta->if_contains("labels") : nullptr;
    if (labels == nullptr || !labels->is_object()) return {};
    std::string value = string_at(&labels->get_object(), label);
    if (value.empty() && !labels->get_object().contains(label)) return {};
    return {std::move(value)};
  };
}

void Store::add_index(std::string name, IndexFn fn) {
  std::unique_lock lock(mutex_);
  index_fns_[name] = std::move(fn);
  auto& index = indexes_[name];
  index.clear();
  for (const auto& [key, object] : objects_) {
    for (auto& value : index_fns_[name](*object)) index[value].insert(key);
  }
}

void Store::set_transform(TransformFn fn) {
  std::unique_lock lock(mutex_);
  transform_ = std::move(fn);
}

Store::Object Store::make(json::object object) const {
  if (transform_) transform_(object);
  return std::make_shared<const json::object>(std::move(object));
}

void Store::index_locked(const std::string& key, const Object& object) {
  for (const auto& [name, fn] : index_fns_) {
    for (auto& value : fn(*object)) indexes_[name][value].insert(key);
  }
}

void Store::unindex_locked(const std::string& key, const Object& object) {
  for (const auto& [name, fn] : index_fns_) {
    auto& index = indexes_[name];
    for (auto& value : fn(*object)) {
      auto it = index.find(value);
      if (it == index.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) index.erase(it);
    }
  }
}

Store::Object Store::upsert(json::object object) {
  std::string key = key_of(object);
  Object stored = make(std::move(object));
  std::unique_lock lock(mutex_);
  Object previous;
  auto it = objects_.find(key);
  if (it != objects_.end()) {
    previous = it->second;
    unindex_locked(key, previous);
    it->second = stored;
  } else {
    objects_.emplace(key, stored);
  }
  index_locked(key, stored);
  return previous;
}

Store::Object Store::remove(const std::string& key) {
  std::unique_lock lock(mutex_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  Object previous = it->second;
  unindex_locked(key, previous);
  objects_.erase(it);
  return previous;
}

std::vector<Store::Object> Store::replace(std::vector<json::object> objects) {
  std::map<std::string, Object> fresh;
  for (auto& o : objects) {
    std::string key = key_of(o);
    fresh[std::move(key)] = make(std::move(o));
  }
  std::unique_lock lock(mutex_);
  std::vector<Object> gone;
  for (const auto& [key, object] : objects_) {
    if (!fresh.count(key)) gone.push_back(object);
  }
  objects_ = std::move(fresh);
  for (auto& [name, index] : indexes_) index.clear();
  for (const auto& [key, object] : objects_) index_locked(key, object);
  return gone;
}

Store::Object Store::get(const std::string& key) const {
  std::shared_lock lock(mutex_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<Store::Object> Store::list() const {
  std::shared_lock lock(mutex_);
  std::vector<Object> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(object);
  return out;
}

std::vector<Store::Object> Store::by_index(const std::string& index, const std::string& value) const {
  std::shared_lock lock(mutex_);
  std::vector<Object> out;
  auto i = indexes_.find(index);
  if (i == indexes_.end()) return out;
  auto v = i->second.find(value);
  if (v == i->second.end()) return out;
  for (const auto& key : v->second) {
    if (auto it = objects_.find(key); it != objects_.end()) out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> Store::keys() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(key);
  return out;
}

std::size_t Store::size() const {
  std::shared_lock lock(mutex_);
  return objects_.size();
}

}  // namespace kwatch::client
