#include "server/audit_log.hpp"

#include "registry/resource_store.hpp"
#include "kinds/scheme.hpp"
#include "server/api_handler.hpp"
#include "server/encryption_at_rest.hpp"
#include "storage/encrypting_storage.hpp"
#include "storage/memory_storage.hpp"
#include "base/uuid.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

namespace kwatch::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("kwatch-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<json::object> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<json::object> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line).as_object());
  return out;
}

AuditEvent sample_event() {
  AuditEvent e;
  e.audit_id = base::new_uuid();
  e.request_uri = "/api/v1/namespaces/default/secrets?fieldManager=kubectl";
  e.method = "POST";
  e.user = {"alice", "42", {"dev", "system:authenticated"}};
  e.source_ip = "127.0.0.1";
  e.user_agent = "kubectl/v1.28.0";
  e.resource_request = true;
  e.attributes.verb = "create";
  e.attributes.resource = "secrets";
  e.attributes.namespace_ = "default";
  e.api_version = "v1";
  e.decision = "allow";
  e.code = 201;
  e.received = std::chrono::system_clock::from_time_t(1'700'000'000) + std::chrono::microseconds(123);
  e.stage_time = e.received + std::chrono::milliseconds(5);
  return e;
}

TEST(AuditLine, HasKubesEventShapeAtLevelMetadata) {
  const AuditEvent e = sample_event();
  const std::string line = audit_line(e, AuditEvent::Stage::response_complete);
  ASSERT_EQ(line.back(), '\n');
  auto o = json::parse(line).as_object();
  EXPECT_EQ(o.at("kind"), "Event");
  EXPECT_EQ(o.at("apiVersion"), "audit.k8s.io/v1");
  EXPECT_EQ(o.at("level"), "Metadata");
  EXPECT_EQ(o.at("auditID").as_string(), e.audit_id);
  EXPECT_EQ(o.at("stage"), "ResponseComplete");
  EXPECT_EQ(o.at("requestURI").as_string(), e.request_uri);
  EXPECT_EQ(o.at("verb"), "create");
  EXPECT_EQ(json::serialize(o.at("user")),
            R"({"username":"alice","uid":"42","groups":["dev","system:authenticated"]})");
  EXPECT_EQ(json::serialize(o.at("sourceIPs")), R"(["127.0.0.1"])");
  EXPECT_EQ(o.at("userAgent"), "kubectl/v1.28.0");
  EXPECT_EQ(json::serialize(o.at("objectRef")),
            R"({"resource":"secrets","namespace":"default","apiVersion":"v1"})");
  EXPECT_EQ(json::serialize(o.at("responseStatus")), R"({"metadata":{},"code":201})");
  EXPECT_EQ(o.at("requestReceivedTimestamp"), "2023-11-14T22:13:20.000123Z");
  EXPECT_EQ(o.at("stageTimestamp"), "2023-11-14T22:13:20.005123Z");
  EXPECT_EQ(o.at("annotations").at("authorization.k8s.io/decision"), "allow");
  EXPECT_FALSE(o.contains("requestObject"));
  EXPECT_FALSE(o.contains("responseObject"));
  EXPECT_TRUE(std::regex_match(e.audit_id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << e.audit_id;
}

TEST(AuditLine, NonResourceRequestsUseTheLowercaseMethodAndHaveNoObjectRef) {
  AuditEvent e = sample_event();
  e.resource_request = false;
  e.method = "GET";
  e.request_uri = "/healthz";
  e.code = 403;
  e.status = "Failure";
  e.reason = "Forbidden";
  e.message = "forbidden: User \"alice\" cannot get path \"/healthz\"";
  e.decision = "forbid";
  auto o = json::parse(audit_line(e, AuditEvent::Stage::response_started)).as_object();
  EXPECT_EQ(o.at("verb"), "get");
  EXPECT_EQ(o.at("stage"), "ResponseStarted");
  EXPECT_FALSE(o.contains("objectRef"));
  EXPECT_EQ(o.at("responseStatus").at("reason"), "Forbidden");
  EXPECT_EQ(o.at("responseStatus").at("code"), 403);
  EXPECT_EQ(o.at("annotations").at("authorization.k8s.io/decision"), "forbid");
}

TEST(AuditLine, NamesTheAuthenticatedUserAndWhomTheRequestActedAs) {
  AuditEvent e = sample_event();
  e.user = auth::UserInfo{"admin", "", {"system:masters", "system:authenticated"}};
  e.impersonated_user = auth::UserInfo{"alice", "", {"team-a"}, {{"scopes", {"view"}}}};
  auto o = json::parse(audit_line(e, AuditEvent::Stage::response_complete)).as_object();
  EXPECT_EQ(o["user"].as_object()["username"].as_string(), "admin");
  auto& as = o["impersonatedUser"].as_object();
  EXPECT_EQ(as["username"].as_string(), "alice");
  EXPECT_EQ(as["groups"].as_array().size(), 1u);
  EXPECT_EQ(as["extra"].as_object()["scopes"].as_array()[0].as_string(), "view");
  // Without impersonation there is no impersonatedUser.
  e.impersonated_user.reset();
  o = json::parse(audit_line(e, AuditEvent::Stage::response_complete)).as_object();
  EXPECT_FALSE(o.contains("impersonatedUser"));
}

TEST(AuditLog, WritesOneLinePerEventToAPrivateFile) {
  const auto dir = temp_dir("audit");
  const auto path = dir / "logs" / "audit.log";  // the directory is created
  auto log = AuditLog::open({path.string()});
  ASSERT_TRUE(log) << log.error();
  for (int i = 0; i < 100; ++i) (*log)->record(sample_event(), AuditEvent::Stage::response_complete);
  (*log)->stop();
  EXPECT_EQ((*log)->events(), 100u);
  EXPECT_EQ((*log)->errors(), 0u);
  EXPECT_EQ(read_lines(path).size(), 100u);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // After stop, events are counted as lost, not written.
  (*log)->record(sample_event(), AuditEvent::Stage::response_complete);
  EXPECT_EQ((*log)->errors(), 1u);
  fs::remove_all(dir);
}

TEST(AuditLog, AnUnwritablePathIsAnErrorNamingIt) {
  auto log = AuditLog::open({"/proc/kwatch-no-such-dir/audit.log"});
  ASSERT_FALSE(log);
  EXPECT_NE(log.error().find("/proc/kwatch-no-such-dir/audit.log"), std::string::npos) << log.error();
}

TEST(AuditLog, RotatesBySizeKeepingMaxBackupFilesNamedLikeLumberjack) {
  const auto dir = temp_dir("audit-rotate");
  const auto path = dir / "audit.log";
  const std::size_t line_size = audit_line(sample_event(), AuditEvent::Stage::response_complete).size();
  AuditLogOptions options;
  options.path = path.string();
  options.max_size_bytes = line_size * 10 + 1;  // ten lines per file
  options.max_backups = 2;
  auto log = AuditLog::open(options);
  ASSERT_TRUE(log) << log.error();
  // One at a time, so that each batch is one line and files fill exactly.
  for (int i = 0; i < 45; ++i) {
    (*log)->record(sample_event(), AuditEvent::Stage::response_complete);
    while (true) {
      std::ifstream in(path);
      std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!all.empty() && all.back() == '\n' && all.size() % line_size == 0 &&
          (all.size() / line_size) == static_cast<std::size_t>(i % 10 + 1)) {
        break;
      }
      std::this_thread::yield();
    }
  }
  (*log)->stop();
  std::vector<std::string> backups;
  const std::regex name(R"(audit-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}\.log)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto n = entry.path().filename().string();
    if (n == "audit.log") continue;
    EXPECT_TRUE(std::regex_match(n, name)) << n;
    backups.push_back(n);
    EXPECT_EQ(read_lines(entry.path()).size(), 10u) << n;
    struct stat st {};
    ::stat(entry.path().c_str(), &st);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  EXPECT_EQ(backups.size(), 2u);  // 4 rotations, the oldest 2 removed
  EXPECT_EQ(read_lines(path).size(), 5u);
  fs::remove_all(dir);
}

TEST(AuditLog, ALargeBatchIsSplitSoThatNoFilePassesTheLimitAndNothingIsLost) {
  const auto dir = temp_dir("audit-batch");
  const auto path = dir / "audit.log";
  const std::size_t line_size = audit_line(sample_event(), AuditEvent::Stage::response_complete).size();
  AuditLogOptions options;
  options.path = path.string();
  options.max_size_bytes = line_size * 10;
  auto log = AuditLog::open(options);
  ASSERT_TRUE(log) << log.error();
  for (int i = 0; i < 95; ++i) (*log)->record(sample_event(), AuditEvent::Stage::response_complete);
  (*log)->stop();
  std::size_t total = 0;
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_LE(fs::file_size(entry.path()), options.max_size_bytes) << entry.path();
    total += read_lines(entry.path()).size();
  }
  EXPECT_EQ(total, 95u);
  EXPECT_GE(files, 10u);  // rotations within one millisecond get distinct names
  fs::remove_all(dir);
}

TEST(AuditLog, AFullQueueDropsAndCountsInsteadOfWaiting) {
  const auto dir = temp_dir("audit-full");
  AuditLogOptions options;
  options.path = (dir / "audit.log").string();
  options.queue_capacity = 1;
  auto log = AuditLog::open(options);
  ASSERT_TRUE(log);
  for (int i = 0; i < 10000; ++i) (*log)->record(sample_event(), AuditEvent::Stage::response_complete);
  (*log)->stop();
  EXPECT_EQ((*log)->events(), 10000u);
  EXPECT_GT((*log)->errors(), 0u);
  EXPECT_EQ(read_lines(dir / "audit.log").size() + (*log)->errors(), 10000u);
  fs::remove_all(dir);
}

// ---- Through the handler: the record is put together where the data is ----

class AuditedHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("audited-handler");
    auto memory = storage::MemoryStorage::open({});
    ASSERT_TRUE(memory);
    raw_ = std::shared_ptr<storage::Storage>(std::move(*memory));
    scheme_ = kinds::Scheme::builtin();
    use_config(std::string(kKeyA) + "\n");
    auto log = AuditLog::open({(dir_ / "audit.log").string()});
    ASSERT_TRUE(log);
    audit_ = *log;
    handler_->set_audit(audit_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static constexpr const char* kKeyA = "      - {name: a, secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=}";
  static constexpr const char* kKeyB = "      - {name: b, secret: ZmVkY2JhOTg3NjU0MzIxMA==}";

  // A handler whose storage encrypts secrets with these key lines (the first writes).
  void use_config(const std::string& keys) {
    auto config = storage::parse_encryption_config(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
        "- resources: [secrets]\n  providers:\n  - aesgcm:\n      keys:\n" + keys);
    ASSERT_TRUE(config) << config.error();
    auto scopes = encryption_scopes(*config, *scheme_, "/registry");
    ASSERT_TRUE(scopes) << scopes.error();
    ASSERT_EQ(scopes->size(), 1u);
    EXPECT_EQ(scopes->front().prefix, "/registry/secrets/");
    auto storage = std::make_shared<storage::EncryptingStorage>(raw_, std::move(*scopes));
    auto store = std::make_shared<registry::ResourceStore>(storage, scheme_);
    auto handler = std::make_shared<ApiHandler>(scheme_, store, std::make_shared<Metrics>(), "127.0.0.1:0");
    if (audit_) handler->set_audit(audit_);
    handler_ = handler;
    run([store]() -> asio::awaitable<void> {
      const std::string ns = "default";
      auto r = co_await store->ensure_namespace(ns);
      EXPECT_TRUE(r);
    });
  }

  template <class F>
  void run(F f) {
    asio::io_context ioc;
    bool done = false;
    asio::co_spawn(ioc, f(), [&](std::exception_ptr e) {
      done = true;
      if (e) std::rethrow_exception(e);
    });
    ioc.run_for(std::chrono::seconds(10));
    ASSERT_TRUE(done);
  }

  ApiResponse call(std::string method, std::string target, std::string body = "") {
    ApiResponse out;
    ApiRequest req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.content_type = "application/json";
    req.body = std::move(body);
    req.user_agent = "audit-test/1.0";
    req.remote_address = "127.0.0.9";
    run([&]() -> asio::awaitable<void> { out = co_await handler_->handle(req); });
    return out;
  }

  std::string raw_value(const std::string& key) {
    std::string out;
    run([&]() -> asio::awaitable<void> {
      std::int64_t current = 0;
      auto kv = co_await raw_->get(key, current);
      if (kv) out = kv->value;
    });
    return out;
  }

  fs::path dir_;
  std::shared_ptr<storage::Storage> raw_;
  std::shared_ptr<kinds::Scheme> scheme_;
  std::shared_ptr<AuditLog> audit_;
  std::shared_ptr<ApiHandler> handler_;
};

constexpr const char* kSecrets = "/api/v1/namespaces/default/secrets";
constexpr const char* kSecret =
    R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"aHVudGVyMg=="}})";

TEST_F(AuditedHandlerTest, EachRequestIsOneLineWithItsUserVerbObjectAndCode) {
  auto created = call("POST", kSecrets, kSecret);
  ASSERT_EQ(created.status, 201u) << created.body;
  ASSERT_TRUE(created.headers.contains("Audit-Id"));
  EXPECT_EQ(call("GET", std::string(kSecrets) + "/s").status, 200u);
  EXPECT_EQ(call("GET", kSecrets).status, 200u);
  EXPECT_EQ(call("GET", std::string(kSecrets) + "/missing").status, 404u);
  EXPECT_EQ(call("GET", "/version").status, 200u);
  audit_->stop();
  auto lines = read_lines(dir_ / "audit.log");
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].at("auditID").as_string(), created.headers.at("Audit-Id"));
  EXPECT_EQ(lines[0].at("verb"), "create");
  EXPECT_EQ(lines[0].at("user").at("username"), "system:anonymous");
  EXPECT_EQ(json::serialize(lines[0].at("sourceIPs")), R"(["127.0.0.9"])");
  EXPECT_EQ(lines[0].at("userAgent"), "audit-test/1.0");
  EXPECT_EQ(json::serialize(lines[0].at("objectRef")),
            R"({"resource":"secrets","namespace":"default","apiVersion":"v1"})");
  EXPECT_EQ(lines[0].at("responseStatus").at("code"), 201);
  EXPECT_EQ(lines[0].at("annotations").at("authorization.k8s.io/decision"), "allow");
  EXPECT_EQ(lines[1].at("verb"), "get");
  EXPECT_EQ(lines[1].at("objectRef").at("name"), "s");
  EXPECT_EQ(lines[2].at("verb"), "list");
  EXPECT_EQ(lines[3].at("responseStatus").at("code"), 404);
  EXPECT_EQ(lines[3].at("responseStatus").at("reason"), "NotFound");
  EXPECT_EQ(lines[4].at("verb"), "get");
  EXPECT_FALSE(lines[4].contains("objectRef"));
  EXPECT_NE(lines[0].at("auditID"), lines[1].at("auditID"));
  // Nothing of the secret's content is in the log.
  std::ifstream in(dir_ / "audit.log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all.find("aHVudGVyMg"), std::string::npos);
}

TEST_F(AuditedHandlerTest, SecretsAreCiphertextInStorageAndPlaintextThroughTheApi) {
  ASSERT_EQ(call("POST", kSecrets, kSecret).status, 201u);
  const std::string raw = raw_value("/registry/secrets/default/s");
  EXPECT_TRUE(raw.starts_with("k8s:enc:aesgcm:v1:a:")) << raw;
  EXPECT_EQ(raw.find("aHVudGVyMg"), std::string::npos);
  auto got = call("GET", std::string(kSecrets) + "/s");
  EXPECT_EQ(json::parse(got.body).at("data").at("password"), "aHVudGVyMg==");
  // Namespaces are not in the configuration: plaintext.
  EXPECT_TRUE(raw_value("/registry/namespaces/default").starts_with("{"));
}

TEST_F(AuditedHandlerTest, RotationRewritesOnUpdateButNotOnADryRun) {
  auto created = call("POST", kSecrets, kSecret);
  ASSERT_EQ(created.status, 201u);
  use_config(std::string(kKeyB) + "\n" + kKeyA + "\n");  // restart with key b first
  auto got = call("GET", std::string(kSecrets) + "/s");
  ASSERT_EQ(got.status, 200u) << got.body;
  const std::string rv(json::parse(got.body).at("metadata").at("resourceVersion").as_string());
  // A dry-run replace of the unchanged object writes nothing, even though the bytes are stale.
  auto dry = call("PUT", std::string(kSecrets) + "/s?dryRun=All", got.body);
  EXPECT_EQ(dry.status, 200u) << dry.body;
  EXPECT_TRUE(raw_value("/registry/secrets/default/s").starts_with("k8s:enc:aesgcm:v1:a:"));
  // kube's rotation recipe, `kubectl get secrets -o json | kubectl replace -f -`: an unchanged
  // replace rewrites the secret with the new key.
  auto replaced = call("PUT", std::string(kSecrets) + "/s", got.body);
  ASSERT_EQ(replaced.status, 200u) << replaced.body;
  EXPECT_NE(json::parse(replaced.body).at("metadata").at("resourceVersion"), json::value(rv));
  EXPECT_TRUE(raw_value("/registry/secrets/default/s").starts_with("k8s:enc:aesgcm:v1:b:"));
  // Once current, an unchanged replace is a no-op again.
  auto again = call("PUT", std::string(kSecrets) + "/s", replaced.body);
  EXPECT_EQ(json::parse(again.body).at("metadata").at("resourceVersion"),
            json::parse(replaced.body).at("metadata").at("resourceVersion"));
}

TEST_F(AuditedHandlerTest, AValueNoKeyDecryptsIsA500NamingTheKeyAndCanBeDeletedOnlyOnPurpose) {
  ASSERT_EQ(call("POST", kSecrets, kSecret).status, 201u);
  use_config(std::string(kKeyB) + "\n");  // key a forgotten
  auto got = call("GET", std::string(kSecrets) + "/s");
  EXPECT_EQ(got.status, 500u);
  EXPECT_NE(got.body.find("/registry/secrets/default/s cannot be decoded (failed to decrypt"),
            std::string::npos)
      << got.body;
  auto list = call("GET", kSecrets);
  EXPECT_EQ(list.status, 200u);
  EXPECT_EQ(json::parse(list.body).at("items").as_array().size(), 0u);
  auto update = call("PUT", std::string(kSecrets) + "/s", kSecret);
  EXPECT_EQ(update.status, 500u);
  EXPECT_TRUE(raw_value("/registry/secrets/default/s").starts_with("k8s:enc:aesgcm:v1:a:"));
  EXPECT_EQ(call("DELETE", std::string(kSecrets) + "/s").status, 500u);
  EXPECT_EQ(call("DELETE", std::string(kSecrets) +
                               "/s?ignoreStoreReadErrorWithClusterBreakingPotential=true")
                .status,
            200u);
  EXPECT_EQ(raw_value("/registry/secrets/default/s"), "");
}

TEST(EncryptionScopes, MapKubesResourceNamesToKeyPrefixes) {
  auto scheme = kinds::Scheme::builtin("/kw");
  auto config = storage::parse_encryption_config(
      "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
      "- resources: [secrets, deployments.apps, widgets.example.com, '*.rbac.authorization.k8s.io']\n"
      "  providers: [{identity: {}}]\n"
      "- resources: ['*.*']\n"
      "  providers: [{identity: {}}]\n");
  ASSERT_TRUE(config) << config.error();
  auto scopes = encryption_scopes(*config, *scheme, "/kw");
  ASSERT_TRUE(scopes) << scopes.error();
  std::vector<std::string> prefixes;
  for (const auto& s : *scopes) prefixes.push_back(s.prefix);
  const std::vector<std::string> expected{"/kw/secrets/", "/kw/deployments/",
                                          "/kw/example.com/widgets/", "/kw/roles/",
                                          "/kw/clusterroles/", "/kw/rolebindings/",
                                          "/kw/clusterrolebindings/", "/kw/rbac.authorization.k8s.io/",
                                          "/kw/"};
  EXPECT_EQ(prefixes, expected);
}

}  // namespace
}  // namespace kwatch::server
