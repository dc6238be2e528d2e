// Label selectors with the syntax and semantics of k8s.io/apimachinery/pkg/labels.
//
// Grammar (comma = AND, blanks around tokens ignored):
//   key=value  key==value  key!=value  key in (a,b)  key notin (a,b)  key  !key  key>5  key<5
// `in`/`notin` with `()` means the single empty value, as in Kubernetes. Keys must be qualified
// names, values label values. Requirements are kept sorted by key (the Kubernetes order).
//
// Value type; immutable after parsing; safe to share between threads for reading.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::apimachinery {

enum class LabelOperator {
  equals,          // `=`
  double_equals,   // `==`
  not_equals,      // `!=`
  in,              // `in (...)`
  not_in,          // `notin (...)`
  exists,          // `key`
  does_not_exist,  // `!key`
  greater_than,    // `key>N` (selection.GreaterThan, "gt")
  less_than,       // `key<N` (selection.LessThan, "lt")
};

struct LabelRequirement {
  std::string key;
  LabelOperator op = LabelOperator::exists;
  std::vector<std::string> values;  // sorted, unique; one element for =, ==, !=, >, <

  // `value` is the label's value, or nullopt when the label is absent.
  bool matches(std::optional<std::string_view> value) const;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything
  explicit LabelSelector(std::vector<LabelRequirement> requirements);

  // `labels` is `metadata.labels` (nullptr = no labels). Non-string values count as absent.
  bool matches(const boost::json::object* labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<LabelRequirement>& requirements() const { return requirements_; }

  // The single value `key` must have (`key=v`, `key==v`, `key in (v)`), as RequiresExactMatch.
  std::optional<std::string> exact_value(std::string_view key) const;

  // Canonical form, as labels.Selector.String(): `a=b,c in (x,y),!d,e>5`.
  std::string to_string() const;

 private:
  std::vector<LabelRequirement> requirements_;
};

// metav1.LabelSelectorAsSelector: a LabelSelector object as written in objects (`matchLabels`
// as `key=value`, `matchExpressions` with In, NotIn, Exists, DoesNotExist). No requirements
// means everything. Errc::invalid for an unknown operator, a bad key or value, or a shape that
// is not a label selector, with kube's text (`"Foo" is not a valid label selector operator`).
ApiResult<LabelSelector> label_selector_from_json(const boost::json::object& selector);

// labels.SelectorFromSet: every entry of a plain label map (an RC's selector) as `key=value`.
// Entries whose value is not a string are skipped (the schema refuses them).
LabelSelector label_selector_from_map(const boost::json::object& labels);

// Parses a `labelSelector` query value. Errors are Errc::bad_request with the Kubernetes text,
// e.g. "unable to parse requirement: found '', expected: identifier".
ApiResult<LabelSelector> parse_label_selector(std::string_view text);

}  // namespace kwatch::apimachinery
