#include "kinds/subresources.hpp"

#include "kinds/scheme.hpp"

namespace kwatch::kinds {

namespace {

const std::vector<std::string_view> kReadWrite{"get", "patch", "update"};
const std::vector<std::string_view> kProxyVerbs{"create", "delete", "get", "patch", "update"};

// Those a kubelet serves (kwatch answers them with why it cannot), binding, eviction and
// ephemeralcontainers.
const std::vector<Subresource>& pod_subresources() {
  static const std::vector<Subresource> kList = {
      {"attach", "", "", "PodAttachOptions", {"create", "get"}},
      {"binding", "", "", "Binding", {"create"}},
      {"ephemeralcontainers", "", "", "Pod", kReadWrite},
      {"eviction", "policy", "v1", "Eviction", {"create"}},
      {"exec", "", "", "PodExecOptions", {"create", "get"}},
      {"log", "", "", "Pod", {"get"}},
      {"portforward", "", "", "PodPortForwardOptions", {"create", "get"}},
      {"proxy", "", "", "PodProxyOptions", kProxyVerbs},
  };
  return kList;
}

}  // namespace

std::vector<Subresource> subresources_of(const ResourceInfo& info) {
  std::vector<Subresource> out;
  if (info.has_status) out.push_back({"status", "", "", "", kReadWrite});
  if (info.scale) out.push_back({"scale", "autoscaling", "v1", "Scale", kReadWrite});
  if (!info.group.empty() || info.origin != KindOrigin::builtin) return out;
  if (info.resource == "pods") {
    for (const auto& sub : pod_subresources()) out.push_back(sub);
  } else if (info.resource == "serviceaccounts") {
    out.push_back({"token", "authentication.k8s.io", "v1", "TokenRequest", {"create"}, true});
  } else if (info.resource == "namespaces") {
    out.push_back({"finalize", "", "", "", {"update"}});
  } else if (info.resource == "services") {
    out.push_back({"proxy", "", "", "ServiceProxyOptions", kProxyVerbs});
  } else if (info.resource == "nodes") {
    out.push_back({"proxy", "", "", "NodeProxyOptions", kProxyVerbs});
  }
  return out;
}

const Subresource* find_subresource(const std::vector<Subresource>& all, std::string_view name) {
  for (const auto& sub : all) {
    if (sub.name == name) return &sub;
  }
  return nullptr;
}

}  // namespace kwatch::kinds
