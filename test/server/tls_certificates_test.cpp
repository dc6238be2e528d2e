#include "server/tls_certificates.hpp"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kwatch::server {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("kwatch-tls-" + std::to_string(::getpid()) + "-" +
                                               std::to_string(std::rand()));
  ~TempDir() { fs::remove_all(path); }
};

X509* read_cert(const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return nullptr;
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return cert;
}

std::string contents(const std::string& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Verifies the serving certificate against the CA file, as a client configured with it would.
bool verifies(const ServingCertificate& c) {
  X509* leaf = read_cert(c.cert_file);
  X509* ca = read_cert(c.ca_file);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  X509_free(leaf);
  return ok;
}

TEST(TlsCertificates, AGeneratedServingCertificateVerifiesAgainstItsCaForEveryHost) {
  TempDir dir;
  auto c = ensure_self_signed_certificate(dir.path.string(), {"localhost", "127.0.0.1", "::1",
                                                              "kwatch.example.com"});
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->generated);
  EXPECT_TRUE(verifies(*c));
  X509* leaf = read_cert(c->cert_file);
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(X509_check_host(leaf, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(leaf, "kwatch.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(leaf, "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(leaf, "::1", 0), 1);
  EXPECT_NE(X509_check_host(leaf, "other.example.com", 0, 0, nullptr), 1);
  X509_free(leaf);
  struct stat st {};
  ASSERT_EQ(::stat(c->key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(TlsCertificates, ALaterStartReusesThemAndANewHostMakesThemAnew) {
  TempDir dir;
  auto first = ensure_self_signed_certificate(dir.path.string(), {"localhost", "127.0.0.1"});
  ASSERT_TRUE(first) << first.error();
  const std::string ca = contents(first->ca_file);
  auto again = ensure_self_signed_certificate(dir.path.string(), {"localhost", "127.0.0.1"});
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(again->generated);
  EXPECT_EQ(contents(again->ca_file), ca);
  auto wider = ensure_self_signed_certificate(dir.path.string(), {"localhost", "10.0.0.7"});
  ASSERT_TRUE(wider) << wider.error();
  EXPECT_TRUE(wider->generated);
  EXPECT_TRUE(verifies(*wider));
}

TEST(TlsCertificates, AnUnwritableDirectoryIsAClearError) {
  auto c = ensure_self_signed_certificate("/proc/kwatch-cannot-write-here", {"localhost"});
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().find("/proc/kwatch-cannot-write-here"), std::string::npos) << c.error();
}

}  // namespace
}  // namespace kwatch::server
