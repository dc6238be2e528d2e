#include "registry/watch_cache_state.hpp"

#include "storage/storage.hpp"
#include "watch/cacher.hpp"

namespace kwatch::registry {

std::optional<registry::StateCache::State> WatchCacheState::lookup(
    const kinds::ResourceInfo& info, const std::string& key) const {
  auto cacher = cachers_->find(info);
  if (!cacher || !cacher->ready()) return std::nullopt;
  watch::ObjectPtr object = cacher->get(key);
  if (!object) return std::nullopt;
  // The text is shared with the cached object, not copied.
  return State{std::shared_ptr<const std::string_view>(object, &object->json),
               object->resource_version};
}

}  // namespace kwatch::registry
