// Keeps the ConfigMap `kube-root-ca.crt` in every namespace, as kube-controller-manager's
// root-ca-cert-publisher does: `data: {ca.crt: <bundle>}` with kube's `kubernetes.io/description`
// annotation, so that in-cluster clients (and tools that read it to trust the API server) find
// the CA bundle that verifies kwatch's serving certificate.
//
// A namespace is looked at when it appears, when it changes while Active, and when its
// kube-root-ca.crt is changed or deleted: the ConfigMap is created where it is missing (not in a
// namespace being deleted), and written back where its data differs from the bundle or the
// description is gone. A ConfigMap write elsewhere costs a name comparison. Writes are creates or
// updates on the version read from the cache, so replicas converge; a failed sync is tried again
// every second. Every replica runs one (kube's runs in the one elected kube-controller-manager):
// replicas that publish different bundles would write over each other without end, so a
// ConfigMap that changes again within 10 s of this publisher's write is written back after a
// hold that doubles each time (1 s to 5 min), with one warning.
//
// Ownership: shared; the running tasks hold it. Strand: the followers and every sync run on one
// strand. Cancellation: `stop()` ends the tasks at their next wait.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace kwatch::kinds {
class Scheme;
struct ResourceInfo;
}  // namespace kwatch::kinds

namespace kwatch::registry {
class CacherRegistry;
class ResourceStore;
}  // namespace kwatch::registry

namespace kwatch::controllers {

inline constexpr std::string_view kRootCaConfigMapName = "kube-root-ca.crt";

class RootCaPublisher : public std::enable_shared_from_this<RootCaPublisher> {
 public:
  // `bundle`: the PEM text published as `ca.crt`.
  RootCaPublisher(const kinds::Scheme& scheme, std::shared_ptr<registry::ResourceStore> store,
                  std::shared_ptr<registry::CacherRegistry> cachers, std::string bundle);

  void start(boost::asio::any_io_executor executor);
  void stop() { stopped_ = true; }

  // How long a write back to namespace `ns` is held now (for tests); call on its strand.
  std::chrono::seconds hold_of(const std::string& ns) const;

 private:
  boost::asio::awaitable<void> follow_namespaces();
  boost::asio::awaitable<void> follow_config_maps();
  boost::asio::awaitable<void> tick();
  // Syncs every pending namespace; one drain runs at a time.
  boost::asio::awaitable<void> drain();
  // False when the namespace must be looked at again later.
  boost::asio::awaitable<bool> sync(const std::string& ns);
  void enqueue_all_namespaces();

  std::shared_ptr<const kinds::ResourceInfo> namespaces_;
  std::shared_ptr<const kinds::ResourceInfo> config_maps_;
  std::shared_ptr<registry::ResourceStore> store_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::string bundle_;
  std::set<std::string> pending_;
  std::set<std::string> retry_;
  // Per namespace: this publisher's last write back, and how long the next one is held.
  struct Rewrites {
    std::chrono::steady_clock::time_point last{};
    std::chrono::seconds hold{0};
    bool warned = false;
  };
  std::map<std::string, Rewrites> rewrites_;
  bool draining_ = false;
  std::atomic<bool> stopped_{false};
};

}  // namespace kwatch::controllers
