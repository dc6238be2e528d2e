#include "auth/rbac_policy_source.hpp"

#include "apimachinery/stored_json.hpp"
#include "base/task_failure.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "storage/storage.hpp"
#include "watch/cache_follower.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>

#include <algorithm>
#include <limits>
#include <vector>

namespace kwatch::auth {

using base::log_task_failure;
using registry::CacherRegistry;
namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::ApiResult;
using base::Errc;

namespace {

constexpr const char* kRbacResources[] = {"roles", "clusterroles", "rolebindings",
                                          "clusterrolebindings"};

}  // namespace

RbacPolicySource::RbacPolicySource(std::shared_ptr<kinds::Scheme> scheme,
                                   std::shared_ptr<CacherRegistry> cachers,
                                   std::shared_ptr<storage::Storage> storage)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)), storage_(std::move(storage)) {}

void RbacPolicySource::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  asio::co_spawn(strand, [self = shared_from_this()] { return self->run(); }, [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  for (const char* resource : kRbacResources) {
    asio::co_spawn(strand, [self = shared_from_this(), resource] { return self->watch_one(resource); },
                   [](std::exception_ptr e) { log_task_failure(e, "RBAC policy task"); });
  }
}

asio::awaitable<void> RbacPolicySource::watch_one(std::string resource) {
  // Any change marks the policy for the next rebuild.
  auto info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
  auto cacher = cachers_->find(*info);
  if (!cacher) co_return;
  co_await watch::mark_changes(std::move(cacher), info->key_prefix(), dirty_,
                               [this] { return !stopped_; });
}

asio::awaitable<void> RbacPolicySource::run() {
  // Changes come in bursts (kubectl apply of many bindings): rebuild at most every 100 ms.
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (!stopped_) {
    if (dirty_.exchange(false)) rebuild();
    tick.expires_after(std::chrono::milliseconds(100));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

std::shared_ptr<const RbacPolicy> RbacPolicySource::rebuild() {
  std::vector<json::object> lists[4];
  std::int64_t covered = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < 4; ++i) {
    auto info =
        scheme_->find("rbac.authorization.k8s.io", "v1", kRbacResources[i]);
    auto cacher = cachers_->find(*info);
    if (!cacher || !cacher->ready()) {
      dirty_ = true;  // try again at the next tick
      return nullptr;
    }
    // Read before the list: the list holds at least everything up to it.
    covered = std::min(covered, cacher->resource_version());
    for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(object->json);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  auto policy = RbacPolicy::build(lists[0], lists[1], lists[2], lists[3]);
  std::lock_guard lock(publish_mutex_);
  if (covered >= covered_.load() || !std::atomic_load(&policy_)) {
    std::atomic_store(&policy_, policy);
    covered_ = covered;
  }
  return policy;
}

asio::awaitable<ApiResult<std::shared_ptr<const RbacPolicy>>>
RbacPolicySource::consistent() {
  auto unavailable = [](std::string why) {
    ApiError e(Errc::unavailable, std::move(why));
    e.retry_after_seconds = 1;
    return e;
  };
  auto policy = current();
  if (!policy) co_return unavailable("the RBAC policy is not loaded yet");
  auto revision = co_await storage_->current_revision();
  if (!revision) co_return unavailable("cannot read the RBAC policy: " + revision.error().message());
  if (covered_.load() >= *revision) co_return policy;
  bool caught_up = true;
  for (const char* resource : kRbacResources) {
    auto info = scheme_->find("rbac.authorization.k8s.io", "v1", resource);
    auto cacher = cachers_->find(*info);
    // Storage whose progress may run ahead of its events (etcd < 3.4.25) cannot prove a quiet
    // cache current: such a cache is not waited for.
    if (!cacher || !cacher->progress_ordered()) {
      caught_up = false;
      break;
    }
    auto fresh = co_await cacher->wait_until_fresh(*revision);
    if (!fresh) {
      caught_up = false;
      break;
    }
  }
  if (caught_up) {
    if (auto rebuilt = rebuild()) co_return rebuilt;
  }
  co_return co_await build_from_storage(*revision);
}

asio::awaitable<ApiResult<std::shared_ptr<const RbacPolicy>>>
RbacPolicySource::build_from_storage(std::int64_t revision) {
  std::vector<json::object> lists[4];
  for (int i = 0; i < 4; ++i) {
    auto info =
        scheme_->find("rbac.authorization.k8s.io", "v1", kRbacResources[i]);
    storage::ListOptions options;
    options.prefix = info->key_prefix();
    options.revision = revision;
    auto listed = co_await storage_->list(std::move(options));
    if (!listed) {
      ApiError e(Errc::unavailable, "cannot read the RBAC policy: " + listed.error().message());
      e.retry_after_seconds = 1;
      co_return e;
    }
    for (const auto& kv : listed->kvs) {
      if (!kv.read_error.empty()) continue;  // what no provider opens grants nothing
      auto v = apimachinery::parse_json(kv.value);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  co_return RbacPolicy::build(lists[0], lists[1], lists[2], lists[3]);
}

}  // namespace kwatch::auth
