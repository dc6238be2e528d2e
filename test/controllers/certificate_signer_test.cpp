#include "controllers/certificate_signer.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <gtest/gtest.h>

#include <ctime>

namespace kwatch::controllers {
namespace {

std::string pem_of_key(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  return out;
}

template <class Write, class T>
std::string pem_of(Write write, T* object) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio, object);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(size));
  BIO_free(bio);
  return out;
}

struct Ca {
  std::string cert_pem;
  std::string key_pem;
  EVP_PKEY* key = nullptr;
};

// A self-signed CA valid for `days`.
Ca make_ca(long days) {
  Ca ca;
  ca.key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("test-signer"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400);
  X509_set_pubkey(cert, ca.key);
  X509_sign(cert, ca.key, EVP_sha256());
  ca.cert_pem = pem_of(PEM_write_bio_X509, cert);
  ca.key_pem = pem_of_key(ca.key);
  X509_free(cert);
  return ca;
}

std::string make_request(const char* cn) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509_REQ* req = X509_REQ_new();
  X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_REQ_set_pubkey(req, key);
  X509_REQ_sign(req, key, EVP_sha256());
  std::string pem = pem_of(PEM_write_bio_X509_REQ, req);
  X509_REQ_free(req);
  EVP_PKEY_free(key);
  return pem;
}

X509* read_cert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

std::time_t seconds_of(const ASN1_TIME* t) {
  std::tm tm{};
  ASN1_TIME_to_tm(t, &tm);
  return timegm(&tm);
}

TEST(CertificateSigner, SignsTheRequestForClientsAsKubesSignerDoes) {
  Ca ca = make_ca(365);
  std::string error;
  auto authority = CertificateSigner::load(ca.cert_pem, ca.key_pem, error);
  ASSERT_TRUE(authority) << error;
  const std::time_t before = std::time(nullptr);
  auto pem = CertificateSigner::sign(*authority, make_request("alice"),
                                     {"digital signature", "client auth"}, std::chrono::hours(1),
                                     error);
  ASSERT_TRUE(pem) << error;
  X509* cert = read_cert(*pem);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_verify(cert, ca.key), 1);
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
  EXPECT_STREQ(subject, "/CN=alice");
  char issuer[256];
  X509_NAME_oneline(X509_get_issuer_name(cert), issuer, sizeof issuer);
  EXPECT_STREQ(issuer, "/CN=test-signer");
  // Under eight hours: from five minutes ago to one hour from now.
  const std::time_t not_before = seconds_of(X509_get0_notBefore(cert));
  const std::time_t not_after = seconds_of(X509_get0_notAfter(cert));
  EXPECT_NEAR(static_cast<double>(not_before), static_cast<double>(before - 300), 5);
  EXPECT_NEAR(static_cast<double>(not_after), static_cast<double>(before + 3600), 5);
  EXPECT_EQ(X509_check_ca(cert), 0);
  EXPECT_NE(X509_get_extended_key_usage(cert) & XKU_SSL_CLIENT, 0u);
  EXPECT_EQ(X509_get_extended_key_usage(cert) & XKU_SSL_SERVER, 0u);
  EXPECT_NE(X509_get_key_usage(cert) & KU_DIGITAL_SIGNATURE, 0u);
  X509_free(cert);

  // Eight hours and more: the duration counts from the backdated start.
  pem = CertificateSigner::sign(*authority, make_request("bob"), {"client auth"},
                                std::chrono::hours(24), error);
  ASSERT_TRUE(pem) << error;
  cert = read_cert(*pem);
  EXPECT_EQ(seconds_of(X509_get0_notAfter(cert)) - seconds_of(X509_get0_notBefore(cert)), 86400);
  X509_free(cert);
  EVP_PKEY_free(ca.key);
}

TEST(CertificateSigner, NeverPastTheSignersOwnExpiry) {
  Ca ca = make_ca(1);
  std::string error;
  auto authority = CertificateSigner::load(ca.cert_pem, ca.key_pem, error);
  ASSERT_TRUE(authority) << error;
  auto pem = CertificateSigner::sign(*authority, make_request("carol"), {"client auth"},
                                     std::chrono::hours(24 * 30), error);
  ASSERT_TRUE(pem) << error;
  X509* cert = read_cert(*pem);
  BIO* bio = BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size()));
  X509* ca_cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_EQ(seconds_of(X509_get0_notAfter(cert)), seconds_of(X509_get0_notAfter(ca_cert)));
  X509_free(cert);
  X509_free(ca_cert);
  // A key that is not the certificate's is refused at load.
  Ca other = make_ca(1);
  EXPECT_FALSE(CertificateSigner::load(ca.cert_pem, other.key_pem, error));
  EXPECT_NE(error.find("does not match"), std::string::npos) << error;
  EXPECT_FALSE(CertificateSigner::load("garbage", ca.key_pem, error));
  EVP_PKEY_free(ca.key);
  EVP_PKEY_free(other.key);
}

}  // namespace
}  // namespace kwatch::controllers
