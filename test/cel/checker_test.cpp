#include "cel/checker.hpp"

#include <gtest/gtest.h>

#include <string>

#include "cel/libraries.hpp"

namespace kwatch::cel {
namespace {

// `self` as a CRD schema might declare it: spec.replicas int, spec.name string, spec.labels
// map(string, string), spec.ports list of objects with a port int.
TypePtr self_type() {
  auto port = std::make_shared<Type>();
  port->kind = TypeKind::object;
  port->name = "self.spec.ports.@items";
  port->fields["port"] = types::int64();
  auto spec = std::make_shared<Type>();
  spec->kind = TypeKind::object;
  spec->name = "self.spec";
  spec->fields["replicas"] = types::int64();
  spec->fields["name"] = types::string();
  spec->fields["labels"] = types::map(types::string(), types::string());
  spec->fields["ports"] = types::list(port);
  auto self = std::make_shared<Type>();
  self->kind = TypeKind::object;
  self->name = "self";
  self->fields["spec"] = spec;
  return self;
}

// The result type, or "error: <first message>".
std::string checked(std::string_view source, CheckOptions options = {}) {
  Parsed p = parse(source);
  if (!p.errors.empty()) return "parse error: " + p.errors.front().message;
  const Checked c = check(p.ast, {"self", "x"}, {self_type(), types::dyn()}, kubernetes_functions(), options);
  if (!c.errors.empty()) return "error: " + c.errors.front().message;
  return format_type(*c.result);
}

TEST(CelChecker, TypesFollowTheDeclarations) {
  EXPECT_EQ(checked("self.spec.replicas"), "int");
  EXPECT_EQ(checked("self.spec.replicas > 1 && self.spec.name.startsWith('a')"), "bool");
  EXPECT_EQ(checked("self.spec.labels['app']"), "string");
  EXPECT_EQ(checked("self.spec.ports.map(p, p.port)"), "list(int)");
  EXPECT_EQ(checked("self.spec.ports.all(p, p.port > 0)"), "bool");
  EXPECT_EQ(checked("self.spec.labels.transformMap(k, v, size(v))"), "map(string, int)");
  EXPECT_EQ(checked("x.anything.goes"), "dyn");
  EXPECT_EQ(checked("has(self.spec.name)"), "bool");
  EXPECT_EQ(checked("self.spec.?name"), "optional_type(string)");
  EXPECT_EQ(checked("[1, 2].map(x, double(x) * 2.0)"), "list(double)");
  EXPECT_EQ(checked("[1, 2].map(x, x * 2.0)"),
            "error: found no matching overload for '_*_' applied to '(int, double)'");
  EXPECT_EQ(checked("cel.bind(n, self.spec.name, n + '!')"), "string");
  EXPECT_EQ(checked("type(1)"), "type(int)");
  EXPECT_EQ(checked("1 < 2.0 && 1u <= 2"), "bool");  // numbers compare across types
}

TEST(CelChecker, MistakesAreReportedWithCelGosWords) {
  EXPECT_EQ(checked("self.spec.replica"), "error: undefined field 'replica'");
  EXPECT_EQ(checked("self.spec.replicas + 'a'"),
            "error: found no matching overload for '_+_' applied to '(int, string)'");
  EXPECT_EQ(checked("self.spec.replicas.size()"),
            "error: found no matching overload for 'size' applied to 'int.()'");
  EXPECT_EQ(checked("self.spec.replicas.x"), "error: type 'int' does not support field selection");
  EXPECT_EQ(checked("nope > 1"), "error: undeclared reference to 'nope' (in container '')");
  EXPECT_EQ(checked("nope(1)"), "error: undeclared reference to 'nope' (in container '')");
  EXPECT_EQ(checked("self.spec.replicas && true"), "error: expected type 'bool' but found 'int'");
  EXPECT_EQ(checked("1 == 1u"), "error: found no matching overload for '_==_' applied to '(int, uint)'");
  EXPECT_EQ(checked("self.spec.replicas.all(x, true)"),
            "error: expression of type 'int' cannot be range of a comprehension (must be list, "
            "map, or dynamic)");
  EXPECT_EQ(checked("self.spec.ports.exists(p, p.port)"),
            "error: expected type 'bool' but found 'int'");
}

TEST(CelChecker, KubeRefusesMixedLiteralsWhenAsked) {
  CheckOptions kube_options;
  kube_options.homogeneous_literals = true;
  EXPECT_EQ(checked("[1, 'a']"), "list(dyn)");
  EXPECT_EQ(checked("[1, 'a']", kube_options), "error: expected type 'int' but found 'string'");
  EXPECT_EQ(checked("{'a': 1, 'b': true}", kube_options),
            "error: expected type 'int' but found 'bool'");
  EXPECT_EQ(checked("[1, x]", kube_options), "list(dyn)");  // dyn fits, and generalises
}

TEST(CelChecker, KubeRefusesLiteralsThatCannotWork) {
  CheckOptions kube_options;
  kube_options.validate_literals = true;
  EXPECT_EQ(checked("'abc'.matches('[a-')", kube_options), "error: invalid matches argument");
  EXPECT_EQ(checked("matches('abc', 'a(')", kube_options), "bool");  // the text, not a pattern
  EXPECT_EQ(checked("duration('1fortnight') > duration('1s')", kube_options),
            "error: invalid duration argument");
  EXPECT_EQ(checked("timestamp('yesterday') < timestamp('2024-01-01T00:00:00Z')", kube_options),
            "error: invalid timestamp argument");
  EXPECT_EQ(checked("'abc'.matches('^a') && duration('90s') > duration('1m')", kube_options),
            "bool");
  EXPECT_EQ(checked("'abc'.matches('[a-')"), "bool");  // only when asked
  Parsed p = parse("'abc'.matches('[a-')");
  const Checked c = check(p.ast, {}, {}, kubernetes_functions(), kube_options);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(format_issues("'abc'.matches('[a-')", c.errors),
            "ERROR: <input>:1:15: invalid matches argument\n | 'abc'.matches('[a-')\n | ..............^");
}

TEST(CelChecker, AnErrorIsReportedOnceWhereItArises) {
  Parsed p = parse("size(nope) + 1 > 0");
  const Checked c = check(p.ast, {}, {}, kubernetes_functions());
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_EQ(c.errors[0].message, "undeclared reference to 'nope' (in container '')");
  EXPECT_EQ(c.errors[0].offset, 5u);
}

}  // namespace
}  // namespace kwatch::cel
