// The watch cache's Predicate for Kubernetes label and field selectors.
// Immutable after construction; thread-safe.
#pragma once

#include "apimachinery/field_selector.hpp"
#include "apimachinery/label_selector.hpp"
#include "kinds/scheme.hpp"
#include "watch/object_codec.hpp"
#include "watch/watch_types.hpp"

namespace kwatch::registry {

class SelectorPredicate final : public watch::Predicate {
 public:
  SelectorPredicate(apimachinery::LabelSelector labels, apimachinery::FieldSelector fields)
      : labels_(std::move(labels)), fields_(std::move(fields)) {}

  bool matches(const watch::CachedObject& object) const override;
  bool empty() const override { return labels_.empty() && fields_.empty(); }
  std::optional<std::string> exact_field(std::string_view field) const override {
    return fields_.exact_value(field);
  }
  std::optional<std::pair<std::string, std::string>> exact_label() const override;

 private:
  apimachinery::LabelSelector labels_;
  apimachinery::FieldSelector fields_;
};

// The watch cache's view of a resource's selectable fields.
watch::FieldsFn fields_of(const kinds::ResourceInfo& info);

}  // namespace kwatch::registry
