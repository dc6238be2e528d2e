#include "cel/json_value.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "cel/checker.hpp"
#include "cel/libraries.hpp"
#include "cel/literal.hpp"
#include "cel/parser.hpp"
#include "cel/program.hpp"

namespace kwatch::cel {
namespace {

TypePtr object(std::map<std::string, TypePtr, std::less<>> fields, bool open = false) {
  auto t = std::make_shared<Type>();
  t->kind = TypeKind::object;
  t->name = "self";
  t->fields = std::move(fields);
  t->open = open;
  return t;
}

// `source` over `self` read in place from `json` as `type`.
std::string eval_view(std::string_view source, const std::string& json, const TypePtr& type) {
  const boost::json::value doc = boost::json::parse(json);
  JsonArena arena;
  const Value self = json_view(doc, type.get(), arena);
  Parsed p = parse(source);
  if (!p.errors.empty()) return "parse error: " + p.errors.front().message;
  Declarations decls;
  decls.variables = {"self"};
  decls.functions = &kubernetes_functions();
  const Value vars[] = {self};
  const EvalResult r = Program::compile(p.ast, decls).evaluate(vars);
  if (r.value.is_error()) return "error: " + std::string(r.value.as_text());
  return format_literal(r.value);
}

TEST(CelJsonValue, SchemaTypesDecideHowJsonReads) {
  auto int_or_string = std::make_shared<Type>();
  int_or_string->int_or_string = true;
  const TypePtr t = object({{"ratio", types::float64()},
                            {"count", types::int64()},
                            {"port", int_or_string},
                            {"at", types::timestamp()},
                            {"every", types::duration()},
                            {"data", types::bytes()},
                            {"tags", types::list(types::string())},
                            {"labels", types::map(types::string(), types::string())}});
  const std::string doc = R"({"ratio": 1, "count": 2, "port": "http", "at": "2024-05-01T10:00:00Z",
      "every": "1m30s", "data": "aGk=", "tags": ["a", "b"], "labels": {"app": "x"}})";
  EXPECT_EQ(eval_view("self.ratio", doc, t), "1.0");
  EXPECT_EQ(eval_view("self.count + 1", doc, t), "3");
  EXPECT_EQ(eval_view("self.port", doc, t), "\"http\"");
  EXPECT_EQ(eval_view("self.at.getHours()", doc, t), "10");
  EXPECT_EQ(eval_view("self.every", doc, t), "duration(\"90s\")");
  EXPECT_EQ(eval_view("self.data", doc, t), "b\"hi\"");
  EXPECT_EQ(eval_view("self.tags.map(x, x + '!')", doc, t), "[\"a!\", \"b!\"]");
  EXPECT_EQ(eval_view("self.labels.all(k, self.labels[k] == 'x')", doc, t), "true");
  EXPECT_EQ(eval_view("has(self.count) && !has(self.ratio)", R"({"count": 1})", t), "true");
  EXPECT_EQ(eval_view("has(self.count)", R"({"count": 1})", t), "true");
}

TEST(CelJsonValue, FieldsAreFoundByTheirCelNames) {
  TypePtr t = object({{"x__dash__y", types::int64()}});
  std::const_pointer_cast<Type>(t)->json_names["x__dash__y"] = "x-y";
  EXPECT_EQ(eval_view("self.x__dash__y", R"({"x-y": 5})", t), "5");
  // A closed object has only its declared fields; an open one has the rest as dyn.
  EXPECT_EQ(eval_view("self.other", R"({"other": 1})", t), "error: no such key: other");
  EXPECT_EQ(eval_view("self.other", R"({"other": 1})", object({}, true)), "1");
}

TEST(CelJsonValue, ViewsCompareWithOwnedValues) {
  const TypePtr t = object({{"tags", types::list(types::string())}});
  EXPECT_EQ(eval_view("self.tags == ['a', 'b'] && 'b' in self.tags", R"({"tags": ["a", "b"]})", t),
            "true");
  EXPECT_EQ(eval_view("self == {'tags': ['a']}", R"({"tags": ["a"]})", t), "true");
  EXPECT_EQ(eval_view("self.tags + ['c']", R"({"tags": ["a"]})", t), "[\"a\", \"c\"]");
}

// A program compiled with the checker's types selects schema fields by their JSON names (the
// predicate kernel in the JSON itself); one compiled without types looks every name up. Both
// must give the same value, the same error and the same cost, also when several programs read
// one view in turn (as a node's rules do, sharing the views of list elements).
TEST(CelJsonValue, TypedSelectionsAgreeWithUntypedOnes) {
  auto member = object({{"v", types::string()}, {"n", types::int64()}});
  TypePtr item = object({{"kind", types::string()},
                         {"count", types::int64()},
                         {"a", member},
                         {"b", member},
                         {"x__dash__y", types::string()},
                         {"items", types::list(member)}});
  std::const_pointer_cast<Type>(item)->json_names["x__dash__y"] = "x-y";
  const char* sources[] = {
      "self.kind == 'A'",
      "self.kind != 'A'",
      "!(has(self.a) && self.kind != 'A')",
      "!(!has(self.b) && self.kind == 'B')",
      "has(self.a.v) && self.a.v.startsWith('x')",
      "self.a.n > 2",
      "self.count == 1",
      "self.x__dash__y == 'z'",
      "self.items.filter(i, i.v == 'p').size() <= 1",
      "self.items.exists_one(i, has(i.n) && i.n == 3)",
      "self.items.all(i, i.v != '')",
      "has(self.kind) ? self.kind.size() : -1",
  };
  const char* docs[] = {
      R"({"kind": "A", "a": {"v": "xy", "n": 3}, "count": 1, "x-y": "z"})",
      R"({"kind": "B", "b": {"v": "q"}, "items": [{"v": "p", "n": 3}, {"v": "p"}]})",
      R"({"kind": "A", "a": null, "items": [{"v": ""}, {"n": 3}]})",
      R"({"count": 1.0, "a": {}})",
      R"({})",
  };
  std::vector<Parsed> parsed;
  std::vector<Checked> checked;
  std::vector<Program> typed;
  std::vector<Program> untyped;
  for (const char* source : sources) {
    parsed.push_back(parse(source));
    ASSERT_TRUE(parsed.back().errors.empty()) << source;
    checked.push_back(check(parsed.back().ast, {"self"}, {item}, kubernetes_functions()));
    ASSERT_TRUE(checked.back().errors.empty()) << source;
  }
  for (std::size_t i = 0; i < parsed.size(); ++i) {
    Declarations decls{{"self"}, &kubernetes_functions()};
    untyped.push_back(Program::compile(parsed[i].ast, decls));
    decls.node_types = &checked[i].types;
    typed.push_back(Program::compile(parsed[i].ast, decls));
  }
  const auto outcome = [](const EvalResult& r) {
    return (r.value.is_error() ? "error: " + std::string(r.value.as_text())
                               : format_literal(r.value)) +
           " cost " + std::to_string(r.cost);
  };
  for (const char* text : docs) {
    const boost::json::value doc = boost::json::parse(text);
    JsonArena typed_arena;
    JsonArena untyped_arena;
    // One view for every program, in turn, twice: the second round reads the element views
    // the first made.
    const Value typed_self[] = {json_view(doc, item.get(), typed_arena)};
    const Value untyped_self[] = {json_view(doc, item.get(), untyped_arena)};
    for (int round = 0; round < 2; ++round) {
      for (std::size_t i = 0; i < parsed.size(); ++i) {
        EXPECT_EQ(outcome(typed[i].evaluate(typed_self)), outcome(untyped[i].evaluate(untyped_self)))
            << sources[i] << " over " << text << " (round " << round << ")";
      }
    }
  }
}

}  // namespace
}  // namespace kwatch::cel
