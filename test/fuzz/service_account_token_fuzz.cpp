// Fuzzes ServiceAccount token verification, the check every request with a bearer token goes
// through. Two modes, chosen by the first byte:
//  - even: the rest is a token as a client sends it. Property: no crash, and it is never
//    accepted (nothing here holds the signing key, so an accepted token would be a forgery).
//  - odd: the rest describes claims (namespace, name, uid, audience, lifetime), which are
//    signed with the server's key and verified. Property: a token the server issued for the
//    API's audience and a future expiry verifies to exactly those claims; an expired one never.
#include "auth/service_account_tokens.hpp"
#include "test/fuzz/fuzz_support.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

using kwatch::auth::ServiceAccountClaims;
using kwatch::auth::ServiceAccountTokens;

std::shared_ptr<ServiceAccountTokens> g_tokens;

// Printable ASCII without the separator: names come from validated objects in the server.
std::string field(std::string_view& in) {
  const auto end = in.find('|');
  std::string out(in.substr(0, end));
  in = end == std::string_view::npos ? std::string_view() : in.substr(end + 1);
  for (char& c : out) c = static_cast<char>(0x20 + (static_cast<unsigned char>(c) % 0x5e));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string file = "/tmp/kwatch-fuzz-sa-" + std::to_string(::getpid()) + ".key";
  EVP_PKEY* key = EVP_EC_gen("P-256");
  FILE* f = std::fopen(file.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  EVP_PKEY_free(key);
  auto loaded = ServiceAccountTokens::load({"https://kwatch.fuzz", {}, file, {file}, ""});
  std::remove(file.c_str());
  if (!loaded) kwatch::fuzz::fail("cannot load the fuzz key", loaded.error());
  g_tokens = *loaded;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in = kwatch::fuzz::as_view(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    auto checked = g_tokens->verify(in, {});
    if (checked && checked->ok) kwatch::fuzz::fail("accepted a token nobody signed", in);
    return 0;
  }
  ServiceAccountClaims c;
  c.namespace_ = field(in);
  c.name = field(in);
  c.uid = field(in);
  const std::string audience = field(in);
  const long lifetime = in.empty() ? 3600 : static_cast<signed char>(in[0]) * 60L;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  c.audiences = {audience.empty() ? "https://kwatch.fuzz" : audience};
  c.issued_at = now;
  c.expires_at = now + lifetime;
  c.id = "fuzz";
  const std::string token = g_tokens->issue(c);
  auto checked = g_tokens->verify(token, {});
  if (!checked) kwatch::fuzz::fail("an issued token is not even a JWT", token);
  const bool should = lifetime > 0 && c.audiences[0] == "https://kwatch.fuzz" &&
                      !c.namespace_.empty() && !c.name.empty();
  if (checked->ok != should) kwatch::fuzz::fail("issued token verified wrongly", checked->error);
  if (checked->ok && (checked->claims.namespace_ != c.namespace_ || checked->claims.name != c.name ||
                      checked->claims.uid != c.uid || checked->claims.expires_at != c.expires_at)) {
    kwatch::fuzz::fail("claims changed on the way", token);
  }
  return 0;
}
