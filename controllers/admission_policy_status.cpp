#include "controllers/admission_policy_status.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "kinds/admission_policy.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "watch/cacher.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <spdlog/spdlog.h>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

std::int64_t int_at(const json::object* obj, std::string_view key) {
  const json::value* v = obj != nullptr ? obj->if_contains(key) : nullptr;
  return v != nullptr && v->is_int64() ? v->get_int64() : 0;
}

}  // namespace

AdmissionPolicyStatus::AdmissionPolicyStatus(std::shared_ptr<kinds::Scheme> scheme,
                                             std::shared_ptr<registry::ResourceStore> store,
                                             std::shared_ptr<registry::CacherRegistry> cachers)
    : Reconciler(std::move(cachers),
                 scheme->find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
                 "admission policy status"),
      scheme_(std::move(scheme)), store_(std::move(store)) {}

asio::awaitable<void> AdmissionPolicyStatus::reconcile_once() {
  auto cacher = cachers_->find(*info_);
  if (!cacher || !cacher->ready()) co_return;
  std::vector<json::object> unobserved;
  for (const auto& object : cacher->list(info_->key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (!parsed || !parsed->is_object()) continue;
    const json::object& policy = parsed->get_object();
    const std::int64_t generation = int_at(object_member(policy, "metadata"), "generation");
    const std::int64_t observed = int_at(object_member(policy, "status"), "observedGeneration");
    if (generation > observed) unobserved.push_back(std::move(parsed->get_object()));
  }
  for (json::object& policy : unobserved) {
    const std::string name = string_at(object_member(policy, "metadata"), "name");
    json::array warnings;
    for (const auto& w : kinds::type_check_validating_policy(policy, *scheme_)) {
      warnings.push_back(json::object{{"fieldRef", w.field_ref}, {"warning", w.warning}});
    }
    json::object type_checking;
    if (!warnings.empty()) type_checking["expressionWarnings"] = std::move(warnings);
    json::value& status = policy["status"];
    if (!status.is_object()) status = json::object();
    status.get_object()["observedGeneration"] =
        int_at(object_member(policy, "metadata"), "generation");
    status.get_object()["typeChecking"] = std::move(type_checking);
    // Written over the version read (its resourceVersion is in the cached copy): a policy that
    // changed meanwhile is a conflict, and its event brings another reconcile.
    registry::WriteQuery query;
    query.subresource = "status";
    query.field_manager = "validatingadmissionpolicy-status";
    std::string cluster_scope;
    auto r = co_await store_->update(*info_, std::move(cluster_scope), name, std::move(policy),
                                     std::move(query));
    if (!r && r.error().code != base::Errc::conflict && r.error().code != base::Errc::not_found) {
      spdlog::warn("cannot write the status of ValidatingAdmissionPolicy {}: {}", name,
                   r.error().message);
    }
  }
}

}  // namespace kwatch::controllers
