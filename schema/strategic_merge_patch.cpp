#include "schema/strategic_merge_patch.hpp"

#include "schema/builtin_schemas.hpp"

#include "apimachinery/json_equality.hpp"
#include "base/sip_hash.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kwatch::schema {

using apimachinery::api_error;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;

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

std::string go_format(const json::value& v) { return go_print(v); }

std::string go_number(const json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  // fmt's %v of a float64: the shortest digits that read back, in %e form when the exponent is
  // below -4 or at least 21, with at least two exponent digits.
  const double d = v.get_double();
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  if (ec != std::errc()) return "0";
  std::string sci(buf, end);
  const auto e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 21) {
    std::string mantissa = sci.substr(0, e);
    const char sign = exponent < 0 ? '-' : '+';
    std::string digits = std::to_string(exponent < 0 ? -exponent : exponent);
    if (digits.size() < 2) digits = "0" + digits;
    return mantissa + "e" + sign + digits;
  }
  auto [fend, fec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  return fec == std::errc() ? std::string(buf, fend) : sci;
}

}  // namespace

std::string go_print(const json::value& v) {
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
        out += go_print(e);
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
        out += go_print(*m);
      }
      return out + "]";
    }
    default: return go_number(v);
  }
}

namespace {

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
// ---- equality and hashing of values ----
//
// Lists are merged through hash tables, so a patch costs expected O(size of original + patch).
// The tables hash with SipHash-1-3 under a key drawn once per process: the patch is untrusted,
// and with an unkeyed hash one crafted list of colliding strings would bring the quadratic
// time back.

using base::SipHash;

enum Domain : std::uint8_t { kNullTag, kBoolTag, kIntegerTag, kDoubleTag, kStringTag, kArrayTag,
                             kObjectTag, kMemberTag, kNameTag };

struct KeyedStringHash {
  std::size_t operator()(std::string_view s) const {
    SipHash h(kNameTag);
    h.write(s);
    return static_cast<std::size_t>(h.finish());
  }
};

// A number as its mathematical value: an integral one (whatever its JSON type) as sign and
// magnitude, any other as its double.
struct NumberValue {
  bool integral;
  bool negative;
  std::uint64_t magnitude;
  double fraction;

  friend bool operator==(const NumberValue& a, const NumberValue& b) {
    if (a.integral != b.integral) return false;
    if (a.integral) return a.negative == b.negative && a.magnitude == b.magnitude;
    return a.fraction == b.fraction;
  }
};

NumberValue number_value(const json::value& v) {
  if (v.is_int64()) {
    auto i = v.get_int64();
    if (i < 0) return {true, true, 0 - static_cast<std::uint64_t>(i), 0};
    return {true, false, static_cast<std::uint64_t>(i), 0};
  }
  if (v.is_uint64()) return {true, false, v.get_uint64(), 0};
  double d = v.get_double();
  constexpr double k2p64 = 18446744073709551616.0;
  if (std::trunc(d) == d && std::fabs(d) < k2p64) {
    auto magnitude = static_cast<std::uint64_t>(std::fabs(d));
    return {true, d < 0 && magnitude != 0, magnitude, 0};
  }
  return {false, false, 0, d};
}

// The equality list merging uses for merge-key values, set members and order entries: numbers by
// mathematical value (1 == 1.0, 1 != "1"), objects regardless of member order. Unlike
// json_equal it is transitive (an int64 beyond 2^53 is not equal to the double nearest it), so
// equal values can share one hash-table entry.
bool values_equal(const json::value& a, const json::value& b) {
  return apimachinery::json_equal_with(a, b, [](const json::value& x, const json::value& y) {
    return number_value(x) == number_value(y);
  });
}

// Consistent with values_equal: equal values hash alike. Recursion is as deep as the value.
std::uint64_t value_hash(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return SipHash(kNullTag).finish();
    case json::kind::bool_: {
      SipHash h(kBoolTag);
      h.write_u64(v.get_bool() ? 1 : 0);
      return h.finish();
    }
    case json::kind::string: {
      SipHash h(kStringTag);
      h.write(v.get_string());
      return h.finish();
    }
    case json::kind::array: {
      SipHash h(kArrayTag);
      for (const auto& e : v.get_array()) h.write_u64(value_hash(e));
      return h.finish();
    }
    case json::kind::object: {
      // Member order does not matter: the member hashes are summed.
      std::uint64_t sum = 0;
      for (const auto& [k, m] : v.get_object()) {
        SipHash member(kMemberTag);
        member.write_u64(k.size());
        member.write(k);
        member.write_u64(value_hash(m));
        sum += member.finish();
      }
      SipHash h(kObjectTag);
      h.write_u64(v.get_object().size());
      h.write_u64(sum);
      return h.finish();
    }
    default: {
      auto n = number_value(v);
      SipHash h(n.integral ? kIntegerTag : kDoubleTag);
      if (n.integral) {
        h.write_u64(n.negative ? 1 : 0);
        h.write_u64(n.magnitude);
      } else {
        std::uint64_t bits;
        std::memcpy(&bits, &n.fraction, sizeof bits);
        h.write_u64(bits);
      }
      return h.finish();
    }
  }
}

// Positions of a list by key: first(probe) is the smallest position whose key values_equal()s
// the probe, in expected O(1). Keys are borrowed: each must stay unchanged in place while its
// position is indexed (rekey() moves a position to a new key). Equal keys share one group that
// keeps its other positions in a min-heap, so duplicates cost nothing on lookup. Callers that
// already know a key's value_hash() pass it.
class KeyIndex {
 public:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  explicit KeyIndex(std::size_t expected) {
    std::size_t slots = 16;
    while (slots < 2 * expected) slots *= 2;
    slots_.resize(slots);
    groups_.reserve(expected);
    keys_.reserve(expected);
    group_of_.reserve(expected);
  }

  // `key` null: the position has no key (it never matches).
  void insert(std::size_t pos, const json::value* key) {
    insert(pos, key, key ? value_hash(*key) : 0);
  }
  void insert(std::size_t pos, const json::value* key, std::uint64_t hash) {
    if (pos >= keys_.size()) {
      keys_.resize(pos + 1, nullptr);
      group_of_.resize(pos + 1, 0);
    }
    keys_[pos] = key;
    if (!key) return;
    std::uint32_t reusable = kNone;
    std::size_t slot = hash & (slots_.size() - 1);
    for (; slots_[slot].group != 0; slot = (slot + 1) & (slots_.size() - 1)) {
      if (slots_[slot].tag != tag(hash)) continue;
      auto g = slots_[slot].group - 1;
      if (groups_[g].hash != hash) continue;
      if (groups_[g].min == kNone) {
        if (reusable == kNone) reusable = g;
      } else if (values_equal(*groups_[g].key, *key)) {
        add(g, pos);
        return;
      }
    }
    if (reusable == kNone) {
      reusable = static_cast<std::uint32_t>(groups_.size());
      groups_.push_back(Group{hash, nullptr, kNone, 0});
      slots_[slot] = Slot{reusable + 1, tag(hash)};
      if (2 * groups_.size() > slots_.size()) grow();
    }
    add(reusable, pos);
  }

  std::size_t first(const json::value& probe) const { return first(probe, value_hash(probe)); }
  std::size_t first(const json::value& probe, std::uint64_t hash) const {
    for (std::size_t slot = hash & (slots_.size() - 1); slots_[slot].group != 0;
         slot = (slot + 1) & (slots_.size() - 1)) {
      if (slots_[slot].tag != tag(hash)) continue;
      const auto& g = groups_[slots_[slot].group - 1];
      // Groups are equality classes: at most one can match.
      if (g.hash == hash && g.min != kNone && values_equal(*g.key, probe)) return g.min;
    }
    return npos;
  }
  bool contains(const json::value& probe, std::uint64_t hash) const {
    return first(probe, hash) != npos;
  }
  bool contains(const json::value& probe) const { return first(probe) != npos; }

  // value_hash() of the key at `pos`, which must have one.
  std::uint64_t hash_at(std::size_t pos) const { return groups_[group_of_[pos]].hash; }

  // `pos` must be what first() answers for its current key (the smallest of its group); the old
  // key need not be readable any more.
  void rekey(std::size_t pos, const json::value* key, std::uint64_t hash) {
    if (pos < keys_.size() && keys_[pos]) {
      auto& g = groups_[group_of_[pos]];
      assert(g.min == pos);
      if (g.heap == 0 || heaps_[g.heap - 1].empty()) {
        g.min = kNone;
        g.key = nullptr;
      } else {
        auto& heap = heaps_[g.heap - 1];
        std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
        g.min = heap.back();
        g.key = keys_[g.min];
        heap.pop_back();
      }
      keys_[pos] = nullptr;
    }
    insert(pos, key, hash);
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  static std::uint32_t tag(std::uint64_t hash) { return static_cast<std::uint32_t>(hash >> 32); }

  struct Slot {
    std::uint32_t group = 0;  // group + 1; 0: free
    std::uint32_t tag = 0;    // high half of the group's hash, checked before the group
  };
  struct Group {
    std::uint64_t hash;
    const json::value* key;  // the key at `min`
    std::uint32_t min;       // smallest position; kNone: empty, reusable by an equal hash
    std::uint32_t heap;      // heaps_ index + 1 of the other positions; 0: none yet
  };

  void add(std::uint32_t g, std::size_t position) {
    auto pos = static_cast<std::uint32_t>(position);
    auto& group = groups_[g];
    group_of_[pos] = g;
    if (group.min == kNone) {
      group.min = pos;
      group.key = keys_[pos];
      return;
    }
    if (pos < group.min) {
      std::swap(pos, group.min);
      group.key = keys_[group.min];
    }
    if (group.heap == 0) {
      heaps_.emplace_back();
      group.heap = static_cast<std::uint32_t>(heaps_.size());
    }
    auto& heap = heaps_[group.heap - 1];
    heap.push_back(pos);
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  }

  void grow() {
    std::vector<Slot> slots(slots_.size() * 2);
    for (std::uint32_t g = 0; g < groups_.size(); ++g) {
      std::size_t slot = groups_[g].hash & (slots.size() - 1);
      while (slots[slot].group != 0) slot = (slot + 1) & (slots.size() - 1);
      slots[slot] = Slot{g + 1, tag(groups_[g].hash)};
    }
    slots_ = std::move(slots);
  }

  std::vector<const json::value*> keys_;   // by position
  std::vector<std::uint32_t> group_of_;    // by position, valid where keys_ is set
  std::vector<Group> groups_;
  std::vector<Slot> slots_;                // open addressing on the hash
  std::vector<std::vector<std::uint32_t>> heaps_;
};

// Erases members of one object in O(1) each while the others keep their order: the first
// erasure numbers the members, later insertions take the next numbers, finish() puts the
// members back in number order once.
class OrderKeeper {
 public:
  void erase(json::object& obj, std::string_view key) {
    if (!obj.contains(key)) return;
    if (!active_) {
      rank_.reserve(obj.size());
      for (const auto& kv : obj) rank_.emplace(kv.key(), next_++);
      active_ = true;
    }
    obj.erase(key);  // moves the last member into the hole
  }
  void inserted(std::string_view key) {
    if (active_) rank_[std::string(key)] = next_++;
  }
  void finish(json::object& obj) {
    if (!active_) return;
    std::vector<json::key_value_pair*> by_rank(next_, nullptr);
    for (auto& kv : obj) by_rank[rank_.find(std::string(kv.key()))->second] = &kv;
    json::object out(obj.storage());
    out.reserve(obj.size());
    for (auto* kv : by_rank) {
      if (kv) out.emplace(kv->key(), std::move(kv->value()));
    }
    obj = std::move(out);
  }

 private:
  bool active_ = false;
  std::size_t next_ = 0;
  std::unordered_map<std::string, std::size_t, KeyedStringHash> rank_;
};


const json::value kNull;

// The key index() compares for a list element: the merge key's value for lists of objects
// (null when missing), the element itself otherwise.
const json::value& position_key(const json::value& v, std::string_view merge_key, ElemKind kind) {
  if (kind != ElemKind::object) return v;
  const auto* k = merge_key_value(v, merge_key);
  return k ? *k : kNull;
}

// index() over `list` for every probe: the first position whose key is the probe's.
KeyIndex position_index(const json::array& list, std::string_view merge_key, ElemKind kind) {
  KeyIndex index(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    index.insert(i, &position_key(list[i], merge_key, kind));
  }
  return index;
}

// The patch list as partition() sees it: by merge-key value (elements without one never match;
// `first_non_map` is the first element that is not an object), or whole elements without a
// merge key.
struct PatchListIndex {
  PatchListIndex(const json::array& list, std::string_view merge_key) : index(list.size()) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (merge_key.empty()) {
        index.insert(i, &list[i]);
      } else if (!list[i].is_object()) {
        first_non_map = std::min(first_non_map, i);
      } else {
        index.insert(i, merge_key_value(list[i], merge_key));
      }
    }
  }
  KeyIndex index;
  std::size_t first_non_map = KeyIndex::npos;
};

Status validate_merge_keys(const json::array& list, std::string_view merge_key) {
  for (const auto& item : list) {
    if (!item.is_object()) return bad_arg_type("map[string]interface {}", item);
    if (!merge_key_value(item, merge_key)) return no_merge_key(item, merge_key);
  }
  return {};
}

// normalizeSliceOrder over the items `part` of `merged`, given each one's position in the order
// list (`size` when absent): validation as kube does it, then a stable counting sort by
// position, `$patch: delete` items last. O(part + size).
ApiResult<std::vector<std::size_t>> sort_part(const json::array& merged,
                                              const std::vector<std::size_t>& part,
                                              const std::vector<std::size_t>& position,
                                              const json::array& order,
                                              std::string_view merge_key, ElemKind kind) {
  std::vector<bool> deleted(part.size(), false);
  if (kind == ElemKind::object) {
    for (auto i : part) {
      if (!merged[i].is_object()) return bad_arg_type("map[string]interface {}", merged[i]);
      if (!merge_key_value(merged[i], merge_key)) return no_merge_key(merged[i], merge_key);
    }
    if (auto s = validate_merge_keys(order, merge_key); !s) return s.error();
    for (std::size_t n = 0; n < part.size(); ++n) {
      const auto& obj = merged[part[n]].get_object();
      auto it = obj.find(kDirective);
      deleted[n] = it != obj.end() && is_directive(it->value(), "delete");
    }
  }
  std::vector<std::size_t> start(order.size() + 2, 0);
  for (std::size_t n = 0; n < part.size(); ++n) {
    if (!deleted[n]) ++start[position[n] + 1];
  }
  for (std::size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
  std::vector<std::size_t> sorted(part.size());
  std::size_t tail = start.back();
  for (std::size_t n = 0; n < part.size(); ++n) {
    sorted[deleted[n] ? tail++ : start[position[n]]++] = n;
  }
  return sorted;
}

// The tail of kube's list merge: partition `merged` into items present in `patch_order` and the
// others (server-only), normalizeElementOrder on both (by position in `patch_order`, resp.
// `server_order`), then mergeSortedSlice. Errors come in kube's order. `hashes`, if not empty,
// holds value_hash() of each merged item's probe: its merge-key value, or itself without a
// merge key. Items move through as positions; the values move once, into the result.
ApiResult<json::array> order_merged(json::array merged, const std::vector<std::uint64_t>& hashes,
                                    const json::array& patch_order,
                                    const PatchListIndex& patch_index,
                                    const json::array& server_order, const KeyIndex& server_index,
                                    std::string_view merge_key, ElemKind kind) {
  // partition(): kube scans the patch list for each item and fails on the first element that
  // is not a map before a match; the first match and the first non-map give the same answer.
  std::vector<std::size_t> in_patch, server_only, patch_pos;
  std::vector<std::uint64_t> probe_hash(merged.size());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const json::value* probe = &merged[i];
    if (!merge_key.empty()) {
      if (!merged[i].is_object()) return bad_arg_type("map[string]interface {}", merged[i]);
      probe = merge_key_value(merged[i], merge_key);
      if (!probe) return no_merge_key(merged[i], merge_key);
    }
    probe_hash[i] = hashes.empty() ? value_hash(*probe) : hashes[i];
    auto match = patch_index.index.first(*probe, probe_hash[i]);
    if (patch_index.first_non_map != KeyIndex::npos &&
        (match == KeyIndex::npos || patch_index.first_non_map < match)) {
      return bad_request("value for key is not a map.");
    }
    if (match != KeyIndex::npos) {
      in_patch.push_back(i);
      patch_pos.push_back(match);
    } else {
      server_only.push_back(i);
    }
  }
  // The probes above are what index() compares unless the merge key and the element kind
  // disagree (an error below, or lists of objects ordered without a merge key).
  const bool same_probe = merge_key.empty() == (kind != ElemKind::object);
  auto position_in = [&](const KeyIndex& index, std::size_t i) {
    return same_probe ? index.first(position_key(merged[i], merge_key, kind), probe_hash[i])
                      : index.first(position_key(merged[i], merge_key, kind));
  };
  if (!same_probe) {
    auto order_index = position_index(patch_order, merge_key, kind);
    for (std::size_t n = 0; n < in_patch.size(); ++n) {
      auto p = order_index.first(position_key(merged[in_patch[n]], merge_key, kind));
      patch_pos[n] = p == KeyIndex::npos ? patch_order.size() : p;
    }
  }
  auto patch_sorted = sort_part(merged, in_patch, patch_pos, patch_order, merge_key, kind);
  if (!patch_sorted) return patch_sorted.error();

  std::vector<std::size_t> server_pos;
  server_pos.reserve(server_only.size());
  for (auto i : server_only) {
    auto p = position_in(server_index, i);
    server_pos.push_back(p == KeyIndex::npos ? server_order.size() : p);
  }
  auto server_sorted = sort_part(merged, server_only, server_pos, server_order, merge_key, kind);
  if (!server_sorted) return server_sorted.error();

  // mergeSortedSlice: interleaves server-only items (left) into patch items (right), keeping
  // each side's order; a left item goes first only when the live list has it before the right
  // item.
  const auto& left = *server_sorted;
  const auto& right = *patch_sorted;
  auto live_position = [&](std::size_t pos) {
    return pos == server_order.size() ? KeyIndex::npos : pos;
  };
  std::vector<std::size_t> right_live(right.size());
  for (std::size_t n = 0; n < right.size(); ++n) {
    right_live[n] = position_in(server_index, in_patch[right[n]]);
  }
  json::array out;
  out.reserve(merged.size());
  std::size_t i = 0, j = 0;
  while (i < left.size() || j < right.size()) {
    bool take_left;
    if (i >= left.size()) {
      take_left = false;
    } else if (j >= right.size()) {
      take_left = true;
    } else {
      auto li = live_position(server_pos[left[i]]);
      auto ri = right_live[j];
      take_left = li != KeyIndex::npos && ri != KeyIndex::npos && li < ri;
    }
    auto from = take_left ? server_only[left[i++]] : in_patch[right[j++]];
    out.push_back(std::move(merged[from]));
  }
  return out;
}

class Merger {
 public:
  ApiResult<json::object> merge_map(json::object original, const json::object& patch,
                                    const Node* node);

 private:
  using FieldSet = std::unordered_set<std::string_view, KeyedStringHash>;

  Status apply_retain_keys(json::object& original, const json::object& patch);
  Status merge_set_element_order(json::object& original, const json::object& patch,
                                 const Node* node, FieldSet& done);
  ApiResult<json::array> merge_slice(json::array original, const json::array& patch,
                                     const Node* elements, std::string_view merge_key);
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

  FieldSet done;  // list fields already merged through $setElementOrder
  if (auto s = merge_set_element_order(original, patch, node, done); !s) return s.error();

  OrderKeeper order;
  for (const auto& [raw_key, patch_value] : patch) {
    std::string_view key = raw_key;
    if (key == kRetainKeys || starts_with(key, kSetElementOrder)) continue;
    if (done.contains(key)) continue;
    bool is_delete_list = false;
    if (starts_with(key, kDeleteFromPrimitiveList)) {
      auto target = directive_target(key, kDeleteFromPrimitiveList);
      if (!target) return bad_format_primitive_list();
      key = *target;
      is_delete_list = true;
    }

    auto it = original.find(key);
    if (patch_value.is_null()) {
      if (it != original.end()) order.erase(original, key);
      continue;
    }
    if (it == original.end()) {
      // Deleting from a list that is not there leaves it absent.
      if (!is_delete_list) {
        original.emplace(key, without_nulls(patch_value));
        order.inserted(key);
      }
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
  order.finish(original);
  return original;
}

ApiResult<json::array> Merger::merge_list_field(json::array original, const json::array& patch,
                                                const Node* field, bool is_delete_list) {
  const PatchRule* rule = rule_of(field);
  if (is_delete_list) {
    // deleteFromSlice; applied whatever the declared strategy.
    KeyIndex drop(patch.size());
    for (std::size_t i = 0; i < patch.size(); ++i) drop.insert(i, &patch[i]);
    json::array out;
    for (auto& v : original) {
      if (!drop.contains(v)) out.push_back(std::move(v));
    }
    return out;
  }
  if (!rule || rule->strategy != PatchStrategy::merge) {
    return without_nulls(json::value(patch)).get_array();
  }
  return merge_slice(std::move(original), patch, field->child(kElements), rule->merge_key);
}

Status Merger::apply_retain_keys(json::object& original, const json::object& patch) {
  auto it = patch.find(kRetainKeys);
  if (it == patch.end()) return {};
  const auto* keep = it->value().if_array();
  if (!keep) return bad_format_retain_keys();
  FieldSet listed;
  for (const auto& v : *keep) {
    if (v.is_string()) listed.insert(v.get_string());
  }
  for (const auto& [k, v] : patch) {
    if (k == kRetainKeys || v.is_null() || starts_with(k, kDeleteFromPrimitiveList) ||
        starts_with(k, kSetElementOrder)) {
      continue;
    }
    if (!listed.contains(k)) return bad_format_retain_keys();
  }
  json::object kept;
  for (auto& [k, v] : original) {
    if (listed.contains(k)) kept.emplace(k, std::move(v));
  }
  original = std::move(kept);
  return {};
}

// validatePatchWithSetOrderList: the patch list's items must appear in $setElementOrder in the
// same relative order.
Status validate_with_set_order(const json::array& patch_list, const json::array& order,
                               std::string_view merge_key) {
  if (order.empty() || patch_list.empty()) return {};
  std::vector<const json::value*> non_delete;
  non_delete.reserve(patch_list.size());
  for (const auto& v : patch_list) {
    if (!merge_key.empty()) {
      const auto* obj = v.if_object();
      if (!obj) return bad_arg_type("map[string]interface {}", v);
      auto d = obj->find(kDirective);
      if (d != obj->end() && is_directive(d->value(), "delete")) continue;
    }
    non_delete.push_back(&v);
  }
  std::size_t p = 0, o = 0;
  while (p < non_delete.size() && o < order.size()) {
    const auto& item = *non_delete[p];
    if (const auto* obj = item.if_object(); obj && obj->contains(kDirective)) {
      ++p;
      continue;
    }
    bool equal;
    if (merge_key.empty()) {
      equal = values_equal(item, order[o]);
    } else {
      if (!item.is_object()) return bad_arg_type("map[string]interface {}", item);
      if (!order[o].is_object()) return bad_arg_type("map[string]interface {}", order[o]);
      const auto* a = merge_key_value(item, merge_key);
      if (!a) return no_merge_key(item, merge_key);
      const auto* b = merge_key_value(order[o], merge_key);
      if (!b) return no_merge_key(order[o], merge_key);
      equal = values_equal(*a, *b);
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
                                       const Node* node, FieldSet& done) {
  for (const auto& [key, order_value] : patch) {
    if (!starts_with(key, kSetElementOrder)) continue;
    const auto* order = order_value.if_array();
    if (!order) return bad_arg_type("[]interface {}", order_value);
    auto target = directive_target(key, kSetElementOrder);
    if (!target) return bad_format_set_element_order();
    std::string_view field_name = *target;

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
    std::string_view merge_key = rule ? std::string_view(rule->merge_key) : std::string_view{};
    if (patch_list) {
      if (auto s = validate_with_set_order(*patch_list, *order, merge_key); !s) return s;
    }
    if (!original_list && !patch_list) continue;

    static const json::array kNoList;
    // Read until the merged list replaces it below.
    const json::array& server_order = original_list ? *original_list : kNoList;
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
      PatchListIndex order_index(*order, merge_key);
      auto server_index = position_index(server_order, merge_key, *kind);
      auto both = order_merged(std::move(merged), {}, *order, order_index, server_order,
                               server_index, merge_key, *kind);
      if (!both) return both.error();
      merged = std::move(*both);
    }
    original[field_name] = std::move(merged);
    done.insert(field_name);
  }
  return {};
}

ApiResult<json::array> Merger::merge_slice(json::array original, const json::array& patch,
                                           const Node* elements, std::string_view merge_key) {
  if (original.empty() && patch.empty()) return original;
  auto kind = element_kind(&original, &patch);
  if (!kind) return kind.error();

  if (*kind != ElemKind::object) {
    // partition() would fail on the first item of the union: an original one if any.
    if (!merge_key.empty()) {
      return bad_arg_type("map[string]interface {}", original.empty() ? patch[0] : original[0]);
    }
    // The union keeps the first of equal items, the original's before the patch's; duplicates
    // already in the original collapse too, as deduplicateScalars does.
    KeyIndex server_index(original.size());
    for (std::size_t i = 0; i < original.size(); ++i) server_index.insert(i, &original[i]);
    PatchListIndex patch_index(patch, merge_key);
    json::array merged;
    std::vector<std::uint64_t> hashes;
    merged.reserve(original.size() + patch.size());
    hashes.reserve(original.size() + patch.size());
    for (std::size_t i = 0; i < original.size(); ++i) {
      auto h = server_index.hash_at(i);
      if (server_index.first(original[i], h) != i) continue;
      merged.push_back(original[i]);
      hashes.push_back(h);
    }
    for (std::size_t j = 0; j < patch.size(); ++j) {
      auto h = patch_index.index.hash_at(j);
      if (server_index.contains(patch[j], h) || patch_index.index.first(patch[j], h) != j) {
        continue;
      }
      merged.push_back(patch[j]);
      hashes.push_back(h);
    }
    return order_merged(std::move(merged), hashes, patch, patch_index, original, server_index,
                        merge_key, *kind);
  }

  if (merge_key.empty()) {
    return bad_request("cannot merge lists without merge key for type struct");
  }
  // mergeSliceWithSpecialElements: `$patch: delete` removes by key, `$patch: replace` makes
  // the rest of the patch list the whole list.
  json::array patch_items;  // the patch without its directive elements
  bool replace = false;
  std::vector<const json::value*> deleted_keys;
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
      deleted_keys.push_back(key);
    } else if (is_directive(d->value(), "replace")) {
      replace = true;
    } else if (is_directive(d->value(), "merge")) {
      return bad_request("merging lists cannot yet be specified in the patch");
    } else {
      return bad_patch_type(d->value(), v);
    }
  }
  if (!deleted_keys.empty()) {
    KeyIndex deleted(deleted_keys.size());
    for (std::size_t i = 0; i < deleted_keys.size(); ++i) deleted.insert(i, deleted_keys[i]);
    json::array kept;
    for (auto& o : original) {
      const auto* ok = merge_key_value(o, merge_key);
      if (!(ok && deleted.contains(*ok))) kept.push_back(std::move(o));
    }
    original = std::move(kept);
  }
  if (replace) {
    original = without_nulls(json::value(std::move(patch_items))).get_array();
    patch_items = json::array{};
  }

  // mergeSliceWithoutSpecialElements: merge matching elements, append new ones. `by_key`
  // borrows the merge-key values inside the merged objects: they live in each object's own
  // table, which stays put when `merged` grows.
  auto server_index = position_index(original, merge_key, *kind);
  PatchListIndex patch_index(patch_items, merge_key);
  json::array merged = original;
  KeyIndex by_key(merged.size() + patch_items.size());
  for (std::size_t i = 0; i < merged.size(); ++i) {
    const auto* key = merge_key_value(merged[i], merge_key);
    by_key.insert(i, key, key ? server_index.hash_at(i) : 0);
  }
  // The hash of a merged item's new key: the patch item's when the merge left that value.
  auto hash_after_merge = [](const json::value* key, const json::value& patch_key,
                             std::uint64_t patch_hash) {
    if (!key) return std::uint64_t{0};
    if (!key->is_structured() && values_equal(*key, patch_key)) return patch_hash;
    return value_hash(*key);
  };
  for (std::size_t j = 0; j < patch_items.size(); ++j) {
    const auto& v = patch_items[j];
    const auto* key = merge_key_value(v, merge_key);
    if (!key) return no_merge_key(v, merge_key);
    auto h = patch_index.index.hash_at(j);
    auto found = by_key.first(*key, h);
    if (found != KeyIndex::npos) {
      auto m = merge_map(std::move(merged[found].get_object()), v.get_object(), elements);
      if (!m) return m.error();
      merged[found] = std::move(*m);
      // The merge may have changed the key (null removes it, 1.0 replaces 1).
      const auto* now = merge_key_value(merged[found], merge_key);
      by_key.rekey(found, now, hash_after_merge(now, *key, h));
    } else {
      merged.push_back(without_nulls(v));
      const auto* now = merge_key_value(merged.back(), merge_key);
      by_key.insert(merged.size() - 1, now, hash_after_merge(now, *key, h));
    }
  }
  // Items without a merge key fail in order_merged(), before their hash is read.
  std::vector<std::uint64_t> hashes(merged.size(), 0);
  for (std::size_t i = 0; i < merged.size(); ++i) {
    if (merge_key_value(merged[i], merge_key)) hashes[i] = by_key.hash_at(i);
  }
  return order_merged(std::move(merged), hashes, patch_items, patch_index, original,
                      server_index, merge_key, *kind);
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

std::vector<std::pair<std::string, PatchRule>> PatchSchema::rules() const {
  std::vector<std::pair<std::string, PatchRule>> out;
  auto walk = [&](auto& self, const Node* node, const std::string& path) -> void {
    if (node->rule) out.emplace_back(path, *node->rule);
    for (const auto& [seg, child] : node->children) {
      std::string sub = path;
      if (seg == "[]") {
        sub += seg;
      } else {
        if (!sub.empty()) sub += '.';
        sub += seg;
      }
      self(self, child.get(), sub);
    }
  };
  walk(walk, root_.get(), "");
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

const PatchSchema& builtin_patch_schema(std::string_view group, std::string_view kind) {
  // The kinds' facts live in schema/schemas/builtin.json; each schema is built once.
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const PatchSchema>, std::less<>> schemas;
  std::string key(group == "core" ? std::string_view{} : group);
  key += '/';
  key += kind;
  std::lock_guard lock(mutex);
  auto it = schemas.find(key);
  if (it == schemas.end()) {
    auto schema = std::make_unique<const PatchSchema>(
        KindSchemas::builtin().patch_schema(group == "core" ? std::string_view{} : group, "v1",
                                            kind));
    it = schemas.emplace(std::move(key), std::move(schema)).first;
  }
  return *it->second;
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

}  // namespace kwatch::schema
