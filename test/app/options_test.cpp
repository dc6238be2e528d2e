#include "app/options.hpp"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace kwatch::app {
namespace {

TEST(Options, DefaultsMatchTheDocumentedOnes) {
  auto o = std::get<Options>(parse_options({}));
  EXPECT_EQ(o.bind_address, "127.0.0.1");
  EXPECT_FALSE(o.port);  // plain HTTP is opt-in
  EXPECT_EQ(o.secure_port, 6443);
  EXPECT_FALSE(o.anonymous_auth);
  EXPECT_EQ(o.authorization_mode, "RBAC");
  EXPECT_EQ(o.storage_backend, "memory");
  EXPECT_EQ(o.data_dir, "");
  EXPECT_EQ(o.io_threads, 0u);
  EXPECT_FALSE(o.low_priority_threads);  // half the I/O threads, at least one
  EXPECT_EQ(std::get<Options>(parse_options({"--low-priority-threads=0"})).low_priority_threads,
            0u);
}

TEST(Options, Http2FlagsKeepKubesMeaning) {
  auto o = std::get<Options>(parse_options({}));
  EXPECT_EQ(o.http2_max_streams_per_connection, 0u);  // the server's default, 100
  EXPECT_FALSE(o.disable_http2_serving);
  o = std::get<Options>(parse_options(
      {"--http2-max-streams-per-connection=250", "--disable-http2-serving=true"}));
  EXPECT_EQ(o.http2_max_streams_per_connection, 250u);
  EXPECT_TRUE(o.disable_http2_serving);
}

TEST(Options, AcceptsBothEqualsAndSeparateValues) {
  auto o = std::get<Options>(
      parse_options({"--port=9090", "--bind-address", "0.0.0.0", "--data-dir=/tmp/x",
                     "--io-threads", "3", "--storage-backend=memory"}));
  EXPECT_EQ(o.port, 9090);
  EXPECT_EQ(std::get<Options>(parse_options({"--port=0"})).port, 0);
  EXPECT_EQ(o.bind_address, "0.0.0.0");
  EXPECT_EQ(o.data_dir, "/tmp/x");
  EXPECT_EQ(o.io_threads, 3u);
}

TEST(Options, DelegationFlagsKeepKubesDefaultsAndNeedRbac) {
  auto o = std::get<Options>(parse_options({}));
  EXPECT_EQ(o.authentication_token_webhook_cache_ttl, std::chrono::seconds(10));
  EXPECT_EQ(o.authorization_webhook_cache_authorized_ttl, std::chrono::seconds(10));
  EXPECT_EQ(o.authorization_webhook_cache_unauthorized_ttl, std::chrono::seconds(10));
  EXPECT_FALSE(o.authentication_skip_lookup);
  EXPECT_FALSE(o.authentication_tolerate_lookup_failure);
  auto set = std::get<Options>(parse_options(
      {"--authentication-kubeconfig=/a", "--authorization-kubeconfig=/b",
       "--authorization-webhook-cache-authorized-ttl=0", "--authentication-skip-lookup=true"}));
  EXPECT_EQ(set.authentication_kubeconfig, "/a");
  EXPECT_EQ(set.authorization_kubeconfig, "/b");
  EXPECT_EQ(set.authorization_webhook_cache_authorized_ttl.count(), 0);
  EXPECT_TRUE(set.authentication_skip_lookup);
  // AlwaysAllow would allow every request before the delegated authorizer is asked.
  auto refused = parse_options({"--authorization-kubeconfig=/b", "--authorization-mode=AlwaysAllow"});
  ASSERT_TRUE(std::holds_alternative<ParseError>(refused));
  EXPECT_NE(std::get<ParseError>(refused).message.find("--authorization-mode=RBAC"),
            std::string::npos);
  EXPECT_TRUE(std::holds_alternative<ParseError>(
      parse_options({"--authentication-token-webhook-cache-ttl=-1s"})));
}

TEST(Options, HelpAndVersionAreRecognised) {
  EXPECT_TRUE(std::holds_alternative<ParseHelp>(parse_options({"--help"})));
  EXPECT_TRUE(std::holds_alternative<ParseVersion>(parse_options({"--version"})));
}

TEST(Options, UnknownFlagsAndBadValuesAreErrors) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--nope=1"}, {"--port=70000"}, {"--port=abc"}, {"--bind-address=999.1.1.1"},
           {"--storage-backend=sqlite"}, {"--io-threads=0"}, {"--port"}, {"positional"},
           {"--data-dir-fsync=maybe"}, {"--log-level=loud"}, {"--etcd-servers=127.0.0.1:2379"},
           {"--etcd-prefix=registry"}, {"--etcd-compaction-interval=soon"},
           {"--etcd-healthcheck-timeout=0"}, {"--etcd-readycheck-timeout=soon"},
           {"--watch-bookmark-interval=0"}, {"--watch-cache-sizes=pods"},
           {"--secure-port=0"}, {"--low-priority-threads=-1"}, {"--low-priority-threads=x"},
           {"--http2-max-streams-per-connection=-1"}, {"--disable-http2-serving=maybe"}}) {
    auto outcome = parse_options(args);
    ASSERT_TRUE(std::holds_alternative<ParseError>(outcome)) << args[0];
    EXPECT_FALSE(std::get<ParseError>(outcome).message.empty());
  }
}

TEST(Options, EtcdFlagsAreParsed) {
  auto o = std::get<Options>(parse_options(
      {"--storage-backend=etcd3", "--etcd-servers=http://127.0.0.1:1,https://127.0.0.1:2",
       "--etcd-prefix=/kw", "--etcd-compaction-interval=1m30s", "--etcd-cafile=/ca",
       "--etcd-readycheck-timeout=500ms"}));
  EXPECT_EQ(o.storage_backend, "etcd3");
  EXPECT_EQ(o.etcd_servers, (std::vector<std::string>{"http://127.0.0.1:1", "https://127.0.0.1:2"}));
  EXPECT_EQ(o.etcd_prefix, "/kw");
  EXPECT_EQ(o.compaction_interval, std::chrono::seconds(90));
  EXPECT_EQ(o.etcd_cafile, "/ca");
  EXPECT_EQ(o.etcd_healthcheck_timeout, std::chrono::seconds(2));  // kube's default
  EXPECT_EQ(o.etcd_readycheck_timeout, std::chrono::milliseconds(500));
}

TEST(Options, DurationsFollowGoSyntax) {
  EXPECT_EQ(parse_duration("0"), std::chrono::milliseconds(0));
  EXPECT_EQ(parse_duration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_duration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(parse_duration("5m0s"), std::chrono::minutes(5));
  EXPECT_EQ(parse_duration("1h2m"), std::chrono::minutes(62));
  EXPECT_FALSE(parse_duration("5"));
  EXPECT_FALSE(parse_duration("m"));
  EXPECT_FALSE(parse_duration("5x"));
}

TEST(Options, WatchCacheFlagsAreParsed) {
  auto o = std::get<Options>(parse_options(
      {"--watch-cache-sizes=pods#500,configmaps#100", "--default-watch-cache-size=200",
       "--watch-bookmark-interval=2s", "--min-request-timeout=60"}));
  EXPECT_EQ(o.watch_cache_sizes.at("pods"), 500u);
  EXPECT_EQ(o.watch_cache_sizes.at("configmaps"), 100u);
  EXPECT_EQ(o.default_watch_cache_size, 200u);
  EXPECT_EQ(o.watch_bookmark_interval, std::chrono::seconds(2));
  EXPECT_EQ(o.min_request_timeout, std::chrono::seconds(60));
}

TEST(Options, AuditAndEncryptionFlagsAreParsedAndOffByDefault) {
  auto d = std::get<Options>(parse_options({}));
  EXPECT_EQ(d.audit_log_path, "");
  EXPECT_EQ(d.encryption_provider_config, "");
  auto o = std::get<Options>(parse_options(
      {"--audit-log-path=-", "--audit-log-maxsize=100", "--audit-log-maxbackup", "3",
       "--audit-log-maxage=7", "--encryption-provider-config=/etc/kwatch/enc.yaml"}));
  EXPECT_EQ(o.audit_log_path, "-");
  EXPECT_EQ(o.audit_log_maxsize_mb, 100u);
  EXPECT_EQ(o.audit_log_maxbackup, 3u);
  EXPECT_EQ(o.audit_log_maxage_days, 7u);
  EXPECT_EQ(o.encryption_provider_config, "/etc/kwatch/enc.yaml");
  for (auto bad : {"--audit-log-maxsize=-1", "--audit-log-maxbackup=many", "--audit-log-maxage=x",
                   "--encryption-provider-config="}) {
    EXPECT_TRUE(std::holds_alternative<ParseError>(parse_options({bad}))) << bad;
  }
}

TEST(Options, SnapshotThresholdIsABoundedByteCount) {
  EXPECT_EQ(std::get<Options>(parse_options({})).snapshot_bytes, 64u << 20);
  EXPECT_EQ(std::get<Options>(parse_options({"--data-dir-snapshot-bytes=4096"})).snapshot_bytes,
            4096u);
  EXPECT_EQ(std::get<Options>(parse_options({"--data-dir-snapshot-bytes=0"})).snapshot_bytes, 0u);
  for (const char* bad : {"--data-dir-snapshot-bytes=-1", "--data-dir-snapshot-bytes=lots",
                          "--data-dir-snapshot-bytes=99999999999999999999"}) {
    EXPECT_TRUE(std::holds_alternative<ParseError>(parse_options({bad}))) << bad;
  }
}

TEST(Options, HelpHasOneRowPerFlagTheParserTakes) {
  const std::string help = usage();
  const auto names = flag_names();
  EXPECT_GT(names.size(), 50u);
  std::set<std::string> rows;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    const auto end = line.find_first_of("= ", 4);
    rows.insert(line.substr(4, end == std::string::npos ? std::string::npos : end - 4));
  }
  std::set<std::string> expected(names.begin(), names.end());
  expected.insert("help");
  expected.insert("version");
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(rows.size(), names.size() + 2);  // no flag listed twice
  for (const auto& name : names) {
    // An empty value is taken or refused as a value, never as an unknown flag.
    auto outcome = parse_options({"--" + name + "="});
    if (const auto* error = std::get_if<ParseError>(&outcome)) {
      EXPECT_EQ(error->message.find("unknown flag"), std::string::npos) << error->message;
    }
  }
  // Descriptions start in one column; a continuation line is indented to it.
  EXPECT_NE(help.find("  --bind-address=IP          address to serve on"), std::string::npos);
  EXPECT_NE(help.find("\n                             port). No TLS"), std::string::npos);
}

}  // namespace
TEST(Options, AdmissionPluginsAreKubesNames) {
  auto o = std::get<Options>(parse_options(
      {"--enable-admission-plugins=NodeRestriction,PodSecurity",
       "--disable-admission-plugins=ValidatingAdmissionPolicy,ResourceQuota"}));
  EXPECT_EQ(o.disabled_admission_plugins,
            (std::vector<std::string>{"ValidatingAdmissionPolicy", "ResourceQuota"}));
  auto bad = parse_options({"--enable-admission-plugins=NodeRestriction,NoSuchPlugin"});
  ASSERT_TRUE(std::holds_alternative<ParseError>(bad));
  EXPECT_NE(std::get<ParseError>(bad).message.find("plugin \"NoSuchPlugin\" is unknown"), std::string::npos);
}

}  // namespace kwatch::app
