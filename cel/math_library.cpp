// cel-go's math extension (version 2): math.greatest/least over numbers or a list, ceil, floor,
// round (half away from zero), trunc, abs, sign, isNaN/isInf/isFinite, sqrt, and the bit
// operations on int and uint (shifts are logical; a shift of 64 or more gives 0).
#include <cmath>
#include <string>

#include "cel/libraries.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

// The least (Sign -1) or greatest (Sign 1) of the numeric arguments, or of one list argument.
template <int Sign>
Value extreme(Args a, EvalBudget& budget) {
  const char* name = Sign < 0 ? "math.least" : "math.greatest";
  std::vector<Value> items;
  if (a.size() == 1 && a[0].is(K::list)) {
    const ListValue& l = a[0].as_list();
    if (l.size() == 0) {
      return Value::error(std::string(Sign < 0 ? "math.@min" : "math.@max") +
                          "(list) argument must not be empty");
    }
    for (std::size_t i = 0; i < l.size(); ++i) items.push_back(l.at(i));
  } else {
    items.assign(a.begin(), a.end());
  }
  (void)budget;
  const Value* best = nullptr;
  for (const Value& v : items) {
    if (!is_number(v.kind())) return no_such_overload(name, a);
    if (best == nullptr) {
      best = &v;
      continue;
    }
    const int c = compare_numbers(v, *best);
    if (c == 2) {
      // NaN wins, as in cel-go.
      if (v.is(K::float64) && std::isnan(v.as_double())) best = &v;
      continue;
    }
    if (c == Sign) best = &v;
  }
  return *best;
}

template <double (*F)(double)>
Value unary_double(Args a, EvalBudget&) { return Value::float64(F(a[0].as_double())); }

double ceil_(double d) { return std::ceil(d); }
double floor_(double d) { return std::floor(d); }
double round_(double d) { return std::round(d); }
double trunc_(double d) { return std::trunc(d); }

Value is_nan(Args a, EvalBudget&) { return Value::boolean(std::isnan(a[0].as_double())); }
Value is_inf(Args a, EvalBudget&) { return Value::boolean(std::isinf(a[0].as_double())); }
Value is_finite(Args a, EvalBudget&) { return Value::boolean(std::isfinite(a[0].as_double())); }

Value abs_int(Args a, EvalBudget&) {
  if (a[0].as_int() == INT64_MIN) return Value::error("integer overflow");
  return Value::int64(a[0].as_int() < 0 ? -a[0].as_int() : a[0].as_int());
}
Value abs_double(Args a, EvalBudget&) { return Value::float64(std::fabs(a[0].as_double())); }
Value sign_int(Args a, EvalBudget&) {
  const auto v = a[0].as_int();
  return Value::int64(v > 0 ? 1 : (v < 0 ? -1 : 0));
}
Value sign_uint(Args a, EvalBudget&) { return Value::uint64(a[0].as_uint() > 0 ? 1 : 0); }
Value sign_double(Args a, EvalBudget&) {
  const double d = a[0].as_double();
  if (std::isnan(d)) return Value::float64(d);
  return Value::float64(d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0));
}
Value sqrt_any(Args a, EvalBudget&) {
  const Value& v = a[0];
  const double d = v.is(K::int64)    ? static_cast<double>(v.as_int())
                   : v.is(K::uint64) ? static_cast<double>(v.as_uint())
                                     : v.as_double();
  return Value::float64(std::sqrt(d));
}

Value bit_and_int(Args a, EvalBudget&) { return Value::int64(a[0].as_int() & a[1].as_int()); }
Value bit_or_int(Args a, EvalBudget&) { return Value::int64(a[0].as_int() | a[1].as_int()); }
Value bit_xor_int(Args a, EvalBudget&) { return Value::int64(a[0].as_int() ^ a[1].as_int()); }
Value bit_not_int(Args a, EvalBudget&) { return Value::int64(~a[0].as_int()); }
Value bit_and_uint(Args a, EvalBudget&) { return Value::uint64(a[0].as_uint() & a[1].as_uint()); }
Value bit_or_uint(Args a, EvalBudget&) { return Value::uint64(a[0].as_uint() | a[1].as_uint()); }
Value bit_xor_uint(Args a, EvalBudget&) { return Value::uint64(a[0].as_uint() ^ a[1].as_uint()); }
Value bit_not_uint(Args a, EvalBudget&) { return Value::uint64(~a[0].as_uint()); }

template <bool Left>
Value shift(Args a, EvalBudget&) {
  const std::int64_t by = a[1].as_int();
  if (by < 0) {
    return Value::error(std::string(Left ? "math.bitShiftLeft" : "math.bitShiftRight") +
                        "() negative offset: " + std::to_string(by));
  }
  const std::uint64_t bits = a[0].is(K::int64) ? static_cast<std::uint64_t>(a[0].as_int())
                                               : a[0].as_uint();
  const std::uint64_t r = by >= 64 ? 0 : (Left ? bits << by : bits >> by);
  if (a[0].is(K::int64)) return Value::int64(static_cast<std::int64_t>(r));
  return Value::uint64(r);
}

}  // namespace

void add_math_library(FunctionRegistry& r) {
  r.add("math.greatest", "math_greatest_1", false, "dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_1", false, "dyn -> dyn", extreme<-1>);
  // Up to eight arguments, as literal lists of candidates are written in rules.
  r.add("math.greatest", "math_greatest_2", false, "dyn, dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_2", false, "dyn, dyn -> dyn", extreme<-1>);
  r.add("math.greatest", "math_greatest_3", false, "dyn, dyn, dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_3", false, "dyn, dyn, dyn -> dyn", extreme<-1>);
  r.add("math.greatest", "math_greatest_4", false, "dyn, dyn, dyn, dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_4", false, "dyn, dyn, dyn, dyn -> dyn", extreme<-1>);
  r.add("math.greatest", "math_greatest_5", false, "dyn, dyn, dyn, dyn, dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_5", false, "dyn, dyn, dyn, dyn, dyn -> dyn", extreme<-1>);
  r.add("math.greatest", "math_greatest_6", false, "dyn, dyn, dyn, dyn, dyn, dyn -> dyn", extreme<1>);
  r.add("math.least", "math_least_6", false, "dyn, dyn, dyn, dyn, dyn, dyn -> dyn", extreme<-1>);
  r.add("math.ceil", "math_ceil_double", false, "double -> double", unary_double<ceil_>);
  r.add("math.floor", "math_floor_double", false, "double -> double", unary_double<floor_>);
  r.add("math.round", "math_round_double", false, "double -> double", unary_double<round_>);
  r.add("math.trunc", "math_trunc_double", false, "double -> double", unary_double<trunc_>);
  r.add("math.isNaN", "math_isNaN_double", false, "double -> bool", is_nan);
  r.add("math.isInf", "math_isInf_double", false, "double -> bool", is_inf);
  r.add("math.isFinite", "math_isFinite_double", false, "double -> bool", is_finite);
  r.add("math.abs", "math_abs_int", false, "int -> int", abs_int);
  r.add("math.abs", "math_abs_uint", false, "uint -> uint", [](Args a, EvalBudget&) { return a[0]; });
  r.add("math.abs", "math_abs_double", false, "double -> double", abs_double);
  r.add("math.sign", "math_sign_int", false, "int -> int", sign_int);
  r.add("math.sign", "math_sign_uint", false, "uint -> uint", sign_uint);
  r.add("math.sign", "math_sign_double", false, "double -> double", sign_double);
  r.add("math.sqrt", "math_sqrt_int", false, "int -> double", sqrt_any);
  r.add("math.sqrt", "math_sqrt_uint", false, "uint -> double", sqrt_any);
  r.add("math.sqrt", "math_sqrt_double", false, "double -> double", sqrt_any);
  r.add("math.bitAnd", "math_bitAnd_int_int", false, "int, int -> int", bit_and_int);
  r.add("math.bitAnd", "math_bitAnd_uint_uint", false, "uint, uint -> uint", bit_and_uint);
  r.add("math.bitOr", "math_bitOr_int_int", false, "int, int -> int", bit_or_int);
  r.add("math.bitOr", "math_bitOr_uint_uint", false, "uint, uint -> uint", bit_or_uint);
  r.add("math.bitXor", "math_bitXor_int_int", false, "int, int -> int", bit_xor_int);
  r.add("math.bitXor", "math_bitXor_uint_uint", false, "uint, uint -> uint", bit_xor_uint);
  r.add("math.bitNot", "math_bitNot_int_int", false, "int -> int", bit_not_int);
  r.add("math.bitNot", "math_bitNot_uint_uint", false, "uint -> uint", bit_not_uint);
  r.add("math.bitShiftLeft", "math_bitShiftLeft_int_int", false, "int, int -> int", shift<true>);
  r.add("math.bitShiftLeft", "math_bitShiftLeft_uint_int", false, "uint, int -> uint", shift<true>);
  r.add("math.bitShiftRight", "math_bitShiftRight_int_int", false, "int, int -> int", shift<false>);
  r.add("math.bitShiftRight", "math_bitShiftRight_uint_int", false, "uint, int -> uint", shift<false>);
}

}  // namespace kwatch::cel
