// The admission webhook plugins (kube's ValidatingAdmissionWebhook and MutatingAdmissionWebhook):
// every write that a webhook of a ValidatingWebhookConfiguration or MutatingWebhookConfiguration
// matches is sent to it as an AdmissionReview over HTTPS, and its answer allows, refuses or (for
// a mutating webhook) patches the object.
//
// Configurations are followed from their watch cache: a change is compiled into a new set of
// webhooks within ~100 ms and swapped in atomically; a request reads the current set without
// locks and never storage. Each webhook has its own HTTPS client (its caBundle, keep-alive
// connections shared by the I/O threads); a call is made on the write's own executor,
// asynchronously, and bounded by the webhook's
// timeoutSeconds, so a hanging webhook costs the writes it matches that long and nothing else:
// the I/O threads keep serving every other request.
//
// A webhook named by a Service is called as kube-apiserver calls it with
// --enable-aggregator-routing (kwatch routes no cluster IPs): at a ready address of the
// Service's Endpoints for the named port, with TLS verified for `<name>.<namespace>.svc`.
// Endpoints in the loopback, link-local or unspecified ranges are refused (kube refuses them in
// Endpoints objects), so a Service cannot point kwatch at itself or its host's local ports;
// --unsafe-webhook-loopback-endpoints lifts that for tests.
//
// Per write, as kube's dispatchers do:
// - which webhooks: the rules (with matchPolicy Equivalent, an equivalent resource's version),
//   the namespace and object selectors, then the match conditions (CEL: false skips; an error
//   refuses under failurePolicy Fail with 403, skips under Ignore);
// - validating webhooks are called in parallel; the first refusal to arrive is the answer;
// - mutating webhooks are called one after another (configurations by name, webhooks in
//   order), each on the object as the ones before left it, and answer with a JSONPatch;
//   a webhook with reinvocationPolicy IfNeeded is called once more when a later one changed
//   the object;
// - a refusal is the webhook's Status (code at least 400) with kube's message (`admission
//   webhook "<name>" denied the request: <message>`); a call that fails (timeout, refused
//   connection, certificate, non-2xx, an answer that is not an AdmissionReview for this request,
//   larger than 3 MiB, a patch that cannot be applied) refuses the write with 500 under
//   failurePolicy Fail and is ignored (and annotated in the audit log) under Ignore;
// - warnings go to the client, audit annotations to the audit event (`<webhook>/<key>`);
// - a dry-run write is refused (400) by a webhook whose sideEffects are not None or
//   NoneOnDryRun, before it is called.
//
// The admission configuration kinds themselves (webhook configurations, admission policies and
// their bindings) are never sent to webhooks (kube's exemption): a broken webhook cannot lock out
// its own repair.
//
// Ownership: shared (the admission chain); its follower task holds the source. Thread-safety:
// handles(), validate() and admit() from any thread.
#pragma once

#include "registry/admission.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/fwd.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace kwatch::kinds {
class Scheme;
}

namespace kwatch::registry {
class CacherRegistry;
}

namespace kwatch::auth {
class RbacPolicySource;
}

namespace kwatch::admission {

class WebhookSource;
struct WebhookSet;

// One webhook call as kube's webhook metrics count it.
struct WebhookCallRecord {
  std::string_view name;       // the webhook's
  std::string_view type;       // "validating" or "admit"
  std::string_view operation;  // CREATE, UPDATE, DELETE, CONNECT
  double seconds = 0;
  // What it came to: the HTTP code kube records (200 allowed, the refusal's code, the failed
  // call's 503/500/400 or the webhook's own non-2xx code; 0 for an error of kwatch's own).
  int code = 0;
  bool rejected = false;   // the write was refused because of it
  bool failed_open = false;  // it failed under failurePolicy Ignore
  // rejection_count's error_type: "calling_webhook_error", "no_error" (a refusal) or
  // "apiserver_internal_error"; empty when the write was not refused.
  std::string_view error_type;
};
using WebhookCallObserver = std::function<void(const WebhookCallRecord&)>;

// What both plugins share: the configurations followed, and one call of one webhook.
class WebhookPluginBase {
 public:
  // Development only (--unsafe-webhook-loopback-endpoints): a Service's webhook may be called
  // at a loopback endpoint, which is otherwise refused. Set before serving.
  void allow_loopback_endpoints(bool allow) { allow_loopback_ = allow; }
  // Told of every call (the server's metrics); set before serving.
  void use_observer(WebhookCallObserver observer) { observer_ = std::move(observer); }
  // Where `authorizer` in match conditions asks; unset: every check is allowed.
  void use_rbac(std::shared_ptr<auth::RbacPolicySource> rbac) { rbac_ = std::move(rbac); }
  // Follows the configuration cache on `executor` until stop(); webhook calls run there too.
  void start(boost::asio::any_io_executor executor);
  void stop();
  // Whether the configurations have been loaded once (start-up waits for it).
  bool loaded() const;
  // Puts these configurations (as stored) in force, their calls made on `executor`: what the
  // follower does after a change; tests call it directly.
  void load(const std::vector<boost::json::object>& configurations,
            boost::asio::any_io_executor executor);
  // The webhooks in force (for tests and logs).
  std::size_t webhooks() const;

 protected:
  WebhookPluginBase(std::shared_ptr<kinds::Scheme> scheme,
                    std::shared_ptr<registry::CacherRegistry> cachers, bool mutating);
  ~WebhookPluginBase();

  std::shared_ptr<const WebhookSet> current() const;
  bool may_handle(const registry::AdmissionAttributes& attributes) const;

  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<registry::CacherRegistry> cachers_;
  std::shared_ptr<WebhookSource> source_;
  std::shared_ptr<auth::RbacPolicySource> rbac_;
  WebhookCallObserver observer_;
  bool allow_loopback_ = false;
  bool mutating_;
};

class ValidatingWebhookPlugin final : public registry::ValidatingAdmission,
                                      public WebhookPluginBase {
 public:
  ValidatingWebhookPlugin(std::shared_ptr<kinds::Scheme> scheme,
                          std::shared_ptr<registry::CacherRegistry> cachers);
  std::string_view name() const override { return "ValidatingAdmissionWebhook"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> validate(
      const registry::AdmissionAttributes& attributes, const boost::json::object* object) override;
};

class MutatingWebhookPlugin final : public registry::MutatingAdmission, public WebhookPluginBase {
 public:
  MutatingWebhookPlugin(std::shared_ptr<kinds::Scheme> scheme,
                        std::shared_ptr<registry::CacherRegistry> cachers);
  std::string_view name() const override { return "MutatingAdmissionWebhook"; }
  bool handles(const registry::AdmissionAttributes& attributes) const override;
  boost::asio::awaitable<std::optional<apimachinery::ApiError>> admit(
      const registry::AdmissionAttributes& attributes, boost::json::object* object) override;
};

}  // namespace kwatch::admission
