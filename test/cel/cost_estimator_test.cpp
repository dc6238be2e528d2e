#include "cel/cost_estimator.hpp"

#include <gtest/gtest.h>

#include "cel/libraries.hpp"
#include "cel/parser.hpp"

namespace kwatch::cel {
namespace {

TypePtr with_length(TypePtr base, std::uint64_t n) {
  auto t = std::make_shared<Type>(*base);
  t->max_length = n;
  return t;
}
TypePtr with_elements(TypePtr base, std::uint64_t n) {
  auto t = std::make_shared<Type>(*base);
  t->max_elements = n;
  return t;
}

// `self` as a schema without bounds makes it: strings and lists as long as a 3 MiB request
// allows (the figures kube's estimator derives).
TypePtr unbounded_self() {
  auto self = std::make_shared<Type>();
  self->kind = TypeKind::object;
  self->name = "self";
  self->fields["str1"] = with_length(types::string(), 3145726);
  self->fields["str2"] = with_length(types::string(), 3145726);
  self->fields["ints"] = with_elements(types::list(types::int64()), 1572863);
  self->fields["short"] = with_length(types::string(), 40);
  self->fields["any"] = types::dyn();
  self->fields["bounded"] = with_length(types::dyn(), 40);
  return self;
}

std::uint64_t estimate(std::string_view source) {
  Parsed p = parse(source);
  EXPECT_TRUE(p.errors.empty()) << source;
  const Checked c = check(p.ast, {"self"}, {unbounded_self()}, kubernetes_functions());
  EXPECT_TRUE(c.errors.empty()) << source << ": " << (c.errors.empty() ? "" : c.errors[0].message);
  return estimate_cost(p.ast, c).max;
}

// The estimates kube's cost stability tests pin for these expressions and bounds.
TEST(CelCostEstimator, AgreesWithKubesFigures) {
  EXPECT_EQ(estimate("self.str1 == self.str2"), 314577u);
  EXPECT_EQ(estimate("self.str1.matches('^[^0-9]*$')"), 943721u);
  EXPECT_EQ(estimate("self.str1.startsWith('Rook')"), 3u);
  EXPECT_EQ(estimate("1 in self.ints"), 1572865u);
  EXPECT_EQ(estimate("self.ints.all(k, size(self.ints) > 0)"), 11010044u);
  EXPECT_EQ(estimate("has(self.ints)"), 1u);
}

TEST(CelCostEstimator, BoundsAndShortCircuitsShapeTheEstimate) {
  // A bounded string costs by its bound.
  EXPECT_EQ(estimate("self.short == 'x'"), 2u + 1u);
  // `||` and `&&` cost at most both sides; `?:` the dearer branch.
  EXPECT_EQ(estimate("true || self.str1 == self.str2"), 314577u);
  EXPECT_EQ(estimate("self.short == 'a' ? 1 : size(self.ints)"), 3u + 3u);
  // cel.bind evaluates its value once, not per element of anything (its empty range is
  // counted as the list literal it is: 10).
  EXPECT_EQ(estimate("cel.bind(n, size(self.ints), n > 1 && n < 5)"), 10u + 3u + 2u + 2u);
  // A value of unknown type is unbounded unless its environment bounds it (kube's DRA attribute
  // values).
  EXPECT_EQ(estimate("self.bounded.matches('a.*')"), estimate("self.short.matches('a.*')"));
  EXPECT_GT(estimate("self.any.matches('a.*')"), 1000000000u);
  // Nested comprehensions multiply.
  EXPECT_GT(estimate("self.ints.all(a, self.ints.all(b, a < b))"), 1572863ull * 1572863ull);
}

}  // namespace
}  // namespace kwatch::cel
