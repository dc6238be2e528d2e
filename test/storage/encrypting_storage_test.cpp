#include "storage/encrypting_storage.hpp"

#include "storage/encryption_config.hpp"
#include "storage/memory_storage.hpp"
#include "base/yaml_subset.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <unistd.h>

namespace kwatch::storage {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

#define CO_ASSERT(cond)                          \
  if (!(cond)) {                                 \
    ADD_FAILURE() << "assertion failed: " #cond; \
    co_return;                                   \
  }

void run(asio::io_context& ioc, asio::awaitable<void> task) {
  bool done = false;
  std::exception_ptr error;
  asio::co_spawn(ioc, std::move(task), [&](std::exception_ptr e) {
    error = e;
    done = true;
  });
  ioc.run_for(10s);
  ioc.restart();
  ASSERT_TRUE(done) << "task did not finish before the deadline";
  if (error) std::rethrow_exception(error);
}

// 32 bytes "0123456789abcdef0123456789abcdef" and 16 bytes "fedcba9876543210", base64.
constexpr const char* kKey1 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
constexpr const char* kKey2 = "ZmVkY2JhOTg3NjU0MzIxMA==";

std::string config_yaml(const std::string& providers) {
  return "apiVersion: apiserver.config.k8s.io/v1\n"
         "kind: EncryptionConfiguration\n"
         "resources:\n"
         "- resources:\n"
         "  - secrets\n"
         "  providers:\n" +
         providers;
}

std::string aesgcm(const std::string& name, const std::string& secret) {
  return "  - aesgcm:\n"
         "      keys:\n"
         "      - name: " + name + "\n"
         "        secret: " + secret + "\n";
}

std::shared_ptr<const ValueTransformer> transformer_from(const std::string& yaml) {
  auto config = parse_encryption_config(yaml);
  EXPECT_TRUE(config) << (config ? "" : config.error());
  if (!config) return nullptr;
  auto t = ValueTransformer::make(config->rules.at(0).providers);
  EXPECT_TRUE(t);
  return t ? *t : nullptr;
}

// ---- The YAML subset ----

TEST(YamlSubset, ReadsBlockMappingsSequencesCommentsAndFlowCollections) {
  auto doc = base::parse_yaml_subset(
      "# a comment\n"
      "---\n"
      "kind: EncryptionConfiguration   # trailing comment\n"
      "resources:\n"
      "  - resources: [secrets, \"configmaps\"]\n"
      "    providers:\n"
      "    - identity: {}\n"
      "    - aesgcm:\n"
      "        keys:\n"
      "          - {name: 'k''1', secret: \"a\\u00e9b\"}\n"
      "list:\n"
      "- a\n"
      "-\n"
      "- - nested\n"
      "empty:\n");
  ASSERT_TRUE(doc) << doc.error();
  ASSERT_EQ(doc->kind, base::YamlNode::Kind::mapping);
  EXPECT_EQ(doc->find("kind")->scalar, "EncryptionConfiguration");
  const base::YamlNode* resources = doc->find("resources");
  ASSERT_EQ(resources->kind, base::YamlNode::Kind::sequence);
  ASSERT_EQ(resources->items.size(), 1u);
  const base::YamlNode& r0 = resources->items[0];
  ASSERT_EQ(r0.find("resources")->items.size(), 2u);
  EXPECT_EQ(r0.find("resources")->items[1].scalar, "configmaps");
  const base::YamlNode* providers = r0.find("providers");
  ASSERT_EQ(providers->items.size(), 2u);
  EXPECT_EQ(providers->items[0].find("identity")->kind, base::YamlNode::Kind::mapping);
  const base::YamlNode& key = providers->items[1].find("aesgcm")->find("keys")->items.at(0);
  EXPECT_EQ(key.find("name")->scalar, "k'1");
  EXPECT_EQ(key.find("secret")->scalar, "a\xc3\xa9" "b");
  EXPECT_EQ(key.line, 10);
  const base::YamlNode* list = doc->find("list");
  ASSERT_EQ(list->items.size(), 3u);
  EXPECT_TRUE(list->items[1].is_null());
  EXPECT_EQ(list->items[2].items.at(0).scalar, "nested");
  EXPECT_TRUE(doc->find("empty")->is_null());
}

TEST(YamlSubset, ReadsAJsonDocumentSpanningLines) {
  auto doc = base::parse_yaml_subset("{\n  \"a\": [1, 2,\n    3],\n  \"b\": {\"c\": \"d\"}\n}\n");
  ASSERT_TRUE(doc) << doc.error();
  EXPECT_EQ(doc->find("a")->items.size(), 3u);
  EXPECT_EQ(doc->find("b")->find("c")->scalar, "d");
}

TEST(YamlSubset, RefusesWhatItDoesNotSupportNamingTheLine) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"a: 1\nb: &x 2\n", "line 2: anchors"},
           {"a: |\n  text\n", "line 1: block scalars"},
           {"a: 1\n  b: 2\n", "line 2: unexpected indentation"},
           {"a: 1\na: 2\n", "line 2: duplicate key \"a\""},
           {"a:\n\t- b\n", "line 2: tabs"},
           {"a: \"open\n", "line 1: unterminated quoted string"},
           {"a: {b: 1\n", "line 1: unterminated flow mapping"},
           {"a: 1\n---\nb: 2\n", "line 2: only one YAML document"},
           {"a: b: c\n", "line 1: a mapping cannot start on its key's line"},
           {"- a\nb: 1\n", "line 2: unexpected content"},
           {"", "line 1: the document is empty"},
           {"a: 1\n: [x]\n", "line 2: a mapping key is empty"},
           {"a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "1]\n",
            "line 1: collections nested more than 128 levels deep"},
       }) {
    auto doc = base::parse_yaml_subset(c.text);
    ASSERT_FALSE(doc) << c.text;
    EXPECT_TRUE(doc.error().starts_with(c.error)) << c.text << " -> " << doc.error();
  }
}

// ---- The configuration ----

TEST(EncryptionConfig, ParsesKubesDocumentedExample) {
  auto config = parse_encryption_config(
      "apiVersion: apiserver.config.k8s.io/v1\n"
      "kind: EncryptionConfiguration\n"
      "resources:\n"
      "  - resources:\n"
      "      - secrets\n"
      "      - configmaps\n"
      "      - pandas.awesome.bears.example\n"
      "    providers:\n"
      "      - aesgcm:\n"
      "          keys:\n"
      "            - name: key1\n"
      "              secret: " + std::string(kKey1) + "\n"
      "            - name: key2\n"
      "              secret: " + kKey2 + "\n"
      "      - identity: {}\n"
      "  - resources: ['*.apps']\n"
      "    providers: [{identity: {}}]\n");
  ASSERT_TRUE(config) << config.error();
  ASSERT_EQ(config->rules.size(), 2u);
  EXPECT_EQ(config->rules[0].resources,
            (std::vector<std::string>{"secrets", "configmaps", "pandas.awesome.bears.example"}));
  ASSERT_EQ(config->rules[0].providers.size(), 2u);
  EXPECT_EQ(config->rules[0].providers[0].type, EncryptionProviderType::aesgcm);
  ASSERT_EQ(config->rules[0].providers[0].keys.size(), 2u);
  EXPECT_EQ(config->rules[0].providers[0].keys[0].secret, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(config->rules[0].providers[0].keys[1].secret.size(), 16u);
  EXPECT_EQ(config->rules[0].providers[1].type, EncryptionProviderType::identity);
  EXPECT_EQ(config->rules[1].resources, std::vector<std::string>{"*.apps"});
}

TEST(EncryptionConfig, AcceptsJson) {
  auto config = parse_encryption_config(
      R"({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
          "resources": [{"resources": ["secrets"],
                         "providers": [{"aesgcm": {"keys": [{"name": "k", "secret": ")" +
      std::string(kKey2) + R"("}]}}]}]})");
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->rules.at(0).providers.at(0).keys.at(0).name, "k");
}

TEST(EncryptionConfig, ErrorsNameTheLineAndFieldAndNeverTheSecret) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string head =
      "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n";
  for (const Case& c : std::vector<Case>{
           {"apiVersion: v1\nkind: EncryptionConfiguration\nresources: []\n",
            "line 1: apiVersion: must be apiserver.config.k8s.io/v1"},
           {head + "resources: []\n", "line 3: resources: must be a non-empty list"},
           {head + "resource: []\n", "line 3: resource: unknown field"},
           {config_yaml("  - aesgcm:\n      keys:\n      - name: k\n        secret: c2hvcnQ=\n"),
            "line 10: resources[0].providers[0].aesgcm.keys[0].secret: secret is not of the "
            "expected length, got 5 bytes"},
           {config_yaml("  - aesgcm:\n      keys:\n      - name: k\n        secret: not*base64\n"),
            "line 10: resources[0].providers[0].aesgcm.keys[0].secret: secrets must be base64"},
           {config_yaml("  - aesgcm:\n      keys: []\n"),
            "line 8: resources[0].providers[0].aesgcm.keys: at least one key is required"},
           {config_yaml(aesgcm("k", kKey1) + "      - name: k\n        secret: " + kKey2 + "\n"),
            "line 11: resources[0].providers[0].aesgcm.keys[1].name: duplicate key name"},
           {config_yaml("  - secretbox:\n      keys: []\n"),
            "line 7: resources[0].providers[0].secretbox: provider not supported by kwatch"},
           {config_yaml("  - aescbc: {}\n"),
            "line 7: resources[0].providers[0].aescbc.keys: at least one key is required"},
           {config_yaml("  - kms: {name: x}\n"), "line 7: resources[0].providers[0].kms: provider not"},
           {config_yaml("  - identity: {}\n    aesgcm: {}\n"),
            "line 7: resources[0].providers[0]: more than one provider in one element"},
           {config_yaml("  - identity: {}\n  - identity: {}\n") +
                "- resources: [secrets]\n  providers: [{identity: {}}]\n",
            "line 9: resources[1].resources[0]: \"secrets\" is named by an earlier entry"},
           {head + "resources:\n- resources: [Secrets]\n  providers: [{identity: {}}]\n",
            "line 4: resources[0].resources[0]: resource names are lowercase"},
       }) {
    auto config = parse_encryption_config(c.text);
    ASSERT_FALSE(config) << c.text;
    EXPECT_TRUE(config.error().starts_with(c.error)) << c.text << "\n -> " << config.error();
    EXPECT_EQ(config.error().find("not*base64"), std::string::npos);
  }
}

TEST(EncryptionConfig, LoadNamesTheFile) {
  auto missing = load_encryption_config("/nonexistent/encryption.yaml");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().starts_with("/nonexistent/encryption.yaml: cannot read"));
}

// ---- The transformer ----

TEST(ValueTransformer, WritesKubesAesGcmFormatAndReadsItBack) {
  auto t = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  ASSERT_TRUE(t);
  const std::string key = "/registry/secrets/default/s";
  auto stored = t->to_storage("{\"kind\":\"Secret\"}", key);
  ASSERT_TRUE(stored);
  const std::string prefix = "k8s:enc:aesgcm:v1:key1:";
  ASSERT_TRUE(stored->starts_with(prefix));
  EXPECT_EQ(stored->size(), prefix.size() + 12 + 17 + 16);  // nonce, ciphertext, tag
  EXPECT_EQ(stored->find("Secret"), std::string::npos);
  auto read = t->from_storage(*stored, key);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->value, "{\"kind\":\"Secret\"}");
  EXPECT_FALSE(read->stale);
  // Two writes of the same value differ (random nonces).
  EXPECT_NE(*t->to_storage("{\"kind\":\"Secret\"}", key), *stored);
}

std::string aescbc(const std::string& name, const std::string& secret) {
  return "  - aescbc:\n"
         "      keys:\n"
         "      - name: " + name + "\n"
         "        secret: " + secret + "\n";
}

std::string unbase64(std::string_view text) {
  std::string out;
  EXPECT_TRUE(decode_base64(text, out));
  return out;
}

TEST(ValueTransformer, ReadsValuesSealedByOtherImplementations) {
  // Sealed by Python's cryptography (AESGCM, nonce "NONCENONCE12", the key as AAD) and by
  // `openssl enc -aes-256-cbc` (IV "IVIVIVIVIVIVIVIV"), as kube's providers lay them out.
  auto t = transformer_from(config_yaml(aesgcm("key1", kKey1) + aescbc("key1", kKey1)));
  ASSERT_TRUE(t);
  const std::string key = "/registry/secrets/default/s";
  const std::string gcm = "k8s:enc:aesgcm:v1:key1:NONCENONCE12" +
                          unbase64("9us4Br3ynz9EpO4rTBC5DlkBGlIi3yvuxx1HiI4abSAT");
  auto a = t->from_storage(gcm, key);
  ASSERT_TRUE(a) << a.error();
  EXPECT_EQ(a->value, "{\"kind\":\"Secret\"}");
  EXPECT_FALSE(a->stale);
  const std::string cbc = "k8s:enc:aescbc:v1:key1:IVIVIVIVIVIVIVIV" +
                          unbase64("oWGOVg5AyMz2o/u3Ovn3UK6ng+wuKhAD37iWg//SY80=");
  auto b = t->from_storage(cbc, key);
  ASSERT_TRUE(b) << b.error();
  EXPECT_EQ(b->value, "{\"kind\":\"Secret\"}");
  EXPECT_TRUE(b->stale);  // aescbc is listed second: the next update writes aesgcm
}

TEST(ValueTransformer, AesCbcRoundTripsAndRefusesBrokenPadding) {
  auto t = transformer_from(config_yaml(aescbc("old", kKey2)));
  ASSERT_TRUE(t);
  const std::string key = "/registry/secrets/default/s";
  for (std::string plain : {std::string(), std::string("{}"), std::string(16, 'x'), std::string(100, 'y')}) {
    auto stored = t->to_storage(plain, key);
    ASSERT_TRUE(stored);
    EXPECT_TRUE(stored->starts_with("k8s:enc:aescbc:v1:old:"));
    EXPECT_EQ((stored->size() - 22) % 16, 0u);
    auto read = t->from_storage(*stored, key);
    ASSERT_TRUE(read) << read.error();
    EXPECT_EQ(read->value, plain);
  }
  auto cut = t->from_storage("k8s:enc:aescbc:v1:old:0123456789abcdef0123", key);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("not a multiple of the block size"), std::string::npos);
}

TEST(ValueTransformer, TheStorageKeyIsAuthenticated) {
  auto t = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  auto stored = t->to_storage("{}", "/registry/secrets/a/x");
  ASSERT_TRUE(stored);
  auto moved = t->from_storage(*stored, "/registry/secrets/b/x");
  ASSERT_FALSE(moved);
  EXPECT_NE(moved.error().find("message authentication failed"), std::string::npos);
}

TEST(ValueTransformer, TamperedOrTruncatedCiphertextIsAnError) {
  auto t = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  const std::string key = "/registry/secrets/default/s";
  auto stored = t->to_storage("{\"data\":{}}", key);
  ASSERT_TRUE(stored);
  for (std::size_t i = 23; i < stored->size(); i += 7) {  // nonce, ciphertext and tag bytes
    std::string bad = *stored;
    bad[i] = static_cast<char>(bad[i] ^ 1);
    EXPECT_FALSE(t->from_storage(bad, key)) << "flipped byte " << i;
  }
  auto short_value = t->from_storage("k8s:enc:aesgcm:v1:key1:short", key);
  ASSERT_FALSE(short_value);
  EXPECT_NE(short_value.error().find("shorter than the required size"), std::string::npos);
}

TEST(ValueTransformer, RotationReadsOldKeysAsStaleAndWritesWithTheFirst) {
  auto old_only = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  auto rotated = transformer_from(config_yaml(aesgcm("key2", kKey2) + aesgcm("key1", kKey1)));
  const std::string key = "/registry/secrets/default/s";
  auto old_value = old_only->to_storage("{\"v\":1}", key);
  ASSERT_TRUE(old_value);
  auto read = rotated->from_storage(*old_value, key);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->value, "{\"v\":1}");
  EXPECT_TRUE(read->stale);
  auto new_value = rotated->to_storage(read->value, key);
  ASSERT_TRUE(new_value);
  EXPECT_TRUE(new_value->starts_with("k8s:enc:aesgcm:v1:key2:"));
  EXPECT_FALSE(rotated->from_storage(*new_value, key)->stale);
  // The old configuration cannot read what the new key wrote.
  EXPECT_FALSE(old_only->from_storage(*new_value, key));
}

TEST(ValueTransformer, PlaintextReadsOnlyWhenIdentityIsListed) {
  auto strict = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  auto lenient = transformer_from(config_yaml(aesgcm("key1", kKey1) + "  - identity: {}\n"));
  const std::string key = "/registry/secrets/default/s";
  auto refused = strict->from_storage("{\"kind\":\"Secret\"}", key);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("no matching prefix"), std::string::npos);
  auto read = lenient->from_storage("{\"kind\":\"Secret\"}", key);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->value, "{\"kind\":\"Secret\"}");
  EXPECT_TRUE(read->stale);  // encrypted by the next update
}

TEST(ValueTransformer, IdentityFirstDecryptsOldValuesAndWritesPlaintext) {
  auto encrypting = transformer_from(config_yaml(aesgcm("key1", kKey1)));
  auto decrypting = transformer_from(config_yaml("  - identity: {}\n" + aesgcm("key1", kKey1)));
  const std::string key = "/registry/secrets/default/s";
  auto sealed = encrypting->to_storage("{}", key);
  auto read = decrypting->from_storage(*sealed, key);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->value, "{}");
  EXPECT_TRUE(read->stale);
  EXPECT_EQ(*decrypting->to_storage("{}", key), "{}");
}

// ---- The decorator ----

std::shared_ptr<EncryptingStorage> encrypting(std::shared_ptr<Storage> inner,
                                              std::shared_ptr<const ValueTransformer> t) {
  std::vector<EncryptionScope> scopes{{"/registry/secrets/", std::move(t)}};
  return std::make_shared<EncryptingStorage>(std::move(inner), std::move(scopes));
}

std::shared_ptr<MemoryStorage> memory() {
  auto opened = MemoryStorage::open({});
  EXPECT_TRUE(opened);
  return std::shared_ptr<MemoryStorage>(std::move(*opened));
}

TEST(EncryptingStorage, EncryptsConfiguredPrefixesOnlyAndReadsEveryWayBack) {
  asio::io_context ioc;
  auto inner = memory();
  auto storage = encrypting(inner, transformer_from(config_yaml(aesgcm("key1", kKey1))));
  run(ioc, [&]() -> asio::awaitable<void> {
    const std::string secret_key = "/registry/secrets/default/s";
    const std::string plain = R"({"kind":"Secret","data":{"password":"aHVudGVyMg=="}})";
    std::int64_t from = 0;
    auto watch = co_await storage->watch("/registry/", from, PrevKv::include);
    CO_ASSERT(watch);
    auto created = co_await storage->create(secret_key, plain);
    CO_ASSERT(created);
    EXPECT_EQ(created->value, plain);
    // Named arguments: GCC 12 destroys temporaries in a co_await expression twice.
    const std::string cm_key = "/registry/configmaps/default/c";
    const std::string cm_value = "{\"kind\":\"ConfigMap\"}";
    auto cm = co_await storage->create(cm_key, cm_value);
    CO_ASSERT(cm);
    // Underneath: ciphertext for the secret, plaintext for the config map.
    std::int64_t current = 0;
    auto raw = co_await inner->get(secret_key, current);
    CO_ASSERT(raw);
    EXPECT_TRUE(raw->value.starts_with("k8s:enc:aesgcm:v1:key1:"));
    EXPECT_EQ(raw->value.find("aHVudGVyMg"), std::string::npos);
    auto raw_cm = co_await inner->get(cm_key, current);
    EXPECT_EQ(raw_cm->value, cm_value);
    // get, list, and a failed guard's state read back in plaintext.
    auto got = co_await storage->get(secret_key, current);
    CO_ASSERT(got);
    EXPECT_EQ(got->value, plain);
    EXPECT_FALSE(got->stale);
    ListOptions options;
    options.prefix = "/registry/";
    auto listed = co_await storage->list(options);
    CO_ASSERT(listed && listed->kvs.size() == 2);
    EXPECT_EQ(listed->kvs[1].value, plain);
    std::int64_t wrong = 1;
    const std::string empty_object = "{}";
    auto lost = co_await storage->put_if(secret_key, wrong, empty_object);
    CO_ASSERT(lost && !lost->succeeded);
    EXPECT_EQ(lost->kv.value, plain);
    // An update, then the watch: events and previous states in plaintext.
    const std::string updated = R"({"kind":"Secret","data":{}})";
    auto u = co_await storage->put_if(secret_key, created->mod_revision, updated);
    CO_ASSERT(u && u->succeeded);
    EXPECT_EQ(u->kv.value, updated);
    std::int64_t any = 0;
    auto d = co_await storage->delete_if(secret_key, any);
    CO_ASSERT(d && d->succeeded);
    EXPECT_EQ(d->kv.value, updated);
    std::vector<Event> events;
    while (events.size() < 4) {
      auto batch = co_await (*watch)->next();
      CO_ASSERT(batch);
      for (auto& e : batch->events) events.push_back(std::move(e));
    }
    EXPECT_EQ(events[0].kv.value, plain);
    EXPECT_EQ(events[2].kv.value, updated);
    CO_ASSERT(events[2].prev_kv);
    EXPECT_EQ(events[2].prev_kv->value, plain);
    EXPECT_EQ(events[3].type, EventType::del);
    CO_ASSERT(events[3].prev_kv);
    EXPECT_EQ(events[3].prev_kv->value, updated);
  }());
}

TEST(EncryptingStorage, AnUnreadableValueCarriesItsErrorAndIsNeverRewritten) {
  asio::io_context ioc;
  auto inner = memory();
  auto storage = encrypting(inner, transformer_from(config_yaml(aesgcm("key1", kKey1))));
  run(ioc, [&]() -> asio::awaitable<void> {
    const std::string key = "/registry/secrets/default/plain";
    const std::string plain = "{\"kind\":\"Secret\"}";
    auto put = co_await inner->create(key, plain);  // written around kwatch
    CO_ASSERT(put);
    std::int64_t current = 0;
    auto got = co_await storage->get(key, current);
    CO_ASSERT(got);
    EXPECT_TRUE(got->value.empty());
    EXPECT_NE(got->read_error.find("no matching prefix"), std::string::npos);
    // An update whose function cannot read the state fails: the stored bytes stay.
    Storage::UpdateFn fn = [](const KeyValue* kv) -> Storage::UpdateResult {
      if (kv == nullptr || !kv->read_error.empty()) return Errc::internal;
      return std::string("{}");
    };
    std::optional<KeyValue> no_suggestion;
    auto u = co_await storage->guaranteed_update(key, fn, no_suggestion);
    EXPECT_FALSE(u);
    auto raw = co_await inner->get(key, current);
    EXPECT_EQ(raw->value, plain);
  }());
}

TEST(EncryptingStorage, AnUnchangedUpdateRewritesAValueReadWithAnOldKey) {
  asio::io_context ioc;
  auto inner = memory();
  auto old_storage = encrypting(inner, transformer_from(config_yaml(aesgcm("key1", kKey1))));
  auto new_storage = encrypting(
      inner, transformer_from(config_yaml(aesgcm("key2", kKey2) + aesgcm("key1", kKey1))));
  run(ioc, [&]() -> asio::awaitable<void> {
    const std::string key = "/registry/secrets/default/s";
    const std::string value = "{\"v\":1}";
    auto created = co_await old_storage->create(key, value);
    CO_ASSERT(created);
    std::optional<KeyValue> none;
    Storage::UpdateFn same = [](const KeyValue* kv) -> Storage::UpdateResult { return kv->value; };
    // With the old configuration an unchanged update writes nothing.
    auto noop = co_await old_storage->guaranteed_update(key, same, none);
    CO_ASSERT(noop);
    EXPECT_EQ(noop->mod_revision, created->mod_revision);
    // With the new key first, the value is stale: the same update rewrites it with key2.
    auto rewritten = co_await new_storage->guaranteed_update(key, same, none);
    CO_ASSERT(rewritten);
    EXPECT_GT(rewritten->mod_revision, created->mod_revision);
    EXPECT_EQ(rewritten->value, "{\"v\":1}");
    std::int64_t current = 0;
    auto raw = co_await inner->get(key, current);
    EXPECT_TRUE(raw->value.starts_with("k8s:enc:aesgcm:v1:key2:"));
    // Now current: the next unchanged update is a no-op again.
    auto again = co_await new_storage->guaranteed_update(key, same, none);
    CO_ASSERT(again);
    EXPECT_EQ(again->mod_revision, rewritten->mod_revision);

    // An update function that says "leave it" (nullopt) rewrites a stale value the same way.
    const std::string other = "/registry/secrets/default/t";
    auto made = co_await old_storage->create(other, value);
    CO_ASSERT(made);
    Storage::UpdateFn leave = [](const KeyValue*) -> Storage::UpdateResult { return std::nullopt; };
    auto left = co_await new_storage->guaranteed_update(other, leave, none);
    CO_ASSERT(left);
    EXPECT_GT(left->mod_revision, made->mod_revision);
    EXPECT_EQ(left->value, value);
    auto raw_other = co_await inner->get(other, current);
    EXPECT_TRUE(raw_other->value.starts_with("k8s:enc:aesgcm:v1:key2:"));
    auto left_again = co_await new_storage->guaranteed_update(other, leave, none);
    CO_ASSERT(left_again);
    EXPECT_EQ(left_again->mod_revision, left->mod_revision);
  }());
}

TEST(EncryptingStorage, TheDataDirectoryHoldsNoPlaintext) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kwatch-enc-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    asio::io_context ioc;
    MemoryStorage::Options options;
    options.data_dir = dir.string();
    options.snapshot_log_records = 2;  // a snapshot as well as the log
    auto opened = MemoryStorage::open(options);
    ASSERT_TRUE(opened);
    std::shared_ptr<Storage> inner(std::move(*opened));
    auto storage = encrypting(inner, transformer_from(config_yaml(aesgcm("key1", kKey1))));
    run(ioc, [&]() -> asio::awaitable<void> {
      for (int i = 0; i < 5; ++i) {
        const std::string key = "/registry/secrets/default/s" + std::to_string(i);
        const std::string value = "{\"data\":\"TOPSECRETVALUE\"}";
        auto r = co_await storage->create(key, value);
        CO_ASSERT(r);
      }
    }());
  }
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find("TOPSECRETVALUE"), std::string::npos) << entry.path();
  }
  EXPECT_GT(files, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kwatch::storage
