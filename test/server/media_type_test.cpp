#include "server/media_type.hpp"
#include "server/responses.hpp"
#include "base/yaml_subset.hpp"

#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::server {
namespace {

namespace json = boost::json;

TEST(MediaType, TheFirstRangeKwatchCanAnswerWins) {
  EXPECT_EQ(negotiate("", false), Representation::json);
  EXPECT_EQ(negotiate("application/json", false), Representation::json);
  EXPECT_EQ(negotiate("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
                      "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                      false),
            Representation::json);
  EXPECT_EQ(negotiate("application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("application/json;q=0, application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("text/html, */*;q=0.8", false), Representation::json);
  EXPECT_EQ(negotiate("application/vnd.kubernetes.protobuf", false), std::nullopt);
  EXPECT_EQ(negotiate("application/xml", false), std::nullopt);
  EXPECT_EQ(negotiate("application/yaml", true), std::nullopt);  // no YAML stream
}

// Protobuf is made only when named, only where the request allows it (a GET that is no watch),
// and without a transform; documents with one form never answer it.
TEST(MediaType, ProtobufOnlyWhenNamedAndAllowed) {
  const std::string pb = "application/vnd.kubernetes.protobuf";
  auto form = negotiate_output(pb, false, true);
  ASSERT_TRUE(form);
  EXPECT_EQ(form->representation, Representation::protobuf);
  EXPECT_FALSE(negotiate_output(pb, false, false)) << "not allowed: a 406";
  EXPECT_FALSE(negotiate_output(pb, true, true)) << "no protobuf watch yet";
  EXPECT_EQ(negotiate_output(pb + ", application/json", false, false)->representation,
            Representation::json);
  EXPECT_EQ(negotiate_output("*/*", false, true)->representation, Representation::json);
  EXPECT_FALSE(negotiate_output(pb + ";as=Table;g=meta.k8s.io;v=v1", false, true));
  EXPECT_FALSE(negotiate(pb, false));
}

// CBOR likewise: `application/cbor` (or a watch's `application/cbor-seq`) named, allowed (not
// over WebSocket), no transform; documents with one form (discovery) never answer it.
TEST(MediaType, CborOnlyWhenNamedAndAllowed) {
  for (const std::string cbor : {"application/cbor", "application/cbor-seq", "APPLICATION/CBOR"}) {
    auto form = negotiate_output(cbor, false, true);
    ASSERT_TRUE(form) << cbor;
    EXPECT_EQ(form->representation, Representation::cbor) << cbor;
    EXPECT_FALSE(negotiate_output(cbor, false, false)) << cbor << ": not allowed, a 406";
    EXPECT_FALSE(negotiate(cbor, false)) << cbor;
  }
  EXPECT_FALSE(negotiate_output("application/cbor;as=Table;g=meta.k8s.io;v=v1", false, true));
  EXPECT_EQ(negotiate_output("application/cbor;q=0.5, application/json", false, true)
                ->representation,
            Representation::json);
  EXPECT_EQ(negotiate_output("*/*", false, true)->representation, Representation::json);
  EXPECT_FALSE(negotiate_output("application/cbor-sequence", false, true));
}

TEST(MediaType, RangesAreTriedInTheOrderOfTheirQuality) {
  EXPECT_EQ(negotiate("application/json;q=0.5, application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("application/yaml;q=0.9, application/json;q=0.95", false),
            Representation::json);
  // Equal quality: exact types before wildcards, otherwise as sent.
  EXPECT_EQ(negotiate("*/*, application/yaml", false), Representation::yaml);
  EXPECT_EQ(negotiate("application/yaml, application/json", false), Representation::yaml);
  // A q that does not read as a number refuses its range, as kube reads it.
  EXPECT_EQ(negotiate("application/json;q=x", false), std::nullopt);
  EXPECT_EQ(negotiate("*", false), Representation::json);
}

// The Accept headers client-go's metadata client, kubectl and others send, and what kube-apiserver
// makes of them.
TEST(MediaType, ResourceAnswersTakeTheFormTheRangeAsksFor) {
  const auto form = [](std::string_view accept) {
    auto f = negotiate_output(accept, false);
    if (!f) return std::string("406");
    std::string out = f->representation == Representation::json ? "json" : "yaml";
    switch (f->transform) {
      case Transform::none: break;
      case Transform::table: out += " Table"; break;
      case Transform::partial_object_metadata: out += " PartialObjectMetadata"; break;
      case Transform::partial_object_metadata_list: out += " PartialObjectMetadataList"; break;
    }
    if (f->transform != Transform::none) out += " " + std::string(f->meta_version);
    return out;
  };
  EXPECT_EQ(form(""), "json");
  EXPECT_EQ(form("application/json"), "json");
  // client-go's metadata client: protobuf first (kwatch has none), then JSON, then plain JSON.
  EXPECT_EQ(form("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;"
                 "v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                 "application/json"),
            "json PartialObjectMetadataList v1");
  EXPECT_EQ(form("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            "json PartialObjectMetadata v1");
  EXPECT_EQ(form("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            "json PartialObjectMetadata v1beta1");
  EXPECT_EQ(form("application/yaml;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            "yaml PartialObjectMetadata v1");
  // kubectl get.
  EXPECT_EQ(form("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;"
                 "v=v1beta1;g=meta.k8s.io,application/json"),
            "json Table v1");
  EXPECT_EQ(form(" application/json ; as=Table ; g=meta.k8s.io ; v=v1beta1"), "json Table v1beta1");
  // A form kwatch cannot make: the next range, or 406 when none is left.
  EXPECT_EQ(form("application/json;as=Pod;g=meta.k8s.io;v=v1"), "406");
  EXPECT_EQ(form("application/json;as=Table;g=example.com;v=v1"), "406");
  EXPECT_EQ(form("application/json;as=Table;g=meta.k8s.io;v=v2"), "406");
  EXPECT_EQ(form("application/json;as=Table;g=meta.k8s.io"), "406");
  EXPECT_EQ(form("application/json;g=meta.k8s.io;v=v1"), "406");
  EXPECT_EQ(form("application/json;as=Table"), "406");
  EXPECT_EQ(form("application/json;as=Pod;g=meta.k8s.io;v=v1, application/yaml"), "yaml");
  EXPECT_EQ(form("application/json;as=Table;g=meta.k8s.io;v=v1;q=0, application/json"), "json");
  // `stream` is JSON's watch framing only; `sv` is v1 only.
  EXPECT_EQ(form("application/json;stream=watch"), "json");
  EXPECT_EQ(form("application/json;stream=other"), "406");
  EXPECT_EQ(form("application/yaml;stream=watch, application/json"), "json");
  EXPECT_EQ(form("application/json;sv=v2"), "406");
  EXPECT_EQ(form("application/json;sv=v1;pretty=1"), "json");
  EXPECT_EQ(form("text/html"), "406");
  // A watch has no YAML form.
  EXPECT_EQ(negotiate_output("application/yaml", true), std::nullopt);
  EXPECT_TRUE(negotiate_output("application/yaml, application/json", true));
}

// Go's json.MarshalIndent(v, "", "  "), as kube-apiserver answers curl.
TEST(MediaType, IndentedAsGoIndents) {
  EXPECT_EQ(*indent_json(R"({"kind":"ConfigMap","metadata":{"name":"a","labels":{}},)"
                        R"("data":{"k":"{\"x\": [1,2]}"},"list":[1,[],{"a":null}]})" "\n",
                        4096),
            "{\n"
            "  \"kind\": \"ConfigMap\",\n"
            "  \"metadata\": {\n"
            "    \"name\": \"a\",\n"
            "    \"labels\": {}\n"
            "  },\n"
            "  \"data\": {\n"
            "    \"k\": \"{\\\"x\\\": [1,2]}\"\n"
            "  },\n"
            "  \"list\": [\n"
            "    1,\n"
            "    [],\n"
            "    {\n"
            "      \"a\": null\n"
            "    }\n"
            "  ]\n"
            "}");
  EXPECT_EQ(*indent_json("{}", 100), "{}");
  EXPECT_EQ(*indent_json(R"(["a\\",":,{"])", 100), "[\n  \"a\\\\\",\n  \":,{\"\n]");
  // Already indented text comes out the same.
  EXPECT_EQ(*indent_json(*indent_json(R"({"a":[{"b":1}]})", 1000), 1000),
            *indent_json(R"({"a":[{"b":1}]})", 1000));
  // Deep and wide: a hundred levels of nesting around ten thousand small values would grow
  // past any sensible bound; refused instead of made.
  std::string deep = std::string(100, '[');
  for (int i = 0; i < 10000; ++i) deep += i == 0 ? "1" : ",1";
  deep += std::string(100, ']');
  EXPECT_EQ(indent_json(deep, 8 * deep.size()), std::nullopt);
  EXPECT_TRUE(indent_json(deep, 1u << 30));
}

// Big answers are not copied whole to be indented: they stay compact, streamed as they are.
TEST(MediaType, LargeAnswersStayCompact) {
  ApiResponse big;
  big.body = "{\"data\":\"" + std::string(kMaxIndentedBytes, 'x') + "\"}";
  const std::size_t size = big.body.size();
  as_indented(big);
  EXPECT_EQ(big.body.size(), size);
  EXPECT_EQ(big.body.find('\n'), std::string::npos);
  ApiResponse small;
  small.body = "{\"a\":1}\n";
  as_indented(small);
  EXPECT_EQ(small.body, "{\n  \"a\": 1\n}");
}

TEST(MediaType, PrettyForPeopleAsKubeDecides) {
  EXPECT_TRUE(wants_pretty(std::nullopt, "curl/7.88.1"));
  EXPECT_TRUE(wants_pretty(std::nullopt, "Wget/1.21"));
  EXPECT_TRUE(wants_pretty(std::nullopt, "Mozilla/5.0 (X11; Linux x86_64)"));
  EXPECT_FALSE(wants_pretty(std::nullopt, "kubectl/v1.32.4 (linux/amd64) kubernetes/abc"));
  EXPECT_FALSE(wants_pretty(std::nullopt, ""));
  for (const char* yes : {"1", "t", "T", "true", "TRUE", "True"}) {
    EXPECT_TRUE(wants_pretty(std::string_view(yes), "kubectl")) << yes;
  }
  // The parameter wins over the user agent; what is no Go boolean is false.
  for (const char* no : {"0", "false", "yes", "on"}) {
    EXPECT_FALSE(wants_pretty(std::string_view(no), "curl/8")) << no;
  }
  EXPECT_TRUE(wants_pretty(std::string_view(""), "curl/8"));
}

TEST(MediaType, YamlReadsBackAsTheSameValues) {
  auto v = json::parse(R"({"kind":"ConfigMap","metadata":{"name":"a","labels":{}},
    "data":{"port":"8080","flag":"true","empty":"","colon":"a: b","hash":"x #y","multi":"l1\nl2",
    "dash":"-x","n":"null"},"list":[1,"two",{"k":"v","z":[]},[3]],"none":null,"yes":true})");
  const std::string text = to_yaml(v);
  auto doc = base::parse_yaml_subset(text);
  ASSERT_TRUE(doc.has_value()) << text << doc.error();
  const auto* data = doc->find("data");
  ASSERT_NE(data, nullptr);
  for (const char* key : {"port", "flag", "empty", "colon", "hash", "dash", "n", "multi"}) {
    const auto* value = data->find(key);
    ASSERT_NE(value, nullptr) << key;
    EXPECT_EQ(value->scalar, v.at("data").at(key).as_string()) << key;
  }
  // Strings YAML would read as something else are quoted.
  EXPECT_TRUE(data->find("port")->quoted);
  EXPECT_TRUE(data->find("flag")->quoted);
  EXPECT_TRUE(data->find("n")->quoted);
  EXPECT_FALSE(doc->find("kind")->quoted);
  EXPECT_NE(text.find("labels: {}"), std::string::npos) << text;
  const auto* list = doc->find("list");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), 4u);
  EXPECT_EQ(list->items[2].find("k")->scalar, "v");
  EXPECT_EQ(list->items[3].items.size(), 1u);
  // Keys come sorted, as kube-apiserver writes them.
  EXPECT_LT(text.find("data:"), text.find("kind:"));
}

}  // namespace
}  // namespace kwatch::server
