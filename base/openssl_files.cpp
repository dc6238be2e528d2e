#include "base/openssl_files.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <sys/stat.h>

#include <fstream>

namespace kwatch::base::openssl {

void Free::operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
void Free::operator()(X509* p) const { X509_free(p); }
void Free::operator()(BIO* p) const { BIO_free(p); }
void Free::operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
void Free::operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
void Free::operator()(X509_REQ* p) const { X509_REQ_free(p); }

std::string error(const std::string& step) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return step + ": " + buf;
}

namespace {

std::string text_of(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

std::string pem_of(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return text_of(bio.get());
}

std::size_t count_certificates(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::size_t n = 0;
  while (Cert cert{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)}) ++n;
  ERR_clear_error();
  return n;
}

std::string private_key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return text_of(bio.get());
}

std::string public_key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PUBKEY(bio.get(), key);
  return text_of(bio.get());
}

bool write_file(const std::filesystem::path& path, const std::string& data, mode_t mode) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << data;
    if (!out.flush()) return false;
  }
  if (::chmod(tmp.c_str(), mode) != 0) return false;
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace kwatch::base::openssl
