// kube's request header authenticator: who a front proxy (an aggregator) may say a request is
// from, and how the headers are read.
#include "auth/access.hpp"

#include <gtest/gtest.h>

namespace kwatch::auth {
namespace {

RequestHeaderOptions kubeadm_style() {
  RequestHeaderOptions o;
  o.allowed_names = {"front-proxy-client"};
  o.username_headers = {"X-Remote-User"};
  o.group_headers = {"X-Remote-Group"};
  o.extra_prefixes = {"X-Remote-Extra-"};
  return o;
}

ClientCertificate proxy_certificate(std::string cn = "front-proxy-client") {
  ClientCertificate c;
  c.front_proxy = true;
  c.user = std::move(cn);
  return c;
}

TEST(RequestHeader, TheUserGroupsAndExtrasComeFromTheHeaders) {
  Credentials credentials;
  credentials.proxy_headers = {{"x-remote-user", "alice"},
                               {"X-Remote-Group", "team-a"},
                               {"X-Remote-Group", "team-b"},
                               {"X-Remote-Extra-Scopes", "read"},
                               {"X-Remote-Extra-example.com%2Ffoo", "bar"},
                               {"Accept", "application/json"}};
  auto user = request_header_user(kubeadm_style(), proxy_certificate(), credentials);
  ASSERT_TRUE(user);
  EXPECT_EQ(user->name, "alice");
  EXPECT_EQ(user->groups, (std::vector<std::string>{"team-a", "team-b", "system:authenticated"}));
  EXPECT_EQ(user->extra.at("scopes"), std::vector<std::string>{"read"});
  EXPECT_EQ(user->extra.at("example.com/foo"), std::vector<std::string>{"bar"});
}

TEST(RequestHeader, OnlyAnAllowedFrontProxyWithAUserHeaderIsBelieved) {
  Credentials credentials;
  credentials.proxy_headers = {{"X-Remote-User", "alice"}};
  EXPECT_FALSE(request_header_user(kubeadm_style(), proxy_certificate("someone-else"), credentials))
      << "a common name not in --requestheader-allowed-names";
  ClientCertificate user_certificate = proxy_certificate();
  user_certificate.front_proxy = false;  // signed by the client CA, not the request header CA
  EXPECT_FALSE(request_header_user(kubeadm_style(), user_certificate, credentials));
  Credentials no_user;
  no_user.proxy_headers = {{"X-Remote-Group", "system:masters"}};
  EXPECT_FALSE(request_header_user(kubeadm_style(), proxy_certificate(), no_user))
      << "groups without a user name no one";
  RequestHeaderOptions any_name = kubeadm_style();
  any_name.allowed_names.clear();
  EXPECT_TRUE(request_header_user(any_name, proxy_certificate("someone-else"), credentials))
      << "no allowed names: any certificate the request header CA signs";
}

TEST(RequestHeader, AnonymousStaysUnauthenticated) {
  Credentials credentials;
  credentials.proxy_headers = {{"X-Remote-User", "system:anonymous"},
                               {"X-Remote-Group", "system:unauthenticated"}};
  auto user = request_header_user(kubeadm_style(), proxy_certificate(), credentials);
  ASSERT_TRUE(user);
  EXPECT_EQ(user->groups, std::vector<std::string>{"system:unauthenticated"});
}

}  // namespace
}  // namespace kwatch::auth
