// StructuralSchema's lifetime, PatternCache and the unknown-field message; the passes live in
// schema_compile.cpp and schema_values.cpp.
#include "schema/structural_schema.hpp"

#include "schema/structural_schema_tree.hpp"

#include <re2/re2.h>

#include <algorithm>

namespace kwatch::schema {

using apimachinery::go_quote;
using detail::go_regexp_error;

// ---- public API ----

StructuralSchema::StructuralSchema(std::unique_ptr<detail::SchemaTree> tree)
    : tree_(std::move(tree)),
      has_cel_rules_(detail::has_cel_rules(*tree_)),
      has_quantities_(tree_->root != nullptr &&
                      detail::mark_quantities_below(const_cast<detail::SchemaNode&>(*tree_->root))) {}
StructuralSchema::~StructuralSchema() = default;

const PatternCache::Compiled& PatternCache::compile(const std::string& pattern) {
  auto found = compiled_.find(pattern);
  if (found != compiled_.end()) return found->second;
  Compiled out;
  std::shared_ptr<const re2::RE2> re;
  if (auto offered = offered_.find(pattern); offered != offered_.end()) {
    re = offered->second;
  } else {
    re2::RE2::Options options;
    options.set_log_errors(false);
    options.set_max_mem(max_mem_);
    re = std::make_shared<const re2::RE2>(pattern, options);
  }
  if (re->ok()) {
    const auto size = static_cast<std::size_t>(std::max(re->ProgramSize(), 0));
    if (size > budget_ - used_) {
      out.refused = "compiled patterns of this definition would need " +
                    std::to_string(used_ + size) + " RE2 instructions, over the budget of " +
                    std::to_string(budget_) + " (this pattern needs " + std::to_string(size) +
                    "; Unicode classes such as \\pL under large repetition counts are the usual "
                    "cause: use fewer distinct patterns, smaller counts or maxLength)";
    } else {
      used_ += size;
      out.regex = std::move(re);
    }
  } else if (re->error_code() == re2::RE2::ErrorPatternTooLarge) {
    // RE2's program (Go's regexp keeps a Unicode class as one instruction; RE2 expands it to
    // UTF-8 byte ranges) outgrew max_mem: not an invalid pattern, a too expensive one.
    out.refused = "pattern compiles to a program larger than " + std::to_string(max_mem_ >> 20) +
                  " MiB; Unicode classes such as \\pL under large repetition counts are the usual "
                  "cause: use smaller counts or maxLength";
  } else {
    out.error = go_regexp_error(*re, pattern);
  }
  return compiled_.emplace(pattern, std::move(out)).first->second;
}

void PatternCache::offer(const PatternCache& previous) {
  for (const auto& [pattern, compiled] : previous.compiled_) {
    if (compiled.regex) offered_.emplace(pattern, compiled.regex);
  }
}

std::string unknown_field_message(std::string_view path) {
  return "unknown field " + go_quote(path);
}

}  // namespace kwatch::schema
