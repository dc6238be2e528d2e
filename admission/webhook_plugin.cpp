#include "admission/webhook_plugin.hpp"

#include "admission/policy_matching.hpp"
#include "admission/policy_runtime.hpp"
#include "kinds/scheme.hpp"
#include "kinds/webhook_configuration.hpp"
#include "registry/cacher_registry.hpp"
#include "watch/cache_follower.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"
#include "base/base64.hpp"
#include "base/task_failure.hpp"
#include "base/uuid.hpp"
#include "client/http_client.hpp"
#include "cel/json_value.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

namespace kwatch::admission {

namespace asio = boost::asio;
namespace json = boost::json;
using apimachinery::ApiError;
using apimachinery::object_member;
using apimachinery::string_at;
using base::Errc;
using registry::AdmissionAttributes;

namespace {

constexpr std::string_view kGroup = "admissionregistration.k8s.io";
// The most of a webhook's answer that is read: a patch that replaces the largest object there
// may be, in base64, with room to spare; more is a failed call.
constexpr std::size_t kMaxResponseBytes = 6u << 20;

}  // namespace

// One webhook in force: what was compiled of it, and its client.
struct Hook {
  kinds::CompiledWebhook spec;
  CompiledMatch match;
  // Its match conditions, as a policy's (evaluate_conditions).
  std::shared_ptr<const kinds::CompiledPolicy> conditions;
  std::string url;     // as messages show it, without the timeout query
  std::string target;  // the request target: the URL's path
  std::shared_ptr<client::HttpClient> client;  // a URL's
  std::string client_error;  // why there is no client ("could not get REST client: ...")
  // A Service's: a client per endpoint it was resolved to, made when first called.
  struct ServiceClients {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<client::HttpClient>> by_address;
  };
  std::shared_ptr<ServiceClients> service_clients;
  asio::any_io_executor executor;  // where a Service's clients live
  std::size_t position = 0;  // in the ordered list of all webhooks of the kind
};

// What resolving a Service's webhook reads.
struct ResolveContext {
  const kinds::Scheme* scheme = nullptr;
  const registry::CacherRegistry* cachers = nullptr;
  bool allow_loopback = false;
};

struct WebhookSet {
  bool loaded = false;
  std::vector<std::shared_ptr<const Hook>> hooks;
  // (group, resource) pairs some webhook's rules could match ("*" for any): a cheap first look.
  bool may_match(std::string_view group, std::string_view resource) const {
    for (const auto& h : hooks) {
      if (h->match.may_match(group, resource)) return true;
    }
    return false;
  }
};

namespace {

// https://host[:port]/path split into the client's server and the request's path.
bool split_url(const std::string& url, std::string& server, std::string& path) {
  if (!url.starts_with("https://")) return false;
  const auto slash = url.find('/', 8);
  server = url.substr(0, slash);
  path = slash == std::string::npos ? "/" : url.substr(slash);
  return server.size() > 8;
}

client::HttpClient::Options client_options(const kinds::CompiledWebhook& spec) {
  client::HttpClient::Options options;
  options.request_timeout = spec.timeout;
  options.user_agent = "kube-apiserver-admission";
  options.max_response_bytes = kMaxResponseBytes;
  // Writes call a webhook concurrently: keep as many connections as client-go's transport
  // keeps per host (25), so that concurrent calls do not each pay a new TLS handshake.
  options.max_idle_connections = 25;
  return options;
}

std::shared_ptr<Hook> make_hook(kinds::CompiledWebhook spec, asio::any_io_executor executor) {
  auto hook = std::make_shared<Hook>();
  hook->match = CompiledMatch::compile(spec.match, /*empty_rules_match_all=*/false);
  auto conditions = std::make_shared<kinds::CompiledPolicy>();
  conditions->name = spec.name;
  for (const auto& c : spec.match_conditions) {
    conditions->match_conditions.push_back({c.name, c.expression});
    conditions->add(c.expression);
  }
  hook->conditions = std::move(conditions);
  client::ClientConfig config;
  std::string server;
  if (spec.service) {
    const auto& s = *spec.service;
    hook->target = s.path.empty() ? "/" : s.path;
    hook->url = "https://" + s.name + "." + s.ns + ".svc:" + std::to_string(s.port) + hook->target;
    hook->service_clients = std::make_shared<Hook::ServiceClients>();
    hook->executor = executor;
  } else if (!split_url(spec.url, server, hook->target)) {
    hook->url = spec.url;
    hook->client_error = "could not get REST client: Unparsable URL: " + spec.url;
  } else {
    hook->url = spec.url;
  }
  if (hook->client_error.empty() && !spec.service) {
    config.server = server;
    config.ca_pem = spec.ca_pem;
    auto made = client::HttpClient::create(executor, std::move(config), client_options(spec));
    if (made) {
      hook->client = std::move(*made);
    } else {
      hook->client_error = "could not get REST client: " + made.error();
    }
  }
  hook->spec = std::move(spec);
  return hook;
}

}  // namespace

class WebhookSource : public std::enable_shared_from_this<WebhookSource> {
 public:
  WebhookSource(std::shared_ptr<kinds::Scheme> scheme,
                std::shared_ptr<registry::CacherRegistry> cachers, bool mutating)
      : scheme_(std::move(scheme)), cachers_(std::move(cachers)), mutating_(mutating),
        set_(std::make_shared<WebhookSet>()) {}

  std::shared_ptr<const WebhookSet> current() const { return std::atomic_load(&set_); }

  void start(asio::any_io_executor executor) {
    executor_ = executor;
    auto strand = asio::make_strand(executor);
    auto log = [](std::exception_ptr e) { base::log_task_failure(e, "admission webhook task"); };
    asio::co_spawn(strand, [self = shared_from_this()] { return self->run(); }, log);
    asio::co_spawn(strand, [self = shared_from_this()] { return self->follow(); }, log);
  }
  void stop() { stopped_ = true; }

  void load(const std::vector<json::object>& configurations, asio::any_io_executor executor) {
    // A configuration whose resourceVersion is unchanged keeps its webhooks (and connections).
    std::map<std::string, std::pair<std::string, std::vector<std::shared_ptr<const Hook>>>> kept;
    std::swap(kept, previous_);
    std::vector<const json::object*> ordered;
    for (const auto& c : configurations) ordered.push_back(&c);
    // Mutating webhooks run in the order of their configurations' names.
    std::sort(ordered.begin(), ordered.end(), [](const json::object* a, const json::object* b) {
      return string_at(object_member(*a, "metadata"), "name") <
             string_at(object_member(*b, "metadata"), "name");
    });
    auto next = std::make_shared<WebhookSet>();
    next->loaded = true;
    for (const json::object* c : ordered) {
      const json::object* meta = object_member(*c, "metadata");
      const std::string name = string_at(meta, "name");
      const std::string rv = string_at(meta, "resourceVersion");
      std::vector<std::shared_ptr<const Hook>> hooks;
      if (auto it = kept.find(name); it != kept.end() && it->second.first == rv && !rv.empty()) {
        hooks = it->second.second;
      } else {
        for (auto& spec : kinds::compile_webhooks(*c, mutating_)) {
          hooks.push_back(make_hook(std::move(spec), executor));
        }
      }
      for (const auto& h : hooks) {
        // The position in the ordered list is the set's: a copy that says it.
        auto placed = std::make_shared<Hook>(*h);
        placed->position = next->hooks.size();
        next->hooks.push_back(std::move(placed));
      }
      previous_[name] = {rv, std::move(hooks)};
    }
    std::atomic_store(&set_, std::shared_ptr<const WebhookSet>(std::move(next)));
  }

 private:
  asio::awaitable<void> follow() {
    auto info = scheme_->find(std::string(kGroup), "v1", resource());
    auto cacher = info && cachers_ ? cachers_->find(*info) : nullptr;
    if (!cacher) co_return;
    co_await watch::mark_changes(std::move(cacher), info->key_prefix(), dirty_,
                                 [this] { return !stopped_; });
  }

  asio::awaitable<void> run() {
    asio::steady_timer tick(co_await asio::this_coro::executor);
    while (!stopped_) {
      if (dirty_.exchange(false)) rebuild();
      tick.expires_after(std::chrono::milliseconds(100));
      co_await tick.async_wait(asio::use_awaitable);
    }
  }

  void rebuild() {
    auto info = scheme_->find(std::string(kGroup), "v1", resource());
    auto cacher = info && cachers_ ? cachers_->find(*info) : nullptr;
    if (!cacher || !cacher->ready()) {
      dirty_ = true;
      return;
    }
    std::vector<json::object> configurations;
    for (const auto& object : cacher->list(info->key_prefix(), "", 0, nullptr).objects) {
      auto v = apimachinery::parse_json(object->json);
      if (v && v->is_object()) configurations.push_back(std::move(v->get_object()));
    }
    load(configurations, executor_);
  }

  std::string resource() const {
    return mutating_ ? "mutatingwebhookconfigurations" : "validatingwebhookconfigurations";
  }

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  bool mutating_;
  asio::any_io_executor executor_;
  std::shared_ptr<const WebhookSet> set_;
  std::map<std::string, std::pair<std::string, std::vector<std::shared_ptr<const Hook>>>> previous_;
  std::atomic<bool> dirty_{true};
  std::atomic<bool> stopped_{false};
};

// ---- one call ----

namespace {

// What one webhook answered, or why it could not.
struct CallResult {
  enum class Kind { allowed, denied, failed, refused } kind = Kind::allowed;
  std::string failure;              // failed: the reason after `failed calling webhook "x": `
  ApiError refusal;                 // denied, refused: what the client gets
  std::optional<json::value> patch;  // a mutating webhook's JSONPatch
  int code = 200;       // for the metrics: see WebhookCallRecord::code
  double seconds = 0;   // how long the call took
};

std::string quoted(std::string_view s) { return apimachinery::go_quote(s); }

// kube's error for a call that failed, under failurePolicy Fail.
ApiError calling_error(const Hook& h, const std::string& reason) {
  const std::string inner = "failed calling webhook " + quoted(h.spec.name) + ": " + reason;
  ApiError e(Errc::internal, "Internal error occurred: " + inner);
  e.causes.push_back({"", inner, ""});
  return e;
}

Errc errc_of(std::int64_t code) {
  switch (code) {
    case 401: return Errc::unauthorized;
    case 403: return Errc::forbidden;
    case 404: return Errc::not_found;
    case 405: return Errc::method_not_allowed;
    case 409: return Errc::conflict;
    case 410: return Errc::gone;
    case 413: return Errc::too_large;
    case 415: return Errc::unsupported_media_type;
    case 422: return Errc::invalid;
    case 429: return Errc::too_many_requests;
    case 500: return Errc::internal;
    case 503: return Errc::unavailable;
    case 504: return Errc::timeout;
    default: return code >= 500 ? Errc::internal : Errc::bad_request;
  }
}

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
  ApiError e(errc_of(code), std::move(message));
  e.reason = reason;
  return e;
}

// client-go's words for a non-2xx answer that carries no Status.
std::string status_text(const client::ApiError& e) {
  if (!e.message.empty() && e.reason.size() > 0) return e.message;
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

// "group/version, Kind=kind", as Go prints a GroupVersionKind.
std::string gvk_of(const json::object& review) {
  const std::string api_version = string_at(review, "apiVersion");
  const auto slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  return group + "/" + version + ", Kind=" + string_at(review, "kind");
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

// Whether the webhook's match conditions let it be called: nullopt yes, else why not (an empty
// error: a condition was false).
std::optional<std::string> conditions_refuse(const Hook& h, const AdmissionAttributes& a,
                                             const kinds::ResourceInfo& matched,
                                             const json::object* object, const json::object* old,
                                             NamespaceLookup& namespaces,
                                             const auth::RbacPolicySource* rbac) {
  const kinds::CompiledPolicy& conditions = *h.conditions;
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

// One matched webhook: the resource it matched, and the objects as that resource serves them.
struct Matched {
  std::shared_ptr<const Hook> hook;
  std::shared_ptr<const kinds::ResourceInfo> info;
};

}  // namespace

// ---- the plugins ----

WebhookPluginBase::WebhookPluginBase(std::shared_ptr<kinds::Scheme> scheme,
                                     std::shared_ptr<registry::CacherRegistry> cachers,
                                     bool mutating)
    : scheme_(std::move(scheme)), cachers_(std::move(cachers)),
      source_(std::make_shared<WebhookSource>(scheme_, cachers_, mutating)), mutating_(mutating) {}

WebhookPluginBase::~WebhookPluginBase() { source_->stop(); }

void WebhookPluginBase::start(asio::any_io_executor executor) { source_->start(executor); }
void WebhookPluginBase::stop() { source_->stop(); }
bool WebhookPluginBase::loaded() const { return source_->current()->loaded; }
void WebhookPluginBase::load(const std::vector<json::object>& configurations,
                             asio::any_io_executor executor) {
  source_->load(configurations, std::move(executor));
}
std::size_t WebhookPluginBase::webhooks() const { return source_->current()->hooks.size(); }
std::shared_ptr<const WebhookSet> WebhookPluginBase::current() const { return source_->current(); }

bool WebhookPluginBase::may_handle(const AdmissionAttributes& a) const {
  if (exempt_from_policies(a.info)) return false;
  const auto set = current();
  if (!set->loaded) return a.user != nullptr;  // refused until loaded (kwatch's own writes pass)
  return set->may_match(a.info.group, a.info.resource);
}

namespace {

// The webhooks of `set` that the write matches, in order; an error ends the write.
std::optional<ApiError> select(const WebhookSet& set, const AdmissionAttributes& a,
                               const json::object* object, const kinds::Scheme& scheme,
                               NamespaceLookup& namespaces, const auth::RbacPolicySource* rbac,
                               std::vector<Matched>& out) {
  const MatchRequest request = match_request(a, object);
  const NamespaceLabels labels = namespaces.labels();
  for (const auto& hook : set.hooks) {
    const MatchOutcome m = hook->match.matches(request, &scheme, labels);
    if (!m.error.empty()) {
      if (hook->spec.fail_closed) return calling_error(*hook, m.error);
      continue;
    }
    if (!m.matched) continue;
    const json::object* o = object;
    const json::object* old = a.old_object;
    std::optional<json::object> converted, converted_old;
    if (m.matched_info->group != a.info.group || m.matched_info->version != a.info.version) {
      if (o != nullptr) o = &converted.emplace(convert_object(a.info, *m.matched_info, *o));
      if (old != nullptr) old = &converted_old.emplace(convert_object(a.info, *m.matched_info, *old));
    }
    if (auto refused = conditions_refuse(*hook, a, *m.matched_info, o, old, namespaces, rbac)) {
      if (refused->empty() || !hook->spec.fail_closed) continue;
      ApiError e(Errc::forbidden,
                 group_resource(a.info) + " \"" + a.name + "\" is forbidden: " + *refused);
      e.name = a.name;
      e.group = a.info.group;
      e.kind = a.info.resource;
      return e;
    }
    out.push_back({hook, m.matched_info});
  }
  return std::nullopt;
}

asio::awaitable<CallResult> call_once(const Hook& h, const AdmissionAttributes& a,
                                      const kinds::ResourceInfo& matched,
                                      const json::object* object, const ResolveContext& context);

// Why an endpoint address may not be called (kube's ValidateNonSpecialIP, which kube applies
// to every Endpoints and EndpointSlice address): "" when it may. Names are refused when they
// are "localhost".
std::string special_address(std::string_view host) {
  if (host == "localhost" || host.ends_with(".localhost")) {
    return "may not be in the loopback range (127.0.0.0/8, ::1/128)";
  }
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(std::string(host), ec);
  if (ec) return "";
  if (ip.is_unspecified()) return "may not be unspecified (" + std::string(host) + ")";
  if (ip.is_loopback()) return "may not be in the loopback range (127.0.0.0/8, ::1/128)";
  if (ip.is_v4()) {
    const auto b = ip.to_v4().to_bytes();
    if (b[0] == 169 && b[1] == 254) {
      return "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
    }
    if (b[0] == 224 && b[1] == 0 && b[2] == 0) {
      return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
    }
  } else {
    const auto v6 = ip.to_v6();
    if (v6.is_v4_mapped()) return special_address(asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string());
    if (v6.is_link_local()) return "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
    if (v6.is_multicast_link_local()) {
      return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
    }
  }
  return "";
}

const json::object* cached_object(const kinds::Scheme& scheme,
                                  const registry::CacherRegistry* cachers,
                                  std::string_view resource, std::string_view ns,
                                  std::string_view name, std::optional<json::value>& holder) {
  auto info = scheme.find("", "v1", resource);
  auto cacher = info && cachers != nullptr ? cachers->find(*info) : nullptr;
  auto cached = cacher ? cacher->get(info->key(ns, name)) : nullptr;
  if (!cached) return nullptr;
  holder = apimachinery::parse_json(cached->json);
  return holder && holder->is_object() ? &holder->get_object() : nullptr;
}

// Where a webhook named by a Service is called, as kube-apiserver routes to it with
// --enable-aggregator-routing (kwatch has no cluster IPs to route through): the Service's port,
// then a ready address of its Endpoints with that port's name. "host:port", or the error.
struct Resolved {
  std::string address;
  std::string error;
};
Resolved resolve_service(const kinds::CompiledWebhook::Service& s, const ResolveContext& context) {
  Resolved out;
  std::optional<json::value> service_holder, endpoints_holder;
  const json::object* service =
      cached_object(*context.scheme, context.cachers, "services", s.ns, s.name, service_holder);
  if (service == nullptr) {
    out.error = "service " + quoted(s.name) + " not found";
    return out;
  }
  const json::object* spec = object_member(*service, "spec");
  if (string_at(spec, "type") == "ExternalName") {
    const std::string host = string_at(spec, "externalName");
    if (const std::string why = special_address(host); !why.empty() && !context.allow_loopback) {
      out.error = "service " + quoted(s.name) + " names " + quoted(host) + ", which " + why;
      return out;
    }
    out.address = host + ":" + std::to_string(s.port);
    return out;
  }
  const json::object* port = nullptr;
  if (const json::array* ports = apimachinery::array_member(spec, "ports")) {
    for (const auto& p : *ports) {
      const json::object* po = p.if_object();
      const json::value* number = po != nullptr ? po->if_contains("port") : nullptr;
      if (number != nullptr && number->is_int64() && number->get_int64() == s.port) {
        port = po;
        break;
      }
    }
  }
  if (port == nullptr) {
    out.error = "no service port " + std::to_string(s.port) + " found for service " + quoted(s.name);
    return out;
  }
  const std::string port_name = string_at(port, "name");
  const json::object* endpoints =
      cached_object(*context.scheme, context.cachers, "endpoints", s.ns, s.name, endpoints_holder);
  std::vector<std::string> candidates;
  std::string refused;
  if (const json::array* subsets = apimachinery::array_member(endpoints, "subsets")) {
    for (const auto& subset : *subsets) {
      const json::object* so = subset.if_object();
      std::int64_t target = -1;
      if (const json::array* ports = apimachinery::array_member(so, "ports")) {
        for (const auto& p : *ports) {
          const json::object* po = p.if_object();
          const json::value* number = po != nullptr ? po->if_contains("port") : nullptr;
          if (string_at(po, "name") == port_name && number != nullptr && number->is_int64()) {
            target = number->get_int64();
          }
        }
      }
      if (target < 0) continue;
      if (const json::array* addresses = apimachinery::array_member(so, "addresses")) {
        for (const auto& a : *addresses) {
          const std::string ip = string_at(a.if_object(), "ip");
          if (ip.empty()) continue;
          if (const std::string why = special_address(ip); !why.empty() && !context.allow_loopback) {
            refused = ip + " " + why;
            continue;
          }
          const bool v6 = ip.find(':') != std::string::npos;
          candidates.push_back((v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(target));
        }
      }
    }
  }
  if (candidates.empty()) {
    out.error = "no endpoints available for service " + quoted(s.name) +
                (refused.empty() ? "" : " (endpoint " + refused + ")");
    return out;
  }
  // Spread over the endpoints, as kube picks one at random.
  static std::atomic<std::size_t> next{0};
  out.address = candidates[next.fetch_add(1, std::memory_order_relaxed) % candidates.size()];
  return out;
}

// The client of the endpoint a Service's webhook resolves to now.
std::shared_ptr<client::HttpClient> service_client(const Hook& h, const ResolveContext& context,
                                                   std::string& error) {
  const auto& s = *h.spec.service;
  const Resolved where = resolve_service(s, context);
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
  auto made = client::HttpClient::create(h.executor, std::move(config), client_options(h.spec));
  if (!made) {
    error = "could not get REST client: " + made.error();
    return nullptr;
  }
  if (by_address.size() >= 64) by_address.clear();  // endpoints come and go: a bounded cache
  by_address.emplace(where.address, *made);
  return *made;
}

// Calls one webhook with the write's objects as `matched` serves them, timed.
asio::awaitable<CallResult> call(const Hook& h, const AdmissionAttributes& a,
                                 const kinds::ResourceInfo& matched, const json::object* object,
                                 const ResolveContext& context) {
  const auto start = std::chrono::steady_clock::now();
  CallResult r = co_await call_once(h, a, matched, object, context);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  co_return r;
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
  std::shared_ptr<client::HttpClient> client = h.client;
  if (h.spec.service) client = service_client(h, context, failed.failure);
  if (!client) {
    if (failed.failure.empty()) failed.failure = h.client_error;
    failed.code = 500;
    co_return failed;
  }
  std::optional<json::object> converted, converted_old;
  const json::object* o = object;
  const json::object* old = a.old_object;
  if (matched.group != a.info.group || matched.version != a.info.version) {
    if (o != nullptr) o = &converted.emplace(convert_object(a.info, matched, *o));
    if (old != nullptr) old = &converted_old.emplace(convert_object(a.info, matched, *old));
  }
  const std::string uid = base::new_uuid();
  std::string body = review_body(h, a, matched, o, old, uid);
  const std::string target = h.target + "?timeout=" + std::to_string(h.spec.timeout.count()) + "s";
  // On the write's own executor: no hop to another thread and back (the client's connections
  // are shared under a lock). Named, not awaited in an argument (GCC 12, docs/design.md).
  client::ApiResult<client::HttpResponse> answer =
      co_await client->request("POST", target, std::move(body), "application/json");
  if (!answer) {
    const std::string post = "Post " + quoted(h.url + "?timeout=" +
                                              std::to_string(h.spec.timeout.count()) + "s");
    const client::ApiError& e = answer.error();
    switch (e.kind) {
      case client::ApiError::Kind::timeout:
        failed.failure = "failed to call webhook: " + post + ": context deadline exceeded";
        break;
      case client::ApiError::Kind::status:
        failed.failure = "failed to call webhook: " + status_text(e);
        failed.code = static_cast<int>(e.http_status);
        break;
      default: {
        // The client's own words after its "POST <target>: ".
        std::string why = e.message;
        if (auto colon = why.find(": "); colon != std::string::npos) why = why.substr(colon + 2);
        failed.failure = "failed to call webhook: " + post + ": " + why;
      }
    }
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

// Tells `observer` of call `r` of `h` during write `a`; `rejected`: it refused the write.
void record(const WebhookCallObserver& observer, const Hook& h, const AdmissionAttributes& a,
            const CallResult& r, bool rejected, bool failed_open) {
  if (!observer) return;
  WebhookCallRecord record;
  record.name = h.spec.name;
  record.type = h.spec.mutating ? "admit" : "validating";
  record.operation = registry::operation_name(a.operation);
  record.seconds = r.seconds;
  record.code = r.code;
  record.rejected = rejected;
  record.failed_open = failed_open;
  if (rejected) {
    record.error_type = r.kind == CallResult::Kind::denied   ? "no_error"
                        : r.kind == CallResult::Kind::failed ? "calling_webhook_error"
                                                             : "apiserver_internal_error";
  }
  observer(record);
}

std::string round_index(int round, std::size_t index) {
  return "round_" + std::to_string(round) + "_index_" + std::to_string(index);
}

}  // namespace

ValidatingWebhookPlugin::ValidatingWebhookPlugin(std::shared_ptr<kinds::Scheme> scheme,
                                                 std::shared_ptr<registry::CacherRegistry> cachers)
    : WebhookPluginBase(std::move(scheme), std::move(cachers), /*mutating=*/false) {}

bool ValidatingWebhookPlugin::handles(const AdmissionAttributes& a) const { return may_handle(a); }

asio::awaitable<std::optional<ApiError>> ValidatingWebhookPlugin::validate(
    const AdmissionAttributes& a, const json::object* object) {
  const auto set = current();
  if (!set->loaded) co_return not_ready(a);
  NamespaceLookup namespaces(*scheme_, cachers_.get());
  std::vector<Matched> matched;
  // A delete is judged on the object it deletes.
  const json::object* judged = object != nullptr ? object : nullptr;
  if (auto e = select(*set, a, judged, *scheme_, namespaces, rbac_.get(), matched)) co_return e;
  if (matched.empty()) co_return std::nullopt;
  const ResolveContext context{scheme_.get(), cachers_.get(), allow_loopback_};
  std::vector<CallResult> results(matched.size());
  std::vector<std::size_t> arrival;  // the order the answers came in
  if (matched.size() == 1) {
    results[0] = co_await call(*matched[0].hook, a, *matched[0].info, judged, context);
    arrival.push_back(0);
  } else {
    // In parallel: each call reports its index when done; all are awaited (the attributes and
    // the object live as long as this call).
    const auto executor = co_await asio::this_coro::executor;
    using Done = asio::experimental::channel<void(boost::system::error_code, std::size_t)>;
    Done done(executor, matched.size());
    for (std::size_t i = 0; i < matched.size(); ++i) {
      asio::co_spawn(
          executor,
          [&, i]() -> asio::awaitable<void> {
            results[i] = co_await call(*matched[i].hook, a, *matched[i].info, judged, context);
            co_await done.async_send(boost::system::error_code{}, i, asio::use_awaitable);
          },
          asio::detached);
    }
    for (std::size_t n = 0; n < matched.size(); ++n) {
      const std::size_t i = co_await done.async_receive(asio::use_awaitable);
      arrival.push_back(i);
    }
  }
  // The first refusal to arrive is the answer; every call is counted.
  std::optional<ApiError> verdict;
  for (const std::size_t i : arrival) {
    CallResult& r = results[i];
    const Hook& h = *matched[i].hook;
    const bool refuses = r.kind == CallResult::Kind::denied ||
                         r.kind == CallResult::Kind::refused ||
                         (r.kind == CallResult::Kind::failed && h.spec.fail_closed);
    const bool failed_open = r.kind == CallResult::Kind::failed && !h.spec.fail_closed;
    record(observer_, h, a, r, refuses, failed_open);
    if (failed_open) {
      spdlog::warn("Failed calling webhook, failing open {}: {}", h.spec.name, r.failure);
      registry::add_audit_annotation(
          a, "failed-open.validating.webhook.admission.k8s.io/" + round_index(0, i), h.spec.name);
    }
    if (!refuses || verdict) continue;
    verdict = r.kind == CallResult::Kind::failed ? calling_error(h, r.failure) : std::move(r.refusal);
  }
  co_return verdict;
}

MutatingWebhookPlugin::MutatingWebhookPlugin(std::shared_ptr<kinds::Scheme> scheme,
                                             std::shared_ptr<registry::CacherRegistry> cachers)
    : WebhookPluginBase(std::move(scheme), std::move(cachers), /*mutating=*/true) {}

bool MutatingWebhookPlugin::handles(const AdmissionAttributes& a) const { return may_handle(a); }

asio::awaitable<std::optional<ApiError>> MutatingWebhookPlugin::admit(const AdmissionAttributes& a,
                                                                      json::object* object) {
  const auto set = current();
  if (!set->loaded) co_return not_ready(a);
  NamespaceLookup namespaces(*scheme_, cachers_.get());
  std::vector<Matched> matched;
  if (auto e = select(*set, a, object, *scheme_, namespaces, rbac_.get(), matched)) co_return e;
  const ResolveContext context{scheme_.get(), cachers_.get(), allow_loopback_};
  // Round 0 calls every matched webhook in order; round 1 those with IfNeeded that a later
  // webhook's change came after.
  std::vector<bool> again(matched.size(), false);
  for (int round = 0; round < 2; ++round) {
    std::optional<std::size_t> last_change;
    for (std::size_t i = 0; i < matched.size(); ++i) {
      if (round == 1 && !again[i]) continue;
      const Hook& h = *matched[i].hook;
      CallResult r = co_await call(h, a, *matched[i].info, object, context);
      bool mutated = false;
      if (r.kind == CallResult::Kind::allowed && r.patch) {
        // Errors of kwatch's own from here (not the webhook's call): counted as such.
        CallResult internal = r;
        internal.kind = CallResult::Kind::refused;
        internal.code = 0;
        if (object == nullptr) {
          record(observer_, h, a, internal, true, false);
          co_return ApiError(Errc::internal, "Internal error occurred: admission webhook " +
                                                 quoted(h.spec.name) +
                                                 " attempted to modify the object, which is not "
                                                 "supported for this operation");
        }
        // The patch is applied to the object as the matched resource serves it.
        const kinds::ResourceInfo& info = *matched[i].info;
        const bool converted = info.group != a.info.group || info.version != a.info.version;
        json::value doc = converted ? json::value(convert_object(a.info, info, *object))
                                    : json::value(*object);
        std::string detail;
        auto patched = apimachinery::apply_json_patch(std::move(doc), *r.patch, &detail);
        if (!patched || !patched->is_object()) {
          record(observer_, h, a, internal, true, false);
          co_return ApiError(Errc::internal,
                             "Internal error occurred: " +
                                 (detail.empty() ? std::string("the patch did not apply") : detail));
        }
        json::object after = converted ? convert_object(info, a.info, patched->get_object())
                                       : std::move(patched->get_object());
        if (!apimachinery::json_equal(json::value(after), json::value(*object))) {
          *object = std::move(after);
          mutated = true;
          last_change = i;
        }
      }
      registry::add_audit_annotation(
          a, "mutation.webhook.admission.k8s.io/" + round_index(round, h.position),
          json::serialize(json::object{{"configuration", h.spec.configuration},
                                       {"webhook", h.spec.name},
                                       {"mutated", mutated}}));
      const bool refuses = r.kind == CallResult::Kind::denied ||
                           r.kind == CallResult::Kind::refused ||
                           (r.kind == CallResult::Kind::failed && h.spec.fail_closed);
      record(observer_, h, a, r, refuses, r.kind == CallResult::Kind::failed && !refuses);
      switch (r.kind) {
        case CallResult::Kind::allowed: break;
        case CallResult::Kind::denied:
        case CallResult::Kind::refused: co_return std::move(r.refusal);
        case CallResult::Kind::failed:
          if (h.spec.fail_closed) co_return calling_error(h, r.failure);
          spdlog::warn("Failed calling webhook, failing open {}: {}", h.spec.name, r.failure);
          registry::add_audit_annotation(
              a, "failed-open.mutation.webhook.admission.k8s.io/" + round_index(round, h.position),
              h.spec.name);
          break;
      }
      if (round == 0 && mutated) {
        // Every IfNeeded webhook called before this change sees the object again.
        for (std::size_t k = 0; k < i; ++k) again[k] = again[k] || matched[k].hook->spec.reinvoke;
      }
    }
    if (std::none_of(again.begin(), again.end(), [](bool b) { return b; })) break;
  }
  co_return std::nullopt;
}

}  // namespace kwatch::admission
