#include "controllers/root_ca_publisher.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/task_failure.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "watch/cache_follower.hpp"
#include "watch/cacher.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

constexpr std::string_view kDescriptionAnnotation = "kubernetes.io/description";
constexpr std::string_view kDescription =
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters.";
// A write back this soon after the last one means the ConfigMap is being fought over.
constexpr auto kQuiet = std::chrono::seconds(10);
constexpr auto kLongestHold = std::chrono::seconds(300);
// The field manager of kube-controller-manager's writes.
constexpr std::string_view kFieldManager = "kube-controller-manager";

std::optional<json::object> parsed(const watch::ObjectPtr& object) {
  auto v = apimachinery::parse_json(object->json);
  if (!v || !v->is_object()) return std::nullopt;
  return std::move(v->get_object());
}

}  // namespace

RootCaPublisher::RootCaPublisher(const kinds::Scheme& scheme,
                                 std::shared_ptr<registry::ResourceStore> store,
                                 std::shared_ptr<registry::CacherRegistry> cachers,
                                 std::string bundle)
    : namespaces_(scheme.find("", "v1", "namespaces")),
      config_maps_(scheme.find("", "v1", "configmaps")),
      store_(std::move(store)),
      cachers_(std::move(cachers)),
      bundle_(std::move(bundle)) {}

void RootCaPublisher::start(asio::any_io_executor executor) {
  auto strand = asio::make_strand(executor);
  auto failed = [](std::exception_ptr e) { base::log_task_failure(e, "root CA publisher"); };
  asio::co_spawn(strand, [self = shared_from_this()] { return self->follow_namespaces(); }, failed);
  asio::co_spawn(strand, [self = shared_from_this()] { return self->follow_config_maps(); },
                 failed);
  asio::co_spawn(strand, [self = shared_from_this()] { return self->tick(); }, failed);
}

void RootCaPublisher::enqueue_all_namespaces() {
  auto cacher = cachers_->find(*namespaces_);
  if (!cacher) return;
  for (const auto& object : cacher->list(namespaces_->key_prefix(), "", 0, nullptr).objects) {
    pending_.emplace(object->name);
  }
}

asio::awaitable<void> RootCaPublisher::follow_namespaces() {
  watch::CacheFollower follower;
  follower.cacher = cachers_->ensure(*namespaces_);
  follower.prefix = namespaces_->key_prefix();
  follower.keep_going = [this] { return !stopped_; };
  follower.on_start = [this](std::int64_t) -> asio::awaitable<void> {
    enqueue_all_namespaces();
    co_await drain();
  };
  follower.on_frames = [this](const std::vector<watch::WatchFrame>& frames)
      -> asio::awaitable<void> {
    for (const auto& frame : frames) {
      if (frame.type == watch::EventType::added) {
        pending_.emplace(frame.object->name);
      } else if (frame.type == watch::EventType::modified) {
        // As kube: a namespace that changes is looked at again only while it is Active.
        auto ns = parsed(frame.object);
        if (ns && string_at(object_member(*ns, "status"), "phase") == "Active") {
          pending_.emplace(frame.object->name);
        }
      }
    }
    co_await drain();
  };
  co_await watch::follow_cache(std::move(follower));
}

asio::awaitable<void> RootCaPublisher::follow_config_maps() {
  watch::CacheFollower follower;
  follower.cacher = cachers_->ensure(*config_maps_);
  follower.prefix = config_maps_->key_prefix();
  follower.keep_going = [this] { return !stopped_; };
  follower.on_start = [this](std::int64_t) -> asio::awaitable<void> {
    enqueue_all_namespaces();  // what changed while no watch was open
    co_await drain();
  };
  follower.on_frames = [this](const std::vector<watch::WatchFrame>& frames)
      -> asio::awaitable<void> {
    bool any = false;
    for (const auto& frame : frames) {
      if (frame.object->name != kRootCaConfigMapName) continue;
      pending_.emplace(frame.object->ns);
      any = true;
    }
    if (any) co_await drain();
  };
  co_await watch::follow_cache(std::move(follower));
}

asio::awaitable<void> RootCaPublisher::tick() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!stopped_) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    if (retry_.empty()) continue;
    pending_.merge(retry_);
    retry_.clear();
    co_await drain();
  }
}

asio::awaitable<void> RootCaPublisher::drain() {
  // The followers and the ticker share the strand but may each be suspended in a sync: the one
  // draining takes what the others add meanwhile.
  if (draining_) co_return;
  draining_ = true;
  while (!pending_.empty() && !stopped_) {
    std::string ns = std::move(pending_.extract(pending_.begin()).value());
    const bool done = co_await sync(ns);
    if (!done) retry_.insert(std::move(ns));
  }
  draining_ = false;
}

std::chrono::seconds RootCaPublisher::hold_of(const std::string& ns) const {
  auto it = rewrites_.find(ns);
  return it != rewrites_.end() ? it->second.hold : std::chrono::seconds(0);
}

asio::awaitable<bool> RootCaPublisher::sync(const std::string& ns) {
  auto namespaces = cachers_->find(*namespaces_);
  auto config_maps = cachers_->find(*config_maps_);
  if (!namespaces || !config_maps || !namespaces->ready() || !config_maps->ready()) {
    co_return false;  // look again when the caches can answer
  }
  auto ns_object = namespaces->get(namespaces_->key("", ns));
  if (!ns_object) {
    rewrites_.erase(ns);
    co_return true;  // gone
  }
  const json::object wanted_data{{"ca.crt", bundle_}};
  auto current = config_maps->get(config_maps_->key(ns, std::string(kRootCaConfigMapName)));
  if (!current) {
    json::object config_map{
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", json::object{{"name", kRootCaConfigMapName},
                                  {"annotations", json::object{{kDescriptionAnnotation,
                                                                kDescription}}}}},
        {"data", wanted_data}};
    registry::WriteQuery query;
    query.field_manager = kFieldManager;
    std::string namespace_name = ns;
    auto r = co_await store_->create(*config_maps_, std::move(namespace_name),
                                     std::move(config_map), std::move(query));
    if (r) co_return true;
    switch (r.error().code) {
      case base::Errc::not_found:       // the namespace is gone
      case base::Errc::forbidden:       // it is being deleted: not tried again, as in kube
      case base::Errc::already_exists:  // its event brings another look
        co_return true;
      default:
        spdlog::warn("cannot create {} in namespace {}: {}", kRootCaConfigMapName, ns,
                     r.error().message);
        co_return false;
    }
  }
  auto config_map = parsed(current);
  if (!config_map) co_return true;
  const json::object* annotations = object_member(object_member(*config_map, "metadata"),
                                                  "annotations");
  const json::value* data = config_map->if_contains("data");
  if (data != nullptr && data->is_object() && data->get_object() == wanted_data &&
      !string_at(annotations, kDescriptionAnnotation).empty()) {
    co_return true;
  }
  // Changed again soon after this publisher wrote it: someone keeps writing another bundle
  // (another replica with another --root-ca-file?). Written back, but ever less often.
  Rewrites& rewrites = rewrites_[ns];
  const auto now = std::chrono::steady_clock::now();
  if (now < rewrites.last + rewrites.hold) co_return false;  // the ticker looks again
  if (rewrites.last != std::chrono::steady_clock::time_point{} &&
      now - rewrites.last < kQuiet) {
    rewrites.hold = std::min(rewrites.hold.count() == 0 ? std::chrono::seconds(1)
                                                        : rewrites.hold * 2,
                             kLongestHold);
    if (!rewrites.warned) {
      rewrites.warned = true;
      spdlog::warn("{} in namespace {} keeps changing after it is written; writing it back at "
                   "most every {} s from now (do all replicas have the same --root-ca-file?)",
                   kRootCaConfigMapName, ns, rewrites.hold.count());
    }
  } else {
    rewrites.hold = std::chrono::seconds(0);
  }
  rewrites.last = now;
  // Written over the version read: a ConfigMap that changed meanwhile is a conflict, and its
  // event brings another look.
  (*config_map)["data"] = wanted_data;
  json::value& meta = (*config_map)["metadata"];
  if (!meta.is_object()) meta = json::object();
  json::value& annotation_map = meta.get_object()["annotations"];
  if (!annotation_map.is_object()) annotation_map = json::object();
  annotation_map.get_object()[kDescriptionAnnotation] = kDescription;
  registry::WriteQuery query;
  query.field_manager = kFieldManager;
  std::string namespace_name = ns;
  auto r = co_await store_->update(*config_maps_, std::move(namespace_name),
                                   std::string(kRootCaConfigMapName), std::move(*config_map),
                                   std::move(query));
  if (r || r.error().code == base::Errc::conflict || r.error().code == base::Errc::not_found) {
    co_return true;
  }
  spdlog::warn("cannot write {} in namespace {}: {}", kRootCaConfigMapName, ns,
               r.error().message);
  co_return false;
}

}  // namespace kwatch::controllers
