// One call of one admission webhook, as kube-apiserver's webhook dispatchers make it: a webhook
// as compiled for calls (`Hook`: its match, match conditions and client), the AdmissionReview it
// is sent, the HTTPS call (a URL's client, or a Service resolved to one of its endpoints), and
// the answer read with kube's checks and messages. Internal to admission/: the webhook plugins
// (webhook_plugin.cpp) choose which webhooks to call and what their answers do to the write.
//
// A Hook is immutable once made, apart from its Service clients (made on first call, under a
// lock); calls may run concurrently on any thread of the io_context.
#pragma once

#include "admission/policy_matching.hpp"
#include "admission/policy_runtime.hpp"
#include "kinds/webhook_configuration.hpp"

#include "apimachinery/api_error.hpp"
#include "client/http_client.hpp"
#include "registry/admission.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

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

// One webhook in force: what was compiled of it, and its client.
struct Hook {
  kinds::CompiledWebhook spec;
  CompiledMatch match;
  std::string url;     // as messages show it, with the timeout query
  std::string target;  // the request target: the URL's path and `?timeout=<timeoutSeconds>s`
  std::shared_ptr<client::HttpClient> client;  // a URL's
  std::string client_error;  // why there is no client ("could not get REST client: ...")
  // A Service's: a client per endpoint it was resolved to, made when first called.
  struct ServiceClients {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<client::HttpClient>> by_address;
  };
  std::shared_ptr<ServiceClients> service_clients;
  boost::asio::any_io_executor executor;  // where a Service's clients live
  std::size_t max_response_bytes = 0;     // the most of an answer read
};

// What resolving a Service's webhook reads.
struct ResolveContext {
  const kinds::Scheme* scheme = nullptr;
  const registry::CacherRegistry* cachers = nullptr;
  bool allow_loopback = false;
};

// What one webhook answered, or why it could not.
struct CallResult {
  enum class Kind { allowed, denied, failed, refused } kind = Kind::allowed;
  std::string failure;  // failed: the reason after `failed calling webhook "x": `
  apimachinery::ApiError refusal;           // denied, refused: what the client gets
  std::optional<boost::json::value> patch;  // a mutating webhook's JSONPatch
  int code = 200;      // for the metrics: see WebhookCallRecord::code
  double seconds = 0;  // how long the call took
};

// The webhook of `spec`, its URL's client made on `executor` (a Service's clients are made
// there when first called), reading at most `max_response_bytes` of an answer (0: 6 MiB, room
// for a patch that replaces the largest object there may be).
std::shared_ptr<Hook> make_hook(kinds::CompiledWebhook spec, boost::asio::any_io_executor executor,
                                std::size_t max_response_bytes = 0);

// Calls `h` with the write `a`, its objects as `matched` serves them (`object` null on delete),
// on the caller's executor: the answer, or why there is none. Timed (CallResult::seconds).
boost::asio::awaitable<CallResult> call_webhook(const Hook& h,
                                                const registry::AdmissionAttributes& a,
                                                const kinds::ResourceInfo& matched,
                                                const boost::json::object* object,
                                                const ResolveContext& context);

// The client a call of `h` goes through now: its URL's, or one for the endpoint its Service
// resolves to; null with `error` ("could not get REST client: ...") when there is none.
std::shared_ptr<client::HttpClient> hook_client(const Hook& h, const ResolveContext& context,
                                                std::string& error);

// client-go's words for a request to `h` that got no answer to read: `Post "<url>": <why>`,
// "... context deadline exceeded" on a timeout, the status' text for a non-2xx answer.
std::string request_failure(const Hook& h, const client::ApiError& e);

// "group/version, Kind=kind" of an object, as Go prints a GroupVersionKind.
std::string gvk_of(const boost::json::object& object);

// kube's error for a call that failed, under failurePolicy Fail (500 InternalError).
apimachinery::ApiError calling_error(const Hook& h, const std::string& reason);

// Whether `h`'s match conditions let it be called: nullopt when they do; "" when one is false;
// else the evaluation errors.
std::optional<std::string> conditions_refuse(const Hook& h, const registry::AdmissionAttributes& a,
                                             const kinds::ResourceInfo& matched,
                                             const boost::json::object* object,
                                             const boost::json::object* old,
                                             NamespaceLookup& namespaces,
                                             const auth::RbacPolicySource* rbac);

}  // namespace kwatch::admission
