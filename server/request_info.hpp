// What an API path names, read from its segments alone, as kube-apiserver's RequestInfoFactory
// reads it: /api/<version>/... (the core group) or /apis/<group>/<version>/..., an optional
// `watch/` step (the deprecated watch paths), `namespaces/<ns>/` for a namespaced resource, then
// the resource, its name and a subresource. A namespace object's own subresources
// (/api/v1/namespaces/<name>/status, /finalize) are the namespaces resource's, not a namespace
// scope. Pure: no kinds are looked up (the router does that), no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kwatch::server {

struct RequestInfo {
  std::string group;  // "" for the core group
  std::string version;
  std::string ns;     // "" when the path names no namespace
  std::string resource;
  std::string name;
  std::string subresource;
  bool watch_prefix = false;  // /api/v1/watch/...
};

// nullopt for a path that names no resource (discovery, /healthz, too few or too many steps).
std::optional<RequestInfo> parse_request_info(const std::vector<std::string>& segments);

}  // namespace kwatch::server
