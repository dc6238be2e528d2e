#include "storage/encrypting_storage.hpp"

#include "apimachinery/stored_json.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

namespace kwatch::storage {

using apimachinery::to_valid_utf8;


namespace asio = boost::asio;

namespace {

constexpr std::string_view kEncryptedPrefix = "k8s:enc:";  // what identity refuses to read
constexpr std::size_t kNonceBytes = 12;
constexpr std::size_t kTagBytes = 16;

struct CipherContext {
  CipherContext() : ctx(EVP_CIPHER_CTX_new()) {}
  ~CipherContext() { EVP_CIPHER_CTX_free(ctx); }
  CipherContext(const CipherContext&) = delete;
  CipherContext& operator=(const CipherContext&) = delete;
  EVP_CIPHER_CTX* ctx;
};

const unsigned char* bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

int length(std::string_view s) { return static_cast<int>(s.size()); }

// result<std::string, std::string> needs to be told which side a string is.
boost::system::result<std::string, std::string> failed(std::string message) {
  return {boost::system::in_place_error, std::move(message)};
}

}  // namespace

struct ValueTransformer::Entry {
  EncryptionProviderType type = EncryptionProviderType::identity;
  std::string prefix;  // "k8s:enc:aesgcm:v1:<name>:"; "" for identity
  std::string key;     // raw AES key
  EVP_CIPHER* cipher = nullptr;  // fetched once, freed by the transformer
};

namespace {

constexpr std::size_t kBlockBytes = 16;  // AES-CBC's IV and block

using Sealed = boost::system::result<std::string, std::string>;

// kube's aesgcm: nonce, ciphertext, tag; the storage key authenticated with them.
Sealed seal_gcm(const ValueTransformer::Entry& e, std::string_view plaintext, std::string_view key) {
  std::string out;
  out.resize(e.prefix.size() + kNonceBytes + plaintext.size() + kTagBytes);
  std::copy(e.prefix.begin(), e.prefix.end(), out.begin());
  auto* nonce = reinterpret_cast<unsigned char*>(out.data() + e.prefix.size());
  auto* sealed = nonce + kNonceBytes;
  // A random 96-bit nonce per write, as kube's aesgcm provider (so keys must be rotated well
  // before 2^32 writes, as kube's documentation says).
  if (RAND_bytes(nonce, static_cast<int>(kNonceBytes)) != 1) return failed("no randomness for a nonce");
  CipherContext c;
  int n = 0;
  int total = 0;
  if (c.ctx == nullptr || EVP_EncryptInit_ex2(c.ctx, e.cipher, bytes(e.key), nonce, nullptr) != 1 ||
      EVP_EncryptUpdate(c.ctx, nullptr, &n, bytes(key), length(key)) != 1 ||
      EVP_EncryptUpdate(c.ctx, sealed, &n, bytes(plaintext), length(plaintext)) != 1) {
    return failed("AES-GCM encryption failed");
  }
  total = n;
  if (EVP_EncryptFinal_ex(c.ctx, sealed + total, &n) != 1) return failed("AES-GCM encryption failed");
  total += n;
  if (EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), sealed + total) != 1) {
    return failed("AES-GCM encryption failed");
  }
  return {boost::system::in_place_value, std::move(out)};
}

Sealed open_gcm(const ValueTransformer::Entry& e, std::string_view data, std::string_view key) {
  if (data.size() < kNonceBytes + kTagBytes) return failed("the stored data was shorter than the required size");
  const auto* nonce = bytes(data);
  std::string_view sealed = data.substr(kNonceBytes, data.size() - kNonceBytes - kTagBytes);
  std::string_view tag = data.substr(data.size() - kTagBytes);
  std::string plain;
  plain.resize(sealed.size());
  CipherContext c;
  int n = 0;
  int m = 0;
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  const bool ok =
      c.ctx != nullptr && EVP_DecryptInit_ex2(c.ctx, e.cipher, bytes(e.key), nonce, nullptr) == 1 &&
      EVP_DecryptUpdate(c.ctx, nullptr, &n, bytes(key), length(key)) == 1 &&
      EVP_DecryptUpdate(c.ctx, out, &n, bytes(sealed), length(sealed)) == 1 &&
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                          const_cast<unsigned char*>(bytes(tag))) == 1 &&
      EVP_DecryptFinal_ex(c.ctx, out + n, &m) == 1;
  if (!ok) return failed("cipher: message authentication failed");
  plain.resize(static_cast<std::size_t>(n + m));
  return {boost::system::in_place_value, std::move(plain)};
}

// kube's aescbc: a random IV, then the PKCS#7-padded ciphertext. Nothing is authenticated (kube
// discourages it for that); kwatch writes it only when it is listed first, and reads it so that
// data from clusters that used it can be migrated.
Sealed seal_cbc(const ValueTransformer::Entry& e, std::string_view plaintext) {
  std::string out;
  out.resize(e.prefix.size() + kBlockBytes + plaintext.size() + kBlockBytes);
  std::copy(e.prefix.begin(), e.prefix.end(), out.begin());
  auto* iv = reinterpret_cast<unsigned char*>(out.data() + e.prefix.size());
  auto* sealed = iv + kBlockBytes;
  if (RAND_bytes(iv, static_cast<int>(kBlockBytes)) != 1) return failed("no randomness for an IV");
  CipherContext c;
  int n = 0;
  int m = 0;
  if (c.ctx == nullptr || EVP_EncryptInit_ex2(c.ctx, e.cipher, bytes(e.key), iv, nullptr) != 1 ||
      EVP_EncryptUpdate(c.ctx, sealed, &n, bytes(plaintext), length(plaintext)) != 1 ||
      EVP_EncryptFinal_ex(c.ctx, sealed + n, &m) != 1) {
    return failed("AES-CBC encryption failed");
  }
  out.resize(e.prefix.size() + kBlockBytes + static_cast<std::size_t>(n + m));
  return {boost::system::in_place_value, std::move(out)};
}

Sealed open_cbc(const ValueTransformer::Entry& e, std::string_view data) {
  if (data.size() < kBlockBytes) return failed("the stored data was shorter than the required size");
  if ((data.size() - kBlockBytes) % kBlockBytes != 0 || data.size() == kBlockBytes) {
    return failed("the stored data is not a multiple of the block size");
  }
  std::string_view sealed = data.substr(kBlockBytes);
  std::string plain;
  plain.resize(sealed.size());
  CipherContext c;
  int n = 0;
  int m = 0;
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  const bool ok = c.ctx != nullptr &&
                  EVP_DecryptInit_ex2(c.ctx, e.cipher, bytes(e.key), bytes(data), nullptr) == 1 &&
                  EVP_DecryptUpdate(c.ctx, out, &n, bytes(sealed), length(sealed)) == 1 &&
                  EVP_DecryptFinal_ex(c.ctx, out + n, &m) == 1;
  if (!ok) return failed("invalid padding on input");
  plain.resize(static_cast<std::size_t>(n + m));
  return {boost::system::in_place_value, std::move(plain)};
}

}  // namespace

ValueTransformer::~ValueTransformer() {
  for (auto& e : entries_) EVP_CIPHER_free(e.cipher);
}

boost::system::result<std::shared_ptr<const ValueTransformer>, std::string> ValueTransformer::make(
    const std::vector<EncryptionProvider>& providers) {
  std::shared_ptr<ValueTransformer> t(new ValueTransformer());
  for (const auto& p : providers) {
    if (p.type == EncryptionProviderType::identity) {
      t->entries_.push_back(Entry{});
      continue;
    }
    const bool gcm = p.type == EncryptionProviderType::aesgcm;
    for (const auto& k : p.keys) {
      Entry e;
      e.type = p.type;
      e.prefix = std::string(gcm ? "k8s:enc:aesgcm:v1:" : "k8s:enc:aescbc:v1:") + k.name + ":";
      e.key = k.secret;
      const std::string name = "AES-" + std::to_string(k.secret.size() * 8) + (gcm ? "-GCM" : "-CBC");
      e.cipher = EVP_CIPHER_fetch(nullptr, name.c_str(), nullptr);
      if (e.cipher == nullptr) return "OpenSSL has no " + name;
      t->entries_.push_back(std::move(e));
    }
  }
  if (t->entries_.empty()) return std::string("no providers");
  return std::shared_ptr<const ValueTransformer>(std::move(t));
}

boost::system::result<std::string, std::string> ValueTransformer::to_storage(
    std::string_view plaintext, std::string_view key) const {
  const Entry& e = entries_.front();
  switch (e.type) {
    case EncryptionProviderType::identity:
      return {boost::system::in_place_value, std::string(plaintext)};
    case EncryptionProviderType::aesgcm:
      return seal_gcm(e, plaintext, key);
    case EncryptionProviderType::aescbc:
      return seal_cbc(e, plaintext);
  }
  return failed("unknown provider");
}

boost::system::result<ValueTransformer::Read, std::string> ValueTransformer::from_storage(
    std::string_view stored, std::string_view key) const {
  std::string errors;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (!stored.starts_with(e.prefix)) continue;
    if (e.type == EncryptionProviderType::identity) {
      // Listed before the encrypting providers (to migrate away from encryption), identity must
      // not hand out ciphertext as if it were the object: the next provider gets it.
      if (stored.starts_with(kEncryptedPrefix)) continue;
      return Read{std::string(stored), i != 0};
    }
    // Names make the prefixes of keys distinct, but a failure with one provider never stops the
    // next from trying (kube's rule).
    std::string_view data = stored.substr(e.prefix.size());
    auto plain = e.type == EncryptionProviderType::aesgcm ? open_gcm(e, data, key) : open_cbc(e, data);
    if (!plain) {
      errors += (errors.empty() ? "" : "; ") + plain.error();
      continue;
    }
    return Read{std::move(*plain), i != 0};
  }
  if (!errors.empty()) return {boost::system::in_place_error, std::move(errors)};
  return {boost::system::in_place_error,
          std::string("no matching prefix found (no configured provider reads this value)")};
}

void decrypt_in_place(const EncryptingStorage::Scopes& scopes, KeyValue& kv) {
  for (const auto& scope : scopes) {
    if (!kv.key.starts_with(scope.prefix)) continue;
    auto r = scope.transformer->from_storage(kv.value, kv.key);
    if (r) {
      kv.value = std::move(r->value);
      kv.stale = r->stale;
    } else {
      spdlog::warn("the value stored at {} (revision {}) cannot be decrypted: {}",
                   to_valid_utf8(kv.key), kv.mod_revision, r.error());
      kv.value.clear();
      kv.read_error = "failed to decrypt: " + r.error();
    }
    return;
  }
}

namespace {

const ValueTransformer* transformer_for(const EncryptingStorage::Scopes& scopes,
                                        std::string_view key) {
  for (const auto& scope : scopes) {
    if (key.starts_with(scope.prefix)) return scope.transformer.get();
  }
  return nullptr;
}

// The state a write returns: present keys only (create_revision 0 means absent, no value).
void decrypt_state(const EncryptingStorage::Scopes& scopes, KeyValue& kv) {
  if (kv.create_revision != 0) decrypt_in_place(scopes, kv);
}

class DecryptingWatchStream : public WatchStream {
 public:
  DecryptingWatchStream(std::unique_ptr<WatchStream> inner,
                        std::shared_ptr<const EncryptingStorage::Scopes> scopes)
      : inner_(std::move(inner)), scopes_(std::move(scopes)) {}

  asio::awaitable<Result<WatchBatch>> next() override {
    auto r = co_await inner_->next();
    if (r) {
      for (auto& ev : r->events) {
        if (ev.type == EventType::put) decrypt_in_place(*scopes_, ev.kv);
        if (ev.prev_kv) decrypt_state(*scopes_, *ev.prev_kv);
      }
    }
    co_return r;
  }
  void request_progress() override { inner_->request_progress(); }
  bool progress_is_ordered() const override { return inner_->progress_is_ordered(); }

 private:
  std::unique_ptr<WatchStream> inner_;
  std::shared_ptr<const EncryptingStorage::Scopes> scopes_;
};

}  // namespace

EncryptingStorage::EncryptingStorage(std::shared_ptr<Storage> inner, std::vector<EncryptionScope> scopes)
    : inner_(std::move(inner)), scopes_(std::make_shared<const Scopes>(std::move(scopes))) {}

asio::awaitable<Result<KeyValue>> EncryptingStorage::get(std::string key, std::int64_t revision) {
  auto r = co_await inner_->get(std::move(key), revision);
  if (r) decrypt_in_place(*scopes_, *r);
  co_return r;
}

asio::awaitable<Result<ListResult>> EncryptingStorage::list(ListOptions options) {
  auto r = co_await inner_->list(std::move(options));
  if (r) {
    for (auto& kv : r->kvs) decrypt_in_place(*scopes_, kv);
  }
  co_return r;
}

asio::awaitable<Result<TxnResult>> EncryptingStorage::put_if(std::string key,
                                                            std::int64_t expected_mod_revision,
                                                            std::string value) {
  std::string stored;
  if (const ValueTransformer* t = transformer_for(*scopes_, key)) {
    auto sealed = t->to_storage(value, key);
    if (!sealed) {
      spdlog::error("cannot encrypt the value for {}: {}", to_valid_utf8(key), sealed.error());
      co_return Errc::internal;
    }
    stored = std::move(*sealed);
  } else {
    stored = value;
  }
  auto r = co_await inner_->put_if(std::move(key), expected_mod_revision, std::move(stored));
  if (!r) co_return r;
  if (r->succeeded) {
    r->kv.value = std::move(value);  // what was written, in plaintext: no need to decrypt it
  } else {
    decrypt_state(*scopes_, r->kv);
  }
  co_return r;
}

asio::awaitable<Result<TxnResult>> EncryptingStorage::delete_if(std::string key,
                                                               std::int64_t expected_mod_revision) {
  auto r = co_await inner_->delete_if(std::move(key), expected_mod_revision);
  if (r) decrypt_state(*scopes_, r->kv);
  co_return r;
}

asio::awaitable<Result<std::int64_t>> EncryptingStorage::current_revision() {
  co_return co_await inner_->current_revision();
}

asio::awaitable<Result<void>> EncryptingStorage::compact(std::int64_t revision) {
  co_return co_await inner_->compact(revision);
}

asio::awaitable<Result<std::unique_ptr<WatchStream>>> EncryptingStorage::watch(
    std::string prefix, std::int64_t start_revision, PrevKv prev_kv) {
  auto r = co_await inner_->watch(std::move(prefix), start_revision, prev_kv);
  if (!r) co_return r.error();
  co_return std::unique_ptr<WatchStream>(
      std::make_unique<DecryptingWatchStream>(std::move(*r), scopes_));
}

}  // namespace kwatch::storage
