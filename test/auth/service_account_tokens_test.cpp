#include "auth/service_account_tokens.hpp"

#include "base/base64.hpp"

#include <boost/json/array.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kwatch::auth {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("kwatch-sa-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(std::rand()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::int64_t now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ServiceAccountClaims robot(std::int64_t lifetime = 3600) {
  ServiceAccountClaims c;
  c.namespace_ = "team";
  c.name = "robot";
  c.uid = "1b99e692-2fc6-4dd8-a26c-715c96726ed6";
  c.audiences = {"https://kwatch.test"};
  c.issued_at = now();
  c.expires_at = c.issued_at + lifetime;
  c.id = "jti-1";
  return c;
}

std::shared_ptr<ServiceAccountTokens> load(const ServiceAccountKeyOptions& o) {
  auto loaded = ServiceAccountTokens::load(o);
  EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error());
  return loaded ? *loaded : nullptr;
}

// A key written as PEM; "ec" for P-256, "rsa" for 2048-bit RSA.
std::string write_key(const fs::path& dir, const std::string& name, const char* type,
                      bool public_only = false) {
  EVP_PKEY* key = std::string(type) == "ec" ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
  const std::string file = (dir / name).string();
  FILE* f = std::fopen(file.c_str(), "w");
  if (public_only) {
    PEM_write_PUBKEY(f, key);
  } else {
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  }
  std::fclose(f);
  EVP_PKEY_free(key);
  return file;
}

TEST(ServiceAccountTokens, GeneratesAKeyOnceAndReusesIt) {
  TempDir dir;
  ServiceAccountKeyOptions o{"https://kwatch.test", {}, "", {}, dir.path.string()};
  auto first = load(o);
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->ephemeral());
  EXPECT_EQ(fs::status(dir.path / "sa.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const std::string token = first->issue(robot());
  auto second = load(o);  // a restart: the same key, so old tokens still verify
  auto checked = second->verify(token, {});
  ASSERT_TRUE(checked);
  EXPECT_TRUE(checked->ok) << checked->error;
  EXPECT_EQ(checked->claims.name, "robot");
  EXPECT_EQ(checked->claims.uid, robot().uid);
}

TEST(ServiceAccountTokens, AnUnwritableDirectoryMeansAKeyInMemory) {
  // Not even root can make a directory in /proc.
  ServiceAccountKeyOptions o{"https://kwatch.test", {}, "", {}, "/proc/kwatch-cannot-write"};
  auto tokens = load(o);
  ASSERT_TRUE(tokens);
  EXPECT_TRUE(tokens->ephemeral());
  EXPECT_TRUE(tokens->verify(tokens->issue(robot()), {})->ok);
}

TEST(ServiceAccountTokens, RoundTripsWithRsaAndEcdsaKeys) {
  for (const char* type : {"rsa", "ec"}) {
    TempDir dir;
    const std::string key = write_key(dir.path, "sa.key", type);
    auto tokens = load({"https://kwatch.test", {}, key, {key}, ""});
    ASSERT_TRUE(tokens) << type;
    ServiceAccountClaims c = robot();
    c.bound_kind = "Pod";
    c.bound_name = "worker";
    c.bound_uid = "pod-uid";
    const std::string token = tokens->issue(c);
    const auto header = base::base64_decode(token.substr(0, token.find('.')));
    ASSERT_TRUE(header);
    EXPECT_NE(header->find(std::string(type) == "ec" ? "ES256" : "RS256"), std::string::npos);
    auto checked = tokens->verify(token, {});
    ASSERT_TRUE(checked && checked->ok) << type << " " << (checked ? checked->error : "");
    EXPECT_EQ(checked->claims.bound_kind, "Pod");
    EXPECT_EQ(checked->claims.bound_name, "worker");
    EXPECT_EQ(checked->claims.bound_uid, "pod-uid");
    EXPECT_EQ(checked->claims.audiences, std::vector<std::string>{"https://kwatch.test"});
  }
}

TEST(ServiceAccountTokens, RefusesWhatItShould) {
  TempDir dir;
  const std::string key = write_key(dir.path, "sa.key", "rsa");
  const std::string other = write_key(dir.path, "other.key", "rsa");
  auto tokens = load({"https://kwatch.test", {}, key, {key}, ""});
  auto stranger = load({"https://kwatch.test", {}, other, {other}, ""});
  auto elsewhere = load({"https://elsewhere", {}, key, {key}, ""});
  auto error_of = [&](const std::string& token, std::vector<std::string> audiences = {}) {
    auto checked = tokens->verify(token, audiences);
    return !checked ? std::string("not a JWT") : checked->ok ? std::string() : checked->error;
  };
  EXPECT_EQ(error_of(tokens->issue(robot())), "");
  EXPECT_EQ(error_of(tokens->issue(robot(-10))), "token has expired");
  EXPECT_EQ(error_of(stranger->issue(robot())), "invalid signature");
  EXPECT_EQ(error_of(elsewhere->issue(robot())), "token issuer is not https://kwatch.test");
  EXPECT_EQ(error_of(tokens->issue(robot()), {"vault"}), "token audiences are invalid");
  EXPECT_EQ(error_of("not-a-jwt"), "not a JWT");
  EXPECT_EQ(error_of("a.b.c"), "not a JWT");
  // Another signature byte (a character inside, whose bits are all signature bits).
  std::string token = tokens->issue(robot());
  char& c = token[token.rfind('.') + 5];
  c = c == 'A' ? 'B' : 'A';
  EXPECT_EQ(error_of(token), "invalid signature");
  // alg "none" is never accepted.
  std::string unsigned_token = tokens->issue(robot());
  unsigned_token = base::base64_encode(R"({"alg":"none"})", true) +
                   unsigned_token.substr(unsigned_token.find('.'), unsigned_token.rfind('.') -
                                                                       unsigned_token.find('.') + 1);
  EXPECT_EQ(error_of(unsigned_token), "invalid signature");
}

TEST(ServiceAccountTokens, VerifiesWithEveryListedKeyForRotation) {
  TempDir dir;
  const std::string old_key = write_key(dir.path, "old.key", "rsa");
  const std::string new_key = write_key(dir.path, "new.key", "ec");
  auto before = load({"https://kwatch.test", {}, old_key, {old_key}, ""});
  const std::string old_token = before->issue(robot());
  auto after = load({"https://kwatch.test", {}, new_key, {new_key, old_key}, ""});
  EXPECT_TRUE(after->verify(old_token, {})->ok);
  EXPECT_TRUE(after->verify(after->issue(robot()), {})->ok);
  auto dropped = load({"https://kwatch.test", {}, new_key, {new_key}, ""});
  EXPECT_FALSE(dropped->verify(old_token, {})->ok);
}

TEST(ServiceAccountTokens, KeyFileErrorsNameTheFile) {
  TempDir dir;
  const std::string key = write_key(dir.path, "sa.key", "rsa");
  const std::string other_pub = write_key(dir.path, "other.pub", "rsa", true);
  auto mismatch = ServiceAccountTokens::load({"https://kwatch.test", {}, key, {other_pub}, ""});
  ASSERT_FALSE(mismatch);
  EXPECT_NE(mismatch.error().find("must include the public key"), std::string::npos);
  std::ofstream(dir.path / "empty.pem") << "nothing here\n";
  auto empty = ServiceAccountTokens::load(
      {"https://kwatch.test", {}, (dir.path / "empty.pem").string(), {}, ""});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("empty.pem"), std::string::npos);
  auto missing = ServiceAccountTokens::load({"https://kwatch.test", {}, "/nonexistent.key", {}, ""});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("/nonexistent.key"), std::string::npos);
}

TEST(ServiceAccountTokens, PublishesItsKeysAsAJwkSet) {
  TempDir dir;
  const std::string rsa_key = write_key(dir.path, "rsa.key", "rsa");
  const std::string ec_key = write_key(dir.path, "ec.key", "ec");
  auto tokens = load({"https://kwatch.test/", {}, ec_key, {ec_key, rsa_key}, ""});
  auto jwks = tokens->jwks();
  const auto& keys = jwks.at("keys").as_array();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].at("kty"), "EC");
  EXPECT_EQ(keys[0].at("crv"), "P-256");
  EXPECT_EQ(base::base64_decode(keys[0].at("x").as_string())->size(), 32u);
  EXPECT_EQ(base::base64_decode(keys[0].at("y").as_string())->size(), 32u);
  EXPECT_EQ(keys[1].at("kty"), "RSA");
  EXPECT_EQ(base::base64_decode(keys[1].at("n").as_string())->size(), 256u);
  EXPECT_EQ(keys[1].at("e"), "AQAB");
  // The signing key's kid is the one in the tokens' headers.
  const std::string token = tokens->issue(robot());
  const auto header = base::base64_decode(token.substr(0, token.find('.')));
  EXPECT_NE(header->find(std::string(keys[0].at("kid").as_string())), std::string::npos);
  auto config = tokens->openid_configuration();
  EXPECT_EQ(config.at("issuer"), "https://kwatch.test/");
  EXPECT_EQ(config.at("jwks_uri"), "https://kwatch.test/openid/v1/jwks");
  EXPECT_EQ(config.at("id_token_signing_alg_values_supported"), (boost::json::array{"ES256", "RS256"}));
}

TEST(Base64, UrlAlphabetAndDecoding) {
  EXPECT_EQ(base::base64_encode(std::string("\xfb\xff", 2), true), "-_8");
  EXPECT_EQ(base::base64_decode("-_8"), std::string("\xfb\xff", 2));
  EXPECT_EQ(base::base64_decode("+/8="), std::string("\xfb\xff", 2));
  EXPECT_EQ(base::base64_decode("Zm9vYmFy"), "foobar");
  EXPECT_FALSE(base::base64_decode("Zm9v!"));
  EXPECT_FALSE(base::base64_decode("Z"));
}

}  // namespace
}  // namespace kwatch::auth
