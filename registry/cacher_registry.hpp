// The watch caches of every served resource, one per storage prefix (every version of a resource
// shares its objects, so it shares one cacher). Built-in resources get theirs at start-up, custom
// resources when their definition is established, and lose it when it is deleted. A version of a
// custom resource that its definition's webhook converts has a cache of its own besides, filled
// through a ConvertingStorage view, so that its objects are converted once for all its watchers
// and a failing webhook stalls that cache only; all() and on_added do not include those.
//
// Ownership: shared by the API handler, the state cache and the CRD controller. Thread-safety:
// every member may be called from any thread; lookups take a shared lock and return shared
// pointers, so a cacher removed meanwhile lives on until its last request is done.
#pragma once

#include "storage/storage.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

namespace kwatch::kinds {
struct ResourceInfo;
}  // namespace kwatch::kinds
namespace kwatch::watch {
class Cacher;
struct CacherOptions;
}  // namespace kwatch::watch

namespace kwatch::registry {
class ConvertingStorage;
}

namespace kwatch::registry {

// What every new cacher gets (kube-apiserver's --default-watch-cache-size, --watch-cache-sizes).
struct CacherDefaults {
  std::size_t default_capacity = 100;
  std::map<std::string, std::size_t> capacities;  // by resource ("pods") or resource.group
  std::chrono::milliseconds bookmark_interval{60'000};
};

class CacherRegistry {
 public:
  // Called with each cacher a registry creates (for its metrics), outside the registry's lock.
  using AddedFn = std::function<void(const std::string& resource,
                                     const std::shared_ptr<watch::Cacher>& cacher)>;

  CacherRegistry(boost::asio::any_io_executor executor, std::shared_ptr<storage::Storage> storage,
                 CacherDefaults defaults);
  ~CacherRegistry();

  // The cacher of `info`'s objects, created and started when there is none yet.
  std::shared_ptr<watch::Cacher> ensure(const kinds::ResourceInfo& info);
  // The cacher of `info`'s objects (of its version's own cache when the webhook converts it),
  // or null.
  std::shared_ptr<watch::Cacher> find(const kinds::ResourceInfo& info) const;
  // How many objects the own cache of a webhook-converted version sent to the webhook so far.
  std::uint64_t converted_objects(const kinds::ResourceInfo& info) const;
  // The cacher under a key prefix (ResourceInfo::key_prefix()), or null.
  std::shared_ptr<watch::Cacher> find_prefix(const std::string& key_prefix) const;
  // Stops and forgets the cachers under `info`'s key prefix, if any (those of its versions too).
  void remove(const kinds::ResourceInfo& info);
  // Every cacher, with the resource it was made for.
  std::vector<std::pair<std::string, std::shared_ptr<watch::Cacher>>> all() const;
  void stop_all();
  // Graceful shutdown: every cacher, and any made later, ends its clients' watches and refuses
  // new ones (watch::Cacher::end_client_watches).
  void end_client_watches();
  // Before that: every cacher catches up with storage's current revision, all at once and
  // within `budget` (a cache that cannot is left where it is), so that the last bookmarks carry
  // it.
  boost::asio::awaitable<void> catch_up_with_storage(
      std::chrono::milliseconds budget = std::chrono::seconds(2));

  void on_added(AddedFn fn);

 private:
  struct Converted {
    std::shared_ptr<watch::Cacher> cacher;
    std::shared_ptr<ConvertingStorage> view;
  };
  watch::CacherOptions options_for(const kinds::ResourceInfo& info) const;
  std::vector<std::shared_ptr<watch::Cacher>> every_cacher() const;

  boost::asio::any_io_executor executor_;
  std::shared_ptr<storage::Storage> storage_;
  CacherDefaults defaults_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::pair<std::string, std::shared_ptr<watch::Cacher>>> by_prefix_;
  // (key prefix, version) -> the own cache of a webhook-converted version.
  std::map<std::pair<std::string, std::string>, Converted> converted_;
  std::vector<AddedFn> added_;
  bool clients_closed_ = false;  // under mutex_
};

}  // namespace kwatch::registry
