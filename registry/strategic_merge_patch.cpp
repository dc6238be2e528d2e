#include "registry/strategic_merge_patch.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>
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

class SipHasher {
 public:
  explicit SipHasher(std::uint8_t domain) {
    static const std::array<std::uint64_t, 2> kKey = [] {
      std::random_device rd;
      auto word = [&] { return (std::uint64_t{rd()} << 32) ^ rd(); };
      return std::array<std::uint64_t, 2>{word(), word()};
    }();
    v0_ = 0x736f6d6570736575ULL ^ kKey[0];
    v1_ = 0x646f72616e646f6dULL ^ kKey[1];
    v2_ = 0x6c7967656e657261ULL ^ kKey[0];
    v3_ = 0x7465646279746573ULL ^ kKey[1];
    write(&domain, 1);
  }
  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    for (; n > 0 && tail_bytes_ != 0; --n) take(*p++);
    for (; n >= 8; n -= 8, p += 8) {
      std::uint64_t m;
      std::memcpy(&m, p, 8);
      compress(m);
    }
    for (; n > 0; --n) take(*p++);
  }
  void write(std::string_view s) { write(s.data(), s.size()); }
  void write_u64(std::uint64_t x) { write(&x, sizeof x); }
  std::uint64_t finish() {
    compress((std::uint64_t{total_ & 0xff} << 56) | tail_);
    v2_ ^= 0xff;
    round();
    round();
    round();
    return v0_ ^ v1_ ^ v2_ ^ v3_;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
  void take(unsigned char c) {
    tail_ |= std::uint64_t{c} << (8 * tail_bytes_);
    if (++tail_bytes_ == 8) {
      compress(tail_);
      tail_ = 0;
      tail_bytes_ = 0;
    }
  }
  void compress(std::uint64_t m) {
    v3_ ^= m;
    round();
    v0_ ^= m;
  }
  void round() {
    v0_ += v1_;
    v1_ = rotl(v1_, 13);
    v1_ ^= v0_;
    v0_ = rotl(v0_, 32);
    v2_ += v3_;
    v3_ = rotl(v3_, 16);
    v3_ ^= v2_;
    v0_ += v3_;
    v3_ = rotl(v3_, 21);
    v3_ ^= v0_;
    v2_ += v1_;
    v1_ = rotl(v1_, 17);
    v1_ ^= v2_;
    v2_ = rotl(v2_, 32);
  }

  std::uint64_t v0_, v1_, v2_, v3_;
  std::uint64_t tail_ = 0;
  std::size_t tail_bytes_ = 0;
  std::size_t total_ = 0;
};

enum Domain : std::uint8_t { kNullTag, kBoolTag, kIntegerTag, kDoubleTag, kStringTag, kArrayTag,
                             kObjectTag, kMemberTag, kNameTag };

struct KeyedStringHash {
  std::size_t operator()(std::string_view s) const {
    SipHasher h(kNameTag);
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
  if (a.is_number() && b.is_number()) return number_value(a) == number_value(b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case json::kind::object: {
      const auto& oa = a.get_object();
      const auto& ob = b.get_object();
      if (oa.size() != ob.size()) return false;
      for (const auto& [k, v] : oa) {
        auto it = ob.find(k);
        if (it == ob.end() || !values_equal(v, it->value())) return false;
      }
      return true;
    }
    case json::kind::array: {
      const auto& aa = a.get_array();
      const auto& ab = b.get_array();
      if (aa.size() != ab.size()) return false;
      for (std::size_t i = 0; i < aa.size(); ++i) {
        if (!values_equal(aa[i], ab[i])) return false;
      }
      return true;
    }
    default: return a == b;
  }
}

// Consistent with values_equal: equal values hash alike. Recursion is as deep as the value.
std::uint64_t value_hash(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return SipHasher(kNullTag).finish();
    case json::kind::bool_: {
      SipHasher h(kBoolTag);
      h.write_u64(v.get_bool() ? 1 : 0);
      return h.finish();
    }
    case json::kind::string: {
      SipHasher h(kStringTag);
      h.write(v.get_string());
      return h.finish();
    }
    case json::kind::array: {
      SipHasher h(kArrayTag);
      for (const auto& e : v.get_array()) h.write_u64(value_hash(e));
      return h.finish();
    }
    case json::kind::object: {
      // Member order does not matter: the member hashes are summed.
      std::uint64_t sum = 0;
      for (const auto& [k, m] : v.get_object()) {
        SipHasher member(kMemberTag);
        member.write_u64(k.size());
        member.write(k);
        member.write_u64(value_hash(m));
        sum += member.finish();
      }
      SipHasher h(kObjectTag);
      h.write_u64(v.get_object().size());
      h.write_u64(sum);
      return h.finish();
    }
    default: {
      auto n = number_value(v);
      SipHasher h(n.integral ? kIntegerTag : kDoubleTag);
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
// keeps its positions as a min-heap, so duplicates cost nothing on lookup.
class KeyIndex {
 public:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  explicit KeyIndex(std::size_t expected) {
    std::size_t slots = 16;
    while (slots < 2 * expected) slots *= 2;
    slots_.assign(slots, 0);
    groups_.reserve(expected);
    keys_.reserve(expected);
    group_of_.reserve(expected);
  }

  // `key` null: the position has no key (it never matches).
  void insert(std::size_t pos, const json::value* key) {
    if (pos >= keys_.size()) {
      keys_.resize(pos + 1, nullptr);
      group_of_.resize(pos + 1, 0);
    }
    keys_[pos] = key;
    if (!key) return;
    auto hash = value_hash(*key);
    std::uint32_t reusable = kNoGroup;
    std::size_t slot = hash & (slots_.size() - 1);
    for (; slots_[slot] != 0; slot = (slot + 1) & (slots_.size() - 1)) {
      auto g = slots_[slot] - 1;
      if (groups_[g].hash != hash) continue;
      if (groups_[g].min == npos) {
        if (reusable == kNoGroup) reusable = g;
      } else if (values_equal(*keys_[groups_[g].min], *key)) {
        add(g, pos);
        return;
      }
    }
    if (reusable == kNoGroup) {
      reusable = static_cast<std::uint32_t>(groups_.size());
      groups_.push_back(Group{hash, npos, {}});
      slots_[slot] = reusable + 1;
      if (2 * groups_.size() > slots_.size()) grow();
    }
    add(reusable, pos);
  }

  std::size_t first(const json::value& probe) const {
    auto hash = value_hash(probe);
    for (std::size_t slot = hash & (slots_.size() - 1); slots_[slot] != 0;
         slot = (slot + 1) & (slots_.size() - 1)) {
      const auto& g = groups_[slots_[slot] - 1];
      // Groups are equality classes: at most one can match.
      if (g.hash == hash && g.min != npos && values_equal(*keys_[g.min], probe)) return g.min;
    }
    return npos;
  }
  bool contains(const json::value& probe) const { return first(probe) != npos; }

  // `pos` must be what first() answers for its current key (the smallest of its group); the old
  // key need not be readable any more.
  void rekey(std::size_t pos, const json::value* key) {
    if (pos < keys_.size() && keys_[pos]) {
      auto& g = groups_[group_of_[pos]];
      assert(g.min == pos);
      if (g.more.empty()) {
        g.min = npos;
      } else {
        std::pop_heap(g.more.begin(), g.more.end(), std::greater<>{});
        g.min = g.more.back();
        g.more.pop_back();
      }
      keys_[pos] = nullptr;
    }
    insert(pos, key);
  }

 private:
  static constexpr std::uint32_t kNoGroup = std::numeric_limits<std::uint32_t>::max();

  struct Group {
    std::uint64_t hash;
    std::size_t min;                // smallest position; npos: empty, reusable by an equal hash
    std::vector<std::size_t> more;  // the other positions, a min-heap
  };

  void add(std::uint32_t g, std::size_t pos) {
    auto& group = groups_[g];
    group_of_[pos] = g;
    if (group.min == npos) {
      group.min = pos;
      return;
    }
    if (pos < group.min) std::swap(pos, group.min);
    group.more.push_back(pos);
    std::push_heap(group.more.begin(), group.more.end(), std::greater<>{});
  }

  void grow() {
    slots_.assign(slots_.size() * 2, 0);
    for (std::uint32_t g = 0; g < groups_.size(); ++g) {
      std::size_t slot = groups_[g].hash & (slots_.size() - 1);
      while (slots_[slot] != 0) slot = (slot + 1) & (slots_.size() - 1);
      slots_[slot] = g + 1;
    }
  }

  std::vector<const json::value*> keys_;  // by position
  std::vector<std::uint32_t> group_of_;   // by position, valid where keys_ is set
  std::vector<Group> groups_;
  std::vector<std::uint32_t> slots_;      // open addressing by hash: group + 1, 0 = free
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

// Positions in `order` (via `order_index`) of each of `items`; order.size() when absent.
std::vector<std::size_t> positions_in(const json::array& items, const KeyIndex& order_index,
                                      std::size_t absent, std::string_view merge_key,
                                      ElemKind kind) {
  std::vector<std::size_t> out;
  out.reserve(items.size());
  for (const auto& v : items) {
    auto p = order_index.first(position_key(v, merge_key, kind));
    out.push_back(p == KeyIndex::npos ? absent : p);
  }
  return out;
}

Status validate_merge_keys(const json::array& list, std::string_view merge_key) {
  for (const auto& item : list) {
    if (!item.is_object()) return bad_arg_type("map[string]interface {}", item);
    if (!merge_key_value(item, merge_key)) return no_merge_key(item, merge_key);
  }
  return {};
}

// normalizeSliceOrder: stable sort by position in `order`; `$patch: delete` items go last.
// `order_index` is position_index(order, ...). The sort counts positions: O(items + order).
ApiResult<json::array> normalize_slice_order(json::array to_sort, const json::array& order,
                                             const KeyIndex& order_index,
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
  auto rank = positions_in(to_sort, order_index, order.size(), merge_key, kind);
  std::vector<std::size_t> start(order.size() + 2, 0);
  for (auto r : rank) ++start[r + 1];
  for (std::size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
  std::vector<std::size_t> sorted(to_sort.size());
  for (std::size_t i = 0; i < to_sort.size(); ++i) sorted[start[rank[i]]++] = i;
  json::array out;
  out.reserve(to_sort.size() + to_delete.size());
  for (auto i : sorted) out.push_back(std::move(to_sort[i]));
  for (auto& v : to_delete) out.push_back(std::move(v));
  return out;
}

// mergeSortedSlice: interleaves server-only items (left) into patch items (right), keeping each
// side's order; a left item goes first only when the live list has it before the right item.
json::array merge_sorted(json::array left, json::array right, const KeyIndex& server_index,
                         std::string_view merge_key, ElemKind kind) {
  constexpr auto kAbsent = KeyIndex::npos;
  auto left_at = positions_in(left, server_index, kAbsent, merge_key, kind);
  auto right_at = positions_in(right, server_index, kAbsent, merge_key, kind);
  json::array out;
  out.reserve(left.size() + right.size());
  std::size_t i = 0, j = 0;
  while (i < left.size() || j < right.size()) {
    if (i >= left.size()) {
      out.push_back(std::move(right[j++]));
    } else if (j >= right.size()) {
      out.push_back(std::move(left[i++]));
    } else if (left_at[i] != kAbsent && right_at[j] != kAbsent && left_at[i] < right_at[j]) {
      out.push_back(std::move(left[i++]));
    } else {
      out.push_back(std::move(right[j++]));
    }
  }
  return out;
}

// Splits `merged` into items present in `by` (patch items) and the others (server-only).
// With a merge key, kube scans `by` for each item and fails on the first element that is not a
// map before a match: the same answer comes from the first match and the first non-map.
ApiResult<std::pair<json::array, json::array>> partition(json::array merged,
                                                         const json::array& by,
                                                         std::string_view merge_key) {
  KeyIndex by_index(by.size());
  std::size_t first_non_map = KeyIndex::npos;
  for (std::size_t i = 0; i < by.size(); ++i) {
    if (merge_key.empty()) {
      by_index.insert(i, &by[i]);
    } else if (!by[i].is_object()) {
      first_non_map = std::min(first_non_map, i);
    } else {
      by_index.insert(i, merge_key_value(by[i], merge_key));
    }
  }
  json::array in_patch, server_only;
  for (auto& v : merged) {
    bool found;
    if (!merge_key.empty()) {
      if (!v.is_object()) return bad_arg_type("map[string]interface {}", v);
      const auto* key = merge_key_value(v, merge_key);
      if (!key) return no_merge_key(v, merge_key);
      auto match = by_index.first(*key);
      if (first_non_map != KeyIndex::npos && (match == KeyIndex::npos || first_non_map < match)) {
        return bad_request("value for key is not a map.");
      }
      found = match != KeyIndex::npos;
    } else {
      found = by_index.contains(v);
    }
    (found ? in_patch : server_only).push_back(std::move(v));
  }
  return std::pair{std::move(in_patch), std::move(server_only)};
}

ApiResult<json::array> normalize_element_order(json::array patch_items, json::array server_only,
                                               const json::array& patch_order,
                                               const json::array& server_order,
                                               std::string_view merge_key, ElemKind kind) {
  auto p = normalize_slice_order(std::move(patch_items), patch_order,
                                 position_index(patch_order, merge_key, kind), merge_key, kind);
  if (!p) return p.error();
  auto server_index = position_index(server_order, merge_key, kind);
  auto s = normalize_slice_order(std::move(server_only), server_order, server_index, merge_key,
                                 kind);
  if (!s) return s.error();
  return merge_sorted(std::move(*s), std::move(*p), server_index, merge_key, kind);
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
      auto parts = partition(std::move(merged), *order, merge_key);
      if (!parts) return parts.error();
      auto both = normalize_element_order(std::move(parts->first), std::move(parts->second),
                                          *order, server_order, merge_key, *kind);
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

  json::array merged;
  json::array patch_items;  // the patch without its directive elements
  if (*kind != ElemKind::object) {
    // The union keeps the first of equal items, the original's before the patch's; duplicates
    // already in the original collapse too, as deduplicateScalars does.
    KeyIndex seen(original.size() + patch.size());
    merged.reserve(original.size() + patch.size());
    std::size_t pos = 0;
    for (const json::array* list : {static_cast<const json::array*>(&original), &patch}) {
      for (const auto& v : *list) {
        if (seen.contains(v)) continue;
        seen.insert(pos++, &v);
        merged.push_back(v);
      }
    }
    patch_items = patch;
  } else {
    if (merge_key.empty()) {
      return bad_request("cannot merge lists without merge key for type struct");
    }
    // mergeSliceWithSpecialElements: `$patch: delete` removes by key, `$patch: replace` makes
    // the rest of the patch list the whole list.
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
    // mergeSliceWithoutSpecialElements: merge matching elements, append new ones. The index
    // borrows the merge-key values inside the merged objects: they live in each object's own
    // table, which stays put when `merged` grows.
    merged = original;
    KeyIndex by_key(merged.size() + patch_items.size());
    for (std::size_t i = 0; i < merged.size(); ++i) {
      by_key.insert(i, merge_key_value(merged[i], merge_key));
    }
    for (const auto& v : patch_items) {
      const auto* key = merge_key_value(v, merge_key);
      if (!key) return no_merge_key(v, merge_key);
      auto found = by_key.first(*key);
      if (found != KeyIndex::npos) {
        auto m = merge_map(std::move(merged[found].get_object()), v.get_object(), elements);
        if (!m) return m.error();
        merged[found] = std::move(*m);
        // The merge may have changed the key (null removes it, 1.0 replaces 1).
        by_key.rekey(found, merge_key_value(merged[found], merge_key));
      } else {
        merged.push_back(without_nulls(v));
        by_key.insert(merged.size() - 1, merge_key_value(merged.back(), merge_key));
      }
    }
  }

  auto parts = partition(std::move(merged), patch_items, merge_key);
  if (!parts) return parts.error();
  return normalize_element_order(std::move(parts->first), std::move(parts->second), patch_items,
                                 original, merge_key, *kind);
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
