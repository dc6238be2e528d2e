#include "cel/parser.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kwatch::cel {
namespace {

// The tree as a compact string: calls as name(args), comprehensions as fold(...), so that a
// test states the shape it expects.
std::string show(const Ast& ast, NodeId id) {
  const Node& n = ast.at(id);
  switch (n.kind) {
    case NodeKind::constant:
      switch (n.constant.kind) {
        case Constant::Kind::null: return "null";
        case Constant::Kind::boolean: return n.constant.boolean ? "true" : "false";
        case Constant::Kind::int64: return std::to_string(n.constant.int64);
        case Constant::Kind::uint64: return std::to_string(n.constant.uint64) + "u";
        case Constant::Kind::float64: return std::to_string(n.constant.float64);
        case Constant::Kind::string: return "'" + n.constant.text + "'";
        case Constant::Kind::bytes: return "b'" + n.constant.text + "'";
      }
      return "?";
    case NodeKind::ident: return n.name;
    case NodeKind::select:
      return (n.test_only ? "has(" : "") + show(ast, n.children[0]) + "." + n.name +
             (n.test_only ? ")" : "");
    case NodeKind::call: {
      std::string out = n.has_target ? show(ast, n.children[0]) + "." + n.name + "("
                                     : n.name + "(";
      for (std::size_t i = 0; i < n.arg_count(); ++i) {
        if (i > 0) out += ", ";
        out += show(ast, n.arg(i));
      }
      return out + ")";
    }
    case NodeKind::list:
    case NodeKind::map: {
      std::string out = n.kind == NodeKind::list ? "[" : "{";
      for (std::size_t i = 0; i < n.children.size(); ++i) {
        if (i > 0) out += n.kind == NodeKind::map && i % 2 == 1 ? ": " : ", ";
        const std::size_t entry = n.kind == NodeKind::map ? i / 2 : i;
        if (n.is_optional(entry) && (n.kind == NodeKind::list || i % 2 == 0)) out += "?";
        out += show(ast, n.children[i]);
      }
      return out + (n.kind == NodeKind::list ? "]" : "}");
    }
    case NodeKind::message: {
      std::string out = n.name + "{";
      for (std::size_t i = 0; i < n.fields.size(); ++i) {
        if (i > 0) out += ", ";
        out += n.fields[i] + ": " + show(ast, n.children[i]);
      }
      return out + "}";
    }
    case NodeKind::comprehension: {
      std::string out = "fold(" + n.iter_var;
      if (!n.iter_var2.empty()) out += "," + n.iter_var2;
      out += " in " + show(ast, n.children[kRange]) + "; " + n.accu_var + " = " +
             show(ast, n.children[kInit]) + "; " + show(ast, n.children[kCondition]) + "; " +
             show(ast, n.children[kStep]) + "; " + show(ast, n.children[kResult]) + ")";
      return out;
    }
  }
  return "?";
}

std::string parsed(std::string_view source) {
  Parsed p = parse(source);
  if (!p.errors.empty()) return "error: " + p.errors.front().message;
  return show(p.ast, p.ast.root);
}

std::string displayed_errors(std::string_view source, const ParseOptions& options = {}) {
  Parsed p = parse(source, options);
  return format_issues(source, p.errors);
}

TEST(CelParser, PrecedenceFollowsTheGrammar) {
  EXPECT_EQ(parsed("a || b && c"), "_||_(a, _&&_(b, c))");
  EXPECT_EQ(parsed("a ? b : c ? d : e"), "_?_:_(a, b, _?_:_(c, d, e))");
  EXPECT_EQ(parsed("1 + 2 * 3 - 4 % 5"), "_-_(_+_(1, _*_(2, 3)), _%_(4, 5))");
  EXPECT_EQ(parsed("a < b == c in d"), "@in(_==_(_<_(a, b), c), d)");
  EXPECT_EQ(parsed("!a.b[0].c(1)"), "!_(_[_](a.b, 0).c(1))");
  EXPECT_EQ(parsed("(1 + 2) * 3"), "_*_(_+_(1, 2), 3)");
}

TEST(CelParser, LongLogicalChainsAreBalanced) {
  EXPECT_EQ(parsed("a || b || c || d"), "_||_(_||_(a, b), _||_(c, d))");
  EXPECT_EQ(parsed("a && b && c"), "_&&_(a, _&&_(b, c))");
}

TEST(CelParser, UnaryOperatorsPairOffAndMinusBindsToNumbers) {
  EXPECT_EQ(parsed("!!a"), "a");
  EXPECT_EQ(parsed("!!!a"), "!_(a)");
  EXPECT_EQ(parsed("--a"), "a");
  EXPECT_EQ(parsed("-a"), "-_(a)");
  EXPECT_EQ(parsed("-9223372036854775808"), "-9223372036854775808");
  EXPECT_EQ(parsed("9223372036854775808"), "error: invalid int literal");
  EXPECT_EQ(parsed("-1u"), "-_(1u)");
  EXPECT_EQ(parsed("a - 1"), "_-_(a, 1)");
}

TEST(CelParser, LiteralsAndQualifiedNames) {
  EXPECT_EQ(parsed("[1, ?a, 'x']"), "[1, ?a, 'x']");
  EXPECT_EQ(parsed("{'k': 1, ?'o': b,}"), "{'k': 1, ?'o': b}");
  EXPECT_EQ(parsed("[]"), "[]");
  EXPECT_EQ(parsed("google.protobuf.Int32Value{value: 1}"),
            "google.protobuf.Int32Value{value: 1}");
  EXPECT_EQ(parsed(".a.b"), ".a.b");
  EXPECT_EQ(parsed("a.`b-c`"), "a.b-c");
  EXPECT_EQ(parsed("a.?b"), "_?._(a, 'b')");
  EXPECT_EQ(parsed("a[?0]"), "_[?_](a, 0)");
  EXPECT_EQ(parsed("null"), "null");
}

TEST(CelParser, ReservedWordsAreRefusedOnlyAsNames) {
  EXPECT_EQ(parsed("package"), "error: reserved identifier: package");
  EXPECT_EQ(parsed("if(1)"), "error: reserved identifier: if");
  EXPECT_EQ(parsed("{'package': 1}.package"), "{'package': 1}.package");
  EXPECT_EQ(parsed("a.as()"), "a.as()");
}

TEST(CelParser, MacrosExpandToComprehensions) {
  EXPECT_EQ(parsed("has(a.b)"), "has(a.b)");
  EXPECT_EQ(parsed("has(a)"), "error: invalid argument to has() macro");
  EXPECT_EQ(parsed("l.all(x, x > 0)"),
            "fold(x in l; @result = true; @not_strictly_false(@result); "
            "_&&_(@result, _>_(x, 0)); @result)");
  EXPECT_EQ(parsed("l.exists(x, p)"),
            "fold(x in l; @result = false; @not_strictly_false(!_(@result)); "
            "_||_(@result, p); @result)");
  EXPECT_EQ(parsed("l.exists_one(x, p)"),
            "fold(x in l; @result = 0; true; _?_:_(p, _+_(@result, 1), @result); "
            "_==_(@result, 1))");
  EXPECT_EQ(parsed("l.map(x, p, f)"),
            "fold(x in l; @result = []; true; _?_:_(p, _+_(@result, [f]), @result); @result)");
  EXPECT_EQ(parsed("l.filter(x, p)"),
            "fold(x in l; @result = []; true; _?_:_(p, _+_(@result, [x]), @result); @result)");
  EXPECT_EQ(parsed("m.all(k, v, p)"),
            "fold(k,v in m; @result = true; @not_strictly_false(@result); "
            "_&&_(@result, p); @result)");
  EXPECT_EQ(parsed("m.transformMap(k, v, f)"),
            "fold(k,v in m; @result = {}; true; cel.@mapInsert(@result, k, f); @result)");
  EXPECT_EQ(parsed("cel.bind(x, 1, x)"), "fold(#unused in []; x = 1; false; x; x)");
  EXPECT_EQ(parsed("o.optMap(x, x)"),
            "_?_:_(o.hasValue(), optional.of(fold(#unused in []; x = o.value(); false; x; x)), "
            "optional.none())");
  // Not a macro's shape: an ordinary call.
  EXPECT_EQ(parsed("l.all(x)"), "l.all(x)");
  EXPECT_EQ(parsed("l.map(1, x)"), "error: argument is not an identifier");
  EXPECT_EQ(parsed("l.all(@result, x)").substr(0, 6), "error:");
  EXPECT_EQ(parsed("m.all(k, k, p)"), "error: duplicate variable name: k");
}

TEST(CelParser, SyntaxErrorsAreDisplayedAsCelGoDoes) {
  EXPECT_EQ(displayed_errors("a + )"),
            "ERROR: <input>:1:5: Syntax error: mismatched input ')'\n | a + )\n | ....^");
  EXPECT_EQ(displayed_errors("a\n && 'x"),
            "ERROR: <input>:2:5: Syntax error: unterminated string literal\n |  && 'x\n | ....^");
  // A multi-byte character before the caret is stood for by a wide dot.
  EXPECT_EQ(displayed_errors("'é' + )"),
            "ERROR: <input>:1:7: Syntax error: mismatched input ')'\n | 'é' + )\n"
            " | .\xEF\xBC\x8E....^");
}

TEST(CelParser, HostileInputIsBounded) {
  ParseOptions options;
  options.max_recursion_depth = 32;
  const std::string nested = std::string(40, '(') + "1" + std::string(40, ')');
  EXPECT_NE(displayed_errors(nested, options).find("max recursion depth exceeded"),
            std::string::npos);
  std::string chain = "a";
  for (int i = 0; i < 40; ++i) chain += " + a";
  EXPECT_NE(displayed_errors(chain, options).find("max recursion depth exceeded"),
            std::string::npos);
  std::string members = "a";
  for (int i = 0; i < 40; ++i) members += ".b";
  EXPECT_NE(displayed_errors(members, options).find("max recursion depth exceeded"),
            std::string::npos);
  // A long `||` chain is flat in the grammar: not a depth problem.
  std::string ors = "a";
  for (int i = 0; i < 200; ++i) ors += " || a";
  EXPECT_TRUE(parse(ors, options).errors.empty());

  options = {};
  options.max_code_points = 10;
  EXPECT_EQ(parse("'ééééééééééé'", options).errors.at(0).message,
            "expression code point size exceeds limit: size: 13, limit 10");
  // The default depth stops a deeply nested expression well before the stack is at risk.
  const std::string deep = std::string(100000, '[');
  EXPECT_FALSE(parse(deep).errors.empty());
}

}  // namespace
}  // namespace kwatch::cel
