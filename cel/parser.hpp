// CEL's grammar (cel-spec doc/langdef.md; precedence and macros as cel-go parses them) into an
// Ast: `?:` < `||` < `&&` < relations (`== != < <= > >= in`, left-associative) < `+ -` <
// `* / %` < unary `!`/`-` < member, index and call. Macros expand while parsing: `has`, `all`,
// `exists`, `exists_one`/`existsOne`, `map`, `filter`, the two-variable forms (`all(k, v, p)`,
// `transformList`, `transformMap`, `transformMapEntry`), `cel.bind`, and the optional library's
// `optMap`/`optFlatMap`. The optional syntax (`a.?b`, `a[?i]`, `[?e]`, `{?k: v}`) is on.
//
// Hostile input is bounded: the source's size in code points, the nesting depth (as cel-go counts
// it: a long chain `a + b + ...` nests as deeply as parentheses do) and the number of errors
// reported. Pure and reentrant.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cel/ast.hpp"

namespace kwatch::cel {

struct ParseOptions {
  std::size_t max_code_points = 100'000;
  std::size_t max_recursion_depth = 250;
};

// One problem with a source, at a byte offset ("Syntax error: ..." or a macro's complaint).
struct SourceIssue {
  std::size_t offset = 0;
  std::string message;
};

struct Parsed {
  Ast ast;                          // meaningful only without errors
  std::vector<SourceIssue> errors;  // in source order
};

Parsed parse(std::string_view source, const ParseOptions& options = {});

// Issues as cel-go displays them, one block per issue joined by newlines:
//   ERROR: <input>:1:5: Syntax error: mismatched input ...
//    | a + )
//    | ....^
std::string format_issues(std::string_view source, const std::vector<SourceIssue>& issues);

}  // namespace kwatch::cel
