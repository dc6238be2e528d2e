// The subresources kwatch serves for a resource, as kube-apiserver lists them in discovery:
// one list that the router (which subresource paths exist) and both discovery forms read, so
// that they cannot disagree. Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace kwatch::kinds {

struct ResourceInfo;

struct Subresource {
  std::string_view name;  // "status", "scale", "log", ...
  // What it answers with: empty group, version and kind mean the resource's own kind (status);
  // an empty group with a kind of its own is a core kind (PodExecOptions, v1).
  std::string_view group, version, kind;
  std::vector<std::string_view> verbs;  // as discovery lists them
  // Routed for these verbs' methods only (TokenRequest: POST); otherwise every method reaches
  // the subresource's handler, which answers what it does not serve.
  bool only_its_verbs = false;
  // A kubelet's or a proxy's to answer (a pod's log, exec, attach, portforward and proxy; a
  // service's and a node's proxy): kwatch, which runs no kubelet, answers with why it cannot.
  bool needs_kubelet = false;
  // For those: the field naming the node whose kubelet would answer (a pod's spec.nodeName, a
  // node's metadata.name); "" when no one node would (a service's proxy).
  std::string_view node_field = {};
  // An update through it writes the object's status, the rest staying the stored object's
  // (status; a CertificateSigningRequest's approval, whose kind keeps all but the conditions).
  bool writes_status = false;
};

// Whether kube serves it through a Connecter (a pod's exec, attach, portforward and proxy; a
// service's and a node's proxy): the request's options object is its kind (PodExecOptions, ...),
// and admission judges it as a CONNECT.
inline bool is_connect(const Subresource& s) { return s.needs_kubelet && s.kind.ends_with("Options"); }

// In discovery's order: status, scale, then the kind's own (pods' kubelet subresources, binding,
// eviction, ephemeralcontainers; serviceaccounts/token; namespaces/finalize; services' and nodes'
// proxy).
std::vector<Subresource> subresources_of(const ResourceInfo& info);
// The one named `name`, if `info` has it (no allocation: the router asks this per request).
const Subresource* find_subresource(const ResourceInfo& info, std::string_view name);

}  // namespace kwatch::kinds
