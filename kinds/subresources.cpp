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
      {"attach", "", "", "PodAttachOptions", {"create", "get"}, false, true, "spec.nodeName"},
      {"binding", "", "", "Binding", {"create"}},
      {"ephemeralcontainers", "", "", "Pod", kReadWrite},
      {"eviction", "policy", "v1", "Eviction", {"create"}},
      {"exec", "", "", "PodExecOptions", {"create", "get"}, false, true, "spec.nodeName"},
      {"log", "", "", "Pod", {"get"}, false, true, "spec.nodeName"},
      {"portforward", "", "", "PodPortForwardOptions", {"create", "get"}, false, true,
       "spec.nodeName"},
      {"proxy", "", "", "PodProxyOptions", kProxyVerbs, false, true, "spec.nodeName"},
  };
  return kList;
}

}  // namespace

const Subresource kStatus{.name = "status", .verbs = kReadWrite, .writes_status = true};
const Subresource kScale{"scale", "autoscaling", "v1", "Scale", kReadWrite};
const std::vector<Subresource> kToken{
    {"token", "authentication.k8s.io", "v1", "TokenRequest", {"create"}, true}};
const std::vector<Subresource> kFinalize{{"finalize", "", "", "", {"update"}}};
const std::vector<Subresource> kServiceProxy{
    {"proxy", "", "", "ServiceProxyOptions", kProxyVerbs, false, true}};
const std::vector<Subresource> kNodeProxy{
    {"proxy", "", "", "NodeProxyOptions", kProxyVerbs, false, true, "metadata.name"}};
const std::vector<Subresource> kApproval{
    {.name = "approval", .verbs = kReadWrite, .writes_status = true}};
const std::vector<Subresource> kNone;

// Those of a built-in kind beyond status and scale.
const std::vector<Subresource>& own_subresources(const ResourceInfo& info) {
  if (info.origin != KindOrigin::builtin) return kNone;
  if (info.group == "certificates.k8s.io" && info.resource == "certificatesigningrequests") {
    return kApproval;
  }
  if (!info.group.empty()) return kNone;
  if (info.resource == "pods") return pod_subresources();
  if (info.resource == "serviceaccounts") return kToken;
  if (info.resource == "namespaces") return kFinalize;
  if (info.resource == "services") return kServiceProxy;
  if (info.resource == "nodes") return kNodeProxy;
  return kNone;
}

std::vector<Subresource> subresources_of(const ResourceInfo& info) {
  std::vector<Subresource> out;
  if (info.has_status) out.push_back(kStatus);
  if (info.scale) out.push_back(kScale);
  const auto& own = own_subresources(info);
  out.insert(out.end(), own.begin(), own.end());
  return out;
}

const Subresource* find_subresource(const ResourceInfo& info, std::string_view name) {
  if (name == kStatus.name) return info.has_status ? &kStatus : nullptr;
  if (name == kScale.name) return info.scale ? &kScale : nullptr;
  for (const auto& sub : own_subresources(info)) {
    if (sub.name == name) return &sub;
  }
  return nullptr;
}

}  // namespace kwatch::kinds
