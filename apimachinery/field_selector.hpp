// Field selectors with the syntax and semantics of k8s.io/apimachinery/pkg/fields.
//
// Grammar: terms separated by unescaped commas, each `field=value`, `field==value` or
// `field!=value` (the first operator in the term splits it; fields have no escapes). In values,
// `\\`, `\,` and `\=` are escapes; any other backslash sequence, or a bare `,`/`=`, is an error.
// A missing field compares as the empty string. Which fields exist is the caller's business: it
// checks `fields()` against the resource's supported set and answers 400
// "field label not supported: <field>" itself.
//
// Value type; immutable after parsing; safe to share between threads for reading.
#pragma once

#include "apimachinery/api_error.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

struct FieldRequirement {
  std::string field;
  bool equals = true;  // `=`/`==` when true, `!=` when false
  std::string value;   // unescaped
};

// Looks a field up on the object being filtered; nullopt when the object does not have it.
using FieldLookup = std::function<std::optional<std::string>(std::string_view field)>;

class FieldSelector {
 public:
  FieldSelector() = default;  // matches everything
  explicit FieldSelector(std::vector<FieldRequirement> requirements)
      : requirements_(std::move(requirements)) {}

  bool matches(const FieldLookup& field_value) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<FieldRequirement>& requirements() const { return requirements_; }
  // Distinct field names used, in order of first use.
  std::vector<std::string> fields() const;
  // The value `field` must equal (`f=v` or `f==v`), as RequiresExactMatch.
  std::optional<std::string> exact_value(std::string_view field) const;
  // Canonical form with escaped values, as fields.Selector.String().
  std::string to_string() const;

 private:
  std::vector<FieldRequirement> requirements_;
};

// Parses a `fieldSelector` query value; errors are Errc::bad_request with the Kubernetes text.
ApiResult<FieldSelector> parse_field_selector(std::string_view text);

// fields.EscapeValue: escapes `\`, `,` and `=`.
std::string escape_field_value(std::string_view value);

}  // namespace kwatch::apimachinery
