// CEL's type checker (cel-spec langdef "Type Checking", as cel-go's checker words its errors):
// every node gets a type from the declarations (variables with their types, the registry's
// overload signatures), calls resolve to the overloads their argument types allow, and
// mistakes are reported where they are, before anything runs:
//
//   undeclared reference to 'x' (in container '')
//   found no matching overload for '_+_' applied to '(int, string)'
//   undefined field 'replica'
//   type 'int' does not support field selection
//   expected type 'bool' but found 'int'
//
// dyn matches everything, so an expression over schemaless data checks as far as its types are
// known. Pure; a Checked result is immutable.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cel/ast.hpp"
#include "cel/functions.hpp"
#include "cel/parser.hpp"
#include "cel/types.hpp"

namespace kwatch::cel {

struct CheckOptions {
  // Kube's environment refuses list and map literals whose elements differ in type
  // (`[1, 'a']`), as cel-go's HomogeneousAggregateLiterals does.
  bool homogeneous_literals = false;
  // The types message literals (`Object{spec: Object.spec{...}}`, `JSONPatch{op: 'add'}`) may
  // name: the type of a name, or null for an unknown one. Without it every message literal is
  // an undeclared reference (kwatch has no protobuf message types).
  std::function<TypePtr(std::string_view name)> message_type;
  // Kube's literal validators (cel-go's ASTValidators, kube 1.29+), run when the expression
  // checks: a constant pattern of `matches` that RE2 refuses, or a constant argument of
  // `duration()` or `timestamp()` that does not parse, is an error at the argument ("invalid
  // matches argument", "invalid duration argument", "invalid timestamp argument").
  bool validate_literals = false;
};

struct Checked {
  std::vector<TypePtr> types;  // by NodeId
  TypePtr result;
  std::vector<SourceIssue> errors;
};

// `variables[i]` has type `variable_types[i]` (dyn when the list is shorter).
Checked check(const Ast& ast, const std::vector<std::string>& variables,
              const std::vector<TypePtr>& variable_types, const FunctionRegistry& functions,
              const CheckOptions& options = {});

}  // namespace kwatch::cel
