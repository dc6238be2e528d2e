// kube-apiserver's EncryptionConfiguration (--encryption-provider-config), in YAML or JSON:
//
//   apiVersion: apiserver.config.k8s.io/v1
//   kind: EncryptionConfiguration
//   resources:
//   - resources: [secrets]          # or configmaps, deployments.apps, *.apps, *.*, ...
//     providers:                    # the first one writes; every one is tried on read
//     - aesgcm:
//         keys:
//         - name: key2
//           secret: <base64 of 16, 24 or 32 bytes>
//     - identity: {}                # plaintext: reads what was stored before encryption
//
// Providers kwatch implements: aesgcm, aescbc (kube discourages it: read it to migrate away)
// and identity. secretbox and kms are refused by name (secretbox needs libsodium's
// XSalsa20-Poly1305, which kwatch does not link; kms needs a plugin). Errors name
// the line and the field, never a secret. Unknown fields are errors, so a typo cannot silently
// leave data unencrypted.
//
// Pure values; safe from any thread.
#pragma once

#include <boost/system/result.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kwatch::storage {

enum class EncryptionProviderType { identity, aesgcm, aescbc };

struct EncryptionKey {
  std::string name;
  std::string secret;  // the raw key bytes (decoded from base64)
};

struct EncryptionProvider {
  EncryptionProviderType type = EncryptionProviderType::identity;
  std::vector<EncryptionKey> keys;  // aesgcm, aescbc: in order, the first one encrypts
};

// One entry of `resources`: which resources, and their providers in order.
struct EncryptionRule {
  std::vector<std::string> resources;  // as written: "secrets", "deployments.apps", "*.*", ...
  std::vector<EncryptionProvider> providers;
};

struct EncryptionConfig {
  std::vector<EncryptionRule> rules;  // in order: the first rule naming a resource wins
};

boost::system::result<EncryptionConfig, std::string> parse_encryption_config(std::string_view text);
// Reads and parses the file; errors start with its path.
boost::system::result<EncryptionConfig, std::string> load_encryption_config(const std::string& path);

// Standard base64 (with padding, as Go's StdEncoding); nullopt-like failure as false.
bool decode_base64(std::string_view text, std::string& out);

}  // namespace kwatch::storage
