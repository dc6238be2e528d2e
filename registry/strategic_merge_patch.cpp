#include "registry/strategic_merge_patch.hpp"

#include "registry/json_patch.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <vector>

namespace kwatch::registry {

namespace detail {
struct PatchSchemaNode {
  std::optional<PatchRule> rule;
  std::map<std::string, std::unique_ptr<PatchSchemaNode>, std::less<>> children;

  const PatchSchemaNode* child(std::string_view name) const {
    auto it = children.find(name);
    return it == children.end() ? nullptr : it->second.get();
  }
};
}  // namespace detail

namespace {

namespace json = boost::json;
using Node = detail::PatchSchemaNode;

constexpr std::string_view kDirective = "$patch";
constexpr std::string_view kRetainKeys = "$retainKeys";
constexpr std::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList";
constexpr std::string_view kSetElementOrder = "$setElementOrder";
constexpr std::string_view kElements = "[]";

// "spec.containers[0].ports" -> {"spec", "containers", "[]", "ports"}.
std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i <= path.size()) {
    auto dot = path.find('.', i);
    auto seg = path.substr(i, dot == std::string_view::npos ? std::string_view::npos : dot - i);
    auto bracket = seg.find('[');
    auto name = seg.substr(0, bracket);
    if (!name.empty()) out.emplace_back(name);
    while (bracket != std::string_view::npos) {
      auto close = seg.find(']', bracket);
      out.emplace_back(kElements);
      if (close == std::string_view::npos) break;
      bracket = seg.find('[', close);
    }
    if (dot == std::string_view::npos) break;
    i = dot + 1;
  }
  return out;
}

// ---- Go-style rendering, for the texts of the errors kube reports ----

std::string go_format(const json::value& v);

std::string go_number(const json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v.get_double());
  return buf;
}

std::string go_format(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "<nil>";
    case json::kind::bool_: return v.get_bool() ? "true" : "false";
    case json::kind::string: return std::string(v.get_string());
    case json::kind::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ' ';
        first = false;
        out += go_format(e);
      }
      return out + "]";
    }
    case json::kind::object: {
      // fmt prints maps with sorted keys.
      std::vector<std::pair<std::string_view, const json::value*>> members;
      for (const auto& [k, m] : v.get_object()) members.emplace_back(k, &m);
      std::sort(members.begin(), members.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "map[";
      bool first = true;
      for (const auto& [k, m] : members) {
        if (!first) out += ' ';
        first = false;
        out += k;
        out += ':';
        out += go_format(*m);
      }
      return out + "]";
    }
    default: return go_number(v);
  }
}

std::string go_type(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "<nil>";
    case json::kind::bool_: return "bool";
    case json::kind::string: return "string";
    case json::kind::array: return "[]interface {}";
    case json::kind::object: return "map[string]interface {}";
    case json::kind::double_: return "float64";
    default: return "int64";
  }
}

// ---- errors ----

ApiError bad_request(std::string message) {
  return api_error(Errc::bad_request, std::move(message));
}
ApiError bad_format_primitive_list() {
  return bad_request("invalid patch format of primitive list");
}
ApiError bad_format_retain_keys() { return bad_request("invalid patch format of retainKeys"); }
ApiError bad_format_set_element_order() {
  return bad_request("invalid patch format of setElementOrder list");
}
ApiError no_list_of_lists() {
  // ErrNoListOfLists ("lists of lists are not supported") reaches clients as a bare 422.
  return api_error(Errc::invalid,
                   "the server rejected our request due to an error in our request");
}
ApiError no_merge_key(const json::value& m, std::string_view key) {
  return bad_request("map: " + go_format(m) + " does not contain declared merge key: " +
                     std::string(key));
}
ApiError bad_arg_type(std::string_view expected, const json::value& actual) {
  return bad_request("expected a " + std::string(expected) + ", but received a " +
                     go_type(actual));
}
ApiError bad_patch_type(const json::value& t, const json::value& m) {
  return bad_request("unknown patch type: " + go_format(t) + " in map: " + go_format(m));
}

using Status = boost::system::result<void, ApiError>;

// ---- helpers ----

bool starts_with(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }

bool is_directive(const json::value& v, std::string_view name) {
  return v.is_string() && v.get_string() == name;
}

// Values taken from the patch as they are lose their null members, as the typed decoding in
// kube-apiserver would drop them.
json::value without_nulls(const json::value& v) {
  if (const auto* obj = v.if_object()) {
    json::object out;
    out.reserve(obj->size());
    for (const auto& [k, m] : *obj) {
      if (!m.is_null()) out.emplace(k, without_nulls(m));
    }
    return out;
  }
  if (const auto* arr = v.if_array()) {
    json::array out;
    out.reserve(arr->size());
    for (const auto& e : *arr) out.push_back(without_nulls(e));
    return out;
  }
  return v;
}

void erase_stable(json::object& obj, std::string_view key) {
  if (!obj.contains(key)) return;
  json::object out;
  out.reserve(obj.size());
  for (auto& [k, v] : obj) {
    if (k != key) out.emplace(k, std::move(v));
  }
  obj = std::move(out);
}

// The part after "<prefix>/" of a directive key such as "$setElementOrder/containers".
std::optional<std::string_view> directive_target(std::string_view key, std::string_view prefix) {
  auto slash = key.find('/');
  if (slash == std::string_view::npos || key.substr(0, slash) != prefix) return std::nullopt;
  return key.substr(slash + 1);
}

enum class ElemKind { none, object, primitive };

// sliceElementType: all elements share one type; lists of lists are refused.
ApiResult<ElemKind> element_kind(const json::array* a, const json::array* b) {
  std::optional<json::kind> seen;
  auto group = [](json::kind k) {
    return (k == json::kind::uint64 || k == json::kind::double_) ? json::kind::int64 : k;
  };
  for (const auto* list : {a, b}) {
    if (!list) continue;
    for (const auto& v : *list) {
      auto k = group(v.kind());
      if (!seen) {
        if (k == json::kind::array) return no_list_of_lists();
        seen = k;
      } else if (*seen != k) {
        std::string all = "[";
        all += a ? go_format(*a) : "[]";
        all += ' ';
        all += b ? go_format(*b) : "[]";
        all += ']';
        return bad_request("list element types are not identical: " + all);
      }
    }
  }
  if (!seen) return ElemKind::none;
  return *seen == json::kind::object ? ElemKind::object : ElemKind::primitive;
}

const json::value* merge_key_value(const json::value& item, std::string_view merge_key) {
  const auto* obj = item.if_object();
  if (!obj) return nullptr;
  auto it = obj->find(merge_key);
  return it == obj->end() ? nullptr : &it->value();
}

// index(): position of `item` in `list`, comparing merge key values for objects.
std::ptrdiff_t index_of(const json::array& list, const json::value& item,
                        std::string_view merge_key, ElemKind kind) {
  static const json::value kNull;
  auto key_of = [&](const json::value& v) -> const json::value& {
    if (kind != ElemKind::object) return v;
    const auto* k = merge_key_value(v, merge_key);
    return k ? *k : kNull;
  };
  const auto& wanted = key_of(item);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (json_equal(key_of(list[i]), wanted)) return static_cast<std::ptrdiff_t>(i);
  }
  return -1;
}

Status validate_merge_keys(const json::array& list, std::string_view merge_key) {
  for (const auto& item : list) {
    if (!item.is_object()) return bad_arg_type("map[string]interface {}", item);
    if (!merge_key_value(item, merge_key)) return no_merge_key(item, merge_key);
  }
  return {};
}

// normalizeSliceOrder: stable sort by position in `order`; `$patch: delete` items go last.
ApiResult<json::array> normalize_slice_order(json::array to_sort, const json::array& order,
                                             std::string_view merge_key, ElemKind kind) {
  json::array to_delete;
  if (kind == ElemKind::object) {
    if (auto s = validate_merge_keys(to_sort, merge_key); !s) return s.error();
    if (auto s = validate_merge_keys(order, merge_key); !s) return s.error();
    json::array keep;
    for (auto& v : to_sort) {
      const auto& obj = v.get_object();
      auto it = obj.find(kDirective);
      (it != obj.end() && is_directive(it->value(), "delete") ? to_delete : keep)
          .push_back(std::move(v));
    }
    to_sort = std::move(keep);
  }
  std::vector<std::pair<std::ptrdiff_t, std::size_t>> keys;
  for (std::size_t i = 0; i < to_sort.size(); ++i) {
    auto idx = index_of(order, to_sort[i], merge_key, kind);
    keys.emplace_back(idx < 0 ? std::numeric_limits<std::ptrdiff_t>::max() : idx, i);
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json::array out;
  out.reserve(to_sort.size() + to_delete.size());
  for (const auto& [_, i] : keys) out.push_back(std::move(to_sort[i]));
  for (auto& v : to_delete) out.push_back(std::move(v));
  return out;
}

// mergeSortedSlice: interleaves server-only items (left) into patch items (right), keeping each
// side's order; a left item goes first only when the live list has it before the right item.
json::array merge_sorted(json::array left, json::array right, const json::array& server_order,
                         std::string_view merge_key, ElemKind kind) {
  json::array out;
  out.reserve(left.size() + right.size());
  std::size_t i = 0, j = 0;
  while (i < left.size() || j < right.size()) {
    if (i >= left.size()) {
      out.push_back(std::move(right[j++]));
    } else if (j >= right.size()) {
      out.push_back(std::move(left[i++]));
    } else {
      auto li = index_of(server_order, left[i], merge_key, kind);
      auto ri = index_of(server_order, right[j], merge_key, kind);
      if (li >= 0 && ri >= 0 && li < ri) {
        out.push_back(std::move(left[i++]));
      } else {
        out.push_back(std::move(right[j++]));
      }
    }
  }
  return out;
}

// Splits `merged` into items present in `by` (patch items) and the others (server-only).
ApiResult<std::pair<json::array, json::array>> partition(const json::array& merged,
                                                         const json::array& by,
                                                         std::string_view merge_key,
                                                         ElemKind kind) {
  json::array in_patch, server_only;
  for (const auto& v : merged) {
    if (!merge_key.empty()) {
      if (!v.is_object()) return bad_arg_type("map[string]interface {}", v);
      if (!merge_key_value(v, merge_key)) return no_merge_key(v, merge_key);
    }
    bool found = false;
    if (!merge_key.empty()) {
      const auto* key = merge_key_value(v, merge_key);
      for (const auto& b : by) {
        if (!b.is_object()) return bad_request("value for key is not a map.");
        const auto* bk = merge_key_value(b, merge_key);
        if (bk && json_equal(*bk, *key)) {
          found = true;
          break;
        }
      }
    } else {
      found = index_of(by, v, merge_key, ElemKind::primitive) >= 0;
    }
    (found ? in_patch : server_only).push_back(v);
  }
  (void)kind;
  return std::pair{std::move(in_patch), std::move(server_only)};
}

ApiResult<json::array> normalize_element_order(json::array patch_items, json::array server_only,
                                               const json::array& patch_order,
                                               const json::array& server_order,
                                               std::string_view merge_key, ElemKind kind) {
  auto p = normalize_slice_order(std::move(patch_items), patch_order, merge_key, kind);
  if (!p) return p.error();
  auto s = normalize_slice_order(std::move(server_only), server_order, merge_key, kind);
  if (!s) return s.error();
  return merge_sorted(std::move(*s), std::move(*p), server_order, merge_key, kind);
}

class Merger {
 public:
  ApiResult<json::object> merge_map(json::object original, const json::object& patch,
                                    const Node* node);

 private:
  Status apply_retain_keys(json::object& original, const json::object& patch);
  Status merge_set_element_order(json::object& original, const json::object& patch,
                                 const Node* node, std::vector<std::string>& done);
  ApiResult<json::array> merge_slice(json::array original, const json::array& patch,
                                     const Node* elements, std::string_view merge_key,
                                     bool is_delete_list);
  ApiResult<json::array> merge_list_field(json::array original, const json::array& patch,
                                          const Node* field, bool is_delete_list);
};

const PatchRule* rule_of(const Node* field) {
  return field && field->rule ? &*field->rule : nullptr;
}

ApiResult<json::object> Merger::merge_map(json::object original, const json::object& patch,
                                          const Node* node) {
  if (auto it = patch.find(kDirective); it != patch.end()) {
    if (is_directive(it->value(), "replace")) {
      json::object out;
      for (const auto& [k, v] : patch) {
        if (k != kDirective && !v.is_null()) out.emplace(k, without_nulls(v));
      }
      return out;
    }
    if (is_directive(it->value(), "delete")) return json::object{};
    return bad_patch_type(it->value(), patch);
  }

  if (auto s = apply_retain_keys(original, patch); !s) return s.error();

  std::vector<std::string> done;  // list fields already merged through $setElementOrder
  if (auto s = merge_set_element_order(original, patch, node, done); !s) return s.error();

  for (const auto& [raw_key, patch_value] : patch) {
    std::string_view key = raw_key;
    if (key == kRetainKeys || starts_with(key, kSetElementOrder)) continue;
    if (std::find(done.begin(), done.end(), key) != done.end()) continue;
    bool is_delete_list = false;
    if (starts_with(key, kDeleteFromPrimitiveList)) {
      auto target = directive_target(key, kDeleteFromPrimitiveList);
      if (!target) return bad_format_primitive_list();
      key = *target;
      is_delete_list = true;
    }

    auto it = original.find(key);
    if (patch_value.is_null()) {
      if (it != original.end()) erase_stable(original, key);
      continue;
    }
    if (it == original.end()) {
      // Deleting from a list that is not there leaves it absent.
      if (!is_delete_list) original.emplace(key, without_nulls(patch_value));
      continue;
    }
    const Node* field = node ? node->child(key) : nullptr;
    const PatchRule* rule = rule_of(field);
    json::value& current = it->value();
    if (current.is_object() && patch_value.is_object()) {
      if (rule && rule->strategy == PatchStrategy::replace) {
        current = without_nulls(patch_value);
        continue;
      }
      auto merged = merge_map(std::move(current.get_object()), patch_value.get_object(), field);
      if (!merged) return merged.error();
      current = std::move(*merged);
    } else if (current.is_array() && patch_value.is_array()) {
      auto merged =
          merge_list_field(std::move(current.get_array()), patch_value.get_array(), field,
                           is_delete_list);
      if (!merged) return merged.error();
      current = std::move(*merged);
    } else {
      current = without_nulls(patch_value);
    }
  }
  return original;
}

ApiResult<json::array> Merger::merge_list_field(json::array original, const json::array& patch,
                                                const Node* field, bool is_delete_list) {
  const PatchRule* rule = rule_of(field);
  if (is_delete_list) {
    // deleteFromSlice; applied whatever the declared strategy.
    json::array out;
    for (auto& v : original) {
      bool drop = std::any_of(patch.begin(), patch.end(),
                              [&](const json::value& d) { return json_equal(d, v); });
      if (!drop) out.push_back(std::move(v));
    }
    return out;
  }
  if (!rule || rule->strategy != PatchStrategy::merge) {
    return without_nulls(json::value(patch)).get_array();
  }
  return merge_slice(std::move(original), patch, field->child(kElements), rule->merge_key, false);
}

Status Merger::apply_retain_keys(json::object& original, const json::object& patch) {
  auto it = patch.find(kRetainKeys);
  if (it == patch.end()) return {};
  const auto* keep = it->value().if_array();
  if (!keep) return bad_format_retain_keys();
  auto listed = [&](std::string_view k) {
    return std::any_of(keep->begin(), keep->end(), [&](const json::value& v) {
      return v.is_string() && v.get_string() == k;
    });
  };
  for (const auto& [k, v] : patch) {
    if (k == kRetainKeys || v.is_null() || starts_with(k, kDeleteFromPrimitiveList) ||
        starts_with(k, kSetElementOrder)) {
      continue;
    }
    if (!listed(k)) return bad_format_retain_keys();
  }
  json::object kept;
  for (auto& [k, v] : original) {
    if (listed(k)) kept.emplace(k, std::move(v));
  }
  original = std::move(kept);
  return {};
}

// validatePatchWithSetOrderList: the patch list's items must appear in $setElementOrder in the
// same relative order.
Status validate_with_set_order(const json::array& patch_list, const json::array& order,
                               std::string_view merge_key) {
  if (order.empty() || patch_list.empty()) return {};
  json::array non_delete;
  if (!merge_key.empty()) {
    for (const auto& v : patch_list) {
      const auto* obj = v.if_object();
      if (!obj) return bad_arg_type("map[string]interface {}", v);
      auto d = obj->find(kDirective);
      if (d == obj->end() || !is_directive(d->value(), "delete")) non_delete.push_back(v);
    }
  } else {
    non_delete = patch_list;
  }
  std::size_t p = 0, o = 0;
  while (p < non_delete.size() && o < order.size()) {
    if (const auto* obj = non_delete[p].if_object(); obj && obj->contains(kDirective)) {
      ++p;
      continue;
    }
    bool equal;
    if (merge_key.empty()) {
      equal = json_equal(non_delete[p], order[o]);
    } else {
      if (!non_delete[p].is_object()) return bad_arg_type("map[string]interface {}", non_delete[p]);
      if (!order[o].is_object()) return bad_arg_type("map[string]interface {}", order[o]);
      const auto* a = merge_key_value(non_delete[p], merge_key);
      if (!a) return no_merge_key(non_delete[p], merge_key);
      const auto* b = merge_key_value(order[o], merge_key);
      if (!b) return no_merge_key(order[o], merge_key);
      equal = json_equal(*a, *b);
    }
    if (equal) ++p;
    ++o;
  }
  if (p < non_delete.size() && o >= order.size()) {
    return bad_request("The order in patch list:\n" + go_format(json::value(patch_list)) +
                       "\n doesn't match " + std::string(kSetElementOrder) + " list:\n" +
                       go_format(json::value(order)) + "\n");
  }
  return {};
}

Status Merger::merge_set_element_order(json::object& original, const json::object& patch,
                                       const Node* node, std::vector<std::string>& done) {
  for (const auto& [key, order_value] : patch) {
    if (!starts_with(key, kSetElementOrder)) continue;
    const auto* order = order_value.if_array();
    if (!order) return bad_arg_type("[]interface {}", order_value);
    auto target = directive_target(key, kSetElementOrder);
    if (!target) return bad_format_set_element_order();
    std::string field_name(*target);

    const json::array* original_list = nullptr;
    const json::array* patch_list = nullptr;
    auto oit = original.find(field_name);
    if (oit != original.end()) {
      original_list = oit->value().if_array();
      if (!original_list) return bad_arg_type("[]interface {}", oit->value());
    }
    auto pit = patch.find(field_name);
    if (pit != patch.end()) {
      patch_list = pit->value().if_array();
      if (!patch_list) return bad_arg_type("[]interface {}", pit->value());
    }
    const Node* field = node ? node->child(field_name) : nullptr;
    const PatchRule* rule = rule_of(field);
    std::string merge_key = rule ? rule->merge_key : std::string{};
    if (patch_list) {
      if (auto s = validate_with_set_order(*patch_list, *order, merge_key); !s) return s;
    }
    if (!original_list && !patch_list) continue;

    json::array server_order = original_list ? *original_list : json::array{};
    json::array merged;
    if (original_list && !patch_list) {
      merged = *original_list;
    } else if (!original_list) {
      merged = without_nulls(json::value(*patch_list)).get_array();
    } else {
      auto m = merge_list_field(*original_list, *patch_list, field, false);
      if (!m) return m.error();
      merged = std::move(*m);
    }
    auto kind = element_kind(original_list, patch_list);
    if (!kind) return kind.error();
    if (*kind != ElemKind::none) {
      auto parts = partition(merged, *order, merge_key, *kind);
      if (!parts) return parts.error();
      auto both = normalize_element_order(std::move(parts->first), std::move(parts->second),
                                          *order, server_order, merge_key, *kind);
      if (!both) return both.error();
      merged = std::move(*both);
    }
    original[field_name] = std::move(merged);
    done.push_back(std::move(field_name));
  }
  return {};
}

ApiResult<json::array> Merger::merge_slice(json::array original, const json::array& patch,
                                           const Node* elements, std::string_view merge_key,
                                           bool is_delete_list) {
  if (original.empty() && patch.empty()) return original;
  auto kind = element_kind(&original, &patch);
  if (!kind) return kind.error();
  (void)is_delete_list;

  json::array merged;
  json::array patch_items;  // the patch without its directive elements
  json::array server_order;
  if (*kind != ElemKind::object) {
    merged = original;
    for (const auto& v : patch) {
      if (std::none_of(merged.begin(), merged.end(),
                       [&](const json::value& m) { return json_equal(m, v); })) {
        merged.push_back(v);
      }
    }
    // Duplicates already in the original collapse too, as deduplicateScalars does.
    json::array dedup;
    for (auto& v : merged) {
      if (std::none_of(dedup.begin(), dedup.end(),
                       [&](const json::value& m) { return json_equal(m, v); })) {
        dedup.push_back(std::move(v));
      }
    }
    merged = std::move(dedup);
    patch_items = patch;
    server_order = std::move(original);
  } else {
    if (merge_key.empty()) {
      return bad_request("cannot merge lists without merge key for type struct");
    }
    // mergeSliceWithSpecialElements: `$patch: delete` removes by key, `$patch: replace` makes
    // the rest of the patch list the whole list.
    bool replace = false;
    for (const auto& v : patch) {
      const auto& obj = v.get_object();
      auto d = obj.find(kDirective);
      if (d == obj.end()) {
        patch_items.push_back(v);
        continue;
      }
      if (is_directive(d->value(), "delete")) {
        const auto* key = merge_key_value(v, merge_key);
        if (!key) return no_merge_key(v, merge_key);
        json::array kept;
        for (auto& o : original) {
          if (!o.is_object()) return bad_request("value for key is not a map.");
          const auto* ok = merge_key_value(o, merge_key);
          if (!(ok && json_equal(*ok, *key))) kept.push_back(std::move(o));
        }
        original = std::move(kept);
      } else if (is_directive(d->value(), "replace")) {
        replace = true;
      } else if (is_directive(d->value(), "merge")) {
        return bad_request("merging lists cannot yet be specified in the patch");
      } else {
        return bad_patch_type(d->value(), v);
      }
    }
    if (replace) {
      original = without_nulls(json::value(std::move(patch_items))).get_array();
      patch_items = json::array{};
    }
    // mergeSliceWithoutSpecialElements: merge matching elements, append new ones.
    merged = original;
    for (const auto& v : patch_items) {
      const auto* key = merge_key_value(v, merge_key);
      if (!key) return no_merge_key(v, merge_key);
      std::optional<std::size_t> found;
      for (std::size_t i = 0; i < merged.size(); ++i) {
        if (!merged[i].is_object()) return bad_request("value for key is not a map.");
        const auto* mk = merge_key_value(merged[i], merge_key);
        if (mk && json_equal(*mk, *key)) {
          found = i;
          break;
        }
      }
      if (found) {
        auto m = merge_map(std::move(merged[*found].get_object()), v.get_object(), elements);
        if (!m) return m.error();
        merged[*found] = std::move(*m);
      } else {
        merged.push_back(without_nulls(v));
      }
    }
    server_order = std::move(original);
  }

  auto parts = partition(merged, patch_items, merge_key, *kind);
  if (!parts) return parts.error();
  return normalize_element_order(std::move(parts->first), std::move(parts->second), patch_items,
                                 server_order, merge_key, *kind);
}

// ---- built-in schemas ----

void add_object_meta(PatchSchema& s, const std::string& prefix) {
  s.merge_list(prefix + "metadata.ownerReferences", "uid");
  s.merge_list(prefix + "metadata.finalizers");
}

void add_container(PatchSchema& s, const std::string& c) {
  s.merge_list(c + ".ports", "containerPort");
  s.merge_list(c + ".env", "name");
  s.merge_list(c + ".volumeMounts", "mountPath");
  s.merge_list(c + ".volumeDevices", "devicePath");
}

void add_pod_spec(PatchSchema& s, const std::string& spec) {
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    s.merge_list(spec + "." + list, "name");
    add_container(s, spec + "." + list + "[]");
  }
  s.set(spec + ".volumes", {PatchStrategy::merge, "name", true});
  s.merge_list(spec + ".imagePullSecrets", "name");
  s.merge_list(spec + ".hostAliases", "ip");
  s.merge_list(spec + ".topologySpreadConstraints", "topologyKey");
  s.merge_list(spec + ".schedulingGates", "name");
  s.set(spec + ".resourceClaims", {PatchStrategy::merge, "name", true});
}

void add_pod_template(PatchSchema& s, const std::string& template_path) {
  add_object_meta(s, template_path + ".");
  add_pod_spec(s, template_path + ".spec");
}

PatchSchema metadata_only() {
  PatchSchema s;
  add_object_meta(s, "");
  return s;
}

PatchSchema pod_schema() {
  PatchSchema s = metadata_only();
  add_pod_spec(s, "spec");
  s.merge_list("status.conditions", "type");
  s.merge_list("status.podIPs", "ip");
  s.merge_list("status.hostIPs", "ip");
  s.set("status.resourceClaimStatuses", {PatchStrategy::merge, "name", true});
  return s;
}

PatchSchema workload_schema(bool deployment) {
  PatchSchema s = metadata_only();
  add_pod_template(s, "spec.template");
  s.merge_list("status.conditions", "type");
  if (deployment) s.set("spec.strategy", {PatchStrategy::merge, "", true});
  return s;
}

PatchSchema pod_template_schema() {
  PatchSchema s = metadata_only();
  add_pod_template(s, "template");
  return s;
}

PatchSchema cron_job_schema() {
  PatchSchema s = metadata_only();
  add_object_meta(s, "spec.jobTemplate.");
  add_pod_template(s, "spec.jobTemplate.spec.template");
  return s;
}

PatchSchema service_schema() {
  PatchSchema s = metadata_only();
  s.merge_list("spec.ports", "port");
  s.merge_list("status.conditions", "type");
  return s;
}

PatchSchema node_schema() {
  PatchSchema s = metadata_only();
  s.merge_list("spec.podCIDRs");
  s.merge_list("status.addresses", "type");
  s.merge_list("status.conditions", "type");
  return s;
}

PatchSchema conditions_schema() {
  PatchSchema s = metadata_only();
  s.merge_list("status.conditions", "type");
  return s;
}

PatchSchema service_account_schema() {
  PatchSchema s = metadata_only();
  s.merge_list("secrets", "name");
  return s;
}

}  // namespace

// ---- PatchSchema ----

PatchSchema::PatchSchema() : root_(std::make_unique<detail::PatchSchemaNode>()) {}
PatchSchema::~PatchSchema() = default;
PatchSchema::PatchSchema(PatchSchema&&) noexcept = default;
PatchSchema& PatchSchema::operator=(PatchSchema&&) noexcept = default;

PatchSchema& PatchSchema::set(std::string_view path, PatchRule rule) {
  Node* node = root_.get();
  for (const auto& seg : split_path(path)) {
    auto& slot = node->children[seg];
    if (!slot) slot = std::make_unique<Node>();
    node = slot.get();
  }
  node->rule = std::move(rule);
  return *this;
}

PatchSchema& PatchSchema::merge_list(std::string_view path, std::string merge_key) {
  return set(path, PatchRule{PatchStrategy::merge, std::move(merge_key), false});
}

const PatchRule* PatchSchema::find(std::string_view path) const {
  const Node* node = root_.get();
  for (const auto& seg : split_path(path)) {
    node = node->child(seg);
    if (!node) return nullptr;
  }
  return rule_of(node);
}

const PatchSchema& builtin_patch_schema(std::string_view group, std::string_view kind) {
  static const auto* const schemas = [] {
    auto* m = new std::map<std::string, PatchSchema, std::less<>>();
    m->emplace("/Pod", pod_schema());
    m->emplace("/PodTemplate", pod_template_schema());
    m->emplace("/Service", service_schema());
    m->emplace("/Node", node_schema());
    m->emplace("/Namespace", conditions_schema());
    m->emplace("/ServiceAccount", service_account_schema());
    m->emplace("apps/Deployment", workload_schema(true));
    m->emplace("apps/ReplicaSet", workload_schema(false));
    m->emplace("apps/StatefulSet", workload_schema(false));
    m->emplace("apps/DaemonSet", workload_schema(false));
    m->emplace("batch/Job", workload_schema(false));
    m->emplace("batch/CronJob", cron_job_schema());
    return m;
  }();
  static const PatchSchema kMetadataOnly = metadata_only();
  std::string key(group == "core" ? std::string_view{} : group);
  key += '/';
  key += kind;
  auto it = schemas->find(key);
  return it == schemas->end() ? kMetadataOnly : it->second;
}

ApiResult<json::value> apply_strategic_merge_patch(const json::value& original,
                                                   const json::value& patch,
                                                   const PatchSchema& schema) {
  const auto* patch_obj = patch.if_object();
  if (!patch_obj) {
    return bad_request("json: cannot unmarshal " +
                       std::string(patch.is_array() ? "array" : patch.is_string() ? "string"
                                                                : patch.is_bool()  ? "bool"
                                                                : patch.is_null()  ? "null"
                                                                                   : "number") +
                       " into Go value of type map[string]interface {}");
  }
  json::object base = original.is_object() ? original.get_object() : json::object{};
  Merger merger;
  auto merged = merger.merge_map(std::move(base), *patch_obj, schema.root());
  if (!merged) return merged.error();
  return json::value(std::move(*merged));
}

}  // namespace kwatch::registry
