#include "server/tls_certificates.hpp"

#include "base/openssl_files.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

namespace kwatch::server {

namespace openssl = base::openssl;
namespace {

namespace fs = std::filesystem;

using openssl::Bio;
using openssl::Cert;
using openssl::Key;
using openssl::pem_of;
using openssl::write_file;

std::string openssl_error(const std::string& step) { return openssl::error(step); }

bool is_ip(const std::string& host) {
  ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str());
  if (ip == nullptr) return false;
  ASN1_OCTET_STRING_free(ip);
  return true;
}

Key new_key() { return Key(EVP_EC_gen("P-256")); }

bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, openssl::Free> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate for `key`, signed by `issuer_key` (itself when `issuer` is null).
Cert make_certificate(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                      EVP_PKEY* issuer_key, long days, bool ca, const std::vector<std::string>& hosts) {
  Cert cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);  // clocks of clients lag a little
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509* issuing = issuer != nullptr ? issuer : cert.get();
  bool ok = true;
  if (ca) {
    ok = ok && add_extension(cert.get(), issuing, NID_basic_constraints, "critical,CA:TRUE");
    ok = ok && add_extension(cert.get(), issuing, NID_key_usage,
                             "critical,digitalSignature,keyEncipherment,keyCertSign");
    ok = ok && add_extension(cert.get(), issuing, NID_subject_key_identifier, "hash");
  } else {
    ok = ok && add_extension(cert.get(), issuing, NID_basic_constraints, "critical,CA:FALSE");
    ok = ok && add_extension(cert.get(), issuing, NID_key_usage,
                             "critical,digitalSignature,keyEncipherment");
    ok = ok && add_extension(cert.get(), issuing, NID_ext_key_usage, "serverAuth");
    ok = ok && add_extension(cert.get(), issuing, NID_authority_key_identifier, "keyid");
    std::string san;
    for (const auto& h : hosts) {
      if (!san.empty()) san += ",";
      san += (is_ip(h) ? "IP:" : "DNS:") + h;
    }
    if (!san.empty()) ok = ok && add_extension(cert.get(), issuing, NID_subject_alt_name, san);
  }
  if (!ok || X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

Cert read_certificate(const fs::path& path) {
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) return nullptr;
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// Whether the certificate at `path` names every host and is not about to expire.
bool still_good(const fs::path& path, const std::vector<std::string>& hosts) {
  Cert cert = read_certificate(path);
  if (!cert) return false;
  time_t soon = std::time(nullptr) + 30 * 24 * 3600;
  if (X509_cmp_time(X509_get0_notAfter(cert.get()), &soon) < 0) return false;
  for (const auto& h : hosts) {
    const int ok = is_ip(h) ? X509_check_ip_asc(cert.get(), h.c_str(), 0)
                            : X509_check_host(cert.get(), h.c_str(), h.size(), 0, nullptr);
    if (ok != 1) return false;
  }
  return true;
}

using Outcome = boost::system::result<ServingCertificate, std::string>;

Outcome failure(std::string message) {
  return Outcome(boost::system::in_place_error, std::move(message));
}

}  // namespace

boost::system::result<ServingCertificate, std::string> ensure_self_signed_certificate(
    const std::string& cert_dir, const std::vector<std::string>& hosts) {
  const fs::path dir(cert_dir);
  ServingCertificate out;
  out.ca_file = (dir / "ca.crt").string();
  out.cert_file = (dir / "apiserver.crt").string();
  out.key_file = (dir / "apiserver.key").string();
  std::error_code ec;
  if (fs::exists(out.cert_file, ec) && fs::exists(out.key_file, ec) && fs::exists(out.ca_file, ec) &&
      still_good(out.cert_file, hosts)) {
    return out;
  }
  fs::create_directories(dir, ec);
  if (ec) return failure("cannot create " + cert_dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  Key ca_key = new_key();
  Key key = new_key();
  if (!ca_key || !key) return failure(openssl_error("generating keys"));
  const std::string ca_name = "kwatch-ca@" + std::to_string(std::time(nullptr));
  Cert ca = make_certificate(ca_key.get(), ca_name, nullptr, ca_key.get(), 3650, true, {});
  if (!ca) return failure(openssl_error("making the CA certificate"));
  Cert cert = make_certificate(key.get(), "kwatch-apiserver", ca.get(), ca_key.get(), 365, false,
                               hosts);
  if (!cert) return failure(openssl_error("making the serving certificate"));
  // Keys first: a certificate on disk always has its key.
  if (!write_file(dir / "ca.key", openssl::private_key_pem(ca_key.get()), 0600) ||
      !write_file(out.key_file, openssl::private_key_pem(key.get()), 0600) ||
      !write_file(out.ca_file, pem_of(ca.get()), 0644) ||
      !write_file(out.cert_file, pem_of(cert.get()) + pem_of(ca.get()), 0644)) {
    return failure("cannot write the certificates into " + cert_dir);
  }
  out.generated = true;
  return out;
}

}  // namespace kwatch::server
