// What a batch of predicate kernels reads of variable 0 (a schema node's `self`), as a tree of
// JSON steps, and the key of one value under it: two values with the same key give every kernel
// of the batch the same outcome at the same cost. A CRD's rules are pure functions of the
// fields they read, and the items of one list often agree on those (filters of one type,
// backends of one kind, rules of one shape): a caller keeps a batch's answer by key and gives
// it again to the next item with that key (RuleRunner in schema/cel_rules.cpp).
//
// The tree is built from the kernels' paths (PredicateKernel::read_into): field selections,
// constant list indexes and the elements of the lists that comprehensions range over. A kernel
// that reads anything else (oldSelf, a whole list or map as a value, a map's keys, a
// comprehension over something other than a path) makes the set unusable. The key records,
// along every path of the tree: whether the member is there, its JSON kind, the length of
// arrays and objects, and the value of the scalars that are read as values.
//
// Thread-safety: built once at compile time; immutable afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

namespace kwatch::cel {

class SelfFields;
class FieldSlots;
struct Type;

// One value's key: the members found along the tree (null: absent or JSON null), each with
// its shape and whether its value was read. Keys are compared whole (a node keeps a few).
struct ReadKey {
  static constexpr std::size_t kMax = 64;
  const boost::json::value* members[kMax];
  std::uint64_t shapes[kMax];  // each member's: 0 absent, else its kind and length
  std::uint64_t values = 0;    // a bit per member whose scalar value is part of the key
  std::size_t size = 0;

  // Records a member; false when the key is full or a value to read is not a scalar.
  bool add(const boost::json::value* v, bool value);
  // Whether two keys are equal member by member.
  static bool same(const ReadKey& a, const boost::json::value* const* b_members,
                   const std::uint64_t* b_shapes, std::size_t b_size, std::uint64_t b_values);
};

class ReadSet {
 public:
  enum class Step : std::uint8_t { root, field, element, index };
  struct Node {
    Step step = Step::root;
    std::string name;         // field: the JSON name
    std::int64_t index = 0;   // index: the position
    std::uint8_t slot = 0xFF;  // root's fields: the FieldSlots slot, when it has one
    bool value = false;       // the scalar value is read (a structured one cannot be keyed)
    bool size = false;        // only measured: a string's value is read, a list's length is
    std::vector<std::uint32_t> children;
  };

  ReadSet() { nodes_.emplace_back(); }

  // The child of `parent` for this step (added when new).
  std::uint32_t child(std::uint32_t parent, Step step, std::string_view name = {},
                      std::int64_t index = 0);
  void read_value(std::uint32_t node) { nodes_[node].value = true; }
  void read_size(std::uint32_t node) { nodes_[node].size = true; }

  bool usable() const { return usable_; }
  void unusable() { usable_ = false; }
  bool empty() const { return nodes_[0].children.empty(); }

  // Gives the root's fields the slots `slots` holds for them (FieldSlots of `owner`), so that
  // key() reads them from a filled SelfFields.
  void use_slots(const FieldSlots& slots);

  // The key of `value` (variable 0), its root fields read from `self` when given (filled from
  // that value); false when the value cannot be keyed (too many members, a structured value
  // read as a value).
  bool key(const boost::json::value& value, const SelfFields* self, ReadKey& out) const;

 private:
  bool enter(const Node& n, std::uint32_t id, const boost::json::value* v,
             const SelfFields* self, ReadKey& out) const;
  bool walk(std::uint32_t node, const boost::json::value& v, const SelfFields* self,
            ReadKey& out) const;

  std::vector<Node> nodes_;
  bool usable_ = true;
  // When everything read is a field of self with a slot (and nothing below it): those fields in
  // the order enter() takes them, for a key read from the slots alone.
  struct Flat {
    std::uint8_t slot;
    bool value, size;
  };
  std::vector<Flat> flat_;
};

}  // namespace kwatch::cel
