// A read-only view of storage in which the objects of one custom resource read as one version
// converted by its definition's webhook: what the watch cache of a webhook-converted version
// (CacherRegistry) is filled from, as kube-apiserver gives each version of a custom resource a
// cacher of its own. Every object is converted once per version, whatever the number of its
// watchers: a list in one ConversionReview, each batch of watched events in one.
//
// A failed conversion (logged with the webhook's error) fails a list with `unavailable` and ends
// a watch stream with `internal`: the cache's reflector then re-lists with its back-off, as
// kube's does after an event it cannot decode (resuming would meet the same event again), so
// that only this version's cache waits for the webhook, or for the object it cannot convert to
// go; the storage version's cache and the other versions' go on. Writes are refused
// (`bad_request`): nothing writes through a view.
//
// Thread-safety: every member may be called from any thread; the converter is swapped under a
// lock when the definition's webhook changes.
#pragma once

#include "storage/storage.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kwatch::kinds {
class VersionConverter;
}

namespace kwatch::registry {

class ConvertingStorage final : public storage::Storage,
                                public std::enable_shared_from_this<ConvertingStorage> {
 public:
  ConvertingStorage(std::shared_ptr<storage::Storage> inner, std::string api_version,
                    std::shared_ptr<const kinds::VersionConverter> converter);

  void set_converter(std::shared_ptr<const kinds::VersionConverter> converter);
  // How many objects were sent for conversion, over the view's life.
  std::uint64_t converted_objects() const;

  boost::asio::awaitable<storage::Result<storage::KeyValue>> get(std::string key,
                                                        std::int64_t revision) override;
  boost::asio::awaitable<storage::Result<storage::ListResult>> list(storage::ListOptions options) override;
  boost::asio::awaitable<storage::Result<storage::TxnResult>> put_if(std::string key,
                                                            std::int64_t expected_mod_revision,
                                                            std::string value) override;
  boost::asio::awaitable<storage::Result<storage::TxnResult>> delete_if(
      std::string key, std::int64_t expected_mod_revision) override;
  boost::asio::awaitable<storage::Result<std::int64_t>> current_revision() override;
  boost::asio::awaitable<storage::Result<void>> compact(std::int64_t revision) override;
  boost::asio::awaitable<storage::Result<std::unique_ptr<storage::WatchStream>>> watch(
      std::string prefix, std::int64_t start_revision, storage::PrevKv prev_kv) override;

  // The most objects sent in one review.
  static constexpr std::size_t kMaxReviewObjects = 500;

  // The values of `kvs` converted in place (those that are not objects, or carry a read error,
  // are left as they are), kMaxReviewObjects per review.
  boost::asio::awaitable<storage::Result<void>> convert(std::vector<storage::KeyValue*> kvs, bool as_list);

 private:
  std::shared_ptr<const kinds::VersionConverter> converter() const;

  std::shared_ptr<storage::Storage> inner_;
  const std::string api_version_;
  mutable std::mutex mutex_;
  std::shared_ptr<const kinds::VersionConverter> converter_;
  std::atomic<std::uint64_t> converted_{0};
};

}  // namespace kwatch::registry
