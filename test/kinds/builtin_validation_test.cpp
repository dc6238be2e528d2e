#include "kinds/builtin_validation.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <gtest/gtest.h>

namespace kwatch::kinds {
namespace {

namespace json = boost::json;

json::object parse(std::string_view text) { return json::parse(text).as_object(); }

using Validate = void (*)(const json::object&, const json::object*, Causes&);

// One line per cause: "<field> | <type> | <message>".
std::string causes_of(Validate validate, const json::object& obj, const json::object* old = nullptr) {
  Causes causes;
  validate(obj, old, causes);
  std::string out;
  for (const auto& c : causes) out += c.field + " | " + c.type + " | " + c.message + "\n";
  return out;
}

json::object deployment(std::string_view selector, std::string_view labels,
                        std::string_view restart = "Always") {
  std::string text = R"({"metadata":{"name":"web"},"spec":{)";
  if (!selector.empty()) text += R"("selector":)" + std::string(selector) + ",";
  text += R"("template":{"metadata":{"labels":)" + std::string(labels) +
          R"(},"spec":{"restartPolicy":")" + std::string(restart) +
          R"(","containers":[{"name":"c","image":"x"}]}}}})";
  return parse(text);
}

TEST(BuiltinValidation, AWorkloadsSelectorMustSelectItsTemplate) {
  EXPECT_EQ(causes_of(validate_deployment,
                      deployment(R"({"matchLabels":{"app":"web"}})", R"({"app":"web"})")),
            "");
  EXPECT_EQ(causes_of(validate_deployment,
                      deployment(R"({"matchLabels":{"app":"web"}})", R"({"app":"api","x":"1"})")),
            "spec.template.metadata.labels | FieldValueInvalid | Invalid value: "
            "map[string]string{\"app\":\"api\", \"x\":\"1\"}: `selector` does not match template "
            "`labels`\n");
  // matchExpressions count too.
  EXPECT_EQ(causes_of(validate_replica_set,
                      deployment(R"({"matchExpressions":[{"key":"tier","operator":"In","values":["a"]}]})",
                                 R"({"tier":"b"})")),
            "spec.template.metadata.labels | FieldValueInvalid | Invalid value: "
            "map[string]string{\"tier\":\"b\"}: `selector` does not match template `labels`\n");
}

TEST(BuiltinValidation, AWorkloadNeedsANonEmptySelector) {
  EXPECT_EQ(causes_of(validate_deployment, deployment("", R"({"app":"web"})")),
            "spec.selector | FieldValueRequired | Required value\n"
            "spec.template.metadata.labels | FieldValueInvalid | Invalid value: "
            "map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`\n");
  EXPECT_EQ(causes_of(validate_stateful_set, deployment("{}", R"({"app":"web"})")),
            "spec.selector | FieldValueInvalid | Invalid value: "
            "v1.LabelSelector{MatchLabels:map[string]string(nil), "
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
            "statefulset\n");
  // A daemon set without a selector selects nothing, so not its template either.
  EXPECT_EQ(causes_of(validate_daemon_set, deployment("", R"({"app":"web"})")),
            "spec.template.metadata.labels | FieldValueInvalid | Invalid value: "
            "map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`\n");
}

TEST(BuiltinValidation, SelectorRequirementsAreCheckedAsKubeChecksThem) {
  EXPECT_EQ(causes_of(validate_deployment,
                      deployment(R"({"matchExpressions":[{"key":"a","operator":"In"},
                                                         {"key":"b","operator":"Near"}]})",
                                 R"({"a":"1"})")),
            "spec.selector.matchExpressions[0].values | FieldValueRequired | Required value: "
            "must be specified when `operator` is 'In' or 'NotIn'\n"
            "spec.selector.matchExpressions[1].operator | FieldValueInvalid | Invalid value: "
            "\"Near\": not a valid selector operator\n"
            "spec.selector | FieldValueInvalid | Invalid value: v1.LabelSelector{MatchLabels:"
            "map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{"
            "v1.LabelSelectorRequirement{Key:\"a\", Operator:\"In\", Values:[]string(nil)}, "
            "v1.LabelSelectorRequirement{Key:\"b\", Operator:\"Near\", Values:[]string(nil)}}}: "
            "invalid label selector\n");
}

TEST(BuiltinValidation, AWorkloadsPodsRestartAlways) {
  EXPECT_EQ(causes_of(validate_daemon_set,
                      deployment(R"({"matchLabels":{"a":"b"}})", R"({"a":"b"})", "OnFailure")),
            "spec.template.spec.restartPolicy | FieldValueNotSupported | Unsupported value: "
            "\"OnFailure\": supported values: \"Always\"\n");
}

TEST(BuiltinValidation, AnAppsWorkloadsSelectorIsImmutable) {
  const auto old = deployment(R"({"matchLabels":{"app":"web"}})", R"({"app":"web"})");
  const auto now = deployment(R"({"matchLabels":{"app":"web2"}})", R"({"app":"web2"})");
  const std::string immutable =
      "spec.selector | FieldValueInvalid | Invalid value: v1.LabelSelector{MatchLabels:"
      "map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: "
      "field is immutable\n";
  EXPECT_EQ(causes_of(validate_deployment, now, &old), immutable);
  EXPECT_EQ(causes_of(validate_replica_set, now, &old), immutable);
  EXPECT_EQ(causes_of(validate_daemon_set, now, &old), immutable);
  // Null and empty lists are the same selector.
  const auto same = deployment(R"({"matchLabels":{"app":"web"},"matchExpressions":[]})",
                               R"({"app":"web"})");
  EXPECT_EQ(causes_of(validate_deployment, same, &old), "");
}

TEST(BuiltinValidation, AReplicationControllerNeedsASelectorMatchingItsTemplate) {
  auto rc = parse(R"({"spec":{"selector":{"app":"a"},"template":{"metadata":{"labels":{"app":"b"}},
      "spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"x"}]}}}})");
  EXPECT_EQ(causes_of(validate_replication_controller, rc),
            "spec.template.metadata.labels | FieldValueInvalid | Invalid value: "
            "map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`\n");
  auto none = parse(R"({"spec":{"template":{"spec":{"restartPolicy":"Always",
      "containers":[{"name":"c","image":"x"}]}}}})");
  EXPECT_EQ(causes_of(validate_replication_controller, none),
            "spec.selector | FieldValueRequired | Required value\n");
}

TEST(BuiltinValidation, AStatefulSetUpdateMayChangeOnlyItsMutableFields) {
  auto old = parse(R"({"spec":{"replicas":1,"serviceName":"a","selector":{"matchLabels":{"x":"y"}},
      "template":{"metadata":{"labels":{"x":"y"}},"spec":{"restartPolicy":"Always",
      "containers":[{"name":"c","image":"1"}]}}}})");
  auto scaled = old;
  scaled["spec"].as_object()["replicas"] = 5;
  scaled["spec"].as_object()["template"].as_object()["spec"].as_object()["containers"] =
      json::parse(R"([{"name":"c","image":"2"}])");
  scaled["spec"].as_object()["minReadySeconds"] = 3;
  EXPECT_EQ(causes_of(validate_stateful_set, scaled, &old), "");
  auto renamed = old;
  renamed["spec"].as_object()["serviceName"] = "b";
  EXPECT_EQ(causes_of(validate_stateful_set, renamed, &old),
            "spec | FieldValueForbidden | Forbidden: updates to statefulset spec for fields other "
            "than 'replicas', 'ordinals', 'template', 'updateStrategy', "
            "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden\n");
}

json::object job(std::string_view spec) {
  return parse(R"({"metadata":{"name":"pi","uid":"u-1"},"spec":)" + std::string(spec) + "}");
}

TEST(BuiltinValidation, AJobRunsTheSelectorKubeGeneratedUnlessItsManual) {
  const char* generated = R"({"selector":{"matchLabels":{"batch.kubernetes.io/controller-uid":"u-1"}},
      "template":{"metadata":{"labels":{"batch.kubernetes.io/controller-uid":"u-1"}},
                  "spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"x"}]}}})";
  EXPECT_EQ(causes_of(validate_job, job(generated)), "");
  const auto own = job(R"({"selector":{"matchLabels":{"a":"b"}},
      "template":{"metadata":{"labels":{"a":"b"}},
                  "spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"x"}]}}})");
  EXPECT_EQ(causes_of(validate_job, own),
            "spec.selector | FieldValueInvalid | Invalid value: v1.LabelSelector{MatchLabels:"
            "map[string]string{\"a\":\"b\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: "
            "`selector` not auto-generated\n");
  auto manual = own;
  manual["spec"].as_object()["manualSelector"] = true;
  EXPECT_EQ(causes_of(validate_job, manual), "");
  auto always = job(R"({"manualSelector":true,"selector":{"matchLabels":{"a":"b"}},
      "template":{"metadata":{"labels":{"a":"b"}},
                  "spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"x"}]}}})");
  EXPECT_EQ(causes_of(validate_job, always),
            "spec.template.spec.restartPolicy | FieldValueNotSupported | Unsupported value: "
            "\"Always\": supported values: \"OnFailure\", \"Never\"\n");
  auto changed = manual;
  changed["spec"].as_object()["selector"] = json::parse(R"({"matchLabels":{"a":"c"}})");
  changed["spec"].as_object()["template"].as_object()["metadata"] =
      json::parse(R"({"labels":{"a":"c"}})");
  EXPECT_EQ(causes_of(validate_job, changed, &manual),
            "spec.selector | FieldValueInvalid | Invalid value: v1.LabelSelector{MatchLabels:"
            "map[string]string{\"a\":\"c\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: "
            "field is immutable\n"
            "spec.template | FieldValueInvalid | Invalid value: {\"metadata\":{\"labels\":"
            "{\"a\":\"c\"}},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":"
            "\"c\",\"image\":\"x\"}]}}: field is immutable\n");
}

TEST(BuiltinValidation, AJobsCompletionsAndTemplateAreFixedUnlessSuspendedAndNeverStarted) {
  auto base = job(R"({"manualSelector":true,"selector":{"matchLabels":{"a":"b"}},"completions":3,
      "template":{"metadata":{"labels":{"a":"b"}},
                  "spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"x"}]}}})");
  auto more = base;
  more["spec"].as_object()["completions"] = 4;
  EXPECT_EQ(causes_of(validate_job, more, &base),
            "spec.completions | FieldValueInvalid | Invalid value: 4: field is immutable\n");
  // Indexed jobs scale completions together with parallelism.
  auto indexed = base;
  indexed["spec"].as_object()["completionMode"] = "Indexed";
  auto elastic = indexed;
  elastic["spec"].as_object()["completions"] = 5;
  elastic["spec"].as_object()["parallelism"] = 5;
  EXPECT_EQ(causes_of(validate_job, elastic, &indexed), "");
  elastic["spec"].as_object()["parallelism"] = 2;
  EXPECT_EQ(causes_of(validate_job, elastic, &indexed),
            "spec.completions | FieldValueInvalid | Invalid value: 5: can only be modified in "
            "tandem with spec.parallelism\n");
  // A suspended job that never ran may move its pods elsewhere, and only that.
  auto suspended = base;
  suspended["spec"].as_object()["suspend"] = true;
  auto moved = suspended;
  json::object& tspec = moved["spec"].as_object()["template"].as_object()["spec"].as_object();
  tspec["nodeSelector"] = json::parse(R"({"zone":"a"})");
  tspec["tolerations"] = json::parse(R"([{"key":"k","operator":"Exists"}])");
  moved["spec"].as_object()["template"].as_object()["metadata"].as_object()["annotations"] =
      json::parse(R"({"x":"y"})");
  EXPECT_EQ(causes_of(validate_job, moved, &suspended), "");
  auto started = suspended;
  started["status"] = json::parse(R"({"startTime":"2026-01-01T00:00:00Z"})");
  EXPECT_NE(causes_of(validate_job, moved, &started).find("spec.template |"), std::string::npos);
  auto image = suspended;
  image["spec"].as_object()["template"].as_object()["spec"].as_object()["containers"] =
      json::parse(R"([{"name":"c","image":"y"}])");
  EXPECT_NE(causes_of(validate_job, image, &suspended).find("spec.template |"), std::string::npos);
}

TEST(BuiltinValidation, ACronJobsTimeZoneIsAnIanaName) {
  auto cj = parse(R"({"spec":{"schedule":"0 * * * *","timeZone":"Europe/Berlin",
      "jobTemplate":{"spec":{"template":{"spec":{
      "restartPolicy":"OnFailure","containers":[{"name":"c","image":"x"}]}}}}}})");
  EXPECT_EQ(causes_of(validate_cron_job, cj), "");
  cj["spec"].as_object()["timeZone"] = "Mars/Olympus_Mons";
  EXPECT_EQ(causes_of(validate_cron_job, cj),
            "spec.timeZone | FieldValueInvalid | Invalid value: \"Mars/Olympus_Mons\": unknown "
            "time zone Mars/Olympus_Mons\n");
  cj["spec"].as_object()["timeZone"] = "../etc/passwd";
  EXPECT_NE(causes_of(validate_cron_job, cj).find("unknown time zone"), std::string::npos);
  cj["spec"].as_object()["timeZone"] = "Local";
  EXPECT_NE(causes_of(validate_cron_job, cj).find("must be an explicit time zone"),
            std::string::npos);
  cj["spec"].as_object().erase("timeZone");
  cj["spec"].as_object()["schedule"] = "CRON_TZ=UTC 0 * * * *";
  EXPECT_NE(causes_of(validate_cron_job, cj).find("cannot use TZ or CRON_TZ in schedule, use "
                                                  "timeZone field instead"),
            std::string::npos);
}

TEST(BuiltinValidation, APersistentVolumeHasOneSourceCapacityAndModes) {
  auto pv = parse(R"({"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
                              "hostPath":{"path":"/data"}}})");
  EXPECT_EQ(causes_of(validate_persistent_volume, pv), "");
  auto none = parse(R"({"spec":{}})");
  EXPECT_EQ(causes_of(validate_persistent_volume, none),
            "spec | FieldValueRequired | Required value: must specify a volume type\n"
            "spec.capacity | FieldValueRequired | Required value\n"
            "spec.accessModes | FieldValueRequired | Required value\n");
  auto two = pv;
  two["spec"].as_object()["nfs"] = json::parse(R"({"server":"s","path":"/"})");
  EXPECT_EQ(causes_of(validate_persistent_volume, two),
            "spec.nfs | FieldValueForbidden | Forbidden: may not specify more than 1 volume type\n");
  auto moved = pv;
  moved["spec"].as_object()["hostPath"] = json::parse(R"({"path":"/other"})");
  EXPECT_EQ(causes_of(validate_persistent_volume, moved, &pv),
            "spec.persistentvolumesource | FieldValueForbidden | Forbidden: "
            "spec.persistentvolumesource is immutable after creation\n");
}

TEST(BuiltinValidation, ACronJobNeedsAScheduleCronCanRead) {
  auto cj = parse(R"({"spec":{"schedule":"*/5 * *","jobTemplate":{"spec":{"template":{"spec":{
      "restartPolicy":"OnFailure","containers":[{"name":"c","image":"x"}]}}}}}})");
  EXPECT_EQ(causes_of(validate_cron_job, cj),
            "spec.schedule | FieldValueInvalid | Invalid value: \"*/5 * *\": expected exactly 5 "
            "fields, found 3: [*/5 * *]\n");
  cj["spec"].as_object()["schedule"] = "@hourly";
  EXPECT_EQ(causes_of(validate_cron_job, cj), "");
}

TEST(BuiltinValidation, ImmutableConfigMapsAndSecretsKeepTheirDataAndTheMark) {
  const auto old = parse(R"({"immutable":true,"data":{"a":"1"}})");
  EXPECT_EQ(causes_of(validate_config_map, parse(R"({"immutable":true,"data":{"a":"1"},
      "metadata":{"labels":{"l":"v"}}})"), &old),
            "");
  EXPECT_EQ(causes_of(validate_config_map, parse(R"({"data":{"a":"2"}})"), &old),
            "immutable | FieldValueForbidden | Forbidden: field is immutable when `immutable` is set\n"
            "data | FieldValueForbidden | Forbidden: field is immutable when `immutable` is set\n");
  EXPECT_EQ(causes_of(validate_config_map,
                      parse(R"({"immutable":true,"data":{"a":"1"},"binaryData":{"b":"eA=="}})"), &old),
            "binaryData | FieldValueForbidden | Forbidden: field is immutable when `immutable` is "
            "set\n");
  const auto mutable_old = parse(R"({"data":{"a":"1"}})");
  EXPECT_EQ(causes_of(validate_config_map, parse(R"({"data":{"a":"2"}})"), &mutable_old), "");

  const auto secret = parse(R"({"immutable":true,"type":"Opaque","data":{"a":"MQ=="}})");
  EXPECT_EQ(causes_of(validate_secret, parse(R"({"immutable":true,"type":"Opaque",
      "data":{"a":"Mg=="}})"), &secret),
            "data | FieldValueForbidden | Forbidden: field is immutable when `immutable` is set\n");
  EXPECT_EQ(causes_of(validate_secret, parse(R"({"immutable":true,"type":"kubernetes.io/tls",
      "data":{"a":"MQ=="}})"), &secret),
            "type | FieldValueInvalid | Invalid value: \"kubernetes.io/tls\": field is immutable\n");
}

TEST(BuiltinValidation, AClaimsSpecIsFixedExceptStorageOfABoundClaimAndItsClasses) {
  const auto old = parse(R"({"spec":{"accessModes":["ReadWriteOnce"],
      "resources":{"requests":{"storage":"1Gi"}}},"status":{"phase":"Pending"}})");
  auto grown = parse(R"({"spec":{"accessModes":["ReadWriteOnce"],
      "resources":{"requests":{"storage":"2Gi"}}},"status":{"phase":"Pending"}})");
  EXPECT_NE(causes_of(validate_persistent_volume_claim, grown, &old).find(
                "spec | FieldValueForbidden | Forbidden: spec is immutable after creation except "
                "resources.requests and volumeAttributesClassName for bound claims\n  "
                "core.PersistentVolumeClaimSpec{\n- \t\"resources\": "),
            std::string::npos);
  grown["status"].as_object()["phase"] = "Bound";
  EXPECT_EQ(causes_of(validate_persistent_volume_claim, grown, &old), "");
  auto named = old;
  named["spec"].as_object()["volumeName"] = "pv-1";
  named["spec"].as_object()["volumeAttributesClassName"] = "fast";
  EXPECT_EQ(causes_of(validate_persistent_volume_claim, named, &old), "");
  auto modes = old;
  modes["spec"].as_object()["accessModes"] = json::parse(R"(["ReadWriteMany"])");
  EXPECT_NE(causes_of(validate_persistent_volume_claim, modes, &old), "");
  // Quantities compare by value: 1024Mi is 1Gi, 900Mi is less.
  auto bound_old = old;
  bound_old["status"].as_object()["phase"] = "Bound";
  auto same_size = bound_old;
  same_size["spec"].as_object()["resources"] = json::parse(R"({"requests":{"storage":"1024Mi"}})");
  EXPECT_EQ(causes_of(validate_persistent_volume_claim, same_size, &bound_old), "");
  auto shrunk = bound_old;
  shrunk["spec"].as_object()["resources"] = json::parse(R"({"requests":{"storage":"900Mi"}})");
  EXPECT_EQ(causes_of(validate_persistent_volume_claim, shrunk, &bound_old),
            "spec.resources.requests.storage | FieldValueForbidden | Forbidden: field can not be "
            "less than previous value\n");
}

json::object pod(std::string_view spec) { return parse(R"({"spec":)" + std::string(spec) + "}"); }

TEST(BuiltinValidation, APodUpdateMayChangeImagesDeadlineAndAddTolerations) {
  const auto old = pod(R"({"containers":[{"name":"c","image":"1"}],"activeDeadlineSeconds":60,
      "tolerations":[{"key":"k","operator":"Exists"}]})");
  EXPECT_EQ(causes_of(validate_pod, pod(R"({"containers":[{"name":"c","image":"2"}],
      "activeDeadlineSeconds":30,"tolerations":[{"key":"k","operator":"Exists"},
      {"key":"n","operator":"Exists"}]})"), &old),
            "");
  const std::string changed = causes_of(validate_pod, pod(R"({"containers":[{"name":"c",
      "image":"1"}],"activeDeadlineSeconds":60,"tolerations":[{"key":"k","operator":"Exists"}],
      "nodeName":"n2"})"), &old);
  EXPECT_EQ(changed.rfind(
                "spec | FieldValueForbidden | Forbidden: pod updates may not change fields other "
                "than `spec.containers[*].image`,`spec.initContainers[*].image`,"
                "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
                "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
                "was previously negative)\n  core.PodSpec{\n+ \t\"nodeName\": \"n2\",\n  }\n",
                0),
            0u)
      << changed;
  EXPECT_EQ(causes_of(validate_pod, pod(R"({"containers":[{"name":"c","image":"1"},
      {"name":"d","image":"1"}]})"), &old),
            "spec.containers | FieldValueForbidden | Forbidden: pod updates may not add or remove "
            "containers\n");
  EXPECT_EQ(causes_of(validate_pod, pod(R"({"containers":[{"name":"c","image":"1"}],
      "activeDeadlineSeconds":90,"tolerations":[{"key":"k","operator":"Exists"}]})"), &old),
            "spec.activeDeadlineSeconds | FieldValueInvalid | Invalid value: 90: must be less "
            "than or equal to previous value\n");
  EXPECT_EQ(causes_of(validate_pod, pod(R"({"containers":[{"name":"c","image":"1"}],
      "activeDeadlineSeconds":60})"), &old),
            "spec.tolerations | FieldValueForbidden | Forbidden: existing toleration can not be "
            "modified except its tolerationSeconds\n");
}

TEST(BuiltinValidation, APodsSchedulingGatesMayOnlyBeRemoved) {
  auto gated = pod(R"({"containers":[{"name":"c","image":"x"}],
                       "schedulingGates":[{"name":"a"},{"name":"b"}]})");
  auto fewer = pod(R"({"containers":[{"name":"c","image":"x"}],"schedulingGates":[{"name":"b"}]})");
  EXPECT_EQ(causes_of(validate_pod, fewer, &gated), "");
  auto added = pod(R"({"containers":[{"name":"c","image":"x"}],
                       "schedulingGates":[{"name":"b"},{"name":"c"}]})");
  EXPECT_EQ(causes_of(validate_pod, added, &fewer),
            "spec.schedulingGates[1].name | FieldValueForbidden | Forbidden: only deletion is "
            "allowed, but found new scheduling gate 'c'\n");
}

TEST(BuiltinValidation, GoValuesArePrintedAsPercentSharpV) {
  const auto sel = json::parse(R"({"matchLabels":{"b":"2","a":"1"},
      "matchExpressions":[{"key":"t","operator":"In","values":["x","y"]}]})");
  EXPECT_EQ(go_label_selector(&sel),
            "v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"1\", \"b\":\"2\"}, "
            "MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"t\", "
            "Operator:\"In\", Values:[]string{\"x\", \"y\"}}}}");
  EXPECT_EQ(go_string_map(nullptr), "map[string]string(nil)");
  const auto empty = json::parse("{}");
  EXPECT_EQ(go_string_map(&empty), "map[string]string{}");
}

// kube's ValidateEndpointIP, for Endpoints and EndpointSlices.
TEST(BuiltinValidation, EndpointAddressesAreNoneOfKubesSpecialOnes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(endpoint_ip_problems("10.0.0.1", false), V{});
  EXPECT_EQ(endpoint_ip_problems("2001:db8::1", false), V{});
  EXPECT_EQ(endpoint_ip_problems("127.0.0.1", false),
            V{"may not be in the loopback range (127.0.0.0/8, ::1/128)"});
  EXPECT_EQ(endpoint_ip_problems("127.9.9.9", true), V{});
  EXPECT_EQ(endpoint_ip_problems("::1", false),
            V{"may not be in the loopback range (127.0.0.0/8, ::1/128)"});
  EXPECT_EQ(endpoint_ip_problems("::ffff:127.0.0.1", false),
            V{"may not be in the loopback range (127.0.0.0/8, ::1/128)"});
  EXPECT_EQ(endpoint_ip_problems("0.0.0.0", false), V{"may not be unspecified (0.0.0.0)"});
  EXPECT_EQ(endpoint_ip_problems("::", false), V{"may not be unspecified (::)"});
  EXPECT_EQ(endpoint_ip_problems("169.254.169.254", true),
            V{"may not be in the link-local range (169.254.0.0/16, fe80::/10)"});
  EXPECT_EQ(endpoint_ip_problems("fe80::1", false),
            V{"may not be in the link-local range (169.254.0.0/16, fe80::/10)"});
  EXPECT_EQ(endpoint_ip_problems("224.0.0.251", false),
            V{"may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"});
  EXPECT_EQ(endpoint_ip_problems("ff02::fb", false),
            V{"may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"});
  EXPECT_EQ(endpoint_ip_problems("224.0.1.1", false), V{});
  EXPECT_EQ(endpoint_ip_problems("example.com", false), V{"must be a valid IP address"});

  Causes causes;
  validate_endpoints(json::parse(R"({"subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"x"}],
      "notReadyAddresses":[{"ip":"127.0.0.1"}]}]})").as_object(), nullptr, causes, false);
  ASSERT_EQ(causes.size(), 3u);
  EXPECT_EQ(causes[0].field, "subsets[0].addresses[1].ip");
  EXPECT_EQ(causes[0].message,
            "Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
  EXPECT_EQ(causes[1].message, "Invalid value: \"x\": must be a valid IP address");
  EXPECT_EQ(causes[2].field, "subsets[0].notReadyAddresses[0].ip");
  causes.clear();
  validate_endpoint_slice(json::parse(R"({"addressType":"IPv4","endpoints":[
      {"addresses":["10.0.0.1","::1","169.254.1.1"]}]})").as_object(), nullptr, causes, false);
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_EQ(causes[0].field, "endpoints[0].addresses[1]");
  EXPECT_EQ(causes[0].message, "Invalid value: \"::1\": must be a valid IPv4 address");
  EXPECT_EQ(causes[1].message, "Invalid value: \"169.254.1.1\": may not be in the link-local range "
                               "(169.254.0.0/16, fe80::/10)");
  causes.clear();
  validate_endpoint_slice(json::parse(R"({"addressType":"FQDN","endpoints":[
      {"addresses":["localhost"]}]})").as_object(), nullptr, causes, false);
  EXPECT_TRUE(causes.empty());
}

}  // namespace
}  // namespace kwatch::kinds
