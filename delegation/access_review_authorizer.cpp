#include "delegation/access_review_authorizer.hpp"

#include "apimachinery/json_members.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace kwatch::delegation {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::object_member;
using apimachinery::string_at;

namespace {

bool flag(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->get_bool();
}

}  // namespace

json::object access_review_spec(const auth::RequestAttributes& a) {
  json::object spec;
  if (a.resource_request) {
    json::object resource;
    // Empty fields are left out, as kube's authorizer sends them (omitempty).
    const std::pair<const char*, const std::string*> fields[] = {
        {"namespace", &a.namespace_}, {"verb", &a.verb},       {"group", &a.api_group},
        {"version", &a.api_version},  {"resource", &a.resource}, {"subresource", &a.subresource},
        {"name", &a.name}};
    for (const auto& [key, value] : fields) {
      if (!value->empty()) resource[key] = *value;
    }
    spec["resourceAttributes"] = std::move(resource);
  } else {
    spec["nonResourceAttributes"] = json::object{{"path", a.path}, {"verb", a.verb}};
  }
  spec["user"] = a.user.name;
  if (!a.user.groups.empty()) spec["groups"] = apimachinery::string_array(a.user.groups);
  if (!a.user.extra.empty()) {
    json::object extra;
    for (const auto& [key, values] : a.user.extra) extra[key] = apimachinery::string_array(values);
    spec["extra"] = std::move(extra);
  }
  if (!a.user.uid.empty()) spec["uid"] = a.user.uid;
  return spec;
}

auth::DelegatedDecision decision_from_access_review(const json::object& review) {
  auth::DelegatedDecision out;
  const json::object* status = object_member(review, "status");
  if (status == nullptr) {
    out.error = "the SubjectAccessReview's answer has no status";
    return out;
  }
  out.allowed = flag(*status, "allowed");
  out.denied = flag(*status, "denied");
  out.reason = string_at(status, "reason");
  if (out.allowed && out.denied) {
    out.allowed = false;
    out.error = "webhook subject access review returned both allow and deny response";
  }
  return out;
}

AccessReviewAuthorizer::AccessReviewAuthorizer(std::shared_ptr<client::HttpClient> client,
                                               AccessReviewOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      cache_(options_.cache_entries),
      in_flight_(options_.max_in_flight) {}

asio::awaitable<auth::DelegatedDecision> AccessReviewAuthorizer::authorize(
    const auth::RequestAttributes& a) {
  json::object spec = access_review_spec(a);
  std::string key = json::serialize(spec);
  if (auto known = cache_.get(key)) co_return std::move(*known);
  const std::shared_ptr<void> slot = in_flight_.try_take();
  if (!slot) co_return auth::DelegatedDecision{.busy = true};
  sent_.fetch_add(1);
  auto answer = co_await post_review(*client_, "authorization.k8s.io/v1", "SubjectAccessReview",
                                     "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                     std::move(spec), options_.backoff);
  if (!answer) co_return auth::DelegatedDecision{.error = std::move(answer.error())};
  auth::DelegatedDecision decision = decision_from_access_review(*answer);
  if (decision.error.empty()) {
    const auto ttl = decision.allowed ? options_.allowed_ttl : options_.denied_ttl;
    cache_.put(std::move(key), decision,
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(ttl));
  }
  co_return decision;
}

}  // namespace kwatch::delegation
