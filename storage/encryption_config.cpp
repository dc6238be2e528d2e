#include "storage/encryption_config.hpp"

#include "base/yaml_subset.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace kwatch::storage {

namespace {

using base::YamlNode;
using Error = std::string;

// "line 7: resources[0].providers[1].aesgcm.keys[0].secret: <problem>"
Error at(const YamlNode& node, const std::string& path, const std::string& problem) {
  return "line " + std::to_string(node.line) + ": " + path + ": " + problem;
}

// Every member of `map` must be one of `known`: a misspelt field must not leave data plaintext.
std::optional<Error> unknown_fields(const YamlNode& map, const std::string& path,
                                    std::initializer_list<std::string_view> known) {
  for (const auto& m : map.members) {
    bool ok = false;
    for (auto k : known) ok = ok || m.key == k;
    if (!ok) {
      return at(m.value, path.empty() ? m.key : path + "." + m.key,
                "unknown field (expected one of: " + [&] {
                  std::string s;
                  for (auto k : known) s += (s.empty() ? "" : ", ") + std::string(k);
                  return s;
                }() + ")");
    }
  }
  return std::nullopt;
}

boost::system::result<std::string, Error> string_of(const YamlNode& node, const std::string& path) {
  using boost::system::in_place_error;
  if (node.kind != YamlNode::Kind::scalar) return {in_place_error, at(node, path, "must be a string")};
  if (node.is_null()) return {in_place_error, at(node, path, "required value")};
  return {boost::system::in_place_value, node.scalar};
}

// A resource as the configuration may name it: "secrets", "deployments.apps", "*.apps", "*.",
// "*.*" (kube's forms). Lowercase, no slashes: a subresource cannot be encrypted on its own.
std::optional<std::string> resource_problem(const std::string& r) {
  if (r.empty()) return "must not be empty";
  if (r == "*") return "\"*\" is not a resource; use \"*.*\" for every resource";
  for (char c : r) {
    if (c >= 'A' && c <= 'Z') return "resource names are lowercase";
    if (c == '/') return "a subresource cannot be encrypted on its own";
    if (c == ' ' || c == ':') return "not a resource name";
  }
  if (r.find('*') != std::string::npos && r != "*.*" &&
      !(r.starts_with("*.") && r.find('*', 1) == std::string::npos)) {
    return "wildcards are \"*.*\", \"*.\" (the core group) or \"*.<group>\"";
  }
  return std::nullopt;
}

boost::system::result<EncryptionProvider, Error> parse_provider(const YamlNode& node,
                                                                const std::string& path) {
  if (node.kind != YamlNode::Kind::mapping) return at(node, path, "must be a mapping");
  if (node.members.size() != 1) {
    return at(node, path,
              node.members.empty()
                  ? "names no provider"
                  : "more than one provider in one element; give each its own list element");
  }
  const auto& [type, body] = node.members.front();
  const std::string where = path + "." + type;
  EncryptionProvider p;
  if (type == "identity") {
    if (!body.is_null() && !(body.kind == YamlNode::Kind::mapping && body.members.empty())) {
      return at(body, where, "takes no settings (write identity: {})");
    }
    p.type = EncryptionProviderType::identity;
    return p;
  }
  if (type == "secretbox" || type == "kms") {
    return at(node, where, "provider not supported by kwatch (supported: aesgcm, aescbc, identity)");
  }
  if (type != "aesgcm" && type != "aescbc") {
    return at(node, where, "unknown provider (expected aesgcm, aescbc or identity)");
  }
  p.type = type == "aesgcm" ? EncryptionProviderType::aesgcm : EncryptionProviderType::aescbc;
  if (body.kind != YamlNode::Kind::mapping) return at(body, where, "must be a mapping with keys");
  if (auto e = unknown_fields(body, where, {"keys"})) return *e;
  const YamlNode* keys = body.find("keys");
  if (keys == nullptr || keys->is_null() ||
      (keys->kind == YamlNode::Kind::sequence && keys->items.empty())) {
    return at(keys ? *keys : body, where + ".keys", "at least one key is required");
  }
  if (keys->kind != YamlNode::Kind::sequence) return at(*keys, where + ".keys", "must be a list");
  std::set<std::string> names;
  for (std::size_t i = 0; i < keys->items.size(); ++i) {
    const YamlNode& k = keys->items[i];
    const std::string kp = where + ".keys[" + std::to_string(i) + "]";
    if (k.kind != YamlNode::Kind::mapping) return at(k, kp, "must be a mapping with name and secret");
    if (auto e = unknown_fields(k, kp, {"name", "secret"})) return *e;
    const YamlNode* name_node = k.find("name");
    const YamlNode* secret_node = k.find("secret");
    if (name_node == nullptr) return at(k, kp + ".name", "required value");
    if (secret_node == nullptr) return at(k, kp + ".secret", "required value");
    auto name = string_of(*name_node, kp + ".name");
    if (!name) return name.error();
    if (name->find(':') != std::string::npos) {
      return at(*name_node, kp + ".name", "must not contain ':' (it ends the stored prefix)");
    }
    if (!names.insert(*name).second) {
      return at(*name_node, kp + ".name", "duplicate key name \"" + *name + "\"");
    }
    auto encoded = string_of(*secret_node, kp + ".secret");
    if (!encoded) return encoded.error();
    EncryptionKey key;
    key.name = std::move(*name);
    // The secret itself never appears in an error.
    if (!decode_base64(*encoded, key.secret)) {
      return at(*secret_node, kp + ".secret", "secrets must be base64 encoded");
    }
    if (key.secret.size() != 16 && key.secret.size() != 24 && key.secret.size() != 32) {
      return at(*secret_node, kp + ".secret",
                "secret is not of the expected length, got " + std::to_string(key.secret.size()) +
                    " bytes, expected one of [16 24 32]");
    }
    p.keys.push_back(std::move(key));
  }
  return p;
}

}  // namespace

bool decode_base64(std::string_view text, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out.clear();
  if (text.size() % 4 != 0) return false;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + static_cast<std::size_t>(j)];
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after padding
      v[j] = value(c);
      if (v[j] < 0) return false;
    }
    const unsigned n = (static_cast<unsigned>(v[0]) << 18) | (static_cast<unsigned>(v[1]) << 12) |
                       (static_cast<unsigned>(v[2]) << 6) | static_cast<unsigned>(v[3]);
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return true;
}

boost::system::result<EncryptionConfig, std::string> parse_encryption_config(std::string_view text) {
  auto doc = base::parse_yaml_subset(text);
  if (!doc) return doc.error();
  const YamlNode& root = *doc;
  if (root.kind != YamlNode::Kind::mapping) return at(root, "(document)", "must be a mapping");
  if (auto e = unknown_fields(root, "", {"apiVersion", "kind", "resources"})) return *e;
  const YamlNode* api_version = root.find("apiVersion");
  const YamlNode* kind = root.find("kind");
  if (kind == nullptr || kind->kind != YamlNode::Kind::scalar ||
      kind->scalar != "EncryptionConfiguration") {
    return at(kind ? *kind : root, "kind", "must be EncryptionConfiguration");
  }
  if (api_version == nullptr || api_version->kind != YamlNode::Kind::scalar ||
      api_version->scalar != "apiserver.config.k8s.io/v1") {
    return at(api_version ? *api_version : root, "apiVersion",
              "must be apiserver.config.k8s.io/v1");
  }
  const YamlNode* resources = root.find("resources");
  if (resources == nullptr || resources->kind != YamlNode::Kind::sequence ||
      resources->items.empty()) {
    return at(resources ? *resources : root, "resources", "must be a non-empty list");
  }
  EncryptionConfig config;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < resources->items.size(); ++i) {
    const YamlNode& entry = resources->items[i];
    const std::string path = "resources[" + std::to_string(i) + "]";
    if (entry.kind != YamlNode::Kind::mapping) return at(entry, path, "must be a mapping");
    if (auto e = unknown_fields(entry, path, {"resources", "providers"})) return *e;
    EncryptionRule rule;
    const YamlNode* names = entry.find("resources");
    if (names == nullptr || names->kind != YamlNode::Kind::sequence || names->items.empty()) {
      return at(names ? *names : entry, path + ".resources", "must be a non-empty list");
    }
    for (std::size_t j = 0; j < names->items.size(); ++j) {
      const std::string rp = path + ".resources[" + std::to_string(j) + "]";
      auto name = string_of(names->items[j], rp);
      if (!name) return name.error();
      if (auto problem = resource_problem(*name)) return at(names->items[j], rp, *problem);
      if (!seen.insert(*name).second) {
        return at(names->items[j], rp, "\"" + *name + "\" is named by an earlier entry too");
      }
      rule.resources.push_back(std::move(*name));
    }
    const YamlNode* providers = entry.find("providers");
    if (providers == nullptr || providers->kind != YamlNode::Kind::sequence ||
        providers->items.empty()) {
      return at(providers ? *providers : entry, path + ".providers", "must be a non-empty list");
    }
    for (std::size_t j = 0; j < providers->items.size(); ++j) {
      auto p = parse_provider(providers->items[j], path + ".providers[" + std::to_string(j) + "]");
      if (!p) return p.error();
      rule.providers.push_back(std::move(*p));
    }
    config.rules.push_back(std::move(rule));
  }
  return config;
}

boost::system::result<EncryptionConfig, std::string> load_encryption_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot read: " + std::strerror(errno);
  std::ostringstream text;
  text << in.rdbuf();
  auto config = parse_encryption_config(text.str());
  if (!config) return path + ": " + config.error();
  return config;
}

}  // namespace kwatch::storage
