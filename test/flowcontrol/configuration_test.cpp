#include "flowcontrol/configuration.hpp"

#include "apimachinery/stored_json.hpp"

#include <gtest/gtest.h>

namespace kwatch::flowcontrol {
namespace {

namespace json = boost::json;

json::object parse(std::string_view text) {
  auto v = apimachinery::parse_json(text);
  EXPECT_TRUE(v && v->is_object()) << text;
  return v ? v->get_object() : json::object();
}

FlowSchema schema_with(std::string_view rules) {
  auto fs = parse_flow_schema(parse(std::string(R"({"metadata":{"name":"s","uid":"u1"},"spec":{
      "priorityLevelConfiguration":{"name":"pl"},"rules":)") + std::string(rules) + "}}"));
  EXPECT_TRUE(fs.has_value());
  return fs.value_or(FlowSchema{});
}

RequestDigest resource(const apimachinery::UserInfo& user, std::string verb, std::string group,
                       std::string resource, std::string ns, std::string subresource = "") {
  RequestDigest r;
  r.user = &user;
  r.resource_request = true;
  r.verb = std::move(verb);
  r.api_group = std::move(group);
  r.resource = std::move(resource);
  r.namespace_ = std::move(ns);
  r.subresource = std::move(subresource);
  return r;
}

RequestDigest path(const apimachinery::UserInfo& user, std::string verb, std::string p) {
  RequestDigest r;
  r.user = &user;
  r.verb = std::move(verb);
  r.path = std::move(p);
  return r;
}

TEST(FlowSchemaMatching, SubjectsByUserGroupAndServiceAccount) {
  const auto fs = schema_with(R"([{"subjects":[
      {"kind":"User","user":{"name":"alice"}},
      {"kind":"Group","group":{"name":"ops"}},
      {"kind":"ServiceAccount","serviceAccount":{"namespace":"ci","name":"builder"}},
      {"kind":"ServiceAccount","serviceAccount":{"namespace":"kube-system","name":"*"}}],
    "resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"clusterScope":true,
                      "namespaces":["*"]}]}])");
  const apimachinery::UserInfo alice{"alice", "", {}};
  const apimachinery::UserInfo bob{"bob", "", {"ops"}};
  const apimachinery::UserInfo carol{"carol", "", {"dev"}};
  const apimachinery::UserInfo builder{"system:serviceaccount:ci:builder", "", {}};
  const apimachinery::UserInfo other_sa{"system:serviceaccount:ci:other", "", {}};
  const apimachinery::UserInfo system_sa{"system:serviceaccount:kube-system:anything", "", {}};
  // A namespace named like the prefix of another must not match it.
  const apimachinery::UserInfo lookalike{"system:serviceaccount:kube-systemx:a", "", {}};
  EXPECT_TRUE(matches(fs, resource(alice, "get", "", "pods", "default")));
  EXPECT_TRUE(matches(fs, resource(bob, "get", "", "pods", "default")));
  EXPECT_FALSE(matches(fs, resource(carol, "get", "", "pods", "default")));
  EXPECT_TRUE(matches(fs, resource(builder, "get", "", "pods", "default")));
  EXPECT_FALSE(matches(fs, resource(other_sa, "get", "", "pods", "default")));
  EXPECT_TRUE(matches(fs, resource(system_sa, "get", "", "pods", "default")));
  EXPECT_FALSE(matches(fs, resource(lookalike, "get", "", "pods", "default")));
}

TEST(FlowSchemaMatching, ResourceRules) {
  const auto fs = schema_with(R"([{"subjects":[{"kind":"Group","group":{"name":"*"}}],
    "resourceRules":[{"verbs":["get","list"],"apiGroups":["apps"],
                      "resources":["deployments","deployments/scale"],"namespaces":["team-a"]},
                     {"verbs":["*"],"apiGroups":[""],"resources":["nodes"],"clusterScope":true}]}])");
  const apimachinery::UserInfo u{"u", "", {}};
  EXPECT_TRUE(matches(fs, resource(u, "get", "apps", "deployments", "team-a")));
  EXPECT_TRUE(matches(fs, resource(u, "get", "apps", "deployments", "team-a", "scale")));
  EXPECT_FALSE(matches(fs, resource(u, "get", "apps", "deployments", "team-a", "status")));
  EXPECT_FALSE(matches(fs, resource(u, "update", "apps", "deployments", "team-a")));
  EXPECT_FALSE(matches(fs, resource(u, "get", "apps", "deployments", "team-b")));
  EXPECT_FALSE(matches(fs, resource(u, "get", "", "deployments", "team-a")));
  // Cluster-scoped requests match only a rule with clusterScope.
  EXPECT_FALSE(matches(fs, resource(u, "list", "apps", "deployments", "")));
  EXPECT_TRUE(matches(fs, resource(u, "delete", "", "nodes", "")));
  EXPECT_FALSE(matches(fs, resource(u, "delete", "", "nodes", "default")));
  // Resource requests never match non-resource rules and the other way round.
  EXPECT_FALSE(matches(fs, path(u, "get", "/healthz")));
}

TEST(FlowSchemaMatching, WildcardsCountOnlyAlone) {
  // kube's containsString: "*" beside other members is a literal member, not "every".
  const auto fs = schema_with(R"([{"subjects":[{"kind":"User","user":{"name":"*"}}],
    "resourceRules":[{"verbs":["get","*"],"apiGroups":["*"],"resources":["*"],"namespaces":["*"]}]}])");
  const apimachinery::UserInfo u{"u", "", {}};
  EXPECT_TRUE(matches(fs, resource(u, "get", "x", "y", "ns")));
  EXPECT_FALSE(matches(fs, resource(u, "list", "x", "y", "ns")));
}

TEST(FlowSchemaMatching, NonResourceUrls) {
  const auto fs = schema_with(R"([{"subjects":[{"kind":"Group","group":{"name":"*"}}],
    "nonResourceRules":[{"verbs":["get"],"nonResourceURLs":["/healthz","/apis/*","/metrics"]}]}])");
  const apimachinery::UserInfo u{"u", "", {}};
  EXPECT_TRUE(matches(fs, path(u, "get", "/healthz")));
  EXPECT_TRUE(matches(fs, path(u, "get", "/healthz/etcd")));  // a rule names its subtree
  EXPECT_FALSE(matches(fs, path(u, "get", "/healthzz")));
  EXPECT_TRUE(matches(fs, path(u, "get", "/apis/apps")));
  EXPECT_FALSE(matches(fs, path(u, "get", "/apis")));
  EXPECT_FALSE(matches(fs, path(u, "post", "/metrics")));
}

TEST(FlowSchemaParsing, DefaultsAndRefusals) {
  auto fs = parse_flow_schema(parse(R"({"metadata":{"name":"a"},"spec":{
      "priorityLevelConfiguration":{"name":"p"},"distinguisherMethod":{"type":"ByNamespace"}}})"));
  ASSERT_TRUE(fs);
  EXPECT_EQ(fs->matching_precedence, 1000);
  EXPECT_EQ(fs->distinguisher, Distinguisher::by_namespace);
  EXPECT_FALSE(parse_flow_schema(parse(R"({"metadata":{"name":"a"},"spec":{}})")));
  EXPECT_FALSE(parse_flow_schema(parse(R"({"metadata":{"name":"a"},"spec":{
      "priorityLevelConfiguration":{"name":"p"},"distinguisherMethod":{"type":"ByColour"}}})")));
  EXPECT_FALSE(parse_flow_schema(parse(R"({"metadata":{"name":"a"},"spec":{
      "priorityLevelConfiguration":{"name":"p"},"rules":[{"subjects":[{"kind":"Robot"}]}]}})")));
}

TEST(PriorityLevelParsing, TypesAndQueuing) {
  auto pl = parse_priority_level(parse(R"({"metadata":{"name":"x","uid":"u"},"spec":{"type":"Limited",
      "limited":{"nominalConcurrencyShares":7,"lendablePercent":10,"borrowingLimitPercent":20,
                 "limitResponse":{"type":"Queue","queuing":{"queues":16,"handSize":4,"queueLengthLimit":9}}}}})"));
  ASSERT_TRUE(pl);
  EXPECT_EQ(pl->uid, "u");
  EXPECT_EQ(pl->nominal_shares, 7);
  EXPECT_EQ(pl->lendable_percent, 10);
  EXPECT_EQ(pl->borrowing_limit_percent, 20);
  EXPECT_EQ(pl->queues, 16);
  EXPECT_EQ(pl->hand_size, 4);
  EXPECT_EQ(pl->queue_length_limit, 9);
  EXPECT_FALSE(pl->low_cpu_priority);
  // kwatch's annotation: "low" only, and never on the exempt level (probes and system:masters).
  auto annotated = [](std::string_view name, std::string_view type, std::string_view value) {
    return parse_priority_level(parse(
        std::string(R"({"metadata":{"name":")") + std::string(name) +
        R"(","annotations":{"flowcontrol.kwatch.io/cpu-priority":")" + std::string(value) +
        R"("}},"spec":{"type":")" + std::string(type) + R"(",)" +
        (type == "Exempt" ? R"("exempt":{}}})" : R"("limited":{"limitResponse":{"type":"Reject"}}}})")));
  };
  EXPECT_TRUE(annotated("x", "Limited", "low")->low_cpu_priority);
  EXPECT_FALSE(annotated("x", "Limited", "Low")->low_cpu_priority);
  EXPECT_FALSE(annotated("x", "Limited", "high")->low_cpu_priority);
  EXPECT_FALSE(annotated("exempt", "Exempt", "low")->low_cpu_priority);
  auto reject = parse_priority_level(parse(R"({"metadata":{"name":"r"},"spec":{"type":"Limited",
      "limited":{"limitResponse":{"type":"Reject"}}}})"));
  ASSERT_TRUE(reject);
  EXPECT_EQ(reject->queues, 0);
  EXPECT_EQ(reject->nominal_shares, 30);  // kube's default
  EXPECT_FALSE(reject->borrowing_limit_percent);
  // Only the level named "exempt" may be, and must be, of type Exempt.
  EXPECT_FALSE(parse_priority_level(parse(R"({"metadata":{"name":"mine"},"spec":{"type":"Exempt",
      "exempt":{}}})")));
  EXPECT_FALSE(parse_priority_level(parse(R"({"metadata":{"name":"exempt"},"spec":{"type":"Limited",
      "limited":{"limitResponse":{"type":"Reject"}}}})")));
  // A hand larger than the deck, or a broken union.
  EXPECT_FALSE(parse_priority_level(parse(R"({"metadata":{"name":"x"},"spec":{"type":"Limited",
      "limited":{"limitResponse":{"type":"Queue","queuing":{"queues":2,"handSize":3,"queueLengthLimit":1}}}}})")));
  EXPECT_FALSE(parse_priority_level(parse(R"({"metadata":{"name":"x"},"spec":{"type":"Limited",
      "limited":{"limitResponse":{"type":"Reject","queuing":{"queues":2}}}}})")));
}

TEST(FlowHash, IsKubesSha256Prefix) {
  // The first 8 bytes, little-endian, of SHA-256("global-default\0alice"), computed apart.
  EXPECT_EQ(flow_hash("global-default", "alice"), 17644606172554983095ULL);
  EXPECT_EQ(flow_hash("catch-all", ""), 7733929212674924205ULL);
}

TEST(FlowDistinguisher, ByUserAndByNamespace) {
  const apimachinery::UserInfo u{"alice", "", {}};
  FlowSchema fs;
  auto r = resource(u, "get", "", "pods", "ns1");
  EXPECT_EQ(flow_distinguisher(fs, r), "");
  fs.distinguisher = Distinguisher::by_user;
  EXPECT_EQ(flow_distinguisher(fs, r), "alice");
  fs.distinguisher = Distinguisher::by_namespace;
  EXPECT_EQ(flow_distinguisher(fs, r), "ns1");
}

}  // namespace
}  // namespace kwatch::flowcontrol
