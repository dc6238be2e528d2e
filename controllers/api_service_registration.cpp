#include "controllers/api_service_registration.hpp"

#include "kinds/api_service.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "watch/cacher.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <set>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

struct Desired {
  std::string group, version;
  kinds::ApiServicePriority priority;
  std::string_view label;
};

std::vector<json::object> cached_objects(const registry::CacherRegistry& cachers,
                                         const kinds::ResourceInfo& info, bool& ready) {
  std::vector<json::object> out;
  auto cacher = cachers.find(info);
  ready = cacher && cacher->ready();
  if (!ready) return out;
  for (const auto& object : cacher->list(info.key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (parsed && parsed->is_object()) out.push_back(std::move(parsed->get_object()));
  }
  return out;
}

bool same_spec(const json::object& existing, const json::object& desired) {
  const json::value* a = existing.if_contains("spec");
  const json::value* b = desired.if_contains("spec");
  return a != nullptr && b != nullptr && *a == *b;
}

}  // namespace

ApiServiceRegistration::ApiServiceRegistration(std::shared_ptr<kinds::Scheme> scheme,
                                               std::shared_ptr<registry::ResourceStore> store,
                                               std::shared_ptr<registry::CacherRegistry> cachers,
                                               std::vector<kinds::GroupVersion> builtin)
    : Reconciler(std::move(cachers), scheme->find("apiregistration.k8s.io", "v1", "apiservices"),
                 {scheme->find("apiextensions.k8s.io", "v1", "customresourcedefinitions")},
                 "APIService registration"),
      builtin_(std::move(builtin)),
      store_(std::move(store)),
      crds_(scheme->find("apiextensions.k8s.io", "v1", "customresourcedefinitions")) {}

asio::awaitable<void> ApiServiceRegistration::reconcile_once() {
  bool services_ready = false, crds_ready = false;
  std::vector<json::object> existing = cached_objects(*cachers_, *info_, services_ready);
  std::vector<json::object> crds = cached_objects(*cachers_, *crds_, crds_ready);
  if (!services_ready || !crds_ready) {
    waiting_ = true;
    co_return;
  }
  waiting_ = false;
  std::map<std::string, Desired> desired;
  if (!started_) {
    for (const auto& gv : builtin_) {
      auto priority = kinds::builtin_api_service_priority(gv.group, gv.version);
      if (!priority) continue;  // kube makes none for a group/version it does not list
      desired.emplace(kinds::api_service_name(gv.group, gv.version),
                      Desired{gv.group, gv.version, *priority, kinds::kAutomanagedOnStart});
    }
  }
  for (const auto& crd : crds) {
    const json::object* spec = object_member(crd, "spec");
    const std::string group = string_at(spec, "group");
    if (group.empty()) continue;
    if (const json::array* versions = apimachinery::array_member(spec, "versions")) {
      for (const auto& v : *versions) {
        const json::object* vo = v.if_object();
        const json::value* served = vo != nullptr ? vo->if_contains("served") : nullptr;
        if (served == nullptr || !served->is_bool() || !served->get_bool()) continue;
        const std::string version = string_at(vo, "name");
        if (version.empty()) continue;
        desired.emplace(kinds::api_service_name(group, version),
                        Desired{group, version, kinds::kCustomResourcePriority,
                                kinds::kAutomanagedContinuously});
      }
    }
  }

  std::map<std::string, const json::object*> by_name;
  for (const auto& s : existing) by_name[string_at(object_member(s, "metadata"), "name")] = &s;
  std::string cluster_scope;
  for (const auto& [name, want] : desired) {
    json::object object =
        kinds::local_api_service(want.group, want.version, want.priority, want.label);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      registry::WriteQuery query;
      query.field_manager = "kube-apiserver";
      std::string ns;
      auto r = co_await store_->create(*info_, std::move(ns), std::move(object), std::move(query));
      if (!r && r.error().code != base::Errc::already_exists) {
        spdlog::warn("cannot create APIService {}: {}", name, r.error().message);
        waiting_ = true;
      }
      continue;
    }
    const json::object& current = *it->second;
    const std::string label = string_at(
        object_member(object_member(current, "metadata"), "labels"), kinds::kAutomanagedLabel);
    if (label.empty() || same_spec(current, object)) continue;  // not ours, or as it should be
    json::object updated = current;
    updated["spec"] = object["spec"];
    registry::WriteQuery query;
    query.field_manager = "kube-apiserver";
    std::string ns;
    auto r = co_await store_->update(*info_, std::move(ns), name, std::move(updated),
                                     std::move(query));
    if (!r && r.error().code != base::Errc::conflict && r.error().code != base::Errc::not_found) {
      spdlog::warn("cannot update APIService {}: {}", name, r.error().message);
    }
  }
  // Those this controller made for a definition that no longer serves them go.
  for (const auto& [name, current] : by_name) {
    if (desired.count(name)) continue;
    const json::object* meta = object_member(*current, "metadata");
    const std::string label = string_at(object_member(meta, "labels"), kinds::kAutomanagedLabel);
    if (label != kinds::kAutomanagedContinuously) continue;
    registry::DeleteQuery query;
    query.uid = string_at(meta, "uid");
    std::string ns;
    std::string n = name;
    auto r = co_await store_->remove(*info_, std::move(ns), std::move(n), std::move(query));
    if (!r && r.error().code != base::Errc::not_found && r.error().code != base::Errc::conflict) {
      spdlog::warn("cannot delete APIService {}: {}", name, r.error().message);
    }
  }
  if (!waiting_) started_ = true;
}

}  // namespace kwatch::controllers
