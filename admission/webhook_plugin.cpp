#include "admission/webhook_plugin.hpp"

#include "registry/config_follower.hpp"
#include "admission/webhook_call.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/json_patch.hpp"
#include "apimachinery/stored_json.hpp"
#include "apimachinery/validation.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <map>

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

// One matched webhook: the resource it matched, and its place among all webhooks of the kind.
struct Matched {
  std::shared_ptr<const Hook> hook;
  std::shared_ptr<const kinds::ResourceInfo> info;
  std::size_t position = 0;  // in the ordered list of all webhooks of the kind
};

}  // namespace

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

class WebhookSource : public std::enable_shared_from_this<WebhookSource> {
 public:
  WebhookSource(std::shared_ptr<kinds::Scheme> scheme,
                std::shared_ptr<registry::CacherRegistry> cachers, bool mutating)
      : scheme_(std::move(scheme)), cachers_(std::move(cachers)), mutating_(mutating),
        set_(std::make_shared<WebhookSet>()) {}

  std::shared_ptr<const WebhookSet> current() const { return std::atomic_load(&set_); }

  void start(asio::any_io_executor executor) {
    auto self = shared_from_this();
    registry::follow_configurations(
        executor, {scheme_, cachers_, std::string(kGroup), "v1", {resource()}},
        [self] { return !self->stopped_; },
        [self, executor](std::vector<std::vector<json::object>>& lists) {
          self->load(lists[0], executor);
        },
        "admission webhook task");
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
      next->hooks.insert(next->hooks.end(), hooks.begin(), hooks.end());
      previous_[name] = {rv, std::move(hooks)};
    }
    std::atomic_store(&set_, std::shared_ptr<const WebhookSet>(std::move(next)));
  }

 private:
  std::string resource() const {
    return mutating_ ? "mutatingwebhookconfigurations" : "validatingwebhookconfigurations";
  }

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  bool mutating_;
  std::shared_ptr<const WebhookSet> set_;
  std::map<std::string, std::pair<std::string, std::vector<std::shared_ptr<const Hook>>>> previous_;
  std::atomic<bool> stopped_{false};
};

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

// The webhooks of `set` that the write matches, in order; an error ends the write. A hook with
// match conditions judges the object as its matched version serves it (converted through the
// definition's webhook for a custom resource that has one).
asio::awaitable<std::optional<ApiError>> select(const WebhookSet& set, const AdmissionAttributes& a,
                                                const json::object* object,
                                                const kinds::Scheme& scheme,
                                                NamespaceLookup& namespaces,
                                                const auth::RbacPolicySource* rbac,
                                                std::vector<Matched>& out) {
  const MatchRequest request = match_request(a, object);
  const NamespaceLabels labels = namespaces.labels();
  // Decided in the loop, returned after it (GCC 12: no co_return inside a loop with locals).
  std::optional<ApiError> failure;
  for (std::size_t position = 0; position < set.hooks.size() && !failure; ++position) {
    const auto& hook = set.hooks[position];
    const MatchOutcome m = hook->match.matches(request, &scheme, labels);
    if (!m.error.empty()) {
      if (hook->spec.fail_closed) failure = calling_error(*hook, m.error);
      continue;
    }
    if (!m.matched) continue;
    const json::object* o = object;
    const json::object* old = a.old_object;
    apimachinery::ApiResult<MatchedForms> forms{MatchedForms{}};
    if (!hook->spec.conditions->match_conditions.empty()) {
      forms = co_await convert_matched_forms(a.info, *m.matched_info, o, old);
      if (!forms) {
        failure = forms.error();
        continue;
      }
      o = forms->object_or(o);
      old = forms->old_or(old);
    }
    if (auto refused = conditions_refuse(*hook, a, *m.matched_info, o, old, namespaces, rbac)) {
      if (refused->empty() || !hook->spec.fail_closed) continue;
      ApiError e(Errc::forbidden,
                 group_resource(a.info) + " \"" + a.name + "\" is forbidden: " + *refused);
      e.name = a.name;
      e.group = a.info.group;
      e.kind = a.info.resource;
      failure = std::move(e);
      continue;
    }
    out.push_back({hook, m.matched_info, position});
  }
  co_return failure;
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
  // A delete has no object: its review carries the object it deletes as oldObject.
  const json::object* judged = object;
  auto selected = co_await select(*set, a, judged, *scheme_, namespaces, rbac_.get(), matched);
  if (selected) co_return selected;
  if (matched.empty()) co_return std::nullopt;
  const ResolveContext context{scheme_.get(), cachers_.get(), allow_loopback_};
  std::vector<CallResult> results(matched.size());
  std::vector<std::size_t> arrival;  // the order the answers came in
  if (matched.size() == 1) {
    results[0] = co_await call_webhook(*matched[0].hook, a, *matched[0].info, judged, context);
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
            results[i] = co_await call_webhook(*matched[i].hook, a, *matched[i].info, judged, context);
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
  auto selected = co_await select(*set, a, object, *scheme_, namespaces, rbac_.get(), matched);
  if (selected) co_return selected;
  const ResolveContext context{scheme_.get(), cachers_.get(), allow_loopback_};
  // Round 0 calls every matched webhook in order; round 1 those with IfNeeded that a later
  // webhook's change came after.
  std::vector<bool> again(matched.size(), false);
  for (int round = 0; round < 2; ++round) {
    std::optional<std::size_t> last_change;
    for (std::size_t i = 0; i < matched.size(); ++i) {
      if (round == 1 && !again[i]) continue;
      const Hook& h = *matched[i].hook;
      CallResult r = co_await call_webhook(h, a, *matched[i].info, object, context);
      bool mutated = false;
      if (r.kind == CallResult::Kind::allowed && r.patch) {
        // Errors of kwatch's own from here (not the webhook's call): counted as such.
        CallResult internal = r;
        internal.kind = CallResult::Kind::refused;
        internal.code = 0;
        if (object == nullptr) {
          record(observer_, h, a, internal, true, false);
          co_return ApiError(Errc::internal, "Internal error occurred: admission webhook " +
                                                 apimachinery::go_quote(h.spec.name) +
                                                 " attempted to modify the object, which is not "
                                                 "supported for this operation");
        }
        // The patch is applied to the object as the matched resource serves it.
        const kinds::ResourceInfo& info = *matched[i].info;
        const bool converted = info.group != a.info.group || info.version != a.info.version;
        apimachinery::ApiResult<json::object> seen = *object;
        if (converted) seen = co_await convert_matched(a.info, info, *object);
        if (!seen) {
          record(observer_, h, a, internal, true, false);
          co_return seen.error();
        }
        json::value doc(std::move(*seen));
        std::string detail;
        auto patched = apimachinery::apply_json_patch(std::move(doc), *r.patch, &detail);
        if (!patched || !patched->is_object()) {
          record(observer_, h, a, internal, true, false);
          co_return ApiError(Errc::internal,
                             "Internal error occurred: " +
                                 (detail.empty() ? std::string("the patch did not apply") : detail));
        }
        apimachinery::ApiResult<json::object> back = std::move(patched->get_object());
        if (converted) back = co_await convert_matched(info, a.info, *back);
        if (!back) {
          record(observer_, h, a, internal, true, false);
          co_return back.error();
        }
        json::object after = std::move(*back);
        if (!apimachinery::json_equal(json::value(after), json::value(*object))) {
          *object = std::move(after);
          mutated = true;
          last_change = i;
        }
      }
      registry::add_audit_annotation(
          a, "mutation.webhook.admission.k8s.io/" + round_index(round, matched[i].position),
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
              a,
              "failed-open.mutation.webhook.admission.k8s.io/" + round_index(round, matched[i].position),
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
