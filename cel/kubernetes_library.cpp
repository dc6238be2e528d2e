// Kubernetes' own list and regex libraries (k8s.io/apiserver/pkg/cel/library: isSorted, sum,
// min, max, indexOf, lastIndexOf on lists; find, findAll on strings), cel-go's sets and base64
// encoders, and the function that puts kube's whole environment together.
#include <re2/re2.h>

#include <string>
#include <vector>

#include "base/base64.hpp"
#include "cel/libraries.hpp"
#include "cel/literal.hpp"

namespace kwatch::cel {

namespace {

using Args = std::span<const Value>;
using K = ValueKind;

// --- lists ---
// Walking a list costs 1 per element, a tenth of its length for a string or bytes.
std::uint64_t traversal_cost(const ListValue& l) {
  std::uint64_t cost = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    const Value v = l.at(i);
    cost += v.is(K::string) || v.is(K::bytes) ? v.as_text().size() / 10 : 1;
  }
  return cost;
}

Value is_sorted(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  budget.call_cost(traversal_cost(l));
  for (std::size_t i = 1; i < l.size(); ++i) {
    const Value prev = l.at(i - 1), next = l.at(i);
    const int c = compare(prev, next);
    if (c == 3) {
      const Value args[] = {prev, next};
      return no_such_overload("isSorted", args);
    }
    if (c == 1) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Value sum(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  const std::uint64_t cost = traversal_cost(l);
  if (l.size() == 0) return Value::int64(0);
  Value acc = l.at(0);
  static const FunctionRegistry* standard = [] {
    auto* r = new FunctionRegistry;
    add_standard_functions(*r);
    return r;
  }();
  const auto overloads = standard->find("_+_", false, 2);
  for (std::size_t i = 1; i < l.size(); ++i) {
    const Value pair[] = {acc, l.at(i)};
    const Overload* match = nullptr;
    for (const Overload* o : overloads) {
      if (o->args[0].accepts(pair[0]) && o->args[1].accepts(pair[1])) match = o;
    }
    if (match == nullptr) return no_such_overload("sum", pair);
    acc = match->impl(std::span<const Value>(pair, 2), budget);
    if (acc.is_error()) return acc;
  }
  if (!is_number(acc.kind()) && !acc.is(K::duration)) return no_such_overload("sum", a);
  budget.call_cost(cost);
  return acc;
}

template <int Prefer>
Value extreme(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  budget.call_cost(traversal_cost(l));
  if (l.size() == 0) {
    return Value::error(std::string(Prefer == 1 ? "min" : "max") + " called on empty list");
  }
  Value best = l.at(0);
  for (std::size_t i = 1; i < l.size(); ++i) {
    Value next = l.at(i);
    const int c = compare(best, next);
    if (c == 3) {
      const Value args[] = {best, next};
      return no_such_overload(Prefer == 1 ? "min" : "max", args);
    }
    if (c == Prefer) best = std::move(next);
  }
  return best;
}

Value list_index_of(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  budget.call_cost(traversal_cost(l));
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (equal(l.at(i), a[1])) return Value::int64(static_cast<std::int64_t>(i));
  }
  return Value::int64(-1);
}

Value list_last_index_of(Args a, EvalBudget& budget) {
  const ListValue& l = a[0].as_list();
  budget.call_cost(traversal_cost(l));
  for (std::size_t i = l.size(); i-- > 0;) {
    if (equal(l.at(i), a[1])) return Value::int64(static_cast<std::int64_t>(i));
  }
  return Value::int64(-1);
}

// --- regex ---
Value find_all(Args a, EvalBudget& budget) {
  std::string error;
  const re2::RE2* re = thread_pattern(a[1].as_text(), error);
  if (!re) return Value::error(error);
  const std::int64_t limit = a.size() > 2 ? a[2].as_int() : -1;
  const std::string_view text = a[0].as_text();
  budget.call_cost(regex_cost(text, a[1].as_text()));
  std::vector<Value> found;
  re2::StringPiece input(text.data(), text.size());
  re2::StringPiece match;
  std::size_t pos = 0;
  while (limit < 0 || static_cast<std::int64_t>(found.size()) < limit) {
    if (pos > text.size() ||
        !re->Match(input, pos, text.size(), RE2::UNANCHORED, &match, 1)) {
      break;
    }
    found.push_back(Value::string(std::string(match.data(), match.size())));
    const std::size_t start = static_cast<std::size_t>(match.data() - text.data());
    pos = start + match.size() + (match.empty() ? 1 : 0);
  }
  return Value::list(std::move(found));
}

Value find(Args a, EvalBudget& budget) {
  const Value args[] = {a[0], a[1], Value::int64(1)};
  Value all = find_all(args, budget);
  if (all.is_error()) return all;
  if (all.as_list().size() == 0) return Value::string("");
  return all.as_list().at(0);
}

// --- sets ---
bool list_contains(const ListValue& l, const Value& v) {
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (equal(l.at(i), v)) return true;
  }
  return false;
}

bool contains_all(const ListValue& l, const ListValue& sub) {
  for (std::size_t i = 0; i < sub.size(); ++i) {
    if (!list_contains(l, sub.at(i))) return false;
  }
  return true;
}

// Comparing every element with every other: the product of the sizes (twice for equivalent).
void charge_product(EvalBudget& budget, Args a, std::uint64_t factor = 1) {
  budget.call_cost(1 + a[0].as_list().size() * a[1].as_list().size() * factor);
}

Value sets_contains(Args a, EvalBudget& budget) {
  charge_product(budget, a);
  return Value::boolean(contains_all(a[0].as_list(), a[1].as_list()));
}
Value sets_equivalent(Args a, EvalBudget& budget) {
  charge_product(budget, a, 2);
  return Value::boolean(contains_all(a[0].as_list(), a[1].as_list()) &&
                        contains_all(a[1].as_list(), a[0].as_list()));
}
Value sets_intersects(Args a, EvalBudget& budget) {
  charge_product(budget, a);
  const ListValue& x = a[0].as_list();
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (list_contains(a[1].as_list(), x.at(i))) return Value::boolean(true);
  }
  return Value::boolean(false);
}

// --- base64 ---
Value base64_encode(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(a[0].as_text().size(), 1));
  return Value::string(base::base64_encode(a[0].as_text()));
}
Value base64_decode(Args a, EvalBudget& budget) {
  budget.call_cost(tenths(a[0].as_text().size(), 1));
  auto decoded = base::base64_decode(a[0].as_text());
  if (!decoded) return Value::error("illegal base64 data in " + format_literal(a[0]));
  return Value::bytes(std::move(*decoded));
}

}  // namespace

void add_sets_and_encoders_libraries(FunctionRegistry& r) {
  r.add("sets.contains", "list_sets_contains_list", false, "list(A), list(A) -> bool", sets_contains);
  r.add("sets.equivalent", "list_sets_equivalent_list", false, "list(A), list(A) -> bool", sets_equivalent);
  r.add("sets.intersects", "list_sets_intersects_list", false, "list(A), list(A) -> bool", sets_intersects);
  r.add("base64.encode", "base64_encode_bytes", false, "bytes -> string", base64_encode);
  r.add("base64.decode", "base64_decode_string", false, "string -> bytes", base64_decode);
}

const FunctionRegistry& kubernetes_functions() {
  static const FunctionRegistry registry = [] {
    FunctionRegistry r;
    add_kubernetes_libraries(r);
    return r;
  }();
  return registry;
}

void add_kubernetes_libraries(FunctionRegistry& r) {
  add_standard_functions(r);
  add_strings_library(r);
  add_math_library(r);
  add_sets_and_encoders_libraries(r);
  add_network_library(r);
  add_quantity_library(r);
  add_semver_library(r);
  add_format_library(r);
  add_url_library(r);
  r.add("isSorted", "list_is_sorted_bool", true, "list(A) -> bool", is_sorted);
  r.add("sum", "list_sum", true, "list(A) -> A", sum);
  r.add("min", "list_min", true, "list(A) -> A", extreme<1>);
  r.add("max", "list_max", true, "list(A) -> A", extreme<-1>);
  r.add("indexOf", "list_a_index_of_int", true, "list(A), A -> int", list_index_of);
  r.add("lastIndexOf", "list_a_last_index_of_int", true, "list(A), A -> int", list_last_index_of);
  r.add("find", "string_find_string", true, "string, string -> string", find);
  r.add("findAll", "string_find_all_string", true, "string, string -> list(string)", find_all);
  r.add("findAll", "string_find_all_string_int", true, "string, string, int -> list(string)", find_all);
}

}  // namespace kwatch::cel
