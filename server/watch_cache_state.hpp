// The watch caches as the registry's `StateCache`: updates start from the cached copy of an
// object instead of reading storage first, which saves etcd a Range per update.
//
// Thread-safety: immutable after construction; `lookup` is safe from any thread (the cacher's
// `get` is).
#pragma once

#include "registry/resource_store.hpp"
#include "server/api_handler.hpp"

namespace kwatch::server {

class WatchCacheState final : public registry::StateCache {
 public:
  explicit WatchCacheState(CacherMap cachers) : cachers_(std::move(cachers)) {}

  std::optional<storage::KeyValue> lookup(const registry::ResourceInfo& info,
                                          const std::string& key) const override;

 private:
  CacherMap cachers_;
};

}  // namespace kwatch::server
