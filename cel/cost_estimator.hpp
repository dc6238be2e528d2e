// The static cost of a checked expression, in the units of the runtime budget: cel-go's cost
// estimator with Kubernetes' library costs, so that a rule kube refuses as too expensive when a
// definition is written is refused here too (the figures kube's cost stability tests pin hold).
//
// What an expression costs depends on the sizes of what it walks: a string's length, a list's
// or map's number of elements. They come from the checked types (Type::max_length,
// Type::max_elements, which the schema sets from maxLength/maxItems/maxProperties or, absent
// those, from the largest request), from literals, and from what functions return. An unknown
// size is unbounded, and the estimate saturates at UINT64_MAX.
//
// Pure; safe from any thread.
#pragma once

#include <cstdint>

#include "cel/ast.hpp"
#include "cel/checker.hpp"

namespace kwatch::cel {

struct CostEstimate {
  std::uint64_t min = 0;
  std::uint64_t max = 0;
};

CostEstimate estimate_cost(const Ast& ast, const Checked& checked);

}  // namespace kwatch::cel
