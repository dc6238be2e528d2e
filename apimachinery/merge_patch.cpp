#include "apimachinery/merge_patch.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

namespace kwatch::apimachinery {
namespace {

// Like the json-patch library kube-apiserver uses, objects nested in an array that replaces a
// value lose their null members too (the array itself keeps null elements). Objects are rebuilt
// rather than erased from, because object::erase reorders members.
boost::json::value pruned(const boost::json::value& v) {
  if (const auto* obj = v.if_object()) {
    boost::json::object out;
    out.reserve(obj->size());
    for (const auto& [key, member] : *obj) {
      if (!member.is_null()) out.emplace(key, pruned(member));
    }
    return out;
  }
  if (const auto* arr = v.if_array()) {
    boost::json::array out;
    out.reserve(arr->size());
    for (const auto& e : *arr) out.push_back(pruned(e));
    return out;
  }
  return v;
}

}  // namespace

boost::json::value apply_merge_patch(const boost::json::value& target,
                                     const boost::json::value& patch) {
  const auto* patch_obj = patch.if_object();
  if (!patch_obj) return pruned(patch);
  const auto* target_obj = target.if_object();
  if (!target_obj) return pruned(patch);

  boost::json::object result;
  result.reserve(target_obj->size() + patch_obj->size());
  for (const auto& [key, value] : *target_obj) {
    auto it = patch_obj->find(key);
    if (it == patch_obj->end()) {
      result.emplace(key, value);
    } else if (!it->value().is_null()) {
      result.emplace(key, apply_merge_patch(value, it->value()));
    }
  }
  for (const auto& [key, value] : *patch_obj) {
    if (!value.is_null() && !target_obj->contains(key)) result.emplace(key, pruned(value));
  }
  return result;
}

}  // namespace kwatch::apimachinery
