// ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1)
// as kinds: kube's validation of them, word for word, and the compiled form of one webhook that
// the webhook admission plugins (admission/webhook_plugin.hpp) call.
//
// Pure functions; a CompiledWebhook is immutable and used from any thread.
#pragma once

#include "apimachinery/api_error.hpp"
#include "kinds/admission_policy.hpp"

#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kwatch::kinds {

// One webhook of a configuration, as stored (defaults set), ready to be called.
struct CompiledWebhook {
  std::string configuration;  // the configuration's metadata.name
  std::string name;           // webhooks[i].name
  std::size_t index = 0;      // i
  bool mutating = false;
  // clientConfig: a URL, or a Service (namespace, name, port, path).
  std::string url;
  struct Service {
    std::string ns, name, path;
    int port = 443;
  };
  std::optional<Service> service;
  std::string ca_pem;  // clientConfig.caBundle decoded ("" for the system's roots)
  bool fail_closed = true;  // failurePolicy Fail
  // A MatchResources made of the webhook's rules, selectors and matchPolicy (for CompiledMatch).
  boost::json::object match;
  std::string side_effects;  // None, NoneOnDryRun, Some, Unknown
  std::chrono::seconds timeout{10};
  // The AdmissionReview version to send: the first of admissionReviewVersions that kwatch
  // speaks (v1, v1beta1); "" when none is (every call then fails, under the failure policy).
  std::string review_version;
  bool reinvoke = false;  // reinvocationPolicy IfNeeded
  // Its match conditions, compiled as a policy's (CompiledPolicy::match_conditions; the
  // admission plugin evaluates them as it evaluates a policy's).
  std::shared_ptr<const CompiledPolicy> conditions;
};

// The webhooks of a configuration (either kind), in order.
std::vector<CompiledWebhook> compile_webhooks(const boost::json::object& configuration,
                                              bool mutating);

// A webhook's clientConfig (url, service, caBundle) into `h`: the part a CRD's conversion
// webhook shares with admission webhooks.
void read_client_config(const boost::json::object* client, CompiledWebhook& h);

// kube's ValidateWebhookURL (https only) and ValidateWebhookService, causes at `path`: also what
// a CRD's conversion webhook is checked with.
void check_webhook_url(const std::string& url, const std::string& path,
                       std::vector<apimachinery::Cause>& causes);
void check_webhook_service(const boost::json::object& service, const std::string& path,
                           std::vector<apimachinery::Cause>& causes);

// KindHooks::validate of the two kinds: kube's ValidateValidatingWebhookConfiguration and
// ValidateMutatingWebhookConfiguration, with the leniency an update keeps for what was stored
// (duplicate names, side effects, unknown review versions, unchanged match conditions).
void validate_validating_webhook_configuration(const boost::json::object& configuration,
                                               const boost::json::object* old,
                                               std::vector<apimachinery::Cause>& causes);
void validate_mutating_webhook_configuration(const boost::json::object& configuration,
                                             const boost::json::object* old,
                                             std::vector<apimachinery::Cause>& causes);

}  // namespace kwatch::kinds
