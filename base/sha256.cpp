#include "base/sha256.hpp"

#include <openssl/evp.h>

#include <memory>
#include <stdexcept>

namespace kwatch::base {
namespace {

const EVP_MD* sha256_md() {
  // Fetched once, kept for the process: EVP_MD objects are shareable between threads.
  static const EVP_MD* md = [] {
    EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (fetched == nullptr) throw std::runtime_error("OpenSSL has no SHA256");
    return fetched;
  }();
  return md;
}

struct ContextFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

}  // namespace

Sha256 sha256(std::string_view data) {
  thread_local const std::unique_ptr<EVP_MD_CTX, ContextFree> ctx(EVP_MD_CTX_new());
  Sha256 out{};
  unsigned int n = 0;
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), sha256_md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), out.data(), &n) != 1 || n != out.size()) {
    throw std::runtime_error("SHA-256 failed");
  }
  return out;
}

}  // namespace kwatch::base
