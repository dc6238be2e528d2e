// ServiceAccount tokens as kube-apiserver issues and checks them: JSON Web Tokens (RS256 for RSA
// keys, ES256 for P-256 keys) signed with --service-account-signing-key-file, checked against
// every key of --service-account-key-file, with kube's claims: iss (--service-account-issuer),
// aud, exp, nbf, iat, jti, sub "system:serviceaccount:<ns>:<name>" and the private
// "kubernetes.io" claim naming the account (and the pod, secret or node the token is bound to)
// with their uids. A token is only as good as what it names: the caller checks that the account
// (and bound object) still exists with the same uid (see access.cpp), so a deleted and
// re-created account's old tokens stop working.
//
// Without key flags, an RSA key is generated into --cert-dir (`sa.key`, `sa.pub`) on first start
// and reused, as the serving certificate is. Immutable after load; safe from any thread.
#pragma once

#include <boost/json/object.hpp>
#include <boost/system/result.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::auth {

// What a token says about its subject, and for how long.
struct ServiceAccountClaims {
  std::string namespace_;
  std::string name;  // the ServiceAccount
  std::string uid;
  // The object the token is bound to (TokenRequest's boundObjectRef): "Pod", "Secret", "Node"
  // or "" for none.
  std::string bound_kind;
  std::string bound_name;
  std::string bound_uid;
  std::vector<std::string> audiences;
  std::int64_t issued_at = 0;  // seconds since the epoch
  std::int64_t expires_at = 0;
  std::string id;  // jti
};

struct ServiceAccountKeyOptions {
  std::string issuer;                  // --service-account-issuer
  std::vector<std::string> api_audiences;  // --api-audiences (empty: the issuer)
  std::string signing_key_file;        // --service-account-signing-key-file
  std::vector<std::string> key_files;  // --service-account-key-file (repeatable)
  std::string cert_dir;                // where a generated key lives without the two above
};

class ServiceAccountTokens {
 public:
  ~ServiceAccountTokens();
  // Loads (or, without key files, generates or reuses in cert_dir) the keys. Errors name the
  // file and what is wrong with it.
  static boost::system::result<std::shared_ptr<ServiceAccountTokens>, std::string> load(
      const ServiceAccountKeyOptions& options);

  // A signed token for `claims` (issuer added here). Empty if this server cannot sign (only
  // verification keys were given).
  std::string issue(const ServiceAccountClaims& claims) const;

  // The claims of `token` if it is a JWT this issuer signed, not expired (nor used before its
  // time, with a minute's leeway for clock skew), for one of `audiences` (empty: the API
  // audiences). nullopt for a token that is not a JWT at all; otherwise an error says why.
  struct Checked {
    bool ok = false;
    std::string error;
    ServiceAccountClaims claims;
  };
  std::optional<Checked> verify(std::string_view token,
                                const std::vector<std::string>& audiences) const;

  // The issuer's OpenID Connect discovery documents, as kube serves them for workload identity
  // federation: /.well-known/openid-configuration and the verification keys' JWK set
  // (/openid/v1/jwks).
  boost::json::object openid_configuration() const;
  boost::json::object jwks() const;

  bool can_sign() const;
  // The generated key could not be written into cert_dir and lives only in memory.
  bool ephemeral() const { return ephemeral_; }
  const std::string& issuer() const { return issuer_; }
  const std::vector<std::string>& api_audiences() const { return api_audiences_; }

 private:
  struct Key;
  ServiceAccountTokens() = default;
  std::string issuer_;
  std::vector<std::string> api_audiences_;
  std::shared_ptr<const Key> signing_;
  std::vector<std::shared_ptr<const Key>> verifying_;
  bool ephemeral_ = false;
};

}  // namespace kwatch::auth
