#include "registry/namespace_lifecycle.hpp"

#include "registry/store_rules.hpp"

namespace kwatch::registry {

namespace asio = boost::asio;
using namespace detail;  // the store's rules and the names they use (store_rules.hpp)

namespace {

// As kube words it: `pods "web" is forbidden: unable to create new content in namespace team
// because it is being terminated`, with the NamespaceTerminating cause.
ApiError namespace_terminating(const ResourceInfo& info, const std::string& name,
                               const std::string& ns) {
  const std::string subject =
      name.empty() ? qualified_resource(info) : qualified_resource(info) + " \"" + name + "\"";
  ApiError e = detailed(info, Errc::forbidden, name,
                        subject + " is forbidden: unable to create new content in namespace " + ns +
                            " because it is being terminated");
  e.causes.push_back({"NamespaceTerminating", "namespace " + ns + " is being terminated",
                      "metadata.namespace"});
  return e;
}

}  // namespace

bool is_immortal_namespace(std::string_view name) {
  return name == "default" || name == "kube-system" || name == "kube-public" ||
         name == "kube-node-lease";
}

NamespaceLifecycle::NamespaceLifecycle(std::shared_ptr<storage::Storage> storage,
                                       const std::shared_ptr<kinds::Scheme>& scheme)
    : storage_(std::move(storage)), namespaces_(scheme->find("", "v1", "namespaces")) {}

bool NamespaceLifecycle::handles(const AdmissionAttributes& a) const {
  switch (a.operation) {
    case AdmissionOperation::create:
      return a.info.namespaced;
    case AdmissionOperation::remove:
      return &a.info == namespaces_.get() && is_immortal_namespace(a.name);
    case AdmissionOperation::update:
    case AdmissionOperation::connect:
      return false;
  }
  return false;
}

asio::awaitable<std::optional<ApiError>> NamespaceLifecycle::admit(const AdmissionAttributes& a,
                                                                   json::object*) {
  if (a.operation == AdmissionOperation::remove) {
    co_return detailed(a.info, Errc::forbidden, a.name,
                       "namespaces \"" + a.name + "\" is forbidden: this namespace may not be deleted");
  }
  auto r = co_await storage_->get(namespaces_->key("", a.ns));
  if (!r) co_return from_storage(*namespaces_, a.ns, r.error());
  auto namespace_obj = ResourceStore::decode(*r);
  if (namespace_obj && metadata_of(*namespace_obj) != nullptr &&
      metadata_of(*namespace_obj)->contains("deletionTimestamp")) {
    co_return namespace_terminating(a.info, a.name, a.ns);
  }
  co_return std::nullopt;
}

}  // namespace kwatch::registry
