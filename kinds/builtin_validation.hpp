// kube-apiserver's validation of built-in kinds beyond what their schemas say: workload
// selectors that must select their own pod template, fields an update may not change (a pod's
// spec, a claim's spec, a stateful set's spec, immutable config maps and secrets, selectors),
// the selector kube generates for a job. Causes carry kube's field paths and texts; values in
// messages are printed as Go's %#v prints them (`map[string]string{"app":"web"}`).
//
// Each function is a KindHooks::validate: it appends to `causes`; `old` is the stored object on
// updates (status writes included, whose spec is the stored one), null on creates.
// Pure functions; safe from any thread.
#pragma once

#include "apimachinery/api_error.hpp"

#include <boost/json/fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::kinds {

using Causes = std::vector<apimachinery::Cause>;

void validate_pod(const boost::json::object& pod, const boost::json::object* old, Causes& causes);
void validate_replication_controller(const boost::json::object& rc,
                                     const boost::json::object* old, Causes& causes);
void validate_deployment(const boost::json::object& deployment, const boost::json::object* old,
                         Causes& causes);
void validate_replica_set(const boost::json::object& rs, const boost::json::object* old,
                          Causes& causes);
void validate_stateful_set(const boost::json::object& sts, const boost::json::object* old,
                           Causes& causes);
void validate_daemon_set(const boost::json::object& ds, const boost::json::object* old,
                         Causes& causes);
void validate_job(const boost::json::object& job, const boost::json::object* old, Causes& causes);
void validate_cron_job(const boost::json::object& cron_job, const boost::json::object* old,
                       Causes& causes);
void validate_config_map(const boost::json::object& config_map, const boost::json::object* old,
                         Causes& causes);
void validate_secret(const boost::json::object& secret, const boost::json::object* old,
                     Causes& causes);
void validate_persistent_volume(const boost::json::object& pv, const boost::json::object* old,
                                Causes& causes);
void validate_persistent_volume_claim(const boost::json::object& pvc,
                                      const boost::json::object* old, Causes& causes);

// kube's ValidateEndpointIP: why `ip` may not be an endpoint's address (unparseable, unspecified,
// loopback, link-local, link-local multicast), each in kube's words; none when it may.
// `allow_loopback` lets loopback addresses through (--unsafe-webhook-loopback-endpoints, for
// tests that run webhooks on 127.0.0.1).
std::vector<std::string> endpoint_ip_problems(std::string_view ip, bool allow_loopback);
// Endpoints' and EndpointSlices' addresses: kube's IP rules (above); an EndpointSlice's of
// addressType IPv4 or IPv6 must be of that family.
void validate_endpoints(const boost::json::object& endpoints, const boost::json::object* old,
                        Causes& causes, bool allow_loopback);
void validate_endpoint_slice(const boost::json::object& slice, const boost::json::object* old,
                             Causes& causes, bool allow_loopback);

// A metav1.LabelSelector as %#v prints the struct:
// `v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}`.
std::string go_label_selector(const boost::json::value* selector);
// A label map as %#v prints it: `map[string]string{"a":"b", "c":"d"}`, `map[string]string(nil)`.
std::string go_string_map(const boost::json::value* labels);

}  // namespace kwatch::kinds
