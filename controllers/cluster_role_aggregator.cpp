#include "controllers/cluster_role_aggregator.hpp"

#include "auth/rbac_authorizer.hpp"
#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "apimachinery/stored_json.hpp"
#include "watch/cacher.hpp"

#include <boost/json/object.hpp>
#include <spdlog/spdlog.h>

namespace kwatch::controllers {

using registry::CacherRegistry;
namespace asio = boost::asio;
namespace json = boost::json;

ClusterRoleAggregator::ClusterRoleAggregator(std::shared_ptr<kinds::Scheme> scheme,
                                             std::shared_ptr<registry::ResourceStore> store,
                                             std::shared_ptr<CacherRegistry> cachers)
    : Reconciler(std::move(cachers), scheme->find("rbac.authorization.k8s.io", "v1", "clusterroles"),
                 "clusterrole aggregation"),
      store_(std::move(store)) {}

asio::awaitable<void> ClusterRoleAggregator::reconcile_once() {
  auto cacher = cachers_->find(*info_);
  if (!cacher || !cacher->ready()) co_return;
  std::vector<json::object> roles;
  for (const auto& object : cacher->list(info_->key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (parsed && parsed->is_object()) roles.push_back(std::move(parsed->get_object()));
  }
  for (auto& change : auth::cluster_roles_to_aggregate(roles)) {
    json::object* role = nullptr;
    for (auto& r : roles) {
      const json::value* meta = r.if_contains("metadata");
      const json::value* name = meta != nullptr && meta->is_object()
                                    ? meta->get_object().if_contains("name")
                                    : nullptr;
      if (name != nullptr && name->is_string() && name->get_string() == change.name) {
        role = &r;
        break;
      }
    }
    if (role == nullptr) continue;
    // Written over the version read (its resourceVersion is in the cached copy): a role that
    // changed meanwhile is a conflict, and its event brings another reconcile.
    json::object updated = *role;
    updated["rules"] = std::move(change.rules);
    registry::WriteQuery query;
    query.field_manager = "clusterrole-aggregation-controller";
    std::string cluster_scope;
    auto r = co_await store_->update(*info_, std::move(cluster_scope), change.name,
                                     std::move(updated), std::move(query));
    if (!r && r.error().code != base::Errc::conflict &&
        r.error().code != base::Errc::not_found) {
      spdlog::warn("cannot write the aggregated rules of clusterrole {}: {}", change.name,
                   r.error().message);
    }
  }
}

}  // namespace kwatch::controllers
