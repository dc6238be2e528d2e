#include "kinds/scheme.hpp"

#include "kinds/builtin_kinds.hpp"
#include "apimachinery/json_path.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <mutex>

namespace kwatch::kinds {

using apimachinery::find_field;

namespace json = boost::json;

std::string ResourceInfo::namespace_prefix(std::string_view ns) const {
  if (!namespaced || ns.empty()) return key_prefix();
  std::string prefix = key_prefix();
  prefix.append(ns);
  prefix.push_back('/');
  return prefix;
}

std::string ResourceInfo::key(std::string_view ns, std::string_view name) const {
  std::string k = namespace_prefix(ns);
  k.append(name);
  return k;
}

bool ResourceInfo::is_selectable(std::string_view field) const {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  for (const auto& f : selectable_fields) {
    if (f == field) return true;
  }
  return false;
}

namespace {

std::string scalar_text(const json::value* v) {
  if (v == nullptr || v->is_null()) return {};
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  return {};
}

}  // namespace

std::optional<std::string> ResourceInfo::field_value(const json::object& object,
                                                     std::string_view field) const {
  if (!is_selectable(field)) return std::nullopt;
  if (hooks.field_value) {
    if (auto v = hooks.field_value(object, field)) return v;
  }
  return scalar_text(find_field(object, field));
}

std::shared_ptr<Scheme> Scheme::builtin(const std::string& storage_prefix) {
  auto scheme = std::make_shared<Scheme>();
  add_builtin_kinds(*scheme, storage_prefix);
  return scheme;
}

void Scheme::add(ResourceInfo info) {
  std::unique_lock lock(mutex_);
  resources_.push_back(std::make_shared<const ResourceInfo>(std::move(info)));
  ++generation_;
}

void Scheme::set_owned(const std::string& owner, std::vector<ResourceInfo> infos) {
  // Destroyed after the lock is released: the last holder of a replaced description may be this
  // scheme, and freeing its compiled schema takes a while.
  std::vector<std::shared_ptr<const ResourceInfo>> replaced;
  std::unique_lock lock(mutex_);
  for (auto it = resources_.begin(); it != resources_.end();) {
    if (!owner.empty() && (*it)->owner == owner) {
      replaced.push_back(std::move(*it));
      it = resources_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& info : infos) {
    info.owner = owner;
    resources_.push_back(std::make_shared<const ResourceInfo>(std::move(info)));
  }
  ++generation_;
}

std::vector<std::string> Scheme::owners() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> out;
  for (const auto& r : resources_) {
    if (!r->owner.empty() && std::find(out.begin(), out.end(), r->owner) == out.end()) {
      out.push_back(r->owner);
    }
  }
  return out;
}

std::shared_ptr<const ResourceInfo> Scheme::find(std::string_view group, std::string_view version,
                                                 std::string_view resource) const {
  std::shared_lock lock(mutex_);
  for (const auto& r : resources_) {
    if (r->group == group && r->version == version && r->resource == resource) return r;
  }
  return nullptr;
}

std::shared_ptr<const ResourceInfo> Scheme::find_kind(std::string_view group,
                                                      std::string_view version,
                                                      std::string_view kind) const {
  std::shared_lock lock(mutex_);
  for (const auto& r : resources_) {
    if (r->group == group && r->version == version && r->kind == kind) return r;
  }
  return nullptr;
}

std::shared_ptr<const ResourceInfo> Scheme::find_prefix(std::string_view key_prefix) const {
  // key_prefix() without building it: the garbage collector asks for each item it runs.
  auto matches = [key_prefix](const ResourceInfo& r) {
    std::string_view rest = key_prefix;
    const std::string& step = r.key_resource.empty() ? r.resource : r.key_resource;
    if (!rest.starts_with(r.storage_prefix)) return false;
    rest.remove_prefix(r.storage_prefix.size());
    return rest.size() == step.size() + 2 && rest.front() == '/' && rest.back() == '/' &&
           rest.substr(1, step.size()) == step;
  };
  std::shared_lock lock(mutex_);
  std::shared_ptr<const ResourceInfo> first;
  for (const auto& r : resources_) {
    if (!matches(*r)) continue;
    if (!r->storage_version.empty() && r->storage_version == r->version) return r;
    if (first == nullptr) first = r;
  }
  return first;
}

std::vector<std::shared_ptr<const ResourceInfo>> Scheme::resources() const {
  std::shared_lock lock(mutex_);
  return resources_;
}

std::vector<std::shared_ptr<const ResourceInfo>> Scheme::resources(std::string_view group,
                                                                   std::string_view version) const {
  std::shared_lock lock(mutex_);
  std::vector<std::shared_ptr<const ResourceInfo>> out;
  for (const auto& r : resources_) {
    if (r->group == group && r->version == version) out.push_back(r);
  }
  return out;
}

std::vector<GroupVersion> Scheme::group_versions() const {
  std::shared_lock lock(mutex_);
  std::vector<GroupVersion> out;
  auto seen = [&](const ResourceInfo& r) {
    for (const auto& gv : out) {
      if (gv.group == r.group && gv.version == r.version) return true;
    }
    return false;
  };
  for (const auto& r : resources_) {
    if (r->group.empty() && !seen(*r)) out.push_back({r->group, r->version});
  }
  for (const auto& r : resources_) {
    if (!r->group.empty() && !seen(*r)) out.push_back({r->group, r->version});
  }
  return out;
}

GroupVersion parse_group_version(std::string_view api_version) {
  const auto slash = api_version.find('/');
  if (slash == std::string_view::npos) return {"", std::string(api_version)};
  return {std::string(api_version.substr(0, slash)), std::string(api_version.substr(slash + 1))};
}

}  // namespace kwatch::kinds
