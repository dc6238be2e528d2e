#include "schema/protobuf_decoder.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include <string>

namespace kwatch::schema {

using base::Errc;

namespace {

namespace json = boost::json;

// A minimal protobuf writer for building request bodies.
std::string varint(std::uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string field(int number, const std::string& bytes) {
  return varint(static_cast<std::uint64_t>(number) << 3 | 2) + varint(bytes.size()) + bytes;
}
std::string number_field(int number, std::uint64_t v) {
  return varint(static_cast<std::uint64_t>(number) << 3) + varint(v);
}
std::string entry(const std::string& k, const std::string& v) { return field(1, k) + field(2, v); }
std::string envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  return std::string("k8s\0", 4) + field(1, field(1, api_version) + field(2, kind)) +
         field(2, raw) + field(3, "") + field(4, "");
}

TEST(ProtobufDecoder, NamespaceWithLabelsBecomesJsonWithTypeMeta) {
  std::string meta = field(1, "team-a") + field(2, "") + field(11, entry("env", "prod")) +
                     number_field(7, 0);
  auto obj = decode_protobuf_object(envelope("v1", "Namespace", field(1, meta) + field(2, "") +
                                                                    field(3, "")));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"metadata":{"name":"team-a","labels":{"env":"prod"}},
                                  "spec":{},"status":{},"apiVersion":"v1","kind":"Namespace"})"));
}

TEST(ProtobufDecoder, DeleteOptionsComeWithAnyGroupVersion) {
  // What `kubectl drain` sends: an empty DeleteOptions in the envelope of "v1".
  const std::string empty(
      "k8s\0\x0a\x13\x0a\x02v1\x12\x0d" "DeleteOptions" "\x12\x00\x1a\x00\x22\x00", 31);
  auto obj = decode_protobuf_object(empty);
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"apiVersion":"v1","kind":"DeleteOptions"})"));
  std::string raw = number_field(1, 0) + field(2, field(1, "u-1") + field(2, "42")) +
                    field(4, "Foreground") + field(5, "All");
  obj = decode_protobuf_object(envelope("apps/v1", "DeleteOptions", raw));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"gracePeriodSeconds":0,
      "preconditions":{"uid":"u-1","resourceVersion":"42"},"propagationPolicy":"Foreground",
      "dryRun":["All"],"apiVersion":"apps/v1","kind":"DeleteOptions"})"));
}

TEST(ProtobufDecoder, EvictionAndBindingAsTypedClientsPostThem) {
  auto obj = decode_protobuf_object(envelope(
      "policy/v1", "Eviction", field(1, field(1, "web-1") + field(3, "default")) +
                                   field(2, number_field(1, 30))));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"metadata":{"name":"web-1","namespace":"default"},
      "deleteOptions":{"gracePeriodSeconds":30},"apiVersion":"policy/v1","kind":"Eviction"})"));
  obj = decode_protobuf_object(envelope(
      "v1", "Binding", field(1, field(1, "web-1")) + field(2, field(1, "Node") + field(3, "n1"))));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"metadata":{"name":"web-1"},"target":{"kind":"Node","name":"n1"},
      "apiVersion":"v1","kind":"Binding"})"));
}

TEST(ProtobufDecoder, EveryBuiltInKindFromTheGeneratedTable) {
  // A pod as `kubectl debug node/...` makes one: a volume whose source is inline in JSON but a
  // nested message on the wire, tolerations, quantities, a privileged security context.
  std::string volume = field(1, "host-root") + field(2, field(1, field(1, "/") + field(2, "")));
  std::string container = field(1, "debugger") + field(2, "busybox") +
                          field(8, field(1, entry("cpu", field(1, "500m")))) +
                          field(9, field(1, "host-root") + field(3, "/host")) +
                          field(15, number_field(2, 1));  // securityContext.privileged
  std::string spec = field(1, volume) + field(2, container) + field(10, "n1") +
                     number_field(11, 1) + field(22, field(1, "k") + field(2, "Exists"));
  auto pod = decode_protobuf_object(envelope("v1", "Pod", field(1, field(1, "p")) + field(2, spec)));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->at("spec"), json::parse(R"({
      "volumes":[{"name":"host-root","hostPath":{"path":"/","type":""}}],
      "containers":[{"name":"debugger","image":"busybox","resources":{"limits":{"cpu":"500m"}},
                     "volumeMounts":[{"name":"host-root","mountPath":"/host"}],
                     "securityContext":{"privileged":true}}],
      "nodeName":"n1","hostNetwork":true,"tolerations":[{"key":"k","operator":"Exists"}]})"));

  // A Lease renewed by a leader: MicroTime with microseconds, a zero duration kept (a pointer).
  std::string lease_spec = field(1, "me") + number_field(2, 0) +
                           field(4, number_field(1, 1767225600) + number_field(2, 123456000));
  auto lease = decode_protobuf_object(envelope("coordination.k8s.io/v1", "Lease",
                                               field(1, field(1, "l")) + field(2, lease_spec)));
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ(lease->at("spec"), json::parse(R"({"holderIdentity":"me","leaseDurationSeconds":0,
      "renewTime":"2026-01-01T00:00:00.123456Z"})"));

  // A budget's status: a map of times; managed fields' FieldsV1 as the JSON it holds.
  std::string status = number_field(1, 2) +
                       field(2, entry("web-1", number_field(1, 1767225600))) + number_field(3, 0);
  std::string managed = field(1, "kubectl") + field(2, "Update") +
                        field(7, field(1, R"({"f:spec":{}})"));
  auto pdb = decode_protobuf_object(envelope(
      "policy/v1", "PodDisruptionBudget", field(1, field(1, "b") + field(17, managed)) +
                                              field(3, status)));
  ASSERT_TRUE(pdb) << pdb.error().message;
  EXPECT_EQ(pdb->at("status"), json::parse(R"({"observedGeneration":2,
      "disruptedPods":{"web-1":"2026-01-01T00:00:00Z"},"disruptionsAllowed":0})"));
  EXPECT_EQ(pdb->at("metadata").at("managedFields"), json::parse(R"([{"manager":"kubectl",
      "operation":"Update","fieldsV1":{"f:spec":{}}}])"));

  // A review's user: extra values are lists of strings on the wire as messages.
  std::string user = field(1, "alice") + field(4, entry("scopes", field(1, "a") + field(1, "b")));
  auto review = decode_protobuf_object(envelope(
      "authentication.k8s.io/v1", "TokenReview", field(3, number_field(1, 1) + field(2, user))));
  ASSERT_TRUE(review) << review.error().message;
  EXPECT_EQ(review->at("status").at("user"),
            json::parse(R"({"username":"alice","extra":{"scopes":["a","b"]}})"));
}

TEST(OmitEmptyFields, LeavesOutWhatGosJsonLeavesOutOfTheKindsStruct) {
  auto pod = json::parse(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","labels":{},"managedFields":[]},
      "spec":{"hostNetwork":false,"nodeSelector":{},"nodeName":"","priority":0,
              "volumes":[{"name":"v","hostPath":{"path":"/","type":""},"emptyDir":null}],
              "containers":[{"name":"c","image":"i","command":[],"stdin":false,
                             "ports":[{"containerPort":80,"hostPort":0,"name":""}]}]},
      "status":{}})").as_object();
  omit_empty_fields("v1", "Pod", pod);
  EXPECT_EQ(pod, json::parse(R"({"apiVersion":"v1","kind":"Pod",
      "metadata":{"name":"p","managedFields":[]},
      "spec":{"priority":0,
              "volumes":[{"name":"v","hostPath":{"path":"/","type":""}}],
              "containers":[{"name":"c","image":"i","ports":[{"containerPort":80}]}]},
      "status":{}})"))
      << "a pointer's zero (priority, hostPath.type) stays, so do structs and managedFields: []";
  auto deployment = json::parse(R"({"spec":{"replicas":0,"paused":false,"minReadySeconds":0,
      "template":{"metadata":{"annotations":{}},"spec":{"containers":[]}}}})").as_object();
  omit_empty_fields("apps/v1", "Deployment", deployment);
  // containers has no omitempty: an empty list stays, as Go writes it.
  EXPECT_EQ(deployment, json::parse(R"({"spec":{"replicas":0,
      "template":{"metadata":{},"spec":{"containers":[]}}}})"));
  auto widget = json::parse(R"({"spec":{"empty":{},"zero":0}})").as_object();
  const auto before = widget;
  omit_empty_fields("example.com/v1", "Widget", widget);
  EXPECT_EQ(widget, before) << "custom resources have no struct";
}

// Go writes as null the zeros of lists and pointers without omitempty and of times that are no
// pointers; pointers with omitempty are left out, and creationTimestamp is omitzero (1.34).
TEST(WriteZeroFields, ZerosGoWritesAsNullAreNull) {
  auto pod = json::parse(R"({"metadata":{"name":"p"},"status":{"conditions":[
      {"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"}]}})")
                 .as_object();
  write_zero_fields("v1", "Pod", pod);
  const auto& condition = pod.at("status").at("conditions").at(0).as_object();
  EXPECT_TRUE(condition.at("lastProbeTime").is_null());
  EXPECT_EQ(condition.at("lastTransitionTime"), "2026-01-01T00:00:00Z");
  EXPECT_FALSE(pod.at("metadata").as_object().contains("deletionTimestamp"));
  EXPECT_FALSE(pod.at("metadata").as_object().contains("creationTimestamp"));
  auto deployment = json::parse(R"({"metadata":{"name":"d"},"spec":{"selector":{},
      "template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c"}]}}}})")
                        .as_object();
  write_zero_fields("apps/v1", "Deployment", deployment);
  EXPECT_FALSE(deployment.at("spec").at("template").at("metadata").as_object().contains(
      "creationTimestamp"));
  auto role = json::parse(R"({"metadata":{"name":"r"}})").as_object();
  write_zero_fields("rbac.authorization.k8s.io/v1", "Role", role);
  EXPECT_TRUE(role.at("rules").is_null());
  auto empty = json::parse(R"({"metadata":{"name":"r"},"rules":[]})").as_object();
  write_zero_fields("rbac.authorization.k8s.io/v1", "Role", empty);
  EXPECT_EQ(empty.at("rules"), json::array()) << "written back as read, never refused";
  auto full = json::parse(R"({"metadata":{"name":"r"},"rules":[{"verbs":["get"]}]})").as_object();
  write_zero_fields("rbac.authorization.k8s.io/v1", "Role", full);
  EXPECT_EQ(full.at("rules").at(0).at("verbs").at(0), "get");
}

// What the encoder writes, the decoder reads back as the same JSON: scalars, maps (labels,
// resource lists of quantities), lists of messages, an inline volume source, int-or-strings,
// times and micro times, bytes, raw JSON (managed fields), packed into kube's envelope.
TEST(ProtobufEncoder, BuiltInObjectsReadBackAsTheSameJson) {
  for (const char* text : {
           R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"t",
               "labels":{"b":"2","a":"1"},"creationTimestamp":"2026-01-02T03:04:05Z",
               "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs",
                 "uid":"u-1","controller":true}],
               "managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1",
                 "time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1",
                 "fieldsV1":{"f:spec":{"f:containers":{}}}}]},
             "spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80,
                 "protocol":"TCP"}],"resources":{"limits":{"cpu":"500m","memory":"64Mi"}},
                 "readinessProbe":{"httpGet":{"port":"http","path":"/"},"periodSeconds":10},
                 "env":[{"name":"A","value":"b"}]}],
               "volumes":[{"name":"v","configMap":{"name":"cm","defaultMode":420}},
                          {"name":"e","emptyDir":{"sizeLimit":"1Gi"}}],
               "priority":-5,"terminationGracePeriodSeconds":30}})",
           R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
             "spec":{"replicas":3,"selector":{"matchLabels":{"app":"d"}},
               "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%",
                 "maxUnavailable":1}},
               "template":{"metadata":{"labels":{"app":"d"}},
                 "spec":{"containers":[{"name":"c","image":"x"}]}}}})",
           R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},
             "data":{"k":"AAEC/w=="},"type":"Opaque"})",
           R"({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e"},
             "eventTime":"2026-01-02T03:04:05.123456Z","reportingController":"c",
             "reportingInstance":"i","action":"A","reason":"R"})"}) {
    const auto obj = json::parse(text).as_object();
    auto bytes = encode_protobuf_object(obj);
    ASSERT_TRUE(bytes) << text;
    EXPECT_EQ(bytes->substr(0, 4), std::string("k8s\0", 4));
    auto back = decode_protobuf_object(*bytes);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, obj) << json::serialize(*back);
  }
}

TEST(ProtobufEncoder, CustomResourcesAndMisfitValuesHaveNoProtobufForm) {
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"example.com/v1","kind":"Widget","spec":{}})").as_object()));
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5}})").as_object()));
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"Secret","data":{"k":"not base64!"}})").as_object()));
  // A field the table does not know (newer than it) would be lost: no protobuf form.
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMap","data":{},"futureField":1})").as_object()));
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","future":true}]}})")
                                          .as_object()));
}

// A kind's object held inside another (a StatefulSet's volumeClaimTemplates) carries its
// apiVersion and kind in JSON, as Go writes TypeMeta; protobuf has no field for them and drops
// them, as kube's generated code does, rather than leave the object without a protobuf form.
TEST(ProtobufEncoder, TypeMetaOfAKindHeldInsideAnotherIsNotOnTheWire) {
  const auto obj = json::parse(R"({"apiVersion":"apps/v1","kind":"StatefulSet",
      "metadata":{"name":"db"},
      "spec":{"serviceName":"db","selector":{"matchLabels":{"app":"db"}},
        "template":{"metadata":{"labels":{"app":"db"}},"spec":{"containers":[{"name":"c"}]}},
        "volumeClaimTemplates":[{"apiVersion":"v1","kind":"PersistentVolumeClaim",
          "metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"]}}]}})")
                       .as_object();
  auto bytes = encode_protobuf_object(obj);
  ASSERT_TRUE(bytes);
  auto back = decode_protobuf_object(*bytes);
  ASSERT_TRUE(back) << back.error().message;
  const auto& claim =
      back->at("spec").as_object().at("volumeClaimTemplates").as_array().at(0).as_object();
  EXPECT_FALSE(claim.contains("kind")) << json::serialize(claim);
  EXPECT_EQ(claim.at("metadata").as_object().at("name"), "data");
  // Elsewhere apiVersion and kind are fields like any other: a Pod's container has none.
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","kind":"x"}]}})")
                                          .as_object()));
}

TEST(ProtobufEncoder, ListsAreListMetaThenTheItemsMessages) {
  const auto list = json::parse(R"({"apiVersion":"v1","kind":"ConfigMapList",
      "metadata":{"resourceVersion":"42","continue":"c1","remainingItemCount":7},
      "items":[{"metadata":{"name":"a"},"data":{"k":"v"}},
               {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}]})").as_object();
  auto bytes = encode_protobuf_object(list);
  ASSERT_TRUE(bytes);
  // The wire form from kube's field numbers: ListMeta {selfLink, resourceVersion, continue,
  // remainingItemCount} = 1, then each item's ConfigMap message = 2 (metadata = 1, data = 2).
  auto meta_of = [](const std::string& name) {
    // ObjectMeta as the encoder writes a name alone (Go writes every string, empty ones too).
    return *encode_protobuf_message(json::parse(R"({"metadata":{"name":")" + name + R"("}})")
                                        .as_object(),
                                    "v1", "ConfigMap");
  };
  const std::string item_a = meta_of("a") + field(2, entry("k", "v"));
  const std::string item_b = meta_of("b");
  const std::string meta = field(1, "") + field(2, "42") + field(3, "c1") + number_field(4, 7);
  EXPECT_EQ(*bytes, envelope("v1", "ConfigMapList",
                             field(1, meta) + field(2, item_a) + field(2, item_b)));
  auto back = decode_protobuf_object(*bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->at("metadata"), json::parse(R"({"resourceVersion":"42","continue":"c1",
      "remainingItemCount":7})"));
  ASSERT_EQ(back->at("items").as_array().size(), 2u);
  EXPECT_EQ(back->at("items").at(0).at("data").at("k"), "v");
  EXPECT_EQ(back->at("items").at(1).at("metadata").at("name"), "b");
  // An empty list, and one whose item has no protobuf form.
  auto empty = encode_protobuf_object(json::parse(
      R"({"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{},"items":[]})").as_object());
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, envelope("apps/v1", "DeploymentList",
                             field(1, field(1, "") + field(2, "") + field(3, ""))));
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"v1","kind":"ConfigMapList","items":[{"metadata":{"name":5}}]})")
                                          .as_object()));
  EXPECT_FALSE(encode_protobuf_object(json::parse(
      R"({"apiVersion":"example.com/v1","kind":"WidgetList","items":[]})").as_object()));
}

TEST(ProtobufEncoder, StatusAsKubeWritesIt) {
  auto bytes = encode_protobuf_status(json::parse(R"({"kind":"Status","apiVersion":"v1",
      "metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound",
      "details":{"name":"x","kind":"pods","causes":[{"reason":"FieldValueInvalid",
        "message":"bad","field":"spec.x"}],"retryAfterSeconds":3},"code":404})").as_object());
  ASSERT_TRUE(bytes);
  const std::string cause = field(1, "FieldValueInvalid") + field(2, "bad") + field(3, "spec.x");
  const std::string details = field(1, "x") + field(2, "") + field(3, "pods") + field(4, cause) +
                              number_field(5, 3) + field(6, "");
  EXPECT_EQ(*bytes, envelope("v1", "Status",
                             field(1, field(1, "") + field(2, "") + field(3, "")) +
                                 field(2, "Failure") + field(3, "pods \"x\" not found") +
                                 field(4, "NotFound") + field(5, details) + number_field(6, 404)));
  EXPECT_FALSE(encode_protobuf_status(json::parse(R"({"kind":"Pod"})").as_object()));
}

TEST(ProtobufEncoder, WatchEventFramesAsKubeStreamsThem) {
  // Messages whose lengths take one, two and three varint bytes.
  for (std::size_t size : {1u, 300u, 40000u}) {
    const auto obj = json::parse(R"({"metadata":{"name":"a"},"data":{"k":")" +
                                 std::string(size, 'x') + R"("}})").as_object();
    const std::string message = *encode_protobuf_message(obj, "v1", "ConfigMap");
    const std::string frame = protobuf_watch_event_head("MODIFIED", "v1", "ConfigMap",
                                                        message.size()) +
                              message + std::string(kWatchEventSuffix);
    // meta/v1 WatchEvent {type = 1, object = 2 {raw = 1: the object in its envelope}}, after a
    // 4-byte big-endian length.
    const std::string event =
        field(1, "MODIFIED") + field(2, field(1, envelope("v1", "ConfigMap", message)));
    std::string length;
    for (int shift = 24; shift >= 0; shift -= 8) {
      length.push_back(static_cast<char>(event.size() >> shift));
    }
    EXPECT_EQ(frame, length + event) << size;
  }
}

TEST(ProtobufDecoder, SecretDataIsBase64AndZeroPointerFieldsAreKept) {
  std::string raw = field(1, field(1, "s")) + field(2, entry("p", "q")) + field(3, "Opaque") +
                    number_field(5, 0);
  auto obj = decode_protobuf_object(envelope("v1", "Secret", raw));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(obj->at("data").at("p"), "cQ==");
  EXPECT_EQ(obj->at("immutable"), false);
}

TEST(ProtobufDecoder, DeploymentKeepsZeroReplicasAndDropsZeroTimestamps) {
  std::string container = field(1, "web") + field(2, "nginx") + field(8, "");
  std::string pod_spec = field(2, container) + field(9, "") + number_field(12, 0);
  std::string tmpl = field(1, field(8, "")) + field(2, pod_spec);
  std::string spec = number_field(1, 0) + field(3, tmpl) + field(4, "");
  auto obj = decode_protobuf_object(envelope("apps/v1", "Deployment", field(1, field(1, "d")) +
                                                                          field(2, spec)));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(obj->at("spec").at("replicas"), 0);
  EXPECT_FALSE(obj->at("spec").at("template").at("metadata").as_object().contains(
      "creationTimestamp"));
  EXPECT_EQ(obj->at("spec").at("template").at("spec").at("containers").at(0).at("image"), "nginx");
}

// What `kubectl create job pi --image=perl -- perl -e 1` sends: a template, and a status whose
// counters Go writes as zeros.
TEST(ProtobufDecoder, AJobFromKubectlCreateJob) {
  std::string container = field(1, "pi") + field(2, "perl") + field(3, "perl") + field(3, "-e") +
                          field(3, "1") + field(8, "");
  std::string pod_spec = field(2, container) + field(3, "Never");
  std::string spec = field(6, field(1, "") + field(2, pod_spec));
  std::string status = number_field(4, 0) + number_field(5, 0) + number_field(6, 0) + field(7, "");
  auto obj = decode_protobuf_object(
      envelope("batch/v1", "Job", field(1, field(1, "pi")) + field(2, spec) + field(3, status)));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(*obj, json::parse(R"({"metadata":{"name":"pi"},"spec":{"template":{"metadata":{},
      "spec":{"containers":[{"name":"pi","image":"perl","command":["perl","-e","1"],
      "resources":{}}],"restartPolicy":"Never"}}},"status":{},"apiVersion":"batch/v1","kind":"Job"})"));
}

TEST(ProtobufDecoder, ACronJobsJobTemplateAndItsPointerFields) {
  std::string job_spec = number_field(7, 0) + field(6, field(2, field(3, "OnFailure")));
  std::string spec = field(1, "*/5 * * * *") + number_field(4, 0) +
                     field(5, field(1, field(1, "c")) + field(2, job_spec));
  auto obj = decode_protobuf_object(envelope("batch/v1", "CronJob", field(1, field(1, "c")) +
                                                                        field(2, spec)));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(obj->at("spec"), json::parse(R"({"schedule":"*/5 * * * *","suspend":false,
      "jobTemplate":{"metadata":{"name":"c"},"spec":{"backoffLimit":0,
      "template":{"spec":{"restartPolicy":"OnFailure"}}}}})"));
}

TEST(ProtobufDecoder, AnIngressRulesValueIsInlineAsInJson) {
  std::string backend = field(4, field(1, "web") + field(2, number_field(2, 80)));
  std::string path = field(1, "/") + field(3, "Prefix") + field(2, backend);
  std::string rule = field(1, "foo.com") + field(2, field(1, field(1, path)));
  std::string spec = field(3, rule) + field(4, "nginx") + field(2, field(1, "foo.com") +
                                                                   field(2, "tls"));
  auto obj = decode_protobuf_object(envelope("networking.k8s.io/v1", "Ingress",
                                             field(1, field(1, "i")) + field(2, spec) +
                                                 field(3, field(1, ""))));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(obj->at("spec"), json::parse(R"({"rules":[{"host":"foo.com","http":{"paths":[
      {"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}],
      "ingressClassName":"nginx","tls":[{"hosts":["foo.com"],"secretName":"tls"}]})"));
  EXPECT_EQ(obj->at("status"), json::parse(R"({"loadBalancer":{}})"));
}

TEST(ProtobufDecoder, QuotaBudgetAndPriorityClassFromKubectlCreate) {
  std::string quota = field(2, field(1, entry("pods", field(1, "3"))) + field(2, "BestEffort"));
  auto q = decode_protobuf_object(envelope("v1", "ResourceQuota", field(1, field(1, "q")) + quota));
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->at("spec"), json::parse(R"({"hard":{"pods":"3"},"scopes":["BestEffort"]})"));

  std::string min_available = number_field(1, 1) + field(3, "50%");  // type string
  std::string pdb_spec = field(1, min_available) + field(2, field(1, entry("app", "x")));
  std::string pdb_status = number_field(1, 0) + number_field(3, 0) + number_field(4, 0);
  auto b = decode_protobuf_object(envelope("policy/v1", "PodDisruptionBudget",
                                           field(1, field(1, "b")) + field(2, pdb_spec) +
                                               field(3, pdb_status)));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->at("spec"), json::parse(R"({"minAvailable":"50%","selector":{"matchLabels":{"app":"x"}}})"));

  auto pc = decode_protobuf_object(envelope("scheduling.k8s.io/v1", "PriorityClass",
                                            field(1, field(1, "zero")) + number_field(2, 0) +
                                                number_field(3, 0) +
                                                field(5, "PreemptLowerPriority")));
  ASSERT_TRUE(pc) << pc.error().message;
  EXPECT_EQ(pc->at("value"), 0);  // a value of 0 is a value
  EXPECT_FALSE(pc->contains("globalDefault"));
  EXPECT_EQ(pc->at("preemptionPolicy"), "PreemptLowerPriority");
}

TEST(ProtobufDecoder, FieldsWhoseTagHasNoOptOrRepAreOnTheWire) {
  // `protobuf:"bytes,3,name=storageClassName"`: no opt between the number and the name.
  auto c = decode_protobuf_object(envelope(
      "storage.k8s.io/v1", "CSIStorageCapacity",
      field(1, field(1, "c") + field(3, "default")) + field(3, "fast") +
          field(4, field(1, "100Gi"))));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->at("storageClassName"), "fast");
  EXPECT_EQ(c->at("capacity"), "100Gi");

  // An HPA's metric: its type, and the target and resource name under it.
  std::string target = field(1, "Utilization") + number_field(4, 80);
  std::string metric = field(1, "Resource") + field(4, field(1, "cpu") + field(2, target));
  std::string hpa_spec = field(1, field(1, "Deployment") + field(2, "web") + field(3, "apps/v1")) +
                         number_field(3, 5) + field(4, metric);
  auto hpa = decode_protobuf_object(envelope("autoscaling/v2", "HorizontalPodAutoscaler",
                                             field(1, field(1, "h")) + field(2, hpa_spec)));
  ASSERT_TRUE(hpa) << hpa.error().message;
  EXPECT_EQ(hpa->at("spec").at("metrics"), json::parse(R"([{"type":"Resource","resource":{
      "name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}])"));
}

TEST(ProtobufDecoder, StorageKindsOfKube134) {
  std::string driver = field(1, "ebs.csi.example.com") + field(2, "i-1") + field(3, "zone") +
                       field(4, number_field(1, 25));
  auto node = decode_protobuf_object(
      envelope("storage.k8s.io/v1", "CSINode", field(1, field(1, "n")) + field(2, field(1, driver))));
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_EQ(node->at("spec"), json::parse(R"({"drivers":[{"name":"ebs.csi.example.com",
      "nodeID":"i-1","topologyKeys":["zone"],"allocatable":{"count":25}}]})"));

  auto vac = decode_protobuf_object(envelope(
      "storage.k8s.io/v1", "VolumeAttributesClass",
      field(1, field(1, "gold")) + field(2, "ebs.csi.example.com") +
          field(3, entry("iops", "5000"))));
  ASSERT_TRUE(vac) << vac.error().message;
  EXPECT_EQ(vac->at("driverName"), "ebs.csi.example.com");
  EXPECT_EQ(vac->at("parameters"), json::parse(R"({"iops":"5000"})"));
}

TEST(ProtobufDecoder, AnAdmissionPolicysRulesAreInlineAsInJson) {
  // RuleWithOperations (field 2 of NamedRuleWithOperations) and its Rule (field 2) are inline.
  std::string rule = field(1, "apps") + field(2, "v1") + field(3, "deployments") + field(4, "*");
  std::string named = field(2, field(1, "CREATE") + field(2, rule));
  std::string match = field(3, named) + field(7, "Equivalent");
  std::string spec = field(2, match) + field(3, field(1, "object.spec.replicas <= 5")) +
                     field(4, "Fail");
  auto obj = decode_protobuf_object(envelope("admissionregistration.k8s.io/v1",
                                             "ValidatingAdmissionPolicy",
                                             field(1, field(1, "p")) + field(2, spec)));
  ASSERT_TRUE(obj) << obj.error().message;
  EXPECT_EQ(obj->at("spec"), json::parse(R"({"matchConstraints":{"resourceRules":[
      {"operations":["CREATE"],"apiGroups":["apps"],"apiVersions":["v1"],
       "resources":["deployments"],"scope":"*"}],"matchPolicy":"Equivalent"},
      "validations":[{"expression":"object.spec.replicas <= 5"}],"failurePolicy":"Fail"})"));
  // A binding of MutatingAdmissionPolicy (v1beta1) decodes too.
  auto binding = decode_protobuf_object(envelope("admissionregistration.k8s.io/v1beta1",
                                                 "MutatingAdmissionPolicyBinding",
                                                 field(1, field(1, "b")) +
                                                     field(2, field(1, "team-label"))));
  ASSERT_TRUE(binding) << binding.error().message;
  EXPECT_EQ(binding->at("spec"), json::parse(R"({"policyName":"team-label"})"));
}

TEST(ProtobufDecoder, DynamicResourceAllocationKindsAsTypedClientsSendThem) {
  // Most resource.k8s.io/v1 fields are tagged without `opt` (`bytes,1,name=...`).
  std::string exactly = field(1, "gpu.example.com") + field(3, "ExactCount") + number_field(4, 2);
  std::string request = field(1, "gpu") + field(2, exactly);
  std::string opaque = field(1, "d.example.com") + field(2, field(1, R"({"a":1})"));
  std::string config = field(1, "gpu") + field(2, field(1, opaque));  // DeviceConfiguration inline
  std::string claim_spec = field(1, field(1, request) + field(3, config));
  auto claim = decode_protobuf_object(envelope("resource.k8s.io/v1", "ResourceClaim",
                                               field(1, field(1, "c")) + field(2, claim_spec)));
  ASSERT_TRUE(claim) << claim.error().message;
  EXPECT_EQ(claim->at("spec"), json::parse(R"({"devices":{"requests":[{"name":"gpu",
      "exactly":{"deviceClassName":"gpu.example.com","allocationMode":"ExactCount","count":2}}],
      "config":[{"requests":["gpu"],"opaque":{"driver":"d.example.com","parameters":{"a":1}}}]}})"));

  std::string pool = field(1, "node-1") + number_field(2, 3) + number_field(3, 1);
  std::string device = field(1, "g0") + field(2, entry("model", field(4, "a100"))) +
                       field(3, entry("memory", field(1, field(1, "40Gi"))));
  std::string slice_spec = field(1, "gpu.example.com") + field(2, pool) + field(3, "node-1") +
                           field(6, device);
  auto slice = decode_protobuf_object(envelope("resource.k8s.io/v1", "ResourceSlice",
                                               field(1, field(1, "s")) + field(2, slice_spec)));
  ASSERT_TRUE(slice) << slice.error().message;
  EXPECT_EQ(slice->at("spec"), json::parse(R"({"driver":"gpu.example.com",
      "pool":{"name":"node-1","generation":3,"resourceSliceCount":1},"nodeName":"node-1",
      "devices":[{"name":"g0","attributes":{"model":{"string":"a100"}},
                  "capacity":{"memory":{"value":"40Gi"}}}]})"));
}

TEST(ProtobufDecoder, UnknownFieldWithAValueIsRefusedRatherThanDropped) {
  std::string raw = field(1, field(1, "c")) + field(99, "something");
  auto obj = decode_protobuf_object(envelope("v1", "ConfigMap", raw));
  ASSERT_FALSE(obj);
  EXPECT_EQ(obj.error().code, Errc::unsupported_media_type);
  EXPECT_NE(obj.error().message.find("field 99 of ConfigMap"), std::string::npos);
}

TEST(ProtobufDecoder, UnknownKindIsUnsupportedAndGarbageIsABadRequest) {
  // Custom resources have no protobuf form; nor has a kind kwatch does not serve.
  for (const auto& [api_version, kind] :
       {std::pair{"example.com/v1", "Widget"}, std::pair{"v1", "Frobnicator"}}) {
    auto r = decode_protobuf_object(envelope(api_version, kind, ""));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::unsupported_media_type);
  }
  for (std::string bad : {std::string("k8s\0\x0a\xff", 6), std::string("\x0a\x00", 2),
                          std::string("k8s\0", 4) + field(2, std::string("\x0a\x05", 2) + "ab")}) {
    auto r = decode_protobuf_object(bad);
    EXPECT_FALSE(r);
  }
}

TEST(ProtobufDecoder, InvalidUtf8InAnyStringIsABadRequestThatDoesNotEchoTheBytes) {
  const std::string bad = "x\xff\xfey";
  const std::string meta = field(1, "cm") + field(2, "");
  for (const std::string& raw : {field(1, meta) + field(2, entry("k", bad)),     // a data value
                                 field(1, meta) + field(2, entry(bad,"v")),     // a data key
                                 field(1, field(1, bad) + field(2, ""))}) {     // the name
    auto r = decode_protobuf_object(envelope("v1", "ConfigMap", raw));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, Errc::bad_request);
    EXPECT_NE(r.error().message.find("invalid UTF-8"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("\xff"), std::string::npos);
  }
  // Valid multi-byte text is fine.
  auto ok = decode_protobuf_object(
      envelope("v1", "ConfigMap", field(1, meta) + field(2, entry("k", "caf\xc3\xa9"))));
  ASSERT_TRUE(ok) << ok.error().message;
}

}  // namespace
}  // namespace kwatch::schema
