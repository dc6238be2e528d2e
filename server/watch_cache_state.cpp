#include "server/watch_cache_state.hpp"

#include "storage/storage.hpp"
#include "watch/cacher.hpp"

namespace kwatch::server {

std::optional<storage::KeyValue> WatchCacheState::lookup(const registry::ResourceInfo& info,
                                                         const std::string& key) const {
  auto cacher = cachers_->find(info);
  if (!cacher || !cacher->ready()) return std::nullopt;
  watch::ObjectPtr object = cacher->get(key);
  if (!object) return std::nullopt;
  storage::KeyValue kv;
  kv.key = key;
  kv.value = object->json;
  kv.mod_revision = object->resource_version;
  return kv;
}

}  // namespace kwatch::server
