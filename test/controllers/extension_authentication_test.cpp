// How kube-system/extension-apiserver-authentication is merged with what other replicas wrote.
#include "controllers/extension_authentication.hpp"

#include <gtest/gtest.h>

namespace kwatch::controllers {
namespace {

const std::string kA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const std::string kB = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

TEST(ExtensionAuthentication, CaBundlesAreCombinedWithoutDuplicates) {
  EXPECT_EQ(merge_ca_bundles("", kA), kA);
  EXPECT_EQ(merge_ca_bundles(kA, kA), kA);
  EXPECT_EQ(merge_ca_bundles(kA, kB), kA + kB);
  EXPECT_EQ(merge_ca_bundles(kA + kB, kB + kA), kA + kB);
}

TEST(ExtensionAuthentication, ListsAreUnitedInOrder) {
  EXPECT_EQ(merge_lists({"X-Remote-User"}, {"X-Remote-User", "X-User"}),
            (std::vector<std::string>{"X-Remote-User", "X-User"}));
  EXPECT_EQ(merge_lists({}, {"front-proxy-client"}),
            std::vector<std::string>{"front-proxy-client"});
}

}  // namespace
}  // namespace kwatch::controllers
