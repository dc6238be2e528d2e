// NamespaceLifecycle, the first mutating admission plugin of every kwatch server (as it is
// kube-apiserver's first): nothing is created in a namespace that does not exist (404) or is
// being deleted (403, cause NamespaceTerminating), and the namespaces kwatch itself relies on
// (default, kube-system, kube-public, kube-node-lease) may not be deleted (403). Other writes
// and cluster-scoped objects pass.
//
// The namespace is read from storage, so a namespace created just before is always found.
// Thread-safety: immutable after construction; any thread.
#pragma once

#include "registry/admission.hpp"

#include <memory>
#include <string_view>

namespace kwatch::storage {
class Storage;
}
namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {

// The namespaces that cannot be deleted.
bool is_immortal_namespace(std::string_view name);

class NamespaceLifecycle final : public MutatingAdmission {
 public:
  NamespaceLifecycle(std::shared_ptr<storage::Storage> storage,
                     const std::shared_ptr<kinds::Scheme>& scheme);

  std::string_view name() const override { return "NamespaceLifecycle"; }
  bool handles(const AdmissionAttributes& attributes) const override;
  bool changes_objects() const override { return false; }
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> admit(
      const AdmissionAttributes& attributes, boost::json::object* object) override;

 private:
  std::shared_ptr<storage::Storage> storage_;
  std::shared_ptr<const kinds::ResourceInfo> namespaces_;
};

}  // namespace kwatch::registry
