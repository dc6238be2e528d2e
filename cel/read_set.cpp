#include "cel/read_set.hpp"

#include <bit>
#include <cstring>

#include <boost/json.hpp>

#include "cel/field_slots.hpp"
#include "cel/json_value.hpp"

namespace kwatch::cel {

namespace json = boost::json;

namespace {

// Scalars equal as JSON (of one kind: 1 and 1.0 are different keys).
bool same_scalar(const json::value& a, const json::value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case json::kind::string: {
      const json::string& x = a.get_string();
      const json::string& y = b.get_string();
      return x.size() == y.size() && same_bytes(x.data(), y.data(), x.size());
    }
    case json::kind::int64: return a.get_int64() == b.get_int64();
    case json::kind::uint64: return a.get_uint64() == b.get_uint64();
    case json::kind::double_:
      return std::bit_cast<std::uint64_t>(a.get_double()) ==
             std::bit_cast<std::uint64_t>(b.get_double());
    case json::kind::bool_: return a.get_bool() == b.get_bool();
    default: return false;
  }
}

}  // namespace

bool ReadKey::add(const json::value* v, bool value) {
  if (size == kMax) return false;
  members[size] = v;
  if (value) values |= std::uint64_t{1} << size;
  if (v == nullptr) {
    shapes[size++] = 0;
    return true;
  }
  const json::kind k = v->kind();
  // The member's shape: its kind, and the length of an array or object.
  std::uint64_t shape = (static_cast<std::uint64_t>(k) + 1) << 56;
  if (k == json::kind::array) shape |= v->get_array().size() & ((std::uint64_t{1} << 56) - 1);
  if (k == json::kind::object) shape |= v->get_object().size() & ((std::uint64_t{1} << 56) - 1);
  shapes[size++] = shape;
  // A value read must be a scalar (a list or map read whole is not keyed).
  return !value || (k != json::kind::array && k != json::kind::object && k != json::kind::null);
}

bool ReadKey::same(const ReadKey& a, const json::value* const* b_members,
                   const std::uint64_t* b_shapes, std::size_t b_size, std::uint64_t b_values) {
  if (a.size != b_size || a.values != b_values) return false;
  // Presence, kinds and lengths in one comparison; then the scalars read as values (of the
  // same kind on both sides, since the shapes agree).
  for (std::size_t i = 0; i < a.size; ++i) {
    if (a.shapes[i] != b_shapes[i]) return false;
  }
  for (std::uint64_t m = a.values; m != 0; m &= m - 1) {
    const auto k = static_cast<std::size_t>(std::countr_zero(m));
    if (a.members[k] != nullptr && !same_scalar(*a.members[k], *b_members[k])) return false;
  }
  return true;
}

std::uint32_t ReadSet::child(std::uint32_t parent, Step step, std::string_view name,
                             std::int64_t index) {
  for (const std::uint32_t c : nodes_[parent].children) {
    const Node& n = nodes_[c];
    if (n.step == step && n.name == name && n.index == index) return c;
  }
  Node n;
  n.step = step;
  n.name = std::string(name);
  n.index = index;
  nodes_.push_back(std::move(n));
  const auto id = static_cast<std::uint32_t>(nodes_.size() - 1);
  nodes_[parent].children.push_back(id);
  return id;
}

void ReadSet::use_slots(const FieldSlots& slots) {
  flat_.clear();
  bool flat = !nodes_[0].value && !nodes_[0].size;
  for (const std::uint32_t c : nodes_[0].children) {
    Node& n = nodes_[c];
    if (n.step == Step::field) n.slot = slots.find(n.name);
    flat = flat && n.step == Step::field && n.slot != 0xFF && n.children.empty();
    flat_.push_back(Flat{n.slot, n.value, n.size});
  }
  if (!flat) flat_.clear();
}

bool ReadSet::key(const json::value& value, const SelfFields* self, ReadKey& out) const {
  if (self == nullptr || flat_.empty() || !value.is_object()) {
    return enter(nodes_[0], 0, &value, self, out);
  }
  // Only fields of self, all in slots: what enter() would record, read from the slots.
  if (!out.add(&value, false)) return false;
  for (const Flat& f : flat_) {
    const json::value* member = self->member(f.slot);
    if (!out.add(member, f.value || (f.size && member != nullptr && member->is_string()))) {
      return false;
    }
  }
  return true;
}

// Records the value at `n` (null: absent), then what is read below it.
bool ReadSet::enter(const Node& n, std::uint32_t id, const json::value* v, const SelfFields* self,
                    ReadKey& out) const {
  if (v != nullptr && v->is_null()) v = nullptr;
  if (!out.add(v, n.value || (n.size && v != nullptr && v->is_string()))) return false;
  if (v == nullptr || n.children.empty()) return true;
  return walk(id, *v, self, out);
}

bool ReadSet::walk(std::uint32_t node, const json::value& v, const SelfFields* self,
                   ReadKey& out) const {
  const json::object* obj = v.if_object();
  const json::array* arr = v.if_array();
  for (const std::uint32_t c : nodes_[node].children) {
    const Node& child = nodes_[c];
    switch (child.step) {
      case Step::root: return false;
      case Step::field: {
        if (obj == nullptr) continue;  // its kind is in the key: nothing is followed in it
        const json::value* member = self != nullptr && child.slot != 0xFF
                                        ? self->member(child.slot)
                                        : find_member(*obj, child.name);
        if (!enter(child, c, member, nullptr, out)) return false;
        break;
      }
      case Step::element:
        if (obj != nullptr) return false;  // a map's keys are not in the key
        if (arr == nullptr) continue;
        for (const json::value& e : *arr) {
          if (!enter(child, c, &e, nullptr, out)) return false;
        }
        break;
      case Step::index:
        if (arr == nullptr || child.index < 0 ||
            static_cast<std::uint64_t>(child.index) >= arr->size()) {
          continue;  // the array's length is in the key
        }
        if (!enter(child, c, &(*arr)[static_cast<std::size_t>(child.index)], nullptr, out)) {
          return false;
        }
        break;
    }
  }
  return true;
}

}  // namespace kwatch::cel
