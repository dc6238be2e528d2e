// kwatch-cel: evaluates one CEL expression with kube's CEL environment, so that a rule or a
// policy's expression can be tried without a cluster.
//
//   kwatch-cel [--no-check] [--var NAME=JSON]... EXPR
//
// Prints the value as a CEL literal on one line and exits 0; a parse or check error exits 2 and
// an evaluation error 1, with the message on stderr.
#include <boost/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cel/checker.hpp"
#include "cel/functions.hpp"
#include "cel/json_value.hpp"
#include "cel/libraries.hpp"
#include "cel/literal.hpp"
#include "cel/parser.hpp"
#include "cel/program.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kwatch-cel [--no-check] [--var NAME=JSON]... EXPR\n"
    "  Evaluates the CEL expression EXPR and prints its value as a CEL literal.\n"
    "  --var NAME=JSON  declares the variable NAME (type dyn) with the JSON value\n"
    "  --no-check       skips type checking\n"
    "Exit status: 0 success, 1 evaluation error, 2 parse or check error or bad usage.\n";

int usage_error(const std::string& message) {
  std::cerr << "kwatch-cel: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kwatch::cel;
  bool type_check = true;
  std::vector<std::string> names;
  std::vector<Value> values;
  std::string expression;
  bool have_expression = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--no-check") {
      type_check = false;
    } else if (arg == "--var" || arg.starts_with("--var=")) {
      std::string spec;
      if (arg == "--var") {
        if (++i >= argc) return usage_error("--var needs NAME=JSON");
        spec = argv[i];
      } else {
        spec = std::string(arg.substr(6));
      }
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0) return usage_error("--var needs NAME=JSON");
      boost::system::error_code ec;
      const boost::json::value json = boost::json::parse(spec.substr(eq + 1), ec);
      if (ec) return usage_error("--var " + spec.substr(0, eq) + ": invalid JSON: " + ec.message());
      names.push_back(spec.substr(0, eq));
      values.push_back(value_from_json(json));
    } else if (arg == "--") {
      if (i + 1 < argc) {
        expression = argv[++i];
        have_expression = true;
      }
    } else if (arg.starts_with("--")) {
      return usage_error("unknown option " + std::string(arg));
    } else if (have_expression) {
      return usage_error("one expression only");
    } else {
      expression = std::string(arg);
      have_expression = true;
    }
  }
  if (!have_expression) return usage_error("no expression");

  Parsed parsed = parse(expression);
  if (!parsed.errors.empty()) {
    std::cerr << format_issues(expression, parsed.errors) << "\n";
    return 2;
  }
  const FunctionRegistry& functions = kubernetes_functions();
  Declarations declarations;
  declarations.variables = names;
  declarations.functions = &functions;
  if (type_check) {
    const Checked checked = check(parsed.ast, names, {}, functions);
    if (!checked.errors.empty()) {
      std::cerr << format_issues(expression, checked.errors) << "\n";
      return 2;
    }
  }
  const Program program = Program::compile(parsed.ast, declarations);
  const EvalResult result = program.evaluate(values);
  if (result.value.is_error()) {
    std::cerr << result.value.as_text() << "\n";
    return 1;
  }
  std::cout << format_literal(result.value) << "\n";
  return 0;
}
