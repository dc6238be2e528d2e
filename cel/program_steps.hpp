// The compiled form of a Program, shared by the evaluator (program.cpp) and the predicate
// kernel (predicate_kernel.cpp). Internal to cel/.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cel/functions.hpp"
#include "cel/program.hpp"
#include "cel/types.hpp"
#include "cel/value.hpp"

namespace kwatch::cel {

enum class Op : std::uint8_t {
  constant,
  variable,    // a declared variable, by slot
  local,       // a comprehension variable, by local slot
  select,      // children[0].name
  has,         // has(children[0].name)
  call,
  logical_and,
  logical_or,
  conditional,
  not_strictly_false,
  equals,
  not_equals,
  less,
  less_equal,
  greater,
  greater_equal,
  in,
  logical_not,  // !_ (one overload: bool -> bool)
  index,
  opt_select,
  opt_index,
  list,
  map,
  comprehension,
  append_to_accumulator,  // accu + [elements...] where the comprehension owns accu
  error,                  // evaluates to `constant` (an error)
};

struct Program::Step {
  Op op = Op::constant;
  std::uint32_t slot = 0;   // variable, local; comprehension: first iteration variable
  std::uint32_t slot2 = 0;  // comprehension: second iteration variable
  std::uint32_t accu = 0;   // comprehension: accumulator
  bool two_vars = false;
  Value constant;           // constant; select: the field name; error: the error
  TypePtr field_type;       // select of a schema object's field: its type
  TypePtr owner;            // ... the object type that has it
  std::string_view json_name;  // ... and its JSON name, held by `owner` (one address a field)
  std::string name;         // a call's function
  std::vector<const Overload*> overloads;
  std::vector<std::uint32_t> children;
  std::vector<bool> optional_at;
};

// What the evaluator reads at every step, packed (64 bytes) so that the steps of the programs a
// validation runs stay in cache: the op, up to three children, a slot, a constant, a schema
// field, and the rest (`cold`).
struct Program::Hot {
  Op op = Op::constant;
  bool attribute = false;  // a variable or selections on one (cel-go's attribute)
  std::uint32_t slot = 0;
  std::uint32_t c[3] = {0, 0, 0};
  const Step* cold = nullptr;
  const Value* constant = nullptr;     // constant, error, select's field name
  const Type* field_type = nullptr;    // select of a schema object's field
  std::string_view json_name;          // ... its JSON name
};
static_assert(sizeof(Program::Hot) == 64, "a packed step is one cache line");

class PredicateKernel;

struct Program::Compiled {
  Compiled();
  ~Compiled();
  std::vector<Step> steps;
  std::vector<Hot> hot;  // hot[i] packs steps[i]
  // The fast form of a boolean guard, when the whole expression has one (predicate_kernel).
  std::unique_ptr<const PredicateKernel> kernel;
};

// What comparing two values costs (equality and ordering): a tenth of the smaller size of
// strings, bytes, lists or maps (rounded up), 1 for anything else.
std::uint64_t comparison_cost(const Value& a, const Value& b);
// The same for two strings.
std::uint64_t string_comparison_cost(std::string_view a, std::string_view b);

// cel-go's "no such key" error for a missing map key or object field.
Value no_such_key(const Value& key);

// `element in container` (a list or a map), or the error when container is neither.
Value in_container(const Value& element, const Value& container);

// The first of `overloads` that accepts `args`, called into `out` and charged to `budget` (1,
// or what the function sets); false when none accepts them. Inline: both evaluators call it at
// every call step.
inline bool call_overload(std::span<const Overload* const> overloads,
                          std::span<const Value> args, EvalBudget& budget, Value& out) {
  for (const Overload* o : overloads) {
    bool match = true;
    for (std::size_t i = 0; i < args.size() && match; ++i) match = o->args[i].accepts(args[i]);
    if (!match) continue;
    budget.begin_call();
    out = o->impl(args, budget);
    budget.end_call();
    return true;
  }
  return false;
}

// Up to N values on the stack, more on the heap; only as many are made as asked for (no N
// null values zeroed for a call of one argument).
template <std::size_t N>
class SmallValues {
 public:
  explicit SmallValues(std::size_t count) : count_(count) {
    if (count <= N) {
      data_ = reinterpret_cast<Value*>(raw_);
      std::uninitialized_value_construct_n(data_, count);
    } else {
      heap_.resize(count);
      data_ = heap_.data();
    }
  }
  ~SmallValues() {
    if (count_ <= N) std::destroy_n(data_, count_);
  }
  SmallValues(const SmallValues&) = delete;
  SmallValues& operator=(const SmallValues&) = delete;

  Value* data() { return data_; }
  Value& operator[](std::size_t i) { return data_[i]; }
  std::span<const Value> view() const { return {data_, count_}; }

 private:
  alignas(Value) unsigned char raw_[N * sizeof(Value)];
  std::vector<Value> heap_;
  Value* data_ = nullptr;
  std::size_t count_;
};



}  // namespace kwatch::cel
