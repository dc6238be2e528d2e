// Kubernetes' quantity library (k8s.io/apiserver/pkg/cel/library quantity.go): `quantity()`,
// `isQuantity`, and on kubernetes.Quantity `sign`, `isGreaterThan`, `isLessThan`, `compareTo`,
// `add`, `sub` (of a quantity or an int), `asInteger`, `isInteger`, `asApproximateFloat`.
//
// A quantity parses as kube's resource.ParseQuantity does (`1.5Gi`, `100m`, `2e3`, `+5`), and is
// held exactly: a 128-bit integer times a power of ten, never finer than nano (finer amounts
// round up, away from zero, as kube's do).
#include <cmath>
#include <optional>
#include <string>

#include "cel/libraries.hpp"
#include "cel/time.hpp"  // Nanos: the 128-bit integer

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;
using Int = Nanos;

// value = mantissa * 10^exponent, exponent >= -9.
struct Decimal {
  Int mantissa = 0;
  int exponent = 0;
};

bool checked_mul(Int a, Int b, Int& out) { return !__builtin_mul_overflow(a, b, &out); }

bool pow10(int n, Int& out) {
  out = 1;
  for (int i = 0; i < n; ++i) {
    if (!checked_mul(out, 10, out)) return false;
  }
  return true;
}

// Both at the smaller exponent, or false when that overflows.
bool align(Decimal a, Decimal b, Int& x, Int& y) {
  const int e = std::min(a.exponent, b.exponent);
  Int fa, fb;
  if (!pow10(a.exponent - e, fa) || !pow10(b.exponent - e, fb)) return false;
  return checked_mul(a.mantissa, fa, x) && checked_mul(b.mantissa, fb, y);
}

double approximate(const Decimal& d) {
  return static_cast<double>(d.mantissa) * std::pow(10.0, d.exponent);
}

int compare(const Decimal& a, const Decimal& b) {
  Int x, y;
  if (!align(a, b, x, y)) {
    const double p = approximate(a), q = approximate(b);
    return p < q ? -1 : (p > q ? 1 : 0);
  }
  return x < y ? -1 : (x > y ? 1 : 0);
}

const char* const kFormatWrong =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

// resource.ParseQuantity: the number, then a suffix (decimal SI, binary SI or an exponent).
std::optional<Decimal> parse(std::string_view s, std::string& error) {
  if (s.empty()) {
    error = kFormatWrong;
    return std::nullopt;
  }
  std::size_t p = 0;
  bool negative = false;
  if (s[p] == '-' || s[p] == '+') negative = s[p++] == '-';
  std::string digits;
  int exponent = 0;
  while (p < s.size() && s[p] >= '0' && s[p] <= '9') digits += s[p++];
  if (p < s.size() && s[p] == '.') {
    ++p;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
      digits += s[p++];
      --exponent;
    }
  }
  const std::size_t suffix_start = p;
  while (p < s.size() && std::string_view("eEinumkKMGTP").find(s[p]) != std::string_view::npos) ++p;
  if (p < s.size() && (s[p] == '-' || s[p] == '+')) ++p;
  while (p < s.size() && s[p] >= '0' && s[p] <= '9') ++p;
  if (p != s.size()) {
    error = kFormatWrong;
    return std::nullopt;
  }
  const std::string_view suffix = s.substr(suffix_start);
  int binary = 0;  // power of two
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    const std::string_view k = "KMGTPE";
    const auto at = k.find(suffix[0]);
    if (at == std::string_view::npos) {
      error = "unable to parse quantity's suffix";
      return std::nullopt;
    }
    binary = 10 * static_cast<int>(at + 1);
  } else if (suffix.size() == 1 && std::string_view("numkMGTPE").find(suffix[0]) != std::string_view::npos) {
    constexpr std::string_view kSi = "numkMGTPE";
    constexpr int kExp[] = {-9, -6, -3, 3, 6, 9, 12, 15, 18};
    exponent += kExp[kSi.find(suffix[0])];
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    int n = 0;
    bool neg = false;
    std::size_t i = 1;
    if (i < suffix.size() && (suffix[i] == '-' || suffix[i] == '+')) neg = suffix[i++] == '-';
    if (i == suffix.size()) {
      error = "unable to parse quantity's suffix";
      return std::nullopt;
    }
    for (; i < suffix.size(); ++i) {
      if (suffix[i] < '0' || suffix[i] > '9' || n > 100000) {
        error = "unable to parse quantity's suffix";
        return std::nullopt;
      }
      n = n * 10 + (suffix[i] - '0');
    }
    exponent += neg ? -n : n;
  } else {
    error = "unable to parse quantity's suffix";
    return std::nullopt;
  }
  // The digits without leading zeros, exactly.
  std::size_t first = digits.find_first_not_of('0');
  Int m = 0;
  if (first != std::string::npos) {
    for (std::size_t i = first; i < digits.size(); ++i) {
      if (!checked_mul(m, 10, m) || __builtin_add_overflow(m, Int{digits[i] - '0'}, &m)) {
        error = "quantity is too large";
        return std::nullopt;
      }
    }
  }
  for (int i = 0; i < binary; ++i) {
    if (!checked_mul(m, 2, m)) {
      error = "quantity is too large";
      return std::nullopt;
    }
  }
  // Nothing finer than nano: round up, away from zero.
  if (exponent < -9) {
    Int f;
    if (!pow10(-9 - exponent, f)) {
      m = m == 0 ? 0 : 1;
    } else {
      m = m / f + (m % f != 0 ? 1 : 0);
    }
    exponent = -9;
  }
  if (exponent > 30 && m != 0) {
    // Keep the exponent in range for aligning: shift it into the mantissa while it fits.
    while (exponent > 30) {
      if (!checked_mul(m, 10, m)) {
        error = "quantity is too large";
        return std::nullopt;
      }
      --exponent;
    }
  }
  if (m == 0) exponent = 0;
  return Decimal{negative ? -m : m, exponent};
}

class QuantityValue final : public OpaqueValue {
 public:
  QuantityValue(Decimal d, std::string text) : value(d), text_(std::move(text)) {}
  std::string_view type_name() const override { return "kubernetes.Quantity"; }
  bool equals(const OpaqueValue& o) const override {
    return compare(value, static_cast<const QuantityValue&>(o).value) == 0;
  }
  std::string literal() const override { return "quantity(\"" + text_ + "\")"; }
  Decimal value;

 private:
  std::string text_;
};

const QuantityValue* as_quantity(const Value& v) { return v.opaque_as<QuantityValue>(); }

Value make(Decimal d, std::string text) {
  return Value::opaque(std::make_shared<const QuantityValue>(d, std::move(text)));
}

std::string decimal_text(const Decimal& d) {
  // A plain text for kwatch-cel's literal: mantissa with the exponent as a suffix.
  std::string digits;
  Int m = d.mantissa < 0 ? -d.mantissa : d.mantissa;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
    m /= 10;
  } while (m != 0);
  std::string out = (d.mantissa < 0 ? "-" : "") + digits;
  if (d.exponent != 0) out += "e" + std::to_string(d.exponent);
  return out;
}

Value quantity(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  auto d = parse(a[0].as_text(), error);
  if (!d) return Value::error(error);
  return make(*d, std::string(a[0].as_text()));
}

Value is_quantity(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(code_point_count(a[0].as_text()), 1));
  std::string error;
  return Value::boolean(parse(a[0].as_text(), error).has_value());
}

template <class F>
Value with_quantities(Args a, std::string_view name, F f) {
  const QuantityValue* x = as_quantity(a[0]);
  const QuantityValue* y = a.size() > 1 ? as_quantity(a[1]) : nullptr;
  if (x == nullptr || (a.size() > 1 && a[1].is(K::opaque) && y == nullptr)) {
    return no_such_overload(name, a);
  }
  return f(x->value, y != nullptr ? y->value : Decimal{});
}

Value sign(Args a, EvalBudget&) {
  return with_quantities(a, "sign", [](Decimal d, Decimal) {
    return Value::int64(d.mantissa > 0 ? 1 : (d.mantissa < 0 ? -1 : 0));
  });
}
Value greater(Args a, EvalBudget&) {
  return with_quantities(a, "isGreaterThan",
                         [](Decimal x, Decimal y) { return Value::boolean(compare(x, y) > 0); });
}
Value less(Args a, EvalBudget&) {
  return with_quantities(a, "isLessThan",
                         [](Decimal x, Decimal y) { return Value::boolean(compare(x, y) < 0); });
}
Value compare_to(Args a, EvalBudget&) {
  return with_quantities(a, "compareTo",
                         [](Decimal x, Decimal y) { return Value::int64(compare(x, y)); });
}

// x + sign * y, exactly.
Value sum(Decimal x, Decimal y, int sign) {
  Int p, q;
  if (!align(x, y, p, q)) return Value::error("quantity is too large");
  Int r;
  if (sign > 0 ? __builtin_add_overflow(p, q, &r) : __builtin_sub_overflow(p, q, &r)) {
    return Value::error("quantity is too large");
  }
  const Decimal d{r, r == 0 ? 0 : std::min(x.exponent, y.exponent)};
  return make(d, decimal_text(d));
}

Value add_sub(Args a, int sign, std::string_view name) {
  if (a[1].is(K::int64)) {
    return with_quantities(a.first(1), name, [&](Decimal x, Decimal) {
      return sum(x, Decimal{a[1].as_int(), 0}, sign);
    });
  }
  return with_quantities(a, name, [&](Decimal x, Decimal y) { return sum(x, y, sign); });
}
Value add(Args a, EvalBudget&) { return add_sub(a, 1, "add"); }
Value sub(Args a, EvalBudget&) { return add_sub(a, -1, "sub"); }

// The quantity as an int64 when it is a whole number that fits.
std::optional<std::int64_t> as_int64(Decimal d) {
  Int v = d.mantissa;
  if (d.exponent < 0) {
    Int f;
    if (!pow10(-d.exponent, f) || v % f != 0) return std::nullopt;
    v /= f;
  } else {
    Int f;
    if (!pow10(d.exponent, f) || !checked_mul(v, f, v)) return std::nullopt;
  }
  if (v > INT64_MAX || v < INT64_MIN) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

Value as_integer(Args a, EvalBudget&) {
  return with_quantities(a, "asInteger", [](Decimal d, Decimal) {
    auto v = as_int64(d);
    if (!v) return Value::error("cannot convert value to integer");
    return Value::int64(*v);
  });
}
Value is_integer(Args a, EvalBudget&) {
  return with_quantities(a, "isInteger",
                         [](Decimal d, Decimal) { return Value::boolean(as_int64(d).has_value()); });
}
Value as_float(Args a, EvalBudget&) {
  return with_quantities(a, "asApproximateFloat",
                         [](Decimal d, Decimal) { return Value::float64(approximate(d)); });
}

}  // namespace

void add_quantity_library(FunctionRegistry& r) {
  r.add("quantity", "string_to_quantity", false, "string -> kubernetes.Quantity", quantity);
  r.add("isQuantity", "is_quantity_string", false, "string -> bool", is_quantity);
  r.add("sign", "quantity_sign", true, "kubernetes.Quantity -> int", sign);
  r.add("sign", "quantity_sign_global", false, "kubernetes.Quantity -> int", sign);
  r.add("isGreaterThan", "quantity_is_greater_than", true,
        "kubernetes.Quantity, kubernetes.Quantity -> bool", greater);
  r.add("isLessThan", "quantity_is_less_than", true,
        "kubernetes.Quantity, kubernetes.Quantity -> bool", less);
  r.add("compareTo", "quantity_compare_to", true,
        "kubernetes.Quantity, kubernetes.Quantity -> int", compare_to);
  r.add("add", "quantity_add", true,
        "kubernetes.Quantity, kubernetes.Quantity -> kubernetes.Quantity", add);
  r.add("add", "quantity_add_int", true, "kubernetes.Quantity, int -> kubernetes.Quantity", add);
  r.add("sub", "quantity_sub", true,
        "kubernetes.Quantity, kubernetes.Quantity -> kubernetes.Quantity", sub);
  r.add("sub", "quantity_sub_int", true, "kubernetes.Quantity, int -> kubernetes.Quantity", sub);
  r.add("asInteger", "quantity_get_int", true, "kubernetes.Quantity -> int", as_integer);
  r.add("isInteger", "quantity_is_integer", true, "kubernetes.Quantity -> bool", is_integer);
  r.add("asApproximateFloat", "quantity_get_float", true, "kubernetes.Quantity -> double",
        as_float);
}

}  // namespace kwatch::cel
