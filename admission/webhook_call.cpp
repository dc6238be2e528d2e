#include "admission/webhook_call.hpp"

#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/service_endpoints.hpp"
#include "watch/cacher.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/status.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"
#include "base/base64.hpp"
#include "base/uuid.hpp"
#include "cel/json_value.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::object_member;
using apimachinery::string_at;
using base::Errc;
using registry::AdmissionAttributes;

namespace {

// The most of a webhook's answer that is read: a patch that replaces the largest object there
// may be, in base64, with room to spare; more is a failed call.
constexpr std::size_t kMaxResponseBytes = 6u << 20;

// https://host[:port]/path split into the client's server and the request's path.
bool split_url(const std::string& url, std::string& server, std::string& path) {
  if (!url.starts_with("https://")) return false;
  const auto slash = url.find('/', 8);
  server = url.substr(0, slash);
  path = slash == std::string::npos ? "/" : url.substr(slash);
  return server.size() > 8;
}

client::HttpClient::Options client_options(const Hook& h) {
  const kinds::CompiledWebhook& spec = h.spec;
  client::HttpClient::Options options;
  options.request_timeout = spec.timeout;
  options.user_agent = "kube-apiserver-admission";
  options.max_response_bytes = h.max_response_bytes;
  // Writes call a webhook concurrently: keep as many connections as client-go's transport
  // keeps per host (25), so that concurrent calls do not each pay a new TLS handshake.
  options.max_idle_connections = 25;
  return options;
}

}  // namespace

std::shared_ptr<Hook> make_hook(kinds::CompiledWebhook spec, asio::any_io_executor executor,
                                std::size_t max_response_bytes) {
  auto hook = std::make_shared<Hook>();
  hook->max_response_bytes = max_response_bytes != 0 ? max_response_bytes : kMaxResponseBytes;
  hook->match = CompiledMatch::compile(spec.match, /*empty_rules_match_all=*/false);
  hook->spec = std::move(spec);
  const kinds::CompiledWebhook& s = hook->spec;
  std::string server;
  if (s.service) {
    const auto& service = *s.service;
    hook->target = service.path.empty() ? "/" : service.path;
    hook->url = "https://" + service.name + "." + service.ns + ".svc:" +
                std::to_string(service.port) + hook->target;
    hook->service_clients = std::make_shared<Hook::ServiceClients>();
    hook->executor = executor;
  } else if (!split_url(s.url, server, hook->target)) {
    hook->url = s.url;
    hook->client_error = "could not get REST client: Unparsable URL: " + s.url;
  } else {
    hook->url = s.url;
    client::ClientConfig config;
    config.server = server;
    config.ca_pem = s.ca_pem;
    auto made = client::HttpClient::create(executor, std::move(config), client_options(*hook));
    if (made) {
      hook->client = std::move(*made);
    } else {
      hook->client_error = "could not get REST client: " + made.error();
    }
  }
  // Every call asks the webhook to answer within the timeout (kube's `?timeout=`).
  const std::string query = "?timeout=" + std::to_string(s.timeout.count()) + "s";
  hook->target += query;
  hook->url += query;
  return hook;
}

namespace {

std::string quoted(std::string_view s) { return apimachinery::go_quote(s); }

// A refusal: the webhook's Status, its code at least 400, kube's message.
ApiError denial(const Hook& h, const json::object* status, int* code_out) {
  std::string message = string_at(status, "message");
  const std::string reason = string_at(status, "reason");
  std::int64_t code = 0;
  if (const json::value* c = status != nullptr ? status->if_contains("code") : nullptr) {
    if (c->is_int64()) code = c->get_int64();
  }
  if (code < 400) code = 400;
  *code_out = static_cast<int>(std::min<std::int64_t>(code, 600));
  const std::string head = "admission webhook " + quoted(h.spec.name) + " denied the request";
  if (!message.empty()) {
    message = head + ": " + message;
  } else if (!reason.empty()) {
    message = head + ": " + reason;
  } else {
    message = head + " without explanation";
  }
  const auto http = static_cast<unsigned>(std::min<std::int64_t>(code, 999));
  ApiError e(apimachinery::errc_for_status(http), std::move(message));
  e.reason = reason;
  return e;
}

// client-go's words for a non-2xx answer that carries no Status.
std::string status_text(const client::ApiError& e) {
  if (!e.message.empty() && !e.reason.empty()) return e.message;
  switch (e.http_status) {
    case 400: return "the server rejected our request for an unknown reason";
    case 401: return "the server has asked for the client to provide credentials";
    case 404: return "the server could not find the requested resource";
    case 405: return "the server does not allow this method on the requested resource";
    case 422: return "the server rejected our request due to an error in our request";
    case 429: return "the server has received too many requests and has asked us to try again later";
    case 503: return "the server is currently unable to handle the request";
    case 504:
      return "the server was unable to return a response in the time allotted, but may still be "
             "processing the request";
    default:
      if (e.http_status >= 500) {
        return "an error on the server (\"" + e.message + "\") has prevented the request from "
               "succeeding";
      }
      return "the server responded with the status code " + std::to_string(e.http_status) +
             " but did not return more information";
  }
}


// The AdmissionReview request for `h`: the write as the matched resource sees it. Written as
// text around the objects' own serializations (the objects are not copied into a document),
// the `request` fields made in a stack buffer.
std::string review_body(const Hook& h, const AdmissionAttributes& a,
                        const kinds::ResourceInfo& matched, const json::object* object,
                        const json::object* old, const std::string& uid) {
  unsigned char buffer[4096];
  json::monotonic_resource scratch(buffer, sizeof buffer);
  json::object request = request_json(a, matched, json::storage_ptr(&scratch));
  if (!request.contains("name") && object != nullptr) {
    const std::string n = string_at(object_member(*object, "metadata"), "name");
    if (!n.empty()) request["name"] = n;
  }
  json::value options = nullptr;
  if (json::value* o = request.if_contains("options")) {
    options = std::move(*o);
    request.erase("options");
  }
  std::string out;
  out.reserve(512);
  out += R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/)";
  out += h.spec.review_version;
  out += R"(","request":{"uid":)";
  out += json::serialize(json::string_view(uid));
  for (const auto& kv : request) {
    out += ',';
    out += json::serialize(kv.key());
    out += ':';
    out += json::serialize(kv.value());
  }
  out += R"(,"object":)";
  out += object != nullptr ? json::serialize(*object) : "null";
  out += R"(,"oldObject":)";
  out += old != nullptr ? json::serialize(*old) : "null";
  out += R"(,"options":)";
  out += json::serialize(options);
  out += "}}";
  return out;
}

// Reads the answer: the checks kube makes, in its order; warnings and audit annotations are
// taken before `allowed` is looked at.
CallResult read_answer(const Hook& h, const AdmissionAttributes& a, const std::string& body,
                       const std::string& uid) {
  CallResult out;
  out.kind = CallResult::Kind::failed;
  // Read under the rules for every object kwatch reads (depth, UTF-8, finite numbers).
  std::string problem;
  std::optional<json::value> v = apimachinery::parse_json(body, &problem);
  if (!v || !v->is_object()) {
    out.failure = "failed to call webhook: the answer is not an AdmissionReview in JSON" +
                  (problem.empty() ? std::string() : ": " + problem);
    return out;
  }
  const json::object& review = v->get_object();
  const json::object* response = object_member(review, "response");
  const auto invalid = [&](std::string why) {
    out.failure = "received invalid webhook response: " + std::move(why);
    return out;
  };
  if (response == nullptr) return invalid("webhook response was absent");
  const bool v1 = h.spec.review_version == "v1";
  if (v1) {
    const std::string got = string_at(response, "uid");
    if (got != uid) return invalid("expected response.uid=" + quoted(uid) + ", got " + quoted(got));
    const std::string gvk = gvk_of(review);
    if (gvk != "admission.k8s.io/v1, Kind=AdmissionReview") {
      return invalid("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got " +
                     gvk);
    }
  }
  const std::string patch_b64 = string_at(response, "patch");
  const json::value* patch_type = response->if_contains("patchType");
  const bool has_patch_type = patch_type != nullptr && !patch_type->is_null();
  if (v1) {
    if (h.spec.mutating) {
      if (!patch_b64.empty() && !has_patch_type) {
        return invalid("webhook returned response.patch but not response.patchType");
      }
      if (patch_b64.empty() && has_patch_type) {
        return invalid("webhook returned response.patchType but not response.patch");
      }
      if (has_patch_type && string_at(response, "patchType").empty()) {
        return invalid("webhook returned invalid response.patchType of \"\"");
      }
    } else {
      if (!patch_b64.empty()) return invalid("validating webhook may not return response.patch");
      if (has_patch_type) return invalid("validating webhook may not return response.patchType");
    }
  }
  if (const json::object* annotations = object_member(response, "auditAnnotations")) {
    for (const auto& [key, value] : *annotations) {
      if (value.is_string() && key.find('/') == std::string_view::npos) {
        registry::add_audit_annotation(a, h.spec.name + "/" + std::string(key),
                                       std::string(value.get_string()));
      }
    }
  }
  if (const json::array* warnings = apimachinery::array_member(response, "warnings")) {
    for (const auto& w : *warnings) {
      if (w.is_string() && !w.get_string().empty()) registry::add_warning(a, std::string(w.get_string()));
    }
  }
  const json::value* allowed = response->if_contains("allowed");
  if (allowed == nullptr || !allowed->is_bool() || !allowed->get_bool()) {
    out.kind = CallResult::Kind::denied;
    out.refusal = denial(h, object_member(*response, "status"), &out.code);
    return out;
  }
  out.kind = CallResult::Kind::allowed;
  if (h.spec.mutating && !patch_b64.empty()) {
    auto decoded = base::base64_decode(patch_b64);
    std::optional<json::value> parsed;
    if (decoded) parsed = apimachinery::parse_json(*decoded, &problem);
    if (!parsed) {
      out.kind = CallResult::Kind::failed;
      out.failure = "received undecodable patch in webhook response: " +
                    (decoded ? problem : std::string("illegal base64 data"));
      return out;
    }
    json::value patch = std::move(*parsed);
    if (!patch.is_array()) {
      out.kind = CallResult::Kind::failed;
      out.failure = "received undecodable patch in webhook response: json: cannot unmarshal " +
                    std::string(patch.is_object() ? "object" : "value") +
                    " into Go value of type jsonpatch.Patch";
      return out;
    }
    if (v1 && string_at(response, "patchType") != "JSONPatch") {
      out.kind = CallResult::Kind::failed;
      out.failure = "unsupported patch type " + quoted(string_at(response, "patchType"));
      return out;
    }
    if (!patch.get_array().empty()) out.patch = std::move(patch);
  }
  return out;
}

}  // namespace

// kube's error for a call that failed, under failurePolicy Fail.
ApiError calling_error(const Hook& h, const std::string& reason) {
  const std::string inner = "failed calling webhook " + quoted(h.spec.name) + ": " + reason;
  ApiError e(Errc::internal, "Internal error occurred: " + inner);
  e.causes.push_back({"", inner, ""});
  return e;
}

// Whether the webhook's match conditions let it be called: nullopt yes, else why not (an empty
// error: a condition was false).
std::optional<std::string> conditions_refuse(const Hook& h, const AdmissionAttributes& a,
                                             const kinds::ResourceInfo& matched,
                                             const json::object* object, const json::object* old,
                                             NamespaceLookup& namespaces,
                                             const auth::RbacPolicySource* rbac) {
  const kinds::CompiledPolicy& conditions = *h.spec.conditions;
  if (conditions.match_conditions.empty()) return std::nullopt;
  cel::JsonArena arena;
  std::array<cel::Value, kinds::policy_slot_count> activation;
  const json::object request = request_json(a, matched);
  if (object != nullptr) activation[kinds::slot_object] = cel::json_view(*object, nullptr, arena);
  if (old != nullptr) activation[kinds::slot_old_object] = cel::json_view(*old, nullptr, arena);
  activation[kinds::slot_request] =
      cel::json_view(request, kinds::admission_request_type().get(), arena);
  if (const json::object* ns = namespaces.object_of(a)) {
    activation[kinds::slot_namespace_object] =
        cel::json_view(*ns, kinds::namespace_object_type().get(), arena);
  }
  if (conditions.uses(kinds::slot_authorizer) || conditions.uses(kinds::slot_request_resource)) {
    set_authorizer(activation, make_policy_authorizer(rbac, a.user), a);
  }
  const ConditionOutcome outcome = evaluate_conditions(conditions, activation);
  if (outcome.hold) return std::nullopt;
  std::string joined;
  for (const auto& e : outcome.errors) joined += (joined.empty() ? "" : ", ") + e;
  return joined;
}

namespace {

asio::awaitable<CallResult> call_once(const Hook& h, const AdmissionAttributes& a,
                                      const kinds::ResourceInfo& matched,
                                      const json::object* object, const ResolveContext& context);

// The client of the endpoint a Service's webhook resolves to now.
std::shared_ptr<client::HttpClient> service_client(const Hook& h, const ResolveContext& context,
                                                   std::string& error) {
  const auto& s = *h.spec.service;
  const registry::ServiceEndpoint where = registry::resolve_service_endpoint(
      *context.scheme, context.cachers, s.ns, s.name, s.port, context.allow_loopback);
  if (!where.error.empty()) {
    error = "could not get REST client: " + where.error;
    return nullptr;
  }
  std::lock_guard lock(h.service_clients->mutex);
  auto& by_address = h.service_clients->by_address;
  if (auto it = by_address.find(where.address); it != by_address.end()) return it->second;
  client::ClientConfig config;
  config.server = "https://" + where.address;
  config.tls_server_name = s.name + "." + s.ns + ".svc";
  config.ca_pem = h.spec.ca_pem;
  auto made = client::HttpClient::create(h.executor, std::move(config), client_options(h));
  if (!made) {
    error = "could not get REST client: " + made.error();
    return nullptr;
  }
  if (by_address.size() >= 64) by_address.clear();  // endpoints come and go: a bounded cache
  by_address.emplace(where.address, *made);
  return *made;
}

asio::awaitable<CallResult> call_once(const Hook& h, const AdmissionAttributes& a,
                                      const kinds::ResourceInfo& matched,
                                      const json::object* object, const ResolveContext& context) {
  CallResult failed;
  failed.kind = CallResult::Kind::failed;
  failed.code = 503;
  if (a.dry_run && h.spec.side_effects != "None" && h.spec.side_effects != "NoneOnDryRun") {
    CallResult r;
    r.kind = CallResult::Kind::refused;
    r.refusal = ApiError(Errc::bad_request, "admission webhook " + quoted(h.spec.name) +
                                                " does not support dry run");
    r.code = 0;
    co_return r;
  }
  if (h.spec.review_version.empty()) {
    failed.failure = "could not create admission objects: webhook does not accept known "
                     "AdmissionReview versions (v1, v1beta1)";
    failed.code = 400;
    co_return failed;
  }
  std::shared_ptr<client::HttpClient> client = hook_client(h, context, failed.failure);
  if (!client) {
    failed.code = 500;
    co_return failed;
  }
  // Through the definition's conversion webhook when it has one; its failure fails the write
  // whatever the failure policy, as kube's dispatcher fails it.
  auto forms = co_await convert_matched_forms(a.info, matched, object, a.old_object);
  if (!forms) {
    failed.kind = CallResult::Kind::refused;
    failed.code = 500;
    failed.refusal = forms.error();
    co_return failed;
  }
  const json::object* o = forms->object_or(object);
  const json::object* old = forms->old_or(a.old_object);
  const std::string uid = base::new_uuid();
  std::string body = review_body(h, a, matched, o, old, uid);
  // On the write's own executor: no hop to another thread and back (the client's connections
  // are shared under a lock). Named, not awaited in an argument (GCC 12, docs/design.md).
  client::ApiResult<client::HttpResponse> answer =
      co_await client->request("POST", h.target, std::move(body), "application/json");
  if (!answer) {
    const client::ApiError& e = answer.error();
    failed.failure = "failed to call webhook: " + request_failure(h, e);
    if (e.kind == client::ApiError::Kind::status) failed.code = static_cast<int>(e.http_status);
    co_return failed;
  }
  if (answer->body.empty()) {
    failed.failure = "failed to call webhook: 0-length response with status code: " +
                     std::to_string(answer->status) + " and content type: " +
                     (answer->content_type.empty() ? "application/json" : answer->content_type);
    co_return failed;
  }
  CallResult read = read_answer(h, a, answer->body, uid);
  if (read.kind == CallResult::Kind::failed) read.code = 503;
  co_return read;
}

}  // namespace

std::string gvk_of(const json::object& object) {
  const std::string api_version = string_at(object, "apiVersion");
  const auto slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  return group + "/" + version + ", Kind=" + string_at(object, "kind");
}

std::shared_ptr<client::HttpClient> hook_client(const Hook& h, const ResolveContext& context,
                                                std::string& error) {
  if (!h.spec.service) {
    if (!h.client) error = h.client_error;
    return h.client;
  }
  return service_client(h, context, error);
}

std::string request_failure(const Hook& h, const client::ApiError& e) {
  const std::string post = "Post " + quoted(h.url);
  switch (e.kind) {
    case client::ApiError::Kind::timeout:
      return post + ": context deadline exceeded";
    case client::ApiError::Kind::status:
      return status_text(e);
    default: {
      // The client's own words after its "POST <target>: ".
      std::string why = e.message;
      if (auto colon = why.find(": "); colon != std::string::npos) why = why.substr(colon + 2);
      return post + ": " + why;
    }
  }
}

// Calls one webhook with the write's objects as `matched` serves them, timed.
asio::awaitable<CallResult> call_webhook(const Hook& h, const AdmissionAttributes& a,
                                 const kinds::ResourceInfo& matched, const json::object* object,
                                 const ResolveContext& context) {
  const auto start = std::chrono::steady_clock::now();
  CallResult r = co_await call_once(h, a, matched, object, context);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  co_return r;
}

}  // namespace kwatch::admission
