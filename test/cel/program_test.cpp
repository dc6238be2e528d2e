#include "cel/program.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "cel/json_value.hpp"
#include "cel/literal.hpp"
#include "cel/parser.hpp"

namespace kwatch::cel {
namespace {

const FunctionRegistry& standard() {
  static const FunctionRegistry registry = [] {
    FunctionRegistry r;
    add_standard_functions(r);
    return r;
  }();
  return registry;
}

// The value of `source` as a literal, or "error: <message>".
std::string eval(std::string_view source,
                 std::vector<std::pair<std::string, std::string>> json_vars = {},
                 std::uint64_t cost_limit = UINT64_MAX) {
  Parsed p = parse(source);
  if (!p.errors.empty()) return "parse error: " + p.errors.front().message;
  Declarations decls;
  decls.functions = &standard();
  std::vector<Value> values;
  for (auto& [name, json] : json_vars) {
    decls.variables.push_back(name);
    values.push_back(value_from_json(boost::json::parse(json)));
  }
  const Program program = Program::compile(p.ast, decls);
  const EvalResult r = program.evaluate(values, cost_limit);
  if (r.value.is_error()) return "error: " + std::string(r.value.as_text());
  return format_literal(r.value);
}

TEST(CelProgram, IntegersOverflowIntoErrors) {
  EXPECT_EQ(eval("9223372036854775807 + 1"), "error: integer overflow");
  EXPECT_EQ(eval("-9223372036854775808 - 1"), "error: integer overflow");
  EXPECT_EQ(eval("-9223372036854775808 / -1"), "error: integer overflow");
  EXPECT_EQ(eval("-(-9223372036854775808)"), "error: integer overflow");
  EXPECT_EQ(eval("0u - 1u"), "error: unsigned integer overflow");
  EXPECT_EQ(eval("1 / 0"), "error: division by zero");
  EXPECT_EQ(eval("1 % 0"), "error: modulus by zero");
  EXPECT_EQ(eval("-7 / 2"), "-3");
  EXPECT_EQ(eval("-7 % 2"), "-1");
  EXPECT_EQ(eval("1.0 / 0.0"), "double(\"inf\")");
  EXPECT_EQ(eval("int(9223372036854775807.0)"), "error: integer overflow");
  EXPECT_EQ(eval("uint(-1)"), "error: unsigned integer overflow");
  EXPECT_EQ(eval("1 + 1u"), "error: no such overload: _+_(int, uint)");
}

TEST(CelProgram, NumbersCompareAcrossTypes) {
  EXPECT_EQ(eval("1 == 1u && 1u == 1.0 && 1 == 1.0"), "true");
  EXPECT_EQ(eval("-1 < 0u && 1.5 > 1 && 18446744073709551615u > 9223372036854775807"), "true");
  EXPECT_EQ(eval("double('nan') == double('nan')"), "false");
  EXPECT_EQ(eval("double('nan') < 1 || double('nan') >= 1"), "false");
  EXPECT_EQ(eval("[1, 2.0] == [1u, 2]"), "true");
  EXPECT_EQ(eval("{1: 'a'}[1u]"), "\"a\"");
  EXPECT_EQ(eval("{1: 'a'}[1.0]"), "\"a\"");
  EXPECT_EQ(eval("1 == 'a'"), "false");
  EXPECT_EQ(eval("1 < 'a'"), "error: no such overload: _<_(int, string)");
}

TEST(CelProgram, LogicIsCommutativeOverErrors) {
  EXPECT_EQ(eval("1 / 0 == 1 || true"), "true");
  EXPECT_EQ(eval("true || 1 / 0 == 1"), "true");
  EXPECT_EQ(eval("1 / 0 == 1 && false"), "false");
  EXPECT_EQ(eval("1 / 0 == 1 && true"), "error: division by zero");
  EXPECT_EQ(eval("false ? 1 / 0 : 2"), "2");
  EXPECT_EQ(eval("[1, 2].all(x, 1 / (x - 1) > 0 || x == 1)"), "true");
  EXPECT_EQ(eval("[0, 1].exists(x, 1 / x > 0)"), "true");
  EXPECT_EQ(eval("[0, 1].all(x, 1 / x > 0)"), "error: division by zero");
}

TEST(CelProgram, StringsCountCodePoints) {
  EXPECT_EQ(eval("size('héllo')"), "5");
  EXPECT_EQ(eval("size(b'h\\xc3\\xa9')"), "3");
  EXPECT_EQ(eval("'héllo'.startsWith('hé') && 'abc'.contains('b') && 'abc'.endsWith('c')"),
            "true");
  EXPECT_EQ(eval("'abc'.matches('^a.c$') && matches('xabcx', 'b')"), "true");
  EXPECT_EQ(eval("'a'.matches('(')").substr(0, 29), "error: given regex is invalid");
  EXPECT_EQ(eval("string(b'\\xff')"), "error: invalid UTF-8 in bytes, cannot convert to string");
  EXPECT_EQ(eval("string(1.5) + string(100000000000000000000.0) + string(1e21)"),
            "\"1.51000000000000000000001e+21\"");
}

// code_point_count reads eight bytes at a time: every length and alignment of ASCII and
// two-, three- and four-byte sequences agree with a byte-by-byte count.
TEST(CelProgram, CodePointsAreCountedAtEveryLengthAndOffset) {
  const std::string pieces[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "~"};
  std::string text;
  std::size_t expected_total = 0;
  for (int i = 0; i < 60; ++i) {
    text += pieces[(i * 7) % 5];
    ++expected_total;
  }
  EXPECT_EQ(code_point_count(text), expected_total);
  for (std::size_t from = 0; from < 24; ++from) {
    for (std::size_t len = 0; from + len <= text.size() && len < 40; ++len) {
      const std::string_view part = std::string_view(text).substr(from, len);
      std::uint64_t expected = 0;
      for (char c : part) expected += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
      ASSERT_EQ(code_point_count(part), expected) << from << "+" << len;
    }
  }
}

TEST(CelProgram, ListsMapsAndComprehensions) {
  EXPECT_EQ(eval("[1, 2, 3].map(x, x * x)"), "[1, 4, 9]");
  EXPECT_EQ(eval("[1, 2, 3].map(x, x > 1, x)"), "[2, 3]");
  EXPECT_EQ(eval("{'a': 1, 'b': 2}.filter(k, k != 'a')"), "[\"b\"]");
  EXPECT_EQ(eval("[3, 4].transformList(i, v, i * v)"), "[0, 4]");
  EXPECT_EQ(eval("{'a': 1}.transformMapEntry(k, v, {v: k})"), "{1: \"a\"}");
  EXPECT_EQ(eval("[1, 1].exists_one(x, x == 1)"), "false");
  EXPECT_EQ(eval("2 in [1, 2] && 'a' in {'a': 1} && !(3 in [1])"), "true");
  EXPECT_EQ(eval("[1, 2][2]"), "error: index '2' out of range in list size '2'");
  EXPECT_EQ(eval("{'a': 1}['b']"), "error: no such key: b");
  EXPECT_EQ(eval("{'a': 1}.b"), "error: no such key: b");
  EXPECT_EQ(eval("{1: 1}[2]"), "error: no such key: 2");
  EXPECT_EQ(eval("{'a': 1, 'a': 2}"), "error: Failed with repeated key: \"a\"");
  EXPECT_EQ(eval("{[1]: 2}"), "error: unsupported key type");
  EXPECT_EQ(eval("[1] + [2] + []"), "[1, 2]");
  // The accumulator's list grows in place, but a list it came from is not changed.
  EXPECT_EQ(eval("cel.bind(l, [1], [l, l.map(x, x + 1), l])"), "[[1], [2], [1]]");
}

TEST(CelProgram, Optionals) {
  EXPECT_EQ(eval("{'a': {'b': 1}}.?a.?b"), "optional.of(1)");
  EXPECT_EQ(eval("{'a': {'b': 1}}.?x.?b"), "optional.none()");
  EXPECT_EQ(eval("{'a': {'b': 1}}.?a.b"), "optional.of(1)");
  EXPECT_EQ(eval("[1, 2][?5].orValue(0)"), "0");
  EXPECT_EQ(eval("[?optional.none(), ?optional.of(1)]"), "[1]");
  EXPECT_EQ(eval("{?'a': optional.none(), 'b': 1}"), "{\"b\": 1}");
  EXPECT_EQ(eval("optional.none().value()"), "error: optional.none() dereference");
  EXPECT_EQ(eval("optional.of(2).optMap(x, x * 3)"), "optional.of(6)");
  EXPECT_EQ(eval("optional.ofNonZeroValue('').hasValue()"), "false");
}

// A duration past the range is an error, however many digits it has (a term of 2^100 hours
// once overflowed 128-bit arithmetic: fuzz finding).
TEST(CelProgram, DurationsPastTheRangeAreErrors) {
  EXPECT_EQ(eval("duration('2562047h47m16.854775807s')"), "duration(\"9223372036.854775807s\")");
  for (const char* text : {"duration('2562048h')", "duration('1h303333333333333333333333333333m')",
                           "duration('999999999999999999999999999999h')",
                           "duration('9223372036854775808ns')"}) {
    EXPECT_TRUE(eval(text).starts_with("error:")) << text << " -> " << eval(text);
  }
}

TEST(CelProgram, TimestampsAndDurations) {
  EXPECT_EQ(eval("timestamp('2009-02-13T23:31:30Z') + duration('1h1.5s')"),
            "timestamp(\"2009-02-14T00:31:31.5Z\")");
  EXPECT_EQ(eval("timestamp('2009-02-13T23:31:30+01:00') - timestamp('2009-02-13T22:31:30Z')"),
            "duration(\"0s\")");
  EXPECT_EQ(eval("timestamp('9999-12-31T23:59:59Z') + duration('1s')"),
            "error: timestamp overflow");
  EXPECT_EQ(eval("timestamp('2024-02-29T12:00:00Z').getDayOfYear()"), "59");
  EXPECT_EQ(eval("timestamp('2024-02-29T12:00:00Z').getDayOfWeek()"), "4");
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('+05:30')"), "17");
  EXPECT_EQ(eval("timestamp('2024-07-01T12:00:00Z').getHours('Europe/Berlin')"), "14");
  EXPECT_EQ(eval("timestamp('2024-01-01T12:00:00Z').getHours('Europe/Berlin')"), "13");
  EXPECT_EQ(eval("duration('-1.5s')"), "duration(\"-1.5s\")");
  EXPECT_EQ(eval("duration('2h30m').getMinutes()"), "150");
  EXPECT_EQ(eval("timestamp('2009-02-30T00:00:00Z')").substr(0, 6), "error:");
  EXPECT_EQ(eval("int(timestamp('1970-01-02T00:00:00Z'))"), "86400");
}

TEST(CelProgram, TypesAndConversions) {
  EXPECT_EQ(eval("type(1) == int && type(type(1)) == type && type(null) == null_type"), "true");
  EXPECT_EQ(eval("[type(1u), type(''), type([]), type({}), type(duration('1s'))]"),
            "[uint, string, list, map, google.protobuf.Duration]");
  EXPECT_EQ(eval("int('-42') + int(2.9) + int(-2.9)"), "-42");
  EXPECT_EQ(eval("bool('True') && !bool('0')"), "true");
  EXPECT_EQ(eval("bool('yes')"), "error: type conversion error from 'string' to 'bool'");
  EXPECT_EQ(eval("double('1e3') + double(1u)"), "1001.0");
  EXPECT_EQ(eval("bytes('é')"), "b\"\\xc3\\xa9\"");
}

TEST(CelProgram, VariablesAndUnknownNames) {
  EXPECT_EQ(eval("self.spec.replicas > 1 && self.spec.name == 'x'",
                 {{"self", R"({"spec": {"replicas": 3, "name": "x"}})"}}),
            "true");
  EXPECT_EQ(eval("self.x", {{"self", "{}"}}), "error: no such key: x");
  EXPECT_EQ(eval("nope"), "error: no such attribute: nope");
  EXPECT_EQ(eval("nope()"), "error: no such overload: nope");
  // A comprehension variable shadows a declared one, and only within the comprehension.
  EXPECT_EQ(eval("[1].map(x, x + 1) + [x]", {{"x", "10"}}), "[2, 10]");
}

// What an evaluation costs, in the units kube's budgets count (the figures kube's own cost
// stability tests pin for the same expressions and data).
TEST(CelProgram, CostsAreCountedAsKubeCountsThem) {
  const std::string self = R"({"val1": "Rook takes \ud83d\udc51", "val6": 7,
      "array": [1, 1, 2, 2, 3, 3, 4, 5], "val": {"b": 1, "d": 2}})";
  const auto cost = [&](std::string_view source) {
    Parsed p = parse(source);
    EXPECT_TRUE(p.errors.empty()) << source;
    Declarations decls;
    decls.variables = {"self"};
    decls.functions = &standard();
    const Value vars[] = {value_from_json(boost::json::parse(self))};
    const EvalResult r = Program::compile(p.ast, decls).evaluate(vars);
    EXPECT_FALSE(r.value.is_error()) << source << ": " << r.value.as_text();
    return r.cost;
  };
  EXPECT_EQ(cost("self.val1.startsWith('Rook')"), 4u);
  EXPECT_EQ(cost("self.val1.matches('^[^0-9]*$')"), 8u);
  EXPECT_EQ(cost("type(self.val1) == string"), 4u);
  EXPECT_EQ(cost("self.val1 == self.val6"), 5u);
  EXPECT_EQ(cost("double(5) < 10.0"), 1u);
  EXPECT_EQ(cost("2 in self.array"), 10u);
  EXPECT_EQ(cost("self.array.all(e, e > 0)"), 43u);
  EXPECT_EQ(cost("self.array.exists(e, e > 2)"), 36u);
  EXPECT_EQ(cost("!self.array.exists(e, e < 0)"), 52u);
  EXPECT_EQ(cost("self.array.exists_one(e, e > 4)"), 22u);
  EXPECT_EQ(cost("'b' in self.val"), 3u);
  EXPECT_EQ(cost("has(self.val.b)"), 2u);
  EXPECT_EQ(cost("self.val.all(k, self.val[k] > 0)"), 17u);
}

TEST(CelProgram, TheBudgetStopsRunawayEvaluation) {
  const std::string grow = "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, "
                           "[1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, a))))";
  EXPECT_EQ(eval(grow, {}, 1000), "error: operation cancelled: actual cost limit exceeded");
  const Parsed p = parse("[1, 2, 3].map(x, x * 2)");
  Declarations decls;
  decls.functions = &standard();
  const EvalResult r = Program::compile(p.ast, decls).evaluate({});
  EXPECT_GT(r.cost, 3u);
  EXPECT_LT(r.cost, 100u);
}

}  // namespace
}  // namespace kwatch::cel
