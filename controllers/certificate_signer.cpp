#include "controllers/certificate_signer.hpp"

#include "apimachinery/json_members.hpp"
#include "apimachinery/stored_json.hpp"
#include "base/base64.hpp"
#include "base/openssl_files.hpp"
#include "base/timestamps.hpp"
#include "kinds/certificate_signing_request.hpp"
#include "kinds/scheme.hpp"
#include "registry/cacher_registry.hpp"
#include "registry/resource_store.hpp"
#include "watch/cacher.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <ctime>
#include <set>

namespace kwatch::controllers {

namespace asio = boost::asio;
namespace json = boost::json;
namespace ossl = base::openssl;
using apimachinery::object_member;
using apimachinery::string_member;

struct CertificateSigner::Authority {
  ossl::Cert cert;
  ossl::Key key;
  std::time_t not_after = 0;
};

namespace {

using ossl::Request;
struct ExtStackFree {
  void operator()(STACK_OF(X509_EXTENSION) * s) const {
    sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
  }
};

constexpr std::chrono::seconds kBackdate{5 * 60};
constexpr std::chrono::seconds kShort{8 * 3600};

std::time_t asn1_time(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return timegm(&tm);
}

Request read_request(const std::string& pem) {
  ossl::Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Request req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return req;
}

// What the signer refuses of a request it would sign, in kube's words; "" when it accepts it.
std::string signer_refusal(std::string_view signer, const kinds::CertificateRequest& request,
                           const std::vector<std::string>& usages) {
  if (signer == kinds::kKubeApiServerClientSigner) {
    bool client_auth = false;
    for (const auto& u : usages) {
      if (u == "client auth") {
        client_auth = true;
      } else if (u != "digital signature" && u != "key encipherment") {
        return "invalid usage for client certificate: " + u;
      }
    }
    if (!client_auth) return "missing required usage for client certificate: client auth";
    return "";
  }
  // kubernetes.io/kube-apiserver-client-kubelet: ValidateKubeletClientCSR.
  if (request.organizations != std::vector<std::string>{"system:nodes"}) {
    return "subject organization is not system:nodes";
  }
  if (request.alternative_names) return "DNS subjectAltNames are not allowed";
  if (!request.common_name.starts_with("system:node:")) {
    return "subject common name does not begin with system:node:";
  }
  const std::set<std::string> got(usages.begin(), usages.end());
  const std::set<std::string> rsa{"client auth", "digital signature", "key encipherment"};
  const std::set<std::string> no_rsa{"client auth", "digital signature"};
  if (got != rsa && got != no_rsa) {
    return "usages did not match [client auth digital signature key encipherment]";
  }
  return "";
}

bool add_extension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

}  // namespace

std::shared_ptr<const CertificateSigner::Authority> CertificateSigner::load(
    const std::string& cert_pem, const std::string& key_pem, std::string& error) {
  auto authority = std::make_shared<Authority>();
  ossl::Bio cert_bio(BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())));
  authority->cert.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  ossl::Bio key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  authority->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!authority->cert || !authority->key) {
    error = ossl::error("reading the signing certificate and key");
    return nullptr;
  }
  if (X509_check_private_key(authority->cert.get(), authority->key.get()) != 1) {
    error = ossl::error("the signing key does not match the signing certificate");
    return nullptr;
  }
  authority->not_after = asn1_time(X509_get0_notAfter(authority->cert.get()));
  return authority;
}

std::optional<std::string> CertificateSigner::sign(const Authority& authority,
                                                   const std::string& request_pem,
                                                   const std::vector<std::string>& usages,
                                                   std::chrono::seconds ttl, std::string& error) {
  Request req = read_request(request_pem);
  if (!req) {
    error = "unable to parse the certificate request";
    return std::nullopt;
  }
  const std::time_t now = std::time(nullptr);
  const std::time_t not_before = now - kBackdate.count();
  std::time_t not_after = (ttl < kShort ? now : not_before) + ttl.count();
  if (not_after >= authority.not_after) not_after = authority.not_after;
  if (not_before >= authority.not_after || now >= authority.not_after) {
    error = "the signer has expired";
    return std::nullopt;
  }
  ossl::Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  // A random positive 128-bit serial.
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1) {
    error = ossl::error("serial number");
    return std::nullopt;
  }
  serial_bytes[0] &= 0x7f;
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_set_subject_name(cert.get(), X509_REQ_get_subject_name(req.get()));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(authority.cert.get()));
  X509_set_pubkey(cert.get(), X509_REQ_get0_pubkey(req.get()));
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), not_before);
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), not_after);
  // The subject alternative names asked for.
  std::unique_ptr<STACK_OF(X509_EXTENSION), ExtStackFree> exts(X509_REQ_get_extensions(req.get()));
  for (int i = 0; exts && i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts.get(), i);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) == NID_subject_alt_name) {
      X509_add_ext(cert.get(), ext, -1);
    }
  }
  // The usages asked for (keyUsagesFromStrings), as critical key usage and extended key usage.
  std::string key_usage;
  std::string extended;
  const auto append = [](std::string& list, const char* name) {
    if (!list.empty()) list += ',';
    list += name;
  };
  for (const auto& u : usages) {
    if (u == "digital signature") append(key_usage, "digitalSignature");
    if (u == "key encipherment") append(key_usage, "keyEncipherment");
    if (u == "client auth") append(extended, "clientAuth");
    if (u == "server auth") append(extended, "serverAuth");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, authority.cert.get(), cert.get(), nullptr, nullptr, 0);
  bool ok = add_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE");
  if (!key_usage.empty()) {
    ok = ok && add_extension(cert.get(), &ctx, NID_key_usage, ("critical," + key_usage).c_str());
  }
  if (!extended.empty()) ok = ok && add_extension(cert.get(), &ctx, NID_ext_key_usage, extended.c_str());
  if (X509_get_ext_by_NID(authority.cert.get(), NID_subject_key_identifier, -1) >= 0) {
    ok = ok && add_extension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  }
  const int key_type = EVP_PKEY_get_base_id(authority.key.get());
  const EVP_MD* digest = key_type == EVP_PKEY_ED25519 ? nullptr : EVP_sha256();
  if (!ok || X509_sign(cert.get(), authority.key.get(), digest) == 0) {
    error = ossl::error("signing the certificate");
    return std::nullopt;
  }
  return ossl::pem_of(cert.get());
}

CertificateSigner::CertificateSigner(std::shared_ptr<kinds::Scheme> scheme,
                                     std::shared_ptr<registry::ResourceStore> store,
                                     std::shared_ptr<registry::CacherRegistry> cachers,
                                     std::shared_ptr<const Authority> authority,
                                     std::chrono::seconds duration)
    : Reconciler(std::move(cachers),
                 scheme->find("certificates.k8s.io", "v1", "certificatesigningrequests"),
                 "certificate signer"),
      store_(std::move(store)), authority_(std::move(authority)), duration_(duration) {}

asio::awaitable<void> CertificateSigner::reconcile_once() {
  auto cacher = cachers_->find(*info_);
  if (!cacher || !cacher->ready()) co_return;
  std::vector<json::object> waiting;
  for (const auto& object : cacher->list(info_->key_prefix(), "", 0, nullptr).objects) {
    auto parsed = apimachinery::parse_json(object->json);
    if (!parsed || !parsed->is_object()) continue;
    const json::object& csr = parsed->get_object();
    const std::string_view signer = string_member(object_member(csr, "spec"), "signerName");
    if (signer != kinds::kKubeApiServerClientSigner && signer != kinds::kKubeletClientSigner) {
      continue;
    }
    if (!kinds::csr_has_condition(csr, "Approved") || kinds::csr_has_condition(csr, "Failed") ||
        !string_member(object_member(csr, "status"), "certificate").empty()) {
      continue;
    }
    waiting.push_back(std::move(parsed->get_object()));
  }
  for (json::object& csr : waiting) {
    const std::string name(string_member(object_member(csr, "metadata"), "name"));
    const json::object* spec = object_member(csr, "spec");
    const std::string signer(string_member(spec, "signerName"));
    std::vector<std::string> usages;
    if (const json::value* u = spec->if_contains("usages"); u && u->is_array()) {
      for (const auto& v : u->get_array()) {
        if (v.is_string()) usages.emplace_back(v.get_string());
      }
    }
    const auto request = kinds::read_certificate_request(csr);
    json::value& status_value = csr["status"];
    if (!status_value.is_object()) status_value = json::object();
    json::object& status = status_value.get_object();
    std::string refusal = request.error.empty() ? signer_refusal(signer, request, usages)
                                                : "unable to parse the certificate request";
    if (refusal.empty()) {
      std::chrono::seconds ttl = duration_;
      if (const json::value* s = spec->if_contains("expirationSeconds"); s && s->is_int64()) {
        ttl = std::min(ttl, std::chrono::seconds(s->get_int64()));
      }
      std::string error;
      auto pem = sign(*authority_, request.pem, usages, ttl, error);
      if (!pem) {
        spdlog::warn("cannot sign CertificateSigningRequest {}: {}", name, error);
        continue;
      }
      status["certificate"] = base::base64_encode(*pem);
    } else {
      json::value& conditions = status["conditions"];
      if (!conditions.is_array()) conditions = json::array();
      const std::string now = base::now_rfc3339();
      conditions.get_array().push_back(json::object{{"type", "Failed"},
                                                    {"status", "True"},
                                                    {"reason", "SignerValidationFailure"},
                                                    {"message", refusal},
                                                    {"lastUpdateTime", now},
                                                    {"lastTransitionTime", now}});
    }
    // Written over the version read: a request that changed meanwhile is a conflict, and its
    // event brings another reconcile.
    registry::WriteQuery query;
    query.subresource = "status";
    query.field_manager = "kube-controller-manager";
    std::string cluster_scope;
    auto r = co_await store_->update(*info_, std::move(cluster_scope), name, std::move(csr),
                                     std::move(query));
    if (!r && r.error().code != base::Errc::conflict && r.error().code != base::Errc::not_found) {
      spdlog::warn("cannot write the status of CertificateSigningRequest {}: {}", name,
                   r.error().message);
    }
  }
}

}  // namespace kwatch::controllers
