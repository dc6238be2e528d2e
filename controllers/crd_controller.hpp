// Serves CustomResourceDefinitions, as kube-apiserver's apiextensions controllers do: for every
// definition in storage (read through its watch cache) the resources it defines are registered
// in the scheme, each with a watch cache, and its NamesAccepted and Established conditions are
// set; a definition being deleted gets the Terminating condition, its objects are deleted, then
// its cleanup finalizer is removed once storage holds none of them and it goes, and its resources
// with it. A definition already being deleted when the controller starts (a restart, a replica
// started meanwhile) is served as terminating (reads, updates and deletes, no creates, never
// established again) and its objects are deleted the same way, found from its stored spec.
//
// Every replica runs one over the same storage, so a definition created through one replica is
// served by all; the status writes are compare-and-swap and idempotent, so replicas agree.
//
// Ownership, strand and cancellation: those of its Reconciler (controllers/reconciler.hpp); the
// scheme, the store and the cacher registry it changes are thread-safe.
#pragma once

#include "controllers/reconciler.hpp"
#include "kinds/version_converter.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::schema {
class PatternCache;
}
namespace kwatch::kinds {
class Scheme;
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class ResourceStore;
}  // namespace kwatch::registry
namespace kwatch::storage {
class Storage;
}

namespace kwatch::registry {
class CacherRegistry;
}  // namespace kwatch::registry

namespace kwatch::controllers {

class CrdController : public Reconciler {
 public:
  CrdController(std::shared_ptr<kinds::Scheme> scheme,
                std::shared_ptr<registry::ResourceStore> store,
                std::shared_ptr<registry::CacherRegistry> cachers,
                std::shared_ptr<storage::Storage> storage, std::string storage_prefix,
                kinds::ConverterFactory converters = nullptr);

 private:
  // Brings the scheme, the caches and every definition's status in line with the definitions.
  boost::asio::awaitable<void> reconcile_once() override;
  boost::asio::awaitable<void> serve(boost::json::object crd);
  // Serves the definition being deleted that this process has not served yet as terminating.
  void serve_terminating(const boost::json::object& crd);
  void register_resources(const boost::json::object& crd,
                          std::vector<kinds::ResourceInfo> infos, bool terminating);
  // Deletes the objects of a definition being deleted, then its cleanup finalizer once storage
  // holds none of them.
  boost::asio::awaitable<void> finalize(boost::json::object crd);
  boost::asio::awaitable<void> write_status(boost::json::object crd);

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<storage::Storage> storage_;
  std::string storage_prefix_;
  // Makes the converter of a definition whose strategy is Webhook (null: its conversions fail).
  kinds::ConverterFactory converters_;
  std::shared_ptr<const kinds::ResourceInfo> crd_info_;
  // Definition name -> the spec its registered resources were made from (for a definition being
  // deleted: the spec it was last looked at with, served or not).
  std::map<std::string, std::string> applied_;
  // Definition name -> the patterns its registered resources were compiled with.
  std::map<std::string, std::shared_ptr<schema::PatternCache>> patterns_;
};

}  // namespace kwatch::controllers
