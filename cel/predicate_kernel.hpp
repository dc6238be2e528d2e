// The fast form of a boolean guard: most CRD rules and match conditions are `!`, `&&`, `||` and
// `?:` over `has()`, comparisons and calls on fields (`!(has(self.cors) && self.type != 'CORS')`,
// `self.type in ['Exact', 'PathPrefix'] ? self.value.startsWith('/') : true`), and the
// quantifiers over lists and maps (`self.rules.all(r, has(r.name))`). Such an
// expression is compiled a second time into this kernel, which evaluates it without the
// evaluator's machinery: conditions are three-valued (false, true, undecided) instead of
// values, a field path is followed in one loop, and the cost is summed, not charged.
//
// The kernel decides only what it is sure of. Whatever might be an error (a missing field, no
// matching overload, a call that fails, a value of an unexpected kind) leaves the whole
// expression "undecided", and
// Program::run then evaluates the expression with the evaluator, from the start: the kernel
// has no side effects, so the evaluator's value, error and cost are what the program answers.
// When the kernel decides, its value and its cost are the evaluator's: the same steps are
// taken in the same order and each is charged as the evaluator charges it, so the kernel also
// stops where the evaluator would run out of budget (and says so, with what was spent) (test/cel
// PredicateKernel* compare both on every expression and object of their tables).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "cel/field_slots.hpp"
#include "cel/read_set.hpp"
#include "cel/program_steps.hpp"

namespace kwatch::cel {

class PredicateKernel {
 public:
  PredicateKernel();
  ~PredicateKernel();
  PredicateKernel(const PredicateKernel&) = delete;
  PredicateKernel& operator=(const PredicateKernel&) = delete;

  // The kernel of the expression at `root`, or null when one of its steps is outside what the
  // kernel evaluates (comprehensions, literals that are not constants, optionals, index, ...).
  // With `slots`, a path that starts with a schema field of variable 0 gets the field's slot.
  static std::unique_ptr<const PredicateKernel> build(const std::vector<Program::Step>& steps,
                                                      std::uint32_t root,
                                                      FieldSlots* slots = nullptr);

  // over_limit: the evaluator would have stopped with "actual cost limit exceeded", having
  // spent `cost`.
  enum class Outcome : std::uint8_t { is_false, is_true, undecided, over_limit };

  // `cost` receives what the evaluator would have spent (when decided). `self`, when given,
  // holds the fields of variables[0], which must be the JSON view of the object they were
  // filled from, with the slots of the table the kernel was built with.
  Outcome run(std::span<const Value> variables, std::uint64_t limit, std::uint64_t& cost,
              SelfFields* self = nullptr) const;

  // One guard of a batch (a schema node's rules): its kernel, null for one the batch cannot
  // decide (the caller's, in full); `skip`: not run at all (a rule about an old value that
  // the object does not have).
  struct Guard {
    const PredicateKernel* kernel = nullptr;
    bool skip = false;
  };

  // How many comprehension variables the guards need at most (computed once, with them).
  static std::uint32_t locals_needed(std::span<const Guard> guards);

  // Runs guards[from..] in turn over the same variables while each holds, each with the limit
  // min(per_call, what is left of `budget`), as a caller running them one by one would; the
  // cost of each that held is taken from `budget`. Returns the index of the first guard that
  // did not hold, was undecided, passed its limit, has no kernel or needs more than `locals`
  // comprehension variables (the caller evaluates it the slow way and may go on from the
  // next), or guards.size(). `locals`: locals_needed(guards).
  // `json`, when given: the JSON variables[0] is the view of (read as `type`, in `arena`), so
  // that a path into it (`self[0].matches`) is followed in the JSON.
  struct JsonVariable {
    const boost::json::value* value = nullptr;
    const Type* type = nullptr;
    JsonArena* arena = nullptr;
  };
  static std::size_t run_while_true(std::span<const Guard> guards, std::size_t from,
                                    std::uint32_t locals, std::span<const Value> variables,
                                    SelfFields* self, std::uint64_t per_call,
                                    std::uint64_t& budget, const JsonVariable* json = nullptr);

  // The variables whose Values a run may need (a bit per variable): a path that is not one of
  // the slot-read fields of variable 0, the variable itself, a comprehension's range. A
  // caller with the fields in their slots need not make the others' views.
  struct Reads {
    std::uint32_t whole = 0;
  };
  const Reads& reads() const { return reads_; }

  // Adds what the kernel reads of variable 0 to `set` (read_set.hpp); false (and the set
  // unusable) when it reads something a key cannot hold.
  bool read_into(ReadSet& set) const;

  struct Node;

 private:
  Reads reads_;
  std::vector<Node> nodes_;
  std::uint32_t root_ = 0;
  std::uint32_t locals_ = 0;  // comprehension variable slots
};

}  // namespace kwatch::cel
