#include "client/kubeconfig.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kwatch::client {
namespace {

namespace fs = std::filesystem;

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kwatch-kubeconfig-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

// What deploy/make-pki.sh writes: paths relative to the file.
constexpr const char* kRelative = R"(apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: ca.crt
contexts:
- name: kwatch
  context:
    cluster: kwatch
    user: kwatch-admin
current-context: kwatch
users:
- name: kwatch-admin
  user:
    client-certificate: admin.crt
    client-key: admin.key
)";

TEST_F(KubeconfigTest, FilesAreReadRelativeToTheKubeconfig) {
  write("pki/ca.crt", "CA PEM");
  write("pki/admin.crt", "CERT PEM");
  write("pki/admin.key", "KEY PEM");
  const auto path = write("pki/kubeconfig", kRelative);
  auto c = load_kubeconfig({path});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->context, "kwatch");
  EXPECT_EQ(c->server, "https://127.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_EQ(c->client_cert_pem, "CERT PEM");
  EXPECT_EQ(c->client_key_pem, "KEY PEM");
  EXPECT_EQ(c->ns, "default");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST_F(KubeconfigTest, InlineDataTokensNamespacesAndAChosenContext) {
  // "CA PEM" and "CERT" and "KEY" in base64; a second context with a token file.
  write("token", "  s3cret-token\n");
  const std::string text = R"(apiVersion: v1
kind: Config
current-context: admin
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
    certificate-authority-data: Q0EgUEVN
    tls-server-name: api.prod
- name: lab
  cluster:
    server: http://127.0.0.1:8080
    insecure-skip-tls-verify: true
contexts:
- name: admin
  context: {cluster: prod, user: admin, namespace: team-a}
- name: robot
  context:
    cluster: lab
    user: robot
users:
- name: admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: robot
  user:
    tokenFile: token
)";
  auto admin = parse_kubeconfig(text, dir_.string());
  ASSERT_TRUE(admin) << admin.error();
  EXPECT_EQ(admin->ca_pem, "CA PEM");
  EXPECT_EQ(admin->client_cert_pem, "CERT");
  EXPECT_EQ(admin->client_key_pem, "KEY");
  EXPECT_EQ(admin->tls_server_name, "api.prod");
  EXPECT_EQ(admin->ns, "team-a");
  auto robot = parse_kubeconfig(text, dir_.string(), "robot");
  ASSERT_TRUE(robot) << robot.error();
  EXPECT_EQ(robot->server, "http://127.0.0.1:8080");
  EXPECT_TRUE(robot->insecure_skip_tls_verify);
  EXPECT_EQ(robot->token, "s3cret-token");
  EXPECT_EQ(robot->token_file, (dir_ / "token").string());
  EXPECT_EQ(robot->ns, "default");
}

TEST_F(KubeconfigTest, SeveralFilesMergeFirstNameWins) {
  write("ca.crt", "CA");
  const auto first = write("a", R"(clusters:
- name: c
  cluster: {server: "https://first:6443"}
users:
- name: u
  user: {token: first}
contexts:
- name: x
  context: {cluster: c, user: u}
)");
  const auto second = write("b", R"(current-context: x
clusters:
- name: c
  cluster: {server: "https://second:6443"}
- name: d
  cluster: {server: "https://d:6443"}
users:
- name: u
  user: {token: second}
contexts:
- name: y
  context: {cluster: d, user: u}
)");
  auto c = load_kubeconfig({first, second});
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "https://first:6443");
  EXPECT_EQ(c->token, "first");
  auto y = load_kubeconfig({first, second}, "y");
  ASSERT_TRUE(y) << y.error();
  EXPECT_EQ(y->server, "https://d:6443");

  ::setenv("KUBECONFIG", (first + ":" + (dir_ / "missing").string() + ":" + second).c_str(), 1);
  auto from_env = load_default_kubeconfig();
  ::unsetenv("KUBECONFIG");
  ASSERT_TRUE(from_env) << from_env.error();
  EXPECT_EQ(from_env->server, "https://first:6443") << "missing files in $KUBECONFIG are skipped";
}

TEST_F(KubeconfigTest, WhatCannotBeUsedIsAnErrorNamingIt) {
  struct Case {
    std::string text;
    std::string context;
    std::string says;
  };
  const std::string base = R"(clusters:
- name: c
  cluster: {server: "https://h:6443"}
contexts:
- name: x
  context: {cluster: c, user: u}
)";
  const std::vector<Case> cases = {
      {base + "users:\n- name: u\n  user: {token: t}\n", "nope", "context \"nope\" is not in the kubeconfig"},
      {base + "users: []\n", "x", "names user \"u\", which is not in the kubeconfig"},
      {base + "users:\n- name: u\n  user:\n    exec:\n      command: aws\n", "x",
       "exec is not supported"},
      {base + "users:\n- name: u\n  user: {client-certificate-data: Q0VSVA==}\n", "x",
       "needs its key"},
      {base + "users:\n- name: u\n  user: {client-key-data: '!!!'}\n", "x", "not valid base64"},
      {base + "users:\n- name: u\n  user: {tokenFile: /nonexistent/token}\n", "x",
       "cannot read /nonexistent/token"},
      {"clusters:\n- name: c\n  cluster: {server: ftp://h}\ncontexts:\n- name: x\n  context: {cluster: c}\n",
       "x", "is not an http(s):// URL"},
      {"contexts:\n- name: x\n  context: {cluster: gone}\n", "x", "names cluster \"gone\""},
      {"clusters: {a: b}\n", "x", "clusters must be a list"},
      {"clusters:\n  - &anchor {}\n", "x", "line"},
      {"kind: Config\n", "", "sets no current-context"},
  };
  for (const auto& c : cases) {
    auto r = parse_kubeconfig(c.text, dir_.string(), c.context);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().find(c.says), std::string::npos) << c.text << " -> " << r.error();
  }
  EXPECT_FALSE(load_kubeconfig({(dir_ / "absent").string()}));
}

// The shape `kubectl config view --raw` writes: keys sorted, `name` after the nested mapping.
TEST_F(KubeconfigTest, TheLayoutKubectlWritesIsRead) {
  auto c = parse_kubeconfig(R"(apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: Q0E=
    server: https://127.0.0.1:6443
  name: kind
contexts:
- context:
    cluster: kind
    namespace: apps
    user: kind
  name: kind
current-context: kind
kind: Config
preferences: {}
users:
- name: kind
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
)",
                            dir_.string());
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->client_cert_pem, "CERT");
  EXPECT_EQ(c->ns, "apps");
}

TEST_F(KubeconfigTest, AContextWithoutAUserIsAnonymous) {
  auto c = parse_kubeconfig(
      "current-context: x\nclusters:\n- name: c\n  cluster: {server: \"https://h:6443\"}\n"
      "contexts:\n- name: x\n  context: {cluster: c}\n",
      dir_.string());
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->token.empty());
  EXPECT_TRUE(c->client_cert_pem.empty());
}

}  // namespace
}  // namespace kwatch::client
