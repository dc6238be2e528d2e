#include "server/request_info.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace kwatch::server {
namespace {

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream in(path);
  std::string step;
  while (std::getline(in, step, '/')) {
    if (!step.empty()) out.push_back(step);
  }
  return out;
}

// group/version/ns/resource/name/subresource, "w:" first for the watch prefix; "-" for none.
std::string read(const std::string& path) {
  auto info = parse_request_info(segments(path));
  if (!info) return "-";
  return (info->watch_prefix ? "w:" : "") + info->group + "/" + info->version + "/" + info->ns +
         "/" + info->resource + "/" + info->name + "/" + info->subresource;
}

TEST(RequestInfo, ReadsThePathsKubeServes) {
  EXPECT_EQ(read("/api/v1/pods"), "/v1//pods//");
  EXPECT_EQ(read("/api/v1/namespaces/t/pods"), "/v1/t/pods//");
  EXPECT_EQ(read("/api/v1/namespaces/t/pods/web"), "/v1/t/pods/web/");
  EXPECT_EQ(read("/api/v1/namespaces/t/pods/web/status"), "/v1/t/pods/web/status");
  EXPECT_EQ(read("/apis/apps/v1/namespaces/t/deployments/web/scale"),
            "apps/v1/t/deployments/web/scale");
  EXPECT_EQ(read("/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"),
            "rbac.authorization.k8s.io/v1//clusterroles/admin/");
  EXPECT_EQ(read("/api/v1/watch/namespaces/t/configmaps"), "w:/v1/t/configmaps//");
}

// A namespace object is the namespaces resource; its status and finalize are its subresources,
// not a namespace scope.
TEST(RequestInfo, ANamespacesOwnPathsAreTheNamespacesResource) {
  EXPECT_EQ(read("/api/v1/namespaces"), "/v1//namespaces//");
  EXPECT_EQ(read("/api/v1/namespaces/t"), "/v1//namespaces/t/");
  EXPECT_EQ(read("/api/v1/namespaces/t/status"), "/v1//namespaces/t/status");
  EXPECT_EQ(read("/api/v1/namespaces/t/finalize"), "/v1//namespaces/t/finalize");
}

TEST(RequestInfo, PathsThatNameNoResource) {
  EXPECT_EQ(read("/"), "-");
  EXPECT_EQ(read("/api"), "-");
  EXPECT_EQ(read("/api/v1"), "-");
  EXPECT_EQ(read("/apis/apps/v1"), "-");
  EXPECT_EQ(read("/healthz"), "-");
  EXPECT_EQ(read("/api/v1/namespaces/t/pods/web/status/extra"), "-");
  EXPECT_EQ(read("/api/v1/watch"), "-");
}

}  // namespace
}  // namespace kwatch::server
