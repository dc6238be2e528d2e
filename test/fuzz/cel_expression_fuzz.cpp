// Fuzzes CEL end to end: parse, check against kube's libraries, compile and evaluate under a
// small cost budget, with `self` bound to a small JSON document. Properties: no crash or
// sanitizer report; every error lies within the source; an evaluation ends within its budget
// (it returns, and spends at most the limit plus the one charge that crossed it); a result
// prints as a literal.
#include <boost/json.hpp>

#include "cel/checker.hpp"
#include "cel/json_value.hpp"
#include "cel/libraries.hpp"
#include "cel/literal.hpp"
#include "cel/parser.hpp"
#include "cel/program.hpp"
#include "test/fuzz/fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kwatch::cel;
  const std::string_view source = kwatch::fuzz::as_view(data, size);
  ParseOptions options;
  options.max_code_points = 4096;
  const Parsed parsed = parse(source, options);
  for (const auto& e : parsed.errors) {
    if (e.offset > source.size()) kwatch::fuzz::fail("a parse error's offset is past the source");
  }
  (void)format_issues(source, parsed.errors);
  if (!parsed.errors.empty()) return 0;

  static const Value self = value_from_json(boost::json::parse(
      R"({"spec": {"replicas": 3, "name": "a", "ports": [{"port": 80}], "labels": {"k": "v"}}})"));
  const std::vector<std::string> names{"self"};
  const Checked checked = check(parsed.ast, names, {}, kubernetes_functions());
  for (const auto& e : checked.errors) {
    if (e.offset > source.size()) kwatch::fuzz::fail("a check error's offset is past the source");
  }
  Declarations decls;
  decls.variables = names;
  decls.functions = &kubernetes_functions();
  const Program program = Program::compile(parsed.ast, decls);
  constexpr std::uint64_t kLimit = 20000;
  const Value vars[] = {self};
  const EvalResult result = program.evaluate(vars, kLimit);
  if (result.cost > kLimit && !result.value.is_error()) {
    kwatch::fuzz::fail("an evaluation spent past its limit and still returned a value");
  }
  (void)format_literal(result.value);
  // The predicate kernel, when the expression has one, answers what the evaluator answers:
  // the same value or error and the same cost, within the limit and past it.
  if (program.has_predicate_kernel()) {
    Declarations plain_decls = decls;
    plain_decls.predicate_kernel = false;
    const Program plain = Program::compile(parsed.ast, plain_decls);
    const auto outcome = [](const EvalResult& r) {
      return (r.value.is_error() ? "error: " + std::string(r.value.as_text())
                                 : format_literal(r.value)) +
             " cost " + std::to_string(r.cost);
    };
    for (const std::uint64_t limit : {kLimit, result.cost / 2}) {
      if (outcome(program.evaluate(vars, limit)) != outcome(plain.evaluate(vars, limit))) {
        kwatch::fuzz::fail("the predicate kernel and the evaluator disagree");
      }
    }
  }
  return 0;
}
