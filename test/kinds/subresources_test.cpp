#include "kinds/subresources.hpp"

#include "kinds/scheme.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kwatch::kinds {
namespace {

std::vector<std::string> names(const ResourceInfo& info) {
  std::vector<std::string> out;
  for (const auto& sub : subresources_of(info)) out.emplace_back(sub.name);
  return out;
}

const ResourceInfo& builtin(const char* group, const char* version, const char* resource) {
  static auto scheme = Scheme::builtin();
  auto info = scheme->find(group, version, resource);
  EXPECT_TRUE(info) << resource;
  return *info;
}

TEST(Subresources, EachBuiltinKindHasKubesList) {
  EXPECT_EQ(names(builtin("apps", "v1", "deployments")), (std::vector<std::string>{"status", "scale"}));
  EXPECT_EQ(names(builtin("", "v1", "namespaces")), (std::vector<std::string>{"status", "finalize"}));
  EXPECT_EQ(names(builtin("", "v1", "services")), (std::vector<std::string>{"status", "proxy"}));
  EXPECT_EQ(names(builtin("", "v1", "nodes")), (std::vector<std::string>{"status", "proxy"}));
  EXPECT_EQ(names(builtin("", "v1", "serviceaccounts")), (std::vector<std::string>{"token"}));
  EXPECT_EQ(names(builtin("", "v1", "configmaps")), (std::vector<std::string>{}));
  EXPECT_EQ(names(builtin("", "v1", "pods")),
            (std::vector<std::string>{"status", "attach", "binding", "ephemeralcontainers",
                                      "eviction", "exec", "log", "portforward", "proxy"}));
}

TEST(Subresources, WhatEachAnswersWithAndWhichVerbs) {
  const ResourceInfo& pods = builtin("", "v1", "pods");
  const Subresource* eviction = find_subresource(pods, "eviction");
  ASSERT_NE(eviction, nullptr);
  EXPECT_EQ(eviction->group, "policy");
  EXPECT_EQ(eviction->kind, "Eviction");
  EXPECT_EQ(eviction->verbs, (std::vector<std::string_view>{"create"}));
  EXPECT_EQ(find_subresource(pods, "finalize"), nullptr);
  EXPECT_EQ(find_subresource(pods, "status")->name, "status");
  EXPECT_EQ(find_subresource(builtin("", "v1", "configmaps"), "status"), nullptr);
  const auto token = subresources_of(builtin("", "v1", "serviceaccounts"));
  ASSERT_EQ(token.size(), 1u);
  EXPECT_TRUE(token[0].only_its_verbs);  // TokenRequest is routed for POST only
  const Subresource* f = find_subresource(builtin("", "v1", "namespaces"), "finalize");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->kind.empty());  // the Namespace itself
  EXPECT_EQ(f->verbs, (std::vector<std::string_view>{"update"}));
}

TEST(Subresources, TheKubeletsAreMarkedAsSuch) {
  std::vector<std::string> kubelets;
  for (const char* resource : {"pods", "services", "nodes", "namespaces", "serviceaccounts"}) {
    for (const auto& sub : subresources_of(builtin("", "v1", resource))) {
      if (sub.needs_kubelet) kubelets.push_back(std::string(resource) + "/" + std::string(sub.name));
    }
  }
  EXPECT_EQ(kubelets, (std::vector<std::string>{"pods/attach", "pods/exec", "pods/log",
                                                "pods/portforward", "pods/proxy",
                                                "services/proxy", "nodes/proxy"}));
}

TEST(Subresources, ACustomResourceHasOnlyWhatItsDefinitionEnables) {
  ResourceInfo custom = builtin("", "v1", "pods");
  custom.origin = KindOrigin::custom;
  custom.group = "example.com";
  EXPECT_EQ(names(custom), (std::vector<std::string>{"status"}));
  // A custom resource named like a core one gets none of the core one's subresources.
  custom.group = "";
  EXPECT_EQ(names(custom), (std::vector<std::string>{"status"}));
}

}  // namespace
}  // namespace kwatch::kinds
