// Encryption at rest, as kube-apiserver does it: a decorator over any Storage that encrypts the
// values written under some key prefixes (the resources an EncryptionConfiguration names) and
// decrypts them on every way back (get, list, the state a failed guard returns, watch events and
// their previous states), so that nothing above storage/ knows values are encrypted.
//
// The stored format is kube's, so that either server can read what the other wrote:
//   aesgcm:   "k8s:enc:aesgcm:v1:<key name>:" + 12-byte random nonce + ciphertext + 16-byte tag,
//             AES-GCM with the full storage key ("/registry/secrets/ns/name") as additional
//             authenticated data, so a value copied under another key does not decrypt.
//   aescbc:   "k8s:enc:aescbc:v1:<key name>:" + 16-byte random IV + PKCS#7-padded AES-CBC
//             ciphertext (unauthenticated, as kube's; read for migrations, written if first).
//   identity: the plaintext itself (which never starts with "k8s:enc:").
// Providers are tried in order on read, by prefix; the first one writes. A value read with any
// but the first is `stale`, so an update rewrites it with the current key even when unchanged
// (kube's key rotation: list the new key first, then rewrite every object). Plaintext stored
// before encryption was turned on reads only when identity is listed; otherwise, and when
// decryption fails (wrong key, tampered bytes), the KeyValue carries `read_error` and an empty
// value: the registry answers 500 naming the key, lists and the watch cache skip it, and nothing
// is written over it unless it is deleted explicitly.
//
// Ownership: shared by everyone who holds the storage; holds the inner storage. Thread-safety:
// as Storage (any thread); the transformers are immutable. Cancellation: as the inner storage.
#pragma once

#include "storage/encryption_config.hpp"
#include "storage/storage.hpp"

#include <boost/system/result.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kwatch::storage {

// The providers of one EncryptionConfiguration entry, in order.
class ValueTransformer {
 public:
  struct Entry;  // one provider key (or identity); defined in the .cpp

  static boost::system::result<std::shared_ptr<const ValueTransformer>, std::string> make(
      const std::vector<EncryptionProvider>& providers);
  ~ValueTransformer();
  ValueTransformer(const ValueTransformer&) = delete;
  ValueTransformer& operator=(const ValueTransformer&) = delete;

  // The bytes to store for `plaintext` under `key`, with the first provider.
  boost::system::result<std::string, std::string> to_storage(std::string_view plaintext,
                                                             std::string_view key) const;
  struct Read {
    std::string value;
    bool stale = false;  // not read with the first provider: rewrite it
  };
  boost::system::result<Read, std::string> from_storage(std::string_view stored,
                                                        std::string_view key) const;

 private:
  ValueTransformer() = default;
  std::vector<Entry> entries_;
};

// A key prefix ("/registry/secrets/") and how values under it are stored.
struct EncryptionScope {
  std::string prefix;
  std::shared_ptr<const ValueTransformer> transformer;
};

class EncryptingStorage : public Storage {
 public:
  // `scopes` in the configuration's order: the first whose prefix a key starts with applies.
  EncryptingStorage(std::shared_ptr<Storage> inner, std::vector<EncryptionScope> scopes);

  boost::asio::awaitable<Result<KeyValue>> get(std::string key, std::int64_t revision = 0) override;
  boost::asio::awaitable<Result<ListResult>> list(ListOptions options) override;
  boost::asio::awaitable<Result<TxnResult>> put_if(std::string key,
                                                   std::int64_t expected_mod_revision,
                                                   std::string value) override;
  boost::asio::awaitable<Result<TxnResult>> delete_if(
      std::string key, std::int64_t expected_mod_revision = 0) override;
  boost::asio::awaitable<Result<std::int64_t>> current_revision() override;
  boost::asio::awaitable<Result<void>> compact(std::int64_t revision) override;
  boost::asio::awaitable<Result<std::unique_ptr<WatchStream>>> watch(
      std::string prefix, std::int64_t start_revision, PrevKv prev_kv) override;

  using Scopes = std::vector<EncryptionScope>;

 private:
  std::shared_ptr<Storage> inner_;
  std::shared_ptr<const Scopes> scopes_;  // shared with the watch streams, which may outlive us
};

// Turns a value read from storage back into plaintext in place (see the contract above); keys
// outside every scope are left alone. Exposed for tests.
void decrypt_in_place(const EncryptingStorage::Scopes& scopes, KeyValue& kv);

}  // namespace kwatch::storage
