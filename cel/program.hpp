// A CEL expression compiled for evaluation: compile once, evaluate many times.
//
// Compiling resolves what the tree leaves to run time in a naive interpreter: variables become
// slots, calls their candidate overloads, qualified names (`google.protobuf.Timestamp`,
// `math.greatest`) what they name, and the macros' accumulating steps (`@result + [x]`) an
// append to a list the comprehension owns. Evaluating walks the flat step array with no
// allocation for scalars and none per step.
//
// Semantics (cel-spec langdef): arguments are strict, errors propagate; `&&` and `||` are
// commutative over errors (`error || true` is true); `?:` evaluates one branch; comprehensions
// stop when their condition is false. The budget stops an evaluation that spends more than its
// cost limit with "operation cancelled: actual cost limit exceeded".
//
// Thread-safety: a Program is immutable after compile; evaluate may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cel/ast.hpp"
#include "cel/field_slots.hpp"
#include "cel/functions.hpp"
#include "cel/parser.hpp"
#include "cel/value.hpp"

namespace kwatch::cel {

class PredicateKernel;

struct Declarations {
  std::vector<std::string> variables;  // slot i holds variables[i]
  const FunctionRegistry* functions = nullptr;
  // The checked type of every node (Checked::types), when the expression was checked: a
  // selection of a schema object's field then goes straight to its JSON name.
  const std::vector<TypePtr>* node_types = nullptr;
  // Message literals the checker accepted (CheckOptions::message_type) evaluate to maps of
  // their fields; without this they are errors ("unknown type: X").
  bool message_literals = false;
  // A boolean guard also gets the predicate kernel (predicate_kernel.hpp), which decides most
  // evaluations without the evaluator; off only to compare the two.
  bool predicate_kernel = true;
  // The table of variable 0's fields that the kernel's paths read from slots (field_slots.hpp):
  // shared by the expressions of one schema node, which run with the same `self`.
  FieldSlots* self_fields = nullptr;
};

// The value may borrow from the program's constants and from the variables' values: it is
// valid while this result (which keeps the program's constants) and the variables live.
struct EvalResult {
  Value value;                  // an error value when evaluation failed
  std::uint64_t cost = 0;       // what it spent
  std::shared_ptr<const void> constants;
};

class Program {
 public:
  // Compiles `ast` (without errors). Unknown names do not fail here: they evaluate to errors,
  // as an unchecked expression's do in cel-go.
  // `undeclared`, when given, receives a reference to each name that is neither a variable, a
  // type nor a function ("undeclared reference to 'x' (in container '')"), which a checked
  // expression refuses.
  static Program compile(const Ast& ast, const Declarations& declarations,
                         std::vector<SourceIssue>* undeclared = nullptr);

  // `variables[i]` is the value of declarations.variables[i].
  EvalResult evaluate(std::span<const Value> variables,
                      std::uint64_t cost_limit = UINT64_MAX) const;
  // The same without a share of the program for the result (EvalResult::constants empty): for
  // a caller that is done with the value before the program goes, spared a reference count.
  EvalResult run(std::span<const Value> variables, std::uint64_t cost_limit) const;

  // The predicate kernel's answer, when it has one: true or false and what it cost, as run()
  // would say; nullopt when run() must evaluate (no kernel, an error, the limit).
  // `self`: variables[0]'s fields, filled from the table the program was compiled with.
  std::optional<bool> decide(std::span<const Value> variables, std::uint64_t cost_limit,
                             std::uint64_t& cost, SelfFields* self = nullptr) const;

  // Whether the predicate kernel was built for this program (for tests and benchmarks).
  bool has_predicate_kernel() const;
  // The predicate kernel, or null (for running a node's guards in one batch).
  const PredicateKernel* predicate_kernel() const;

  struct Step;
  struct Hot;
  struct Compiled;

 private:
  std::shared_ptr<const Compiled> compiled_;
  std::uint32_t root_ = 0;
  std::uint32_t locals_ = 0;  // comprehension variable slots
};

}  // namespace kwatch::cel
