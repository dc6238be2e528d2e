// The watch caches as the registry's `StateCache`: updates start from the cached copy of an
// object instead of reading storage first, which saves etcd a Range per update.
//
// Thread-safety: `lookup` is safe from any thread (the registry's and the cacher's `get` are).
#pragma once

#include "registry/resource_store.hpp"
#include "registry/cacher_registry.hpp"

namespace kwatch::registry {

class WatchCacheState final : public registry::StateCache {
 public:
  explicit WatchCacheState(std::shared_ptr<CacherRegistry> cachers) : cachers_(std::move(cachers)) {}

  std::optional<State> lookup(const kinds::ResourceInfo& info,
                              const std::string& key) const override;

 private:
  std::shared_ptr<CacherRegistry> cachers_;
};

}  // namespace kwatch::registry
