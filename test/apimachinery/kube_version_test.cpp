// The order of API versions in discovery.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "apimachinery/kube_version.hpp"

namespace kwatch::apimachinery {
namespace {

std::vector<std::string> sorted(std::vector<std::string> versions) {
  std::stable_sort(versions.begin(), versions.end(), [](const auto& a, const auto& b) {
    return compare_kube_aware_versions(a, b) > 0;
  });
  return versions;
}

TEST(KubeVersion, GaThenBetaThenAlphaThenTheRestByText) {
  EXPECT_EQ(sorted({"v1alpha1", "foo", "v1", "v10", "v1beta2", "v2", "v1beta1", "v11alpha2",
                    "v12alpha1", "bar", "v3beta1"}),
            (std::vector<std::string>{"v10", "v2", "v1", "v3beta1", "v1beta2", "v1beta1",
                                      "v12alpha1", "v11alpha2", "v1alpha1", "bar", "foo"}));
}

TEST(KubeVersion, OnlyTheExactFormIsKubeLike) {
  // Each of these is compared as text: after every kube-like version.
  for (const char* other : {"v", "1", "V1", "v1gamma1", "v1beta", "v1alpha", "v1.2", "v1beta1x",
                            "v99999999999999999999", "v1beta99999999999999999999", "v１"}) {
    EXPECT_LT(compare_kube_aware_versions(other, "v1alpha1"), 0) << other;
    EXPECT_GT(compare_kube_aware_versions("v1alpha1", other), 0) << other;
  }
  EXPECT_EQ(compare_kube_aware_versions("v1", "v1"), 0);
  EXPECT_EQ(compare_kube_aware_versions("v01", "v1"), 0);  // the same numbers
  EXPECT_GT(compare_kube_aware_versions("v2", "v01"), 0);  // leading zeros read as numbers
}

}  // namespace
}  // namespace kwatch::apimachinery
