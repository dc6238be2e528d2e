#include "registry/config_follower.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "watch/cache_follower.hpp"
#include "watch/cacher.hpp"

#include "apimachinery/stored_json.hpp"
#include "base/task_failure.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>

namespace kwatch::registry {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

struct Following {
  FollowedResources followed;
  std::function<bool()> keep_going;
  std::function<void(std::vector<std::vector<json::object>>&)> rebuild;
  std::atomic<bool> dirty{true};

  std::shared_ptr<watch::Cacher> cacher(const std::string& resource,
                                        std::shared_ptr<const kinds::ResourceInfo>& info) const {
    info = followed.scheme->find(followed.group, followed.version, resource);
    return info && followed.cachers ? followed.cachers->find(*info) : nullptr;
  }

  bool list(std::vector<std::vector<json::object>>& lists) const {
    auto listed = list_configurations(followed);
    if (!listed) return false;
    lists = std::move(*listed);
    return true;
  }
};

asio::awaitable<void> follow(std::shared_ptr<Following> f, std::string resource) {
  std::shared_ptr<const kinds::ResourceInfo> info;
  auto c = f->cacher(resource, info);
  if (!c) co_return;
  co_await watch::mark_changes(std::move(c), info->key_prefix(), f->dirty, f->keep_going);
}

asio::awaitable<void> run(std::shared_ptr<Following> f) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  std::vector<std::vector<json::object>> lists;
  while (f->keep_going()) {
    if (f->dirty.exchange(false)) {
      if (f->list(lists)) {
        f->rebuild(lists);
      } else {
        f->dirty = true;  // again at the next tick
      }
    }
    tick.expires_after(std::chrono::milliseconds(100));
    co_await tick.async_wait(asio::use_awaitable);
  }
}

}  // namespace

std::optional<std::vector<std::vector<json::object>>> list_configurations(
    const FollowedResources& followed) {
  std::vector<std::vector<json::object>> lists(followed.resources.size());
  for (std::size_t i = 0; i < followed.resources.size(); ++i) {
    auto info = followed.scheme->find(followed.group, followed.version, followed.resources[i]);
    auto c = info && followed.cachers ? followed.cachers->find(*info) : nullptr;
    if (!c || !c->ready()) return std::nullopt;
    for (const auto& object : c->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(object->json);
      if (v && v->is_object()) lists[i].push_back(std::move(v->get_object()));
    }
  }
  return lists;
}

void follow_configurations(asio::any_io_executor executor, FollowedResources followed,
                           std::function<bool()> keep_going,
                           std::function<void(std::vector<std::vector<json::object>>&)> rebuild,
                           const char* task) {
  auto f = std::make_shared<Following>();
  f->followed = std::move(followed);
  f->keep_going = std::move(keep_going);
  f->rebuild = std::move(rebuild);
  auto strand = asio::make_strand(executor);
  auto log = [task](std::exception_ptr e) { base::log_task_failure(e, task); };
  asio::co_spawn(strand, run(f), log);
  for (const std::string& resource : f->followed.resources) {
    asio::co_spawn(strand, follow(f, resource), log);
  }
}

}  // namespace kwatch::registry
