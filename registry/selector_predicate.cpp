#include "registry/selector_predicate.hpp"

#include <boost/json/object.hpp>

namespace kwatch::registry {

bool SelectorPredicate::matches(const watch::CachedObject& object) const {
  for (const auto& requirement : labels_.requirements()) {
    const std::string_view* value = object.label(requirement.key);
    if (!requirement.matches(value ? std::optional<std::string_view>(*value) : std::nullopt)) {
      return false;
    }
  }
  if (fields_.empty()) return true;
  return fields_.matches([&](std::string_view field) -> std::optional<std::string> {
    if (const std::string_view* v = object.field(field)) return std::string(*v);
    return std::nullopt;
  });
}

std::optional<std::pair<std::string, std::string>> SelectorPredicate::exact_label() const {
  for (const auto& r : labels_.requirements()) {
    const bool equality = r.op == apimachinery::LabelOperator::equals ||
                          r.op == apimachinery::LabelOperator::double_equals ||
                          (r.op == apimachinery::LabelOperator::in && r.values.size() == 1);
    if (equality && r.values.size() == 1) return std::make_pair(r.key, r.values.front());
  }
  return std::nullopt;
}

watch::FieldsFn fields_of(const kinds::ResourceInfo& info) {
  // Copies only what field_value reads: the cacher outlives the description it was made with (a
  // definition's spec update keeps the cache), and a whole copy would keep that description's
  // schema alive with it.
  kinds::ResourceInfo fields;
  fields.selectable_fields = info.selectable_fields;
  fields.hooks.field_value = info.hooks.field_value;
  return [fields = std::move(fields)](const boost::json::object& object) {
    watch::Attributes out;
    for (const auto& field : fields.selectable_fields) {
      if (auto v = fields.field_value(object, field)) out.emplace_back(field, std::move(*v));
    }
    return out;
  };
}

}  // namespace kwatch::registry
