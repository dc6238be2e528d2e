#include "registry/dynamic_resource_rules.hpp"

#include "kinds/dynamic_resources.hpp"
#include "registry/store_rules.hpp"

namespace kwatch::registry {

namespace asio = boost::asio;
using namespace detail;  // the store's rules and the names they use (store_rules.hpp)

DynamicResourceRules::DynamicResourceRules(std::shared_ptr<storage::Storage> storage,
                                                   const std::shared_ptr<kinds::Scheme>& scheme)
    : storage_(std::move(storage)), namespaces_(scheme->find("", "v1", "namespaces")) {}

bool DynamicResourceRules::handles(const AdmissionAttributes& a) const {
  if (a.info.group != "resource.k8s.io") return false;
  if (a.info.kind == "ResourceSlice") {
    return a.operation == AdmissionOperation::create || a.operation == AdmissionOperation::update;
  }
  if (a.info.kind == "ResourceClaim") {
    return (a.operation == AdmissionOperation::create && a.subresource.empty()) ||
           (a.operation == AdmissionOperation::update && a.subresource == "status");
  }
  return a.info.kind == "ResourceClaimTemplate" && a.operation == AdmissionOperation::create;
}

asio::awaitable<std::optional<ApiError>> DynamicResourceRules::validate(
    const AdmissionAttributes& a, const json::object* object) {
  if (object == nullptr) co_return std::nullopt;
  if (a.info.kind == "ResourceSlice") {
    if (auto warning = kinds::resource_slice_driver_warning(*object)) add_warning(a, *warning);
    co_return std::nullopt;
  }
  const auto field = kinds::admin_access_field(*object, a.info.kind, a.old_object, a.subresource);
  if (!field) co_return std::nullopt;
  auto r = co_await storage_->get(namespaces_->key("", a.ns));
  if (!r) co_return from_storage(*namespaces_, a.ns, r.error());
  auto ns = ResourceStore::decode(*r);
  const json::object* meta = ns ? metadata_of(*ns) : nullptr;
  const json::value* labels = meta != nullptr ? meta->if_contains("labels") : nullptr;
  const json::value* label = labels != nullptr && labels->is_object()
                                 ? labels->get_object().if_contains(kinds::kAdminAccessNamespaceLabel)
                                 : nullptr;
  if (label != nullptr && label->is_string() && label->get_string() == "true") {
    co_return std::nullopt;
  }
  std::string name = a.name;
  if (name.empty()) {
    if (const json::object* m = metadata_of(*object)) {
      if (const json::value* n = m->if_contains("name"); n != nullptr && n->is_string()) {
        name = std::string(n->get_string());
      }
    }
  }
  co_return invalid(a.info, name,
                    {{"FieldValueForbidden", "Forbidden: " + kinds::admin_access_detail(), *field}});
}

}  // namespace kwatch::registry
