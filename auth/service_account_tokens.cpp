#include "auth/service_account_tokens.hpp"

#include "apimachinery/json_members.hpp"
#include "base/base64.hpp"
#include "base/openssl_files.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kwatch::auth {

namespace openssl = base::openssl;
namespace json = boost::json;
namespace fs = std::filesystem;
using base::base64_decode;
using base::base64_encode;

struct ServiceAccountTokens::Key {
  openssl::Key pkey;
  bool ecdsa = false;  // ES256 (P-256); otherwise RS256
  std::string id;      // kid: base64url(SHA-256(SubjectPublicKeyInfo DER)), as kube derives it
};

ServiceAccountTokens::~ServiceAccountTokens() = default;

namespace {

using Outcome = boost::system::result<std::shared_ptr<ServiceAccountTokens>, std::string>;

Outcome failure(std::string message) {
  return Outcome(boost::system::in_place_error, std::move(message));
}

std::int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A key kube would take: RSA (2048 bits or more) or ECDSA on P-256.
std::string key_problem(EVP_PKEY* pkey, bool& ecdsa) {
  const int type = EVP_PKEY_get_base_id(pkey);
  if (type == EVP_PKEY_RSA) {
    ecdsa = false;
    return EVP_PKEY_get_bits(pkey) < 2048 ? "RSA keys must have at least 2048 bits" : "";
  }
  if (type == EVP_PKEY_EC) {
    ecdsa = true;
    char group[64] = {};
    std::size_t len = 0;
    if (EVP_PKEY_get_group_name(pkey, group, sizeof group, &len) != 1 ||
        std::string_view(group) != "prime256v1") {
      return "ECDSA keys must be on the P-256 curve";
    }
    return "";
  }
  return "only RSA and ECDSA P-256 keys are supported";
}

std::string key_id(EVP_PKEY* pkey) {
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(pkey, &der);
  if (len <= 0) return {};
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(der, static_cast<std::size_t>(len), digest);
  OPENSSL_free(der);
  return base64_encode(std::string_view(reinterpret_cast<char*>(digest), sizeof digest), true);
}

// Every key in a PEM file: public keys, certificates' keys, and private keys' public halves (kube
// takes all of these for --service-account-key-file).
boost::system::result<std::vector<openssl::Key>, std::string> read_keys(const std::string& file,
                                                                        bool private_only) {
  using Result = boost::system::result<std::vector<openssl::Key>, std::string>;
  openssl::Bio bio(BIO_new_file(file.c_str(), "r"));
  if (!bio) return Result(boost::system::in_place_error, "cannot read " + file);
  std::vector<openssl::Key> keys;
  for (;;) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) break;
    const std::string kind = name;
    const unsigned char* p = data;
    EVP_PKEY* pkey = nullptr;
    const bool is_private = kind == "PRIVATE KEY" || kind == "RSA PRIVATE KEY" || kind == "EC PRIVATE KEY";
    if (std::string_view(header).find("ENCRYPTED") != std::string_view::npos) {
      // leave pkey null: reported below
    } else if (kind == "PRIVATE KEY") {
      pkey = d2i_AutoPrivateKey(nullptr, &p, len);
    } else if (kind == "RSA PRIVATE KEY") {
      pkey = d2i_PrivateKey(EVP_PKEY_RSA, nullptr, &p, len);
    } else if (kind == "EC PRIVATE KEY") {
      pkey = d2i_PrivateKey(EVP_PKEY_EC, nullptr, &p, len);
    } else if (!private_only && kind == "PUBLIC KEY") {
      pkey = d2i_PUBKEY(nullptr, &p, len);
    } else if (!private_only && kind == "RSA PUBLIC KEY") {
      pkey = d2i_PublicKey(EVP_PKEY_RSA, nullptr, &p, len);
    } else if (!private_only && kind == "CERTIFICATE") {
      if (X509* cert = d2i_X509(nullptr, &p, len)) {
        pkey = X509_get_pubkey(cert);
        X509_free(cert);
      }
    }
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if ((is_private || !private_only) && pkey == nullptr &&
        (is_private || kind.find("PUBLIC KEY") != std::string::npos || kind == "CERTIFICATE")) {
      return Result(boost::system::in_place_error,
                    file + ": cannot read its " + kind + " block (encrypted keys are not supported)");
    }
    if (pkey != nullptr) keys.emplace_back(pkey);
  }
  ERR_clear_error();  // the end of the file reads as an error
  if (keys.empty()) {
    return Result(boost::system::in_place_error,
                  file + ": no " + (private_only ? "private key" : "key or certificate") + " in it");
  }
  return keys;
}

std::string sign(EVP_PKEY* pkey, bool ecdsa, std::string_view input) {
  openssl::DigestContext ctx(EVP_MD_CTX_new());
  std::size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return {};
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return {};
  }
  sig.resize(len);
  if (!ecdsa) return sig;
  // JWS carries ECDSA signatures as r || s, 32 bytes each, not DER.
  const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
  ECDSA_SIG* es = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
  if (es == nullptr) return {};
  std::string raw(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(es), reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(es), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  ECDSA_SIG_free(es);
  return raw;
}

bool verify_signature(EVP_PKEY* pkey, bool ecdsa, std::string_view input, std::string sig) {
  if (ecdsa) {
    if (sig.size() != 64) return false;
    ECDSA_SIG* es = ECDSA_SIG_new();
    const auto* raw = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG_set0(es, BN_bin2bn(raw, 32, nullptr), BN_bin2bn(raw + 32, 32, nullptr));
    unsigned char* der = nullptr;
    const int len = i2d_ECDSA_SIG(es, &der);
    ECDSA_SIG_free(es);
    if (len <= 0) return false;
    sig.assign(reinterpret_cast<char*>(der), static_cast<std::size_t>(len));
    OPENSSL_free(der);
  }
  openssl::DigestContext ctx(EVP_MD_CTX_new());
  const bool ok =
      ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pkey) == 1 &&
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  ERR_clear_error();
  return ok;
}

using apimachinery::string_at;

std::optional<std::int64_t> seconds_at(const json::object& obj, std::string_view key) {
  const json::value* v = obj.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->get_uint64());
  if (v->is_double()) return static_cast<std::int64_t>(v->get_double());
  return std::nullopt;
}

}  // namespace

Outcome ServiceAccountTokens::load(const ServiceAccountKeyOptions& options) {
  std::shared_ptr<ServiceAccountTokens> out(new ServiceAccountTokens());
  out->issuer_ = options.issuer;
  out->api_audiences_ = options.api_audiences;
  if (out->api_audiences_.empty()) out->api_audiences_.push_back(options.issuer);

  auto make = [](openssl::Key pkey, const std::string& file) -> boost::system::result<std::shared_ptr<const Key>, std::string> {
    auto key = std::make_shared<Key>();
    if (auto problem = key_problem(pkey.get(), key->ecdsa); !problem.empty()) {
      return boost::system::result<std::shared_ptr<const Key>, std::string>(
          boost::system::in_place_error, file + ": " + problem);
    }
    key->id = key_id(pkey.get());
    key->pkey = std::move(pkey);
    return std::shared_ptr<const Key>(std::move(key));
  };

  std::string signing_file = options.signing_key_file;
  std::vector<std::string> key_files = options.key_files;
  if (signing_file.empty() && key_files.empty()) {
    // Neither flag: a key of this server's own, made once in --cert-dir and reused, as the
    // serving certificate is.
    // Where the directory cannot be written, the key lives in memory: tokens work until the
    // server restarts (the caller says so in the log).
    const fs::path dir(options.cert_dir);
    signing_file = (dir / "sa.key").string();
    std::error_code ec;
    if (!fs::exists(signing_file, ec)) {
      openssl::Key pkey(EVP_RSA_gen(2048));
      if (!pkey) return failure(openssl::error("generating the ServiceAccount key"));
      fs::create_directories(dir, ec);
      if (!ec) ::chmod(dir.c_str(), 0700);
      if (ec || !openssl::write_file(signing_file, openssl::private_key_pem(pkey.get()), 0600) ||
          !openssl::write_file(dir / "sa.pub", openssl::public_key_pem(pkey.get()), 0644)) {
        auto key = make(std::move(pkey), signing_file);
        if (!key) return failure(key.error());
        out->signing_ = *key;
        out->verifying_.push_back(*key);
        out->ephemeral_ = true;
        return out;
      }
    }
    key_files.push_back(signing_file);
  }
  if (!signing_file.empty()) {
    auto keys = read_keys(signing_file, true);
    if (!keys) return failure(keys.error());
    auto key = make(std::move(keys->front()), signing_file);
    if (!key) return failure(key.error());
    out->signing_ = *key;
  }
  for (const auto& file : key_files) {
    auto keys = read_keys(file, false);
    if (!keys) return failure(keys.error());
    for (auto& pkey : *keys) {
      auto key = make(std::move(pkey), file);
      if (!key) return failure(key.error());
      out->verifying_.push_back(*key);
    }
  }
  if (out->signing_) {
    const bool listed = std::any_of(out->verifying_.begin(), out->verifying_.end(),
                                    [&](const auto& k) { return k->id == out->signing_->id; });
    if (!listed) {
      return failure("--service-account-key-file must include the public key of " +
                     signing_file + ", or the tokens this server issues would not be accepted");
    }
  }
  return out;
}

bool ServiceAccountTokens::can_sign() const { return signing_ != nullptr; }

namespace {

std::string big_number(EVP_PKEY* pkey, const char* param) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, param, &bn) != 1) return {};
  std::string bytes(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
  BN_bn2bin(bn, reinterpret_cast<unsigned char*>(bytes.data()));
  BN_free(bn);
  return bytes;
}

// A P-256 coordinate: always 32 bytes in a JWK.
std::string coordinate(EVP_PKEY* pkey, const char* param) {
  std::string bytes = big_number(pkey, param);
  return std::string(32 - std::min<std::size_t>(32, bytes.size()), '\0') + bytes;
}

}  // namespace

json::object ServiceAccountTokens::jwks() const {
  json::array keys;
  for (const auto& key : verifying_) {
    json::object jwk{{"use", "sig"}, {"kid", key->id}};
    if (key->ecdsa) {
      jwk["kty"] = "EC";
      jwk["crv"] = "P-256";
      jwk["alg"] = "ES256";
      jwk["x"] = base64_encode(coordinate(key->pkey.get(), OSSL_PKEY_PARAM_EC_PUB_X), true);
      jwk["y"] = base64_encode(coordinate(key->pkey.get(), OSSL_PKEY_PARAM_EC_PUB_Y), true);
    } else {
      jwk["kty"] = "RSA";
      jwk["alg"] = "RS256";
      jwk["n"] = base64_encode(big_number(key->pkey.get(), OSSL_PKEY_PARAM_RSA_N), true);
      jwk["e"] = base64_encode(big_number(key->pkey.get(), OSSL_PKEY_PARAM_RSA_E), true);
    }
    keys.push_back(std::move(jwk));
  }
  return json::object{{"keys", std::move(keys)}};
}

json::object ServiceAccountTokens::openid_configuration() const {
  json::array algorithms;
  for (const char* alg : {"ES256", "RS256"}) {
    const bool used = std::any_of(verifying_.begin(), verifying_.end(), [&](const auto& k) {
      return k->ecdsa == (std::string_view(alg) == "ES256");
    });
    if (used) algorithms.emplace_back(alg);
  }
  std::string issuer = issuer_;
  while (!issuer.empty() && issuer.back() == '/') issuer.pop_back();
  return json::object{{"issuer", issuer_},
                      {"jwks_uri", issuer + "/openid/v1/jwks"},
                      {"response_types_supported", json::array{"id_token"}},
                      {"subject_types_supported", json::array{"public"}},
                      {"id_token_signing_alg_values_supported", std::move(algorithms)}};
}

std::string ServiceAccountTokens::issue(const ServiceAccountClaims& c) const {
  if (!signing_) return {};
  json::object header{{"alg", signing_->ecdsa ? "ES256" : "RS256"}, {"kid", signing_->id}};
  json::array audiences;
  for (const auto& a : c.audiences) audiences.emplace_back(a);
  json::object account{{"name", c.name}, {"uid", c.uid}};
  json::object private_claim{{"namespace", c.namespace_}, {"serviceaccount", std::move(account)}};
  if (!c.bound_kind.empty()) {
    std::string field = c.bound_kind;
    std::transform(field.begin(), field.end(), field.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    private_claim[field] = json::object{{"name", c.bound_name}, {"uid", c.bound_uid}};
  }
  json::object claims{{"aud", std::move(audiences)},
                      {"exp", c.expires_at},
                      {"iat", c.issued_at},
                      {"iss", issuer_},
                      {"jti", c.id},
                      {"kubernetes.io", std::move(private_claim)},
                      {"nbf", c.issued_at},
                      {"sub", "system:serviceaccount:" + c.namespace_ + ":" + c.name}};
  std::string input = base64_encode(json::serialize(header), true) + "." +
                      base64_encode(json::serialize(claims), true);
  std::string sig = sign(signing_->pkey.get(), signing_->ecdsa, input);
  if (sig.empty()) return {};
  return input + "." + base64_encode(sig, true);
}

std::optional<ServiceAccountTokens::Checked> ServiceAccountTokens::verify(
    std::string_view token, const std::vector<std::string>& audiences) const {
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  // JWS segments are base64url (RFC 7515): '+' and '/' make a token that is not one.
  auto header_text = base64_decode(token.substr(0, dot1), true);
  auto claims_text = base64_decode(token.substr(dot1 + 1, dot2 - dot1 - 1), true);
  auto sig = base64_decode(token.substr(dot2 + 1), true);
  if (!header_text || !claims_text || !sig) return std::nullopt;
  boost::system::error_code ec;
  json::value header = json::parse(*header_text, ec);
  if (ec || !header.is_object()) return std::nullopt;
  json::value payload = json::parse(*claims_text, ec);
  if (ec || !payload.is_object()) return std::nullopt;

  Checked out;
  const json::object& claims = payload.get_object();
  // Someone else's JWT (an OIDC provider's): not ours to judge beyond saying so.
  if (string_at(claims, "iss") != issuer_) {
    out.error = "token issuer is not " + issuer_;
    return out;
  }
  const std::string alg = string_at(header.get_object(), "alg");
  const std::string kid = string_at(header.get_object(), "kid");
  const std::string_view input = token.substr(0, dot2);
  bool signed_ok = false;
  for (const auto& key : verifying_) {
    if ((alg == "ES256") != key->ecdsa || (alg != "ES256" && alg != "RS256")) continue;
    if (!kid.empty() && kid != key->id) continue;
    if (verify_signature(key->pkey.get(), key->ecdsa, input, *sig)) {
      signed_ok = true;
      break;
    }
  }
  if (!signed_ok) {
    out.error = "invalid signature";
    return out;
  }
  const std::int64_t now = now_seconds();
  constexpr std::int64_t kLeeway = 60;
  auto exp = seconds_at(claims, "exp");
  if (!exp || *exp <= now) {
    out.error = "token has expired";
    return out;
  }
  if (auto nbf = seconds_at(claims, "nbf"); nbf && *nbf > now + kLeeway) {
    out.error = "token is not valid yet";
    return out;
  }
  const std::vector<std::string>& wanted = audiences.empty() ? api_audiences_ : audiences;
  std::vector<std::string> token_audiences;
  if (const json::value* aud = claims.if_contains("aud")) {
    if (aud->is_string()) token_audiences.emplace_back(aud->get_string());
    if (const json::array* list = aud->if_array()) {
      for (const auto& a : *list) {
        if (a.is_string()) token_audiences.emplace_back(a.get_string());
      }
    }
  }
  std::vector<std::string> matched;
  for (const auto& a : token_audiences) {
    if (std::find(wanted.begin(), wanted.end(), a) != wanted.end()) matched.push_back(a);
  }
  if (matched.empty()) {
    out.error = "token audiences are invalid";
    return out;
  }
  const json::value* k8s = claims.if_contains("kubernetes.io");
  const json::object* priv = k8s != nullptr ? k8s->if_object() : nullptr;
  const json::value* sa = priv != nullptr ? priv->if_contains("serviceaccount") : nullptr;
  if (sa == nullptr || !sa->is_object()) {
    out.error = "token names no ServiceAccount";
    return out;
  }
  ServiceAccountClaims& c = out.claims;
  c.namespace_ = string_at(*priv, "namespace");
  c.name = string_at(sa->get_object(), "name");
  c.uid = string_at(sa->get_object(), "uid");
  if (c.namespace_.empty() || c.name.empty() ||
      string_at(claims, "sub") != "system:serviceaccount:" + c.namespace_ + ":" + c.name) {
    out.error = "token names no ServiceAccount";
    return out;
  }
  for (const char* kind : {"pod", "secret", "node"}) {
    const json::value* bound = priv->if_contains(kind);
    if (bound == nullptr || !bound->is_object()) continue;
    c.bound_kind = kind;
    c.bound_kind[0] = static_cast<char>(std::toupper(c.bound_kind[0]));
    c.bound_name = string_at(bound->get_object(), "name");
    c.bound_uid = string_at(bound->get_object(), "uid");
    break;
  }
  c.audiences = std::move(matched);
  c.issued_at = seconds_at(claims, "iat").value_or(0);
  c.expires_at = *exp;
  c.id = string_at(claims, "jti");
  out.ok = true;
  return out;
}

}  // namespace kwatch::auth
