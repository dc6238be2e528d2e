// What kube-apiserver 1.34's resource.k8s.io strategies decide with more than the object:
// - admin access to devices (DRAAdminAccess, on by default): a claim or template whose request
//   asks for adminAccess, or a claim's /status write granting it in a new allocation, is
//   refused (422, a Forbidden cause at the field that asks) unless its namespace carries the
//   label `resource.kubernetes.io/admin-access: "true"`;
// - a ResourceSlice whose driver name has capital letters is stored with kube's warning.
// The first validating stage of every write, as kube checks these in the strategy, before any
// validating admission plugin.
//
// The namespace is read from storage. Thread-safety: immutable after construction; any thread.
#pragma once

#include "registry/admission.hpp"

#include <memory>

namespace kwatch::storage {
class Storage;
}
namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {

class DynamicResourceRules final : public ValidatingAdmission {
 public:
  DynamicResourceRules(std::shared_ptr<storage::Storage> storage,
                           const std::shared_ptr<kinds::Scheme>& scheme);
  std::string_view name() const override { return "DynamicResourceRules"; }
  bool handles(const AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const AdmissionAttributes& attributes, const boost::json::object* object) override;

 private:
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<const kinds::ResourceInfo> namespaces_;
};

}  // namespace kwatch::registry
