// The direct fields of `self` that one schema node's rules read, found in the object once for
// all of them. A node with fourteen rules that each test `has(self.x)` or compare `self.type`
// reads the same few members of the same JSON object again and again; with a table the
// predicate kernel reads each from an array slot that one pass over the object filled.
//
// Compile time: the rules of a node are compiled with `Declarations::self_fields` pointing at
// the node's table, and each kernel step that selects a field of `self` (variable 0) by its
// JSON name is given the field's slot. Run time: the caller fills an array from the object
// (SelfFields::fill) and passes it; a kernel run without one walks the object as before.
//
// Thread-safety: built by one thread at compile time; immutable afterwards (fill is const).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

#include "cel/value.hpp"

namespace kwatch::cel {

struct Type;
class JsonArena;

class FieldSlots {
 public:
  static constexpr std::uint8_t kNone = 0xFF;
  // At most this many fields get slots; a rule reading more walks the object for the rest.
  static constexpr std::size_t kMaxSlots = 32;
  // Past this many members an object is not filled (find_member hashes such objects).
  static constexpr std::size_t kMaxMembers = 16;

  // The slot of `owner`'s field with this JSON name (added when new), or kNone when the table
  // holds fields of another type or is full.
  std::uint8_t slot(const Type* owner, std::string_view json_name);

  std::size_t size() const { return names_.size(); }
  // The slot of the field with this JSON name, or kNone (nothing is added).
  std::uint8_t find(std::string_view json_name) const;

  // out[i] := the member named by slot i, null when it is absent or JSON null (as a selection
  // reads it). False, with `out` unspecified, when the object has more than kMaxMembers
  // members: its fields are then found one by one. `out` has size() elements.
  bool fill(const boost::json::object& object, std::span<const boost::json::value*> out) const;

  static_assert(kMaxSlots <= 32, "SelfFields keeps a bit per slot");

  // Tests of one slot's string against constants that several rules of the node make (`self.
  // type in ['Exact', 'PathPrefix']` in ten rules, `self.type == 'CORS'` and `!=` in two): one
  // id per slot and constants (`in`: the list, else the one string), so that a visit answers
  // each once (SelfFields::test). kNone past kMaxTests.
  static constexpr std::size_t kMaxTests = 32;
  std::uint8_t test(std::uint8_t slot, bool in, std::span<const std::string_view> constants);

 private:
  struct Test {
    std::uint8_t slot;
    bool in;
    std::vector<std::string> constants;
  };
  std::vector<Test> tests_;
  const Type* owner_ = nullptr;
  std::vector<std::string> names_;
  std::uint64_t lengths_ = 0;  // bit n: a name of n bytes (1 to 63)
};

// One object's members by slot, for kernel runs whose variable 0 is the JSON view of that
// object, and the views made of them: a list read by several rules is viewed once (and the
// views of its elements, which the list view keeps, with it). On the caller's stack, for one
// node's rules.
class SelfFields {
 public:
  SelfFields() = default;
  ~SelfFields();
  SelfFields(const SelfFields&) = delete;
  SelfFields& operator=(const SelfFields&) = delete;

  // Fills from `object`, read through `arena` (the view's); false when the object has more
  // than kMaxMembers members (nothing is filled: the kernel finds fields one by one).
  bool fill(const FieldSlots& slots, const boost::json::object& object, JsonArena& arena);

  // The member of slot i: null when absent or JSON null.
  const boost::json::value* member(std::uint8_t i) const { return members_[i]; }
  JsonArena* arena() const { return arena_; }
  // The view of slot i's member (which is there) read as `type`, made on first use.
  const Value& value(std::uint8_t i, const Type* type);

  // A slot's string test (FieldSlots::test), once answered: whether the string equals the
  // constant (or is in the list), and what comparing cost.
  struct TestAnswer {
    bool same;
    std::uint64_t cost;
  };
  const TestAnswer* tested(std::uint8_t id) const {
    return (tested_ >> id & 1) != 0 ? &tests_[id] : nullptr;
  }
  void remember(std::uint8_t id, TestAnswer answer) {
    tests_[id] = answer;
    tested_ |= std::uint32_t{1} << id;
  }
  // The code points of slot i's string `text` (its member's), counted once.
  std::uint64_t code_points(std::uint8_t i, std::string_view text);

 private:
  TestAnswer tests_[FieldSlots::kMaxTests];
  std::uint32_t tested_ = 0;
  std::uint64_t code_points_[FieldSlots::kMaxSlots];
  std::uint32_t counted_ = 0;
  const boost::json::value* members_[FieldSlots::kMaxSlots];
  alignas(Value) unsigned char values_[FieldSlots::kMaxSlots * sizeof(Value)];
  std::uint32_t made_ = 0;  // which values_ hold a Value
  JsonArena* arena_ = nullptr;
};

}  // namespace kwatch::cel
