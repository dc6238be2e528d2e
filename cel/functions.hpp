// CEL functions as the evaluator calls them: each function name has overloads, each overload
// says whether it is called as a method (`s.size()`) or globally (`size(s)`), which kinds its
// arguments must have, and the code that computes it. Libraries (standard, strings, lists, ...)
// add their overloads to a FunctionRegistry; a Program resolves a call's overloads once, when
// it is compiled, and picks one by the arguments' kinds when it runs.
//
// Thread-safety: a registry is filled once, then read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cel/types.hpp"
#include "cel/value.hpp"

namespace re2 {
class RE2;
}

namespace kwatch::cel {

// What an evaluation has spent and may spend, in cel-go's cost units; a function that does work
// proportional to its input charges for it.
class EvalBudget {
 public:
  explicit EvalBudget(std::uint64_t limit) : limit_(limit) {}
  // Adds `units`; throws CostLimitExceeded beyond the limit.
  void charge(std::uint64_t units) {
    spent_ += units;
    if (spent_ > limit_) exceeded();
  }
  std::uint64_t spent() const { return spent_; }
  std::uint64_t limit() const { return limit_; }

  // A call costs 1 unless its function sets what it costs (proportional to its input):
  // the evaluator brackets each call with begin_call/end_call, a function calls call_cost.
  void begin_call() { call_cost_ = 1; }
  void call_cost(std::uint64_t units) { call_cost_ = units; }
  void end_call() { charge(call_cost_); }

 private:
  [[noreturn]] void exceeded() const;
  std::uint64_t spent_ = 0;
  std::uint64_t limit_;
  std::uint64_t call_cost_ = 1;
};

struct CostLimitExceeded {};

// An argument kind an overload accepts: a ValueKind, or any value.
struct ArgKind {
  bool any = true;
  ValueKind kind = ValueKind::null;
  std::string_view opaque_name;  // a library type's name, for ValueKind::opaque
  constexpr ArgKind() = default;
  constexpr ArgKind(ValueKind k) : any(false), kind(k) {}  // NOLINT: implicit by design
  bool accepts(const Value& v) const {
    if (any) return true;
    if (v.kind() != kind) return false;
    return opaque_name.empty() || v.as_opaque().type_name() == opaque_name;
  }
};
inline constexpr ArgKind kAny{};

using FunctionImpl = Value (*)(std::span<const Value> args, EvalBudget& budget);

struct Overload {
  std::string id;  // cel-go's overload id, e.g. "add_int64"
  bool receiver = false;
  Signature signature;        // for the checker; the receiver first, for a method
  std::vector<ArgKind> args;  // for the evaluator: the kinds the signature's types have
  FunctionImpl impl = nullptr;
};

class FunctionRegistry {
 public:
  // `signature` in parse_signature's notation: "list(A), A -> int".
  void add(std::string_view function, std::string id, bool receiver, std::string_view signature,
           FunctionImpl impl);
  // Both spellings: `f(a, b)` and `a.f(b)`.
  void add_both(std::string_view function, std::string id, std::string_view signature,
                FunctionImpl impl);

  // The overloads of `function` called with `argc` arguments (the receiver counted) in the
  // given style; empty when there are none.
  std::vector<const Overload*> find(std::string_view function, bool receiver,
                                    std::size_t argc) const;
  bool has_function(std::string_view function) const;

 private:
  std::map<std::string, std::vector<Overload>, std::less<>> functions_;
};

// The standard definitions (cel-spec langdef "Standard Definitions"): operators, conversions,
// `size`, the string predicates, `matches` (RE2), timestamp and duration accessors.
void add_standard_functions(FunctionRegistry& registry);

// `string(d)`: the shortest digits that read back as `d`, in an exponent form when the exponent
// is below -4 or at least 21 (Go's `%g` with shortest precision, as cel-go writes it).
std::string double_to_string(double d);

// ceil(n * tenths / 10): cel-go's cost factors (0.1 per code point of a string, 0.2, 0.25 ...).
inline std::uint64_t tenths(std::uint64_t n, std::uint64_t tenths_per_unit) {
  return (n * tenths_per_unit + 9) / 10;
}

// The number of code points of UTF-8 text (the size CEL gives a string).
std::uint64_t code_point_count(std::string_view s);

// What matching `text` against `pattern` costs: a tenth per code point of the text (plus one),
// times a quarter per code point of the pattern, both rounded up.
std::uint64_t regex_cost(std::string_view text, std::string_view pattern);

// `pattern` compiled as RE2 for `matches`, `find` and `findAll`, shared among callers and
// threads; null with `error` set ("given regex is invalid: ...") when it does not compile. The
// cache keeps at most 256 patterns, each of at most 4096 RE2 instructions; larger ones are
// compiled for each call.
std::shared_ptr<const re2::RE2> compiled_pattern(std::string_view pattern, std::string& error);
// The same for a call being evaluated, from a few slots of the calling thread's own first (no
// lock, no allocation, no reference count for a rule's constant pattern). The pointer is valid
// until the thread's next call of this function.
const re2::RE2* thread_pattern(std::string_view pattern, std::string& error);

// The error a call without a matching overload evaluates to.
Value no_such_overload(std::string_view function, std::span<const Value> args);

}  // namespace kwatch::cel
