#include "flowcontrol/config_keeper.hpp"

#include "apimachinery/json_members.hpp"
#include "base/task_failure.hpp"
#include "base/timestamps.hpp"
#include "flowcontrol/bootstrap.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/config_follower.hpp"
#include "registry/list_query.hpp"
#include "registry/resource_store.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iterator>
#include <string_view>
#include <unordered_map>

namespace kwatch::flowcontrol {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr const char* kGroup = "flowcontrol.apiserver.k8s.io";
// kube's field managers for the two halves of its APF configuration controller.
constexpr const char* kConsumer = "api-priority-and-fairness-config-consumer-v1";
constexpr const char* kProducer = "api-priority-and-fairness-config-producer-v1";
// The two resources followed, levels first (the dispatcher takes them in this order).
constexpr const char* kLevels = "prioritylevelconfigurations";
constexpr const char* kSchemas = "flowschemas";
constexpr const char* kResources[] = {kLevels, kSchemas};

// How long start-up waits for a cache to hold the keeper's own writes.
constexpr std::chrono::seconds kWrittenWait{10};

std::string name_of(const json::object& o) {
  return apimachinery::string_at(apimachinery::object_member(o, "metadata"), "name");
}

std::int64_t resource_version_of(const json::object& o) {
  return registry::parse_resource_version(
             apimachinery::string_at(apimachinery::object_member(o, "metadata"), "resourceVersion"))
      .value_or(0);
}

// Whether the cache holds each of `written` that is of `resource`: at its version or a later
// one, or gone when it was deleted.
bool holds(const watch::Cacher& cacher, const kinds::ResourceInfo& info, std::size_t resource,
           const std::vector<ConfigKeeper::Written>& written) {
  const auto listed = cacher.list(info.key_prefix(), "", 0, nullptr);
  std::unordered_map<std::string_view, std::int64_t> cached;
  for (const auto& o : listed.objects) cached.emplace(o->name, o->resource_version);
  for (const auto& w : written) {
    if (w.resource != resource) continue;
    const auto it = cached.find(w.name);
    const bool there = it != cached.end();
    if (w.resource_version == 0 ? there : !there || it->second < w.resource_version) return false;
  }
  return true;
}

// The cache caught up with storage: proven by storage's revision where its progress is ordered
// with events, else by the keeper's own writes being in it (within kWrittenWait).
asio::awaitable<bool> caught_up(watch::Cacher& cacher, const kinds::ResourceInfo& info,
                                std::size_t resource,
                                const std::vector<ConfigKeeper::Written>& written) {
  auto fresh = co_await cacher.wait_until_consistent();
  if (fresh) co_return true;
  if (cacher.progress_ordered()) co_return false;
  asio::steady_timer retry(co_await asio::this_coro::executor);
  const auto deadline = std::chrono::steady_clock::now() + kWrittenWait;
  while (!holds(cacher, info, resource, written)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn("the {} cache does not show the priority and fairness bootstrap writes after "
                   "{} s: ready without them",
                   info.resource, kWrittenWait.count());
      co_return false;
    }
    retry.expires_after(std::chrono::milliseconds(10));
    co_await retry.async_wait(asio::use_awaitable);
  }
  co_return true;
}

}  // namespace

ConfigKeeper::ConfigKeeper(std::shared_ptr<PriorityAndFairness> dispatcher,
                           std::shared_ptr<kinds::Scheme> scheme,
                           std::shared_ptr<registry::CacherRegistry> cachers,
                           std::shared_ptr<registry::ResourceStore> store)
    : dispatcher_(std::move(dispatcher)),
      scheme_(std::move(scheme)),
      cachers_(std::move(cachers)),
      store_(std::move(store)) {}

void ConfigKeeper::start(asio::any_io_executor executor) {
  executor_ = asio::make_strand(executor);
  auto self = shared_from_this();
  registry::follow_configurations(
      executor_,
      {scheme_, cachers_, kGroup, "v1", {kLevels, kSchemas}},
      [self] { return !self->stopped_; },
      [self](std::vector<std::vector<json::object>>& lists) { self->reconfigure(lists); },
      "priority and fairness configuration task");
  asio::co_spawn(
      executor_,
      [self]() -> asio::awaitable<void> {
        asio::steady_timer tick(co_await asio::this_coro::executor);
        while (!self->stopped_) {
          tick.expires_after(std::chrono::minutes(1));
          co_await tick.async_wait(asio::use_awaitable);
          if (!self->stopped_) co_await self->ensure_bootstrap();
        }
      },
      [](std::exception_ptr e) { base::log_task_failure(e, "priority and fairness bootstrap task"); });
}

void ConfigKeeper::reconfigure(std::vector<std::vector<json::object>>& lists) {
  auto conditions = dispatcher_->configure(lists[0], lists[1]);
  if (conditions.empty() || !store_) return;
  asio::co_spawn(executor_, write_conditions(std::move(conditions), std::move(lists[1])),
                 [](std::exception_ptr e, std::vector<Written>) {
                   base::log_task_failure(e, "FlowSchema status");
                 });
}

// Each FlowSchema's Dangling condition, replaced in its status conditions (the others kept).
asio::awaitable<std::vector<ConfigKeeper::Written>> ConfigKeeper::write_conditions(
    std::vector<DanglingCondition> conditions, std::vector<json::object> schemas) {
  std::vector<Written> written;
  auto info = scheme_->find(kGroup, "v1", kSchemas);
  if (!info) co_return written;
  const std::string now = base::now_rfc3339();
  for (const auto& c : conditions) {
    json::array list;
    for (const auto& s : schemas) {
      if (name_of(s) != c.flow_schema) continue;
      if (const json::array* old = apimachinery::array_member(
              apimachinery::object_member(s, "status"), "conditions")) {
        for (const auto& o : *old) {
          if (o.is_object() &&
              apimachinery::string_member(o.get_object(), "type") != "Dangling") {
            list.push_back(o);
          }
        }
      }
    }
    list.push_back(json::object{{"type", "Dangling"},
                                {"status", c.status},
                                {"lastTransitionTime", now},
                                {"reason", c.reason},
                                {"message", c.message}});
    registry::WriteQuery query;
    query.subresource = "status";
    query.field_manager = kConsumer;
    json::value patch = json::object{{"status", json::object{{"conditions", std::move(list)}}}};
    std::string scope;
    std::string name = c.flow_schema;
    auto r = co_await store_->patch(*info, std::move(scope), std::move(name),
                                    registry::PatchType::merge, std::move(patch), std::move(query));
    if (r) {
      written.push_back({1, c.flow_schema, resource_version_of(*r)});
    } else if (r.error().code != base::Errc::not_found) {
      spdlog::warn("cannot write the Dangling condition of FlowSchema {}: {}", c.flow_schema,
                   r.error().message);
    }
  }
  co_return written;
}

asio::awaitable<void> ConfigKeeper::settle() {
  std::vector<Written> written = std::move(written_);
  written_.clear();
  for (int round = 0; round < 10 && !stopped_; ++round) {
    for (std::size_t i = 0; i < std::size(kResources); ++i) {
      auto info = scheme_->find(kGroup, "v1", kResources[i]);
      auto cacher = info && cachers_ ? cachers_->find(*info) : nullptr;
      if (!cacher) co_return;
      const bool fresh = co_await caught_up(*cacher, *info, i, written);
      if (!fresh) co_return;
    }
    auto lists = registry::list_configurations(
        {scheme_, cachers_, kGroup, "v1", {kLevels, kSchemas}});
    if (!lists) co_return;
    auto conditions = dispatcher_->configure((*lists)[0], (*lists)[1]);
    if (conditions.empty() || !store_) co_return;
    written = co_await write_conditions(std::move(conditions), std::move((*lists)[1]));
  }
}

asio::awaitable<bool> ConfigKeeper::ensure_bootstrap() {
  if (!store_) co_return false;
  const auto& b = bootstrap_objects();
  bool ok = true;
  written_.clear();
  for (std::size_t i = 0; i < std::size(kResources); ++i) {
    const char* resource = kResources[i];
    auto info = scheme_->find(kGroup, "v1", resource);
    if (!info) co_return false;
    auto listed = registry::list_configurations({scheme_, cachers_, kGroup, "v1", {resource}});
    if (!listed) co_return false;
    const bool levels = std::string_view(resource) == kLevels;
    EnsurePlan plan = plan_bootstrap((*listed)[0], levels ? b.mandatory_levels : b.mandatory_schemas,
                                     levels ? b.suggested_levels : b.suggested_schemas);
    for (auto& object : plan.create) {
      registry::WriteQuery query;
      query.field_manager = kProducer;
      std::string scope;
      auto r = co_await store_->create(*info, std::move(scope), std::move(object), std::move(query));
      if (r) written_.push_back({i, name_of(*r), resource_version_of(*r)});
      if (!r && r.error().code != base::Errc::already_exists) {
        spdlog::warn("cannot create a bootstrap {}: {}", info->kind, r.error().message);
        ok = false;
      }
    }
    for (auto& object : plan.update) {
      registry::WriteQuery query;
      query.field_manager = kProducer;
      std::string scope;
      std::string name = name_of(object);
      auto r = co_await store_->update(*info, std::move(scope), std::move(name), std::move(object),
                                       std::move(query));
      if (r) written_.push_back({i, name_of(*r), resource_version_of(*r)});
      // A conflict means someone changed it meanwhile: the next round looks again.
      if (!r && r.error().code != base::Errc::conflict) {
        spdlog::warn("cannot update a bootstrap {}: {}", info->kind, r.error().message);
        ok = false;
      }
    }
    for (auto& name : plan.remove) {
      std::string scope;
      registry::DeleteQuery del;
      std::string removed = name;
      auto r = co_await store_->remove(*info, std::move(scope), std::move(name), std::move(del));
      if (r || r.error().code == base::Errc::not_found) written_.push_back({i, removed, 0});
      if (!r && r.error().code != base::Errc::not_found) {
        spdlog::warn("cannot delete an unwanted {}: {}", info->kind, r.error().message);
        ok = false;
      }
    }
  }
  co_return ok;
}

}  // namespace kwatch::flowcontrol
