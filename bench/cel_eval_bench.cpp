// What one CEL evaluation costs, apart from any schema walk: expressions of the shapes CRD rules
// use, checked against a schema object type and run with Program::run on a view of a JSON
// object, as schema/cel_rules.cpp runs them. In-process Google Benchmark (not a ctest test).
//
//   build/bench/cel_eval_bench [benchmark flags...]
//
//   Eval/true            the fixed cost of running a program (and of making the object's view)
//   Eval/union_guard     `!(has(self.alpha) && self.kind != 'Alpha')`: a union's member check
//   Eval/select_equals   `self.kind == 'Alpha'`
//   Eval/starts_with     `self.kind.startsWith('Al')`: a library call
//   Eval/filter_size     `self.items.filter(f, f.kind == 'Alpha').size() <= 10` over 64 items
//   Eval/exists_one      `self.items.exists_one(f, has(f.alpha) && f.kind == 'Golf')`
#include <boost/json.hpp>
#include <benchmark/benchmark.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "cel/checker.hpp"
#include "cel/json_value.hpp"
#include "cel/libraries.hpp"
#include "cel/parser.hpp"
#include "cel/program.hpp"
#include "cel/types.hpp"

namespace {

namespace json = boost::json;
namespace cel = kwatch::cel;

constexpr const char* kMembers[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
                                    "golf"};

// {kind: string, alpha..golf: {v: string}, items: list of the same shape without items}
cel::TypePtr item_type() {
  auto member = std::make_shared<cel::Type>();
  member->kind = cel::TypeKind::object;
  member->name = "member";
  member->fields["v"] = cel::types::string();
  auto item = std::make_shared<cel::Type>();
  item->kind = cel::TypeKind::object;
  item->name = "item";
  item->fields["kind"] = cel::types::string();
  for (const char* m : kMembers) item->fields[m] = member;
  return item;
}

cel::TypePtr self_type() {
  auto t = std::make_shared<cel::Type>(*item_type());
  t->name = "self";
  auto items = cel::types::list(item_type());
  t->fields["items"] = items;
  return t;
}

json::object item(int i) {
  std::string m = kMembers[i % 7];
  std::string kind = m;
  kind[0] = static_cast<char>(kind[0] - 'a' + 'A');
  return json::object{{"kind", kind}, {m, json::object{{"v", "value-" + std::to_string(i)}}}};
}

json::value document() {
  json::object self = item(0);
  json::array items;
  for (int i = 0; i < 64; ++i) items.push_back(item(i));
  self["items"] = std::move(items);
  return self;
}

struct Compiled {
  cel::Program program;
  cel::TypePtr type;
};

Compiled compile(const std::string& source) {
  const cel::Parsed parsed = cel::parse(source);
  if (!parsed.errors.empty()) throw std::runtime_error("parse: " + source);
  cel::TypePtr type = self_type();
  cel::CheckOptions options;
  options.homogeneous_literals = true;
  const cel::Checked checked =
      cel::check(parsed.ast, {"self"}, {type}, cel::kubernetes_functions(), options);
  if (!checked.errors.empty()) throw std::runtime_error("check: " + source);
  cel::Declarations decls{{"self"}, &cel::kubernetes_functions()};
  decls.node_types = &checked.types;
  return {cel::Program::compile(parsed.ast, decls), std::move(type)};
}

void run(benchmark::State& state, const std::string& source) {
  const Compiled c = compile(source);
  const json::value doc = document();
  cel::JsonArena arena;
  {
    const cel::Value vars[1] = {cel::json_view(doc, c.type.get(), arena)};
    const cel::EvalResult r = c.program.run(vars, UINT64_MAX);
    if (!r.value.is(cel::ValueKind::boolean) || !r.value.as_bool()) {
      throw std::runtime_error("not true: " + source);
    }
  }
  arena.clear();
  // As a validation runs it: a view of the object, the program, the views dropped.
  for (auto _ : state) {
    {
      const cel::Value vars[1] = {cel::json_view(doc, c.type.get(), arena)};
      cel::EvalResult r = c.program.run(vars, UINT64_MAX);
      benchmark::DoNotOptimize(r);
    }
    arena.clear();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::pair<const char*, const char*> cases[] = {
      {"true", "true"},
      {"union_guard", "!(has(self.bravo) && self.kind != 'Bravo')"},
      {"select_equals", "self.kind == 'Alpha'"},
      {"starts_with", "self.kind.startsWith('Al')"},
      {"filter_size", "self.items.filter(f, f.kind == 'Alpha').size() <= 10"},
      {"exists_one", "self.items.exists_one(f, has(f.alpha) && f.kind == 'Golf') || true"},
  };
  for (const auto& [name, source] : cases) {
    benchmark::RegisterBenchmark((std::string("Eval/") + name).c_str(),
                                 [source = std::string(source)](benchmark::State& state) {
                                   run(state, source);
                                 });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
