#include "registry/cacher_registry.hpp"

#include "kinds/scheme.hpp"
#include "registry/converting_storage.hpp"
#include "registry/selector_predicate.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <mutex>

namespace kwatch::registry {

CacherRegistry::CacherRegistry(boost::asio::any_io_executor executor,
                               std::shared_ptr<storage::Storage> storage, CacherDefaults defaults)
    : executor_(std::move(executor)), storage_(std::move(storage)), defaults_(std::move(defaults)) {}

CacherRegistry::~CacherRegistry() = default;

watch::CacherOptions CacherRegistry::options_for(const kinds::ResourceInfo& info) const {
  watch::CacherOptions co;
  co.resource = info.resource;
  co.prefix = info.key_prefix();
  co.kind = info.kind;
  co.api_version = info.api_version();
  co.trigger_field = info.trigger_field;
  co.lower_capacity = defaults_.default_capacity;
  co.upper_capacity = std::max<std::size_t>(100 * 1024, co.lower_capacity);
  const std::string qualified = info.group.empty() ? info.resource : info.resource + "." + info.group;
  for (const auto& name : {info.resource, qualified}) {
    if (auto it = defaults_.capacities.find(name); it != defaults_.capacities.end()) {
      co.lower_capacity = co.upper_capacity = it->second;
    }
  }
  co.bookmark_interval = defaults_.bookmark_interval;
  co.fields = fields_of(info);
  return co;
}

std::shared_ptr<watch::Cacher> CacherRegistry::ensure(const kinds::ResourceInfo& info) {
  const std::string prefix = info.key_prefix();
  std::shared_ptr<watch::Cacher> created;
  std::shared_ptr<watch::Cacher> dropped;
  std::vector<AddedFn> added;
  {
    std::unique_lock lock(mutex_);
    const auto version_key = std::make_pair(prefix, info.version);
    if (info.converted_by_webhook()) {
      if (auto it = converted_.find(version_key); it != converted_.end()) {
        it->second.view->set_converter(info.converter);  // the definition's webhook may change
        return it->second.cacher;
      }
      auto view = std::make_shared<ConvertingStorage>(storage_, info.api_version(), info.converter);
      auto cacher = std::make_shared<watch::Cacher>(executor_, view, options_for(info));
      cacher->start();
      if (clients_closed_) cacher->end_client_watches();
      converted_.emplace(version_key, Converted{cacher, view});
      return cacher;
    }
    if (auto it = converted_.find(version_key); it != converted_.end()) {
      // The definition converts this version without a webhook now.
      dropped = std::move(it->second.cacher);
      converted_.erase(it);
    }
    if (auto it = by_prefix_.find(prefix); it != by_prefix_.end()) {
      created = it->second.second;
    } else {
      created = std::make_shared<watch::Cacher>(executor_, storage_, options_for(info));
      created->start();
      if (clients_closed_) created->end_client_watches();
      by_prefix_.emplace(prefix, std::make_pair(info.resource, created));
      added = added_;
    }
  }
  if (dropped) dropped->stop();
  for (const auto& fn : added) fn(info.resource, created);
  return created;
}

std::shared_ptr<watch::Cacher> CacherRegistry::find(const kinds::ResourceInfo& info) const {
  if (info.converted_by_webhook()) {
    std::shared_lock lock(mutex_);
    auto it = converted_.find(std::make_pair(info.key_prefix(), info.version));
    return it == converted_.end() ? nullptr : it->second.cacher;
  }
  return find_prefix(info.key_prefix());
}

std::shared_ptr<watch::Cacher> CacherRegistry::find_prefix(const std::string& key_prefix) const {
  std::shared_lock lock(mutex_);
  auto it = by_prefix_.find(key_prefix);
  return it == by_prefix_.end() ? nullptr : it->second.second;
}

std::uint64_t CacherRegistry::converted_objects(const kinds::ResourceInfo& info) const {
  std::shared_lock lock(mutex_);
  auto it = converted_.find(std::make_pair(info.key_prefix(), info.version));
  return it == converted_.end() ? 0 : it->second.view->converted_objects();
}

void CacherRegistry::remove(const kinds::ResourceInfo& info) {
  std::vector<std::shared_ptr<watch::Cacher>> gone;
  {
    std::unique_lock lock(mutex_);
    const std::string prefix = info.key_prefix();
    if (auto it = by_prefix_.find(prefix); it != by_prefix_.end()) {
      gone.push_back(std::move(it->second.second));
      by_prefix_.erase(it);
    }
    for (auto it = converted_.lower_bound(std::make_pair(prefix, std::string()));
         it != converted_.end() && it->first.first == prefix;) {
      gone.push_back(std::move(it->second.cacher));
      it = converted_.erase(it);
    }
  }
  for (auto& cacher : gone) cacher->stop();
}

std::vector<std::pair<std::string, std::shared_ptr<watch::Cacher>>> CacherRegistry::all() const {
  std::shared_lock lock(mutex_);
  std::vector<std::pair<std::string, std::shared_ptr<watch::Cacher>>> out;
  for (const auto& [prefix, entry] : by_prefix_) out.push_back(entry);
  return out;
}

std::vector<std::shared_ptr<watch::Cacher>> CacherRegistry::every_cacher() const {
  std::shared_lock lock(mutex_);
  std::vector<std::shared_ptr<watch::Cacher>> out;
  for (const auto& [prefix, entry] : by_prefix_) out.push_back(entry.second);
  for (const auto& [key, entry] : converted_) out.push_back(entry.cacher);
  return out;
}

void CacherRegistry::stop_all() {
  for (auto& cacher : every_cacher()) cacher->stop();
}

void CacherRegistry::end_client_watches() {
  {
    std::unique_lock lock(mutex_);
    clients_closed_ = true;
  }
  for (auto& cacher : every_cacher()) cacher->end_client_watches();
}

boost::asio::awaitable<void> CacherRegistry::catch_up_with_storage(
    std::chrono::milliseconds budget) {
  namespace asio = boost::asio;
  auto current = co_await storage_->current_revision();
  if (!current) co_return;
  // Every cache asks for progress at once; the waits overlap, within one budget.
  struct Pending {
    explicit Pending(asio::any_io_executor executor) : done(executor) {}
    std::atomic<std::size_t> left{1};
    asio::steady_timer done;
  };
  auto strand = asio::make_strand(co_await asio::this_coro::executor);
  // On the strand from here on, so that no completion runs between the last count and the wait.
  co_await asio::post(asio::bind_executor(strand, asio::use_awaitable));
  auto pending = std::make_shared<Pending>(strand);
  pending->done.expires_after(budget);
  auto finished = [pending, strand] {
    if (--pending->left == 0) asio::post(strand, [pending] { pending->done.cancel(); });
  };
  for (auto& [resource, cacher] : all()) {
    if (!cacher->ready()) continue;
    ++pending->left;
    asio::co_spawn(strand, cacher->wait_until_fresh(*current),
                   [finished](std::exception_ptr, base::Result<void>) { finished(); });
  }
  if (--pending->left == 0) co_return;  // the count held for this loop
  co_await pending->done.async_wait(asio::as_tuple(asio::use_awaitable));
}

void CacherRegistry::on_added(AddedFn fn) {
  std::unique_lock lock(mutex_);
  added_.push_back(std::move(fn));
}

}  // namespace kwatch::registry
