// Small OpenSSL helpers shared by the files kwatch generates and reads at start-up (serving
// certificates, ServiceAccount keys) and by the certificates it reads and signs for
// CertificateSigningRequests: owning pointers, readable OpenSSL errors, PEM text, and files
// replaced atomically with a given mode (start-up only).
#pragma once

#include <openssl/types.h>
#include <openssl/x509.h>

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace kwatch::base::openssl {

struct Free {
  void operator()(EVP_PKEY* p) const;
  void operator()(X509* p) const;
  void operator()(BIO* p) const;
  void operator()(X509_EXTENSION* p) const;
  void operator()(EVP_MD_CTX* p) const;
  void operator()(X509_REQ* p) const;
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;
using Bio = std::unique_ptr<BIO, Free>;
using DigestContext = std::unique_ptr<EVP_MD_CTX, Free>;
using Request = std::unique_ptr<X509_REQ, Free>;

// "<step>: <OpenSSL's last error>", clearing the error queue.
std::string error(const std::string& step);

std::string pem_of(X509* cert);
// How many certificates the PEM text holds, read until the first block that is none.
std::size_t count_certificates(std::string_view pem);
std::string private_key_pem(EVP_PKEY* key);  // PKCS#8
std::string public_key_pem(EVP_PKEY* key);   // SubjectPublicKeyInfo

// Written next to the target, then renamed over it: a crash leaves the old file or the new one.
bool write_file(const std::filesystem::path& path, const std::string& data, mode_t mode);

}  // namespace kwatch::base::openssl
