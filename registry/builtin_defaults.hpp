// kube-apiserver's defaulting of the built-in kinds kwatch serves, on the JSON object: the
// SetDefaults_* functions of the kinds' v1 APIs, the defaults its default-on admission plugins
// add (Priority, DefaultTolerationSeconds) and the status a pod or namespace starts with.
//
// Each function fills absent fields only; what a client set is left alone, so applying a function
// twice changes nothing the second time. The `*_on_create` functions also set what only a create
// decides (a pod's initial status). Values that are not objects where an object is expected are
// skipped: the schema reports them.
// Pure functions; safe from any thread.
#pragma once

#include <boost/json/fwd.hpp>

#include <string>
#include <string_view>

namespace kwatch::registry {

// Pod spec and containers: restartPolicy, dnsPolicy, terminationGracePeriodSeconds,
// schedulerName, securityContext, enableServiceLinks; per container imagePullPolicy (by image
// tag), terminationMessagePath and -Policy, port protocol, probe timings, requests from limits;
// volume source default modes.
void default_pod_spec(boost::json::object& spec);
void default_pod(boost::json::object& pod);
// What admission adds when a pod is created (priority, tolerations for not-ready and
// unreachable nodes), then status.phase Pending and status.qosClass.
void default_pod_on_create(boost::json::object& pod);

// type, sessionAffinity, port protocol and targetPort, traffic policies.
void default_service(boost::json::object& service);

// replicas, strategy, revisionHistoryLimit, progressDeadlineSeconds, the pod template.
void default_deployment(boost::json::object& deployment);

// type Opaque; stringData folded into data (base64), as the API's conversion does.
void default_secret(boost::json::object& secret);

// The `kubernetes.io/metadata.name` label, equal to the name.
void default_namespace(boost::json::object& ns);
// status.phase Active and the `kubernetes` finalizer.
void default_namespace_on_create(boost::json::object& ns);

// subsets[].ports[].protocol.
void default_endpoints(boost::json::object& endpoints);

// The imagePullPolicy kube gives an image: Always for `:latest` or no tag (and no digest),
// IfNotPresent otherwise.
std::string default_image_pull_policy(std::string_view image);

}  // namespace kwatch::registry
