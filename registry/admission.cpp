#include "registry/admission.hpp"

#include <utility>

namespace kwatch::registry {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;

std::string_view operation_name(AdmissionOperation operation) {
  switch (operation) {
    case AdmissionOperation::create:
      return "CREATE";
    case AdmissionOperation::update:
      return "UPDATE";
    case AdmissionOperation::remove:
      return "DELETE";
    case AdmissionOperation::connect:
      return "CONNECT";
  }
  return "";
}

void add_warning(const AdmissionAttributes& attributes, std::string warning) {
  if (attributes.warnings == nullptr) return;
  for (const std::string& w : *attributes.warnings) {
    if (w == warning) return;
  }
  attributes.warnings->push_back(std::move(warning));
}

void add_audit_annotation(const AdmissionAttributes& attributes, std::string key,
                          std::string value) {
  if (attributes.audit_annotations == nullptr) return;
  for (auto& [k, v] : *attributes.audit_annotations) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  attributes.audit_annotations->emplace_back(std::move(key), std::move(value));
}

void Admission::add(std::shared_ptr<MutatingAdmission> plugin) {
  mutating_.push_back(std::move(plugin));
}

void Admission::add(std::shared_ptr<ValidatingAdmission> plugin) {
  validating_.push_back(std::move(plugin));
}

bool Admission::mutates(const AdmissionAttributes& attributes) const {
  for (const auto& plugin : mutating_) {
    if (plugin->handles(attributes)) return true;
  }
  return false;
}

bool Admission::may_change(const AdmissionAttributes& attributes) const {
  for (const auto& plugin : mutating_) {
    if (plugin->changes_objects() && plugin->handles(attributes)) return true;
  }
  return false;
}

bool Admission::validates(const AdmissionAttributes& attributes) const {
  for (const auto& plugin : validating_) {
    if (plugin->handles(attributes)) return true;
  }
  return false;
}

asio::awaitable<std::optional<ApiError>> Admission::mutate(const AdmissionAttributes& attributes,
                                                           json::object* object) const {
  for (const auto& plugin : mutating_) {
    if (!plugin->handles(attributes)) continue;
    if (auto refused = co_await plugin->admit(attributes, object)) co_return refused;
  }
  co_return std::nullopt;
}

asio::awaitable<std::optional<ApiError>> Admission::validate(
    const AdmissionAttributes& attributes, const json::object* object) const {
  for (const auto& plugin : validating_) {
    if (!plugin->handles(attributes)) continue;
    if (auto refused = co_await plugin->validate(attributes, object)) co_return refused;
  }
  co_return std::nullopt;
}

std::vector<std::string> Admission::names() const {
  std::vector<std::string> out;
  for (const auto& plugin : mutating_) out.emplace_back(plugin->name());
  for (const auto& plugin : validating_) out.emplace_back(plugin->name());
  return out;
}

}  // namespace kwatch::registry
