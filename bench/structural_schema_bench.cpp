// Structural schema cost per write: in-process Google Benchmark (not a ctest test).
//
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKWATCH_BUILD_BENCH=ON
//   cmake --build build-bench --target structural_schema_bench -j 2
//   build-bench/bench/structural_schema_bench
//
// A Deployment-like schema written here (several levels, list-map keys, int-or-string, enums,
// patterns, defaults, nullable, preserve-unknown-fields) and two Deployment-like objects of about
// 1 KiB and 20 KiB with a few unknown fields and nothing defaulted yet. `Pipeline` is what a
// write costs: copy the parsed object, prune, apply defaults, validate (the copy stands for the
// parse the write path does anyway; `Copy` measures it alone). `Parse` is the stored-JSON parse
// of the same text, for scale. Objects are parsed once, outside the timed loops.
#include "kinds/builtin_kinds.hpp"
#include "kinds/scheme.hpp"
#include "schema/structural_schema.hpp"
#include "apimachinery/stored_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace {

namespace json = boost::json;
using kwatch::schema::StructuralSchema;

constexpr const char* kDeploymentSchema = R"({
  "type": "object",
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
    "spec": {
      "type": "object",
      "required": ["selector", "template"],
      "properties": {
        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "default": 1},
        "minReadySeconds": {"type": "integer", "format": "int32", "minimum": 0},
        "revisionHistoryLimit": {"type": "integer", "format": "int32", "default": 10},
        "progressDeadlineSeconds": {"type": "integer", "format": "int32", "default": 600},
        "paused": {"type": "boolean"},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {
          "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
          "matchExpressions": {"type": "array", "items": {"type": "object",
            "required": ["key", "operator"], "properties": {
              "key": {"type": "string"},
              "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
              "values": {"type": "array", "x-kubernetes-list-type": "atomic",
                         "items": {"type": "string"}}}}}}},
        "strategy": {"type": "object", "default": {}, "properties": {
          "type": {"type": "string", "enum": ["Recreate", "RollingUpdate"],
                   "default": "RollingUpdate"},
          "rollingUpdate": {"type": "object", "properties": {
            "maxSurge": {"x-kubernetes-int-or-string": true, "default": "25%"},
            "maxUnavailable": {"x-kubernetes-int-or-string": true, "default": "25%"}}}}},
        "template": {"type": "object", "properties": {
          "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
          "spec": {"type": "object", "required": ["containers"], "properties": {
            "containers": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object",
              "required": ["name"], "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                         "maxLength": 63},
                "image": {"type": "string", "pattern": "(?i)^[a-z0-9./:@_-]+$"},
                "command": {"type": "array", "items": {"type": "string"}},
                "args": {"type": "array", "items": {"type": "string"}},
                "workingDir": {"type": "string"},
                "imagePullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"],
                                    "default": "IfNotPresent"},
                "terminationMessagePath": {"type": "string",
                                           "default": "/dev/termination-log"},
                "env": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object",
                  "required": ["name"], "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "value": {"type": "string"},
                    "valueFrom": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                  "items": {"type": "object", "required": ["containerPort"], "properties": {
                    "name": {"type": "string", "maxLength": 15},
                    "containerPort": {"type": "integer", "format": "int32", "minimum": 1,
                                      "maximum": 65535},
                    "protocol": {"type": "string", "enum": ["TCP", "UDP", "SCTP"],
                                 "default": "TCP"}}}},
                "resources": {"type": "object", "properties": {
                  "limits": {"type": "object",
                             "additionalProperties": {"x-kubernetes-int-or-string": true}},
                  "requests": {"type": "object",
                               "additionalProperties": {"x-kubernetes-int-or-string": true}}}},
                "volumeMounts": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["mountPath"], "items": {"type": "object",
                  "required": ["name", "mountPath"], "properties": {
                    "name": {"type": "string"},
                    "mountPath": {"type": "string"},
                    "readOnly": {"type": "boolean"}}}},
                "livenessProbe": {"type": "object", "nullable": true, "properties": {
                  "httpGet": {"type": "object", "properties": {
                    "path": {"type": "string"},
                    "port": {"x-kubernetes-int-or-string": true}}},
                  "initialDelaySeconds": {"type": "integer", "minimum": 0},
                  "periodSeconds": {"type": "integer", "minimum": 1, "default": 10}}}}}},
            "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never"],
                              "default": "Always"},
            "dnsPolicy": {"type": "string", "default": "ClusterFirst"},
            "terminationGracePeriodSeconds": {"type": "integer", "default": 30},
            "serviceAccountName": {"type": "string"},
            "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "volumes": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object",
              "required": ["name"], "properties": {
                "name": {"type": "string"},
                "configMap": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "emptyDir": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
            "tolerations": {"type": "array", "items": {"type": "object", "properties": {
              "key": {"type": "string"},
              "operator": {"type": "string", "enum": ["Exists", "Equal"]},
              "value": {"type": "string"},
              "effect": {"type": "string",
                         "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}}}}}}}}}},
    "status": {"type": "object", "properties": {
      "replicas": {"type": "integer"},
      "readyReplicas": {"type": "integer"},
      "conditions": {"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"], "items": {"type": "object",
        "required": ["type", "status"], "properties": {
          "type": {"type": "string"},
          "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
          "lastTransitionTime": {"type": "string", "format": "date-time"},
          "reason": {"type": "string"},
          "message": {"type": "string"}}}}}}
  }
})";

json::object container(int c, int envs, int ports, int mounts) {
  json::array env;
  for (int i = 0; i < envs; ++i) {
    env.push_back(json::object{{"name", "SETTING_" + std::to_string(i)},
                               {"value", "value-of-setting-" + std::to_string(i)}});
  }
  json::array port_list;
  for (int i = 0; i < ports; ++i) {
    port_list.push_back(json::object{{"name", "port-" + std::to_string(i)},
                                     {"containerPort", 8080 + i}});
  }
  json::array mount_list;
  for (int i = 0; i < mounts; ++i) {
    mount_list.push_back(json::object{{"name", "vol-" + std::to_string(i)},
                                      {"mountPath", "/data/vol-" + std::to_string(i)},
                                      {"readOnly", i % 2 == 0}});
  }
  return json::object{
      {"name", "app-" + std::to_string(c)},
      {"image", "registry.example.com/team/app-" + std::to_string(c) + ":1.2.3"},
      {"args", json::array{"--port=8080", "--verbose"}},
      {"env", std::move(env)},
      {"ports", std::move(port_list)},
      {"volumeMounts", std::move(mount_list)},
      {"resources", json::object{{"limits", json::object{{"cpu", "500m"}, {"memory", "256Mi"}}},
                                 {"requests", json::object{{"cpu", 1}}}}},
      {"livenessProbe",
       json::object{{"httpGet", json::object{{"path", "/healthz"}, {"port", "http"}}},
                    {"initialDelaySeconds", 5}}},
      {"unknownContainerField", true},
  };
}

json::value deployment(int containers, int envs, int ports, int mounts, int volumes) {
  json::array cs;
  for (int c = 0; c < containers; ++c) cs.push_back(container(c, envs, ports, mounts));
  json::array vs;
  for (int v = 0; v < volumes; ++v) {
    vs.push_back(json::object{{"name", "vol-" + std::to_string(v)},
                              {"configMap", json::object{{"name", "cm-" + std::to_string(v)}}}});
  }
  return json::object{
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", json::object{{"name", "web"}, {"namespace", "default"},
                                {"labels", json::object{{"app", "web"}}}}},
      {"spec",
       json::object{
           {"replicas", 3},
           {"selector", json::object{{"matchLabels", json::object{{"app", "web"}}}}},
           {"template",
            json::object{{"metadata", json::object{{"labels", json::object{{"app", "web"}}}}},
                         {"spec", json::object{{"containers", std::move(cs)},
                                               {"volumes", std::move(vs)},
                                               {"nodeSelector",
                                                json::object{{"disk", "ssd"}}},
                                               {"bogusPodField", 1}}}}},
           {"bogusSpecField", "x"}}},
  };
}

struct Fixture {
  std::shared_ptr<const StructuralSchema> schema;
  json::value small;   // ~1 KiB
  json::value large;   // ~20 KiB
  std::string small_text, large_text;

  Fixture() {
    auto r = StructuralSchema::compile(json::parse(kDeploymentSchema));
    if (!r) throw std::runtime_error("schema refused: " + r.error().message);
    schema = *r;
    small = deployment(1, 4, 1, 1, 1);
    large = deployment(8, 32, 4, 6, 8);
    small_text = json::serialize(small);
    large_text = json::serialize(large);
    check(small);
    check(large);
  }

  // The pipeline must do real work: prune something, default something, find nothing wrong.
  void check(const json::value& original) const {
    json::value v = original;
    auto pruned = schema->prune(v);
    schema->apply_defaults(v);
    auto causes = schema->validate(v);
    if (pruned.empty() || !causes.empty() || v == original) {
      throw std::runtime_error("benchmark objects do not exercise the schema as intended: " +
                               (causes.empty() ? std::string() : causes[0].message));
    }
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

const json::value& object(int size) { return size == 1 ? fixture().small : fixture().large; }
const std::string& text(int size) {
  return size == 1 ? fixture().small_text : fixture().large_text;
}

void label(benchmark::State& state, int size) {
  state.SetLabel(std::to_string(text(size).size()) + " bytes");
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text(size).size()));
}

void BM_Pipeline(benchmark::State& state) {
  int size = static_cast<int>(state.range(0));
  const auto& schema = *fixture().schema;
  const auto& original = object(size);
  for (auto _ : state) {
    json::value v = original;
    auto pruned = schema.prune(v);
    schema.apply_defaults(v);
    auto causes = schema.validate(v);
    benchmark::DoNotOptimize(pruned);
    benchmark::DoNotOptimize(causes);
  }
  label(state, size);
}

void BM_Copy(benchmark::State& state) {
  int size = static_cast<int>(state.range(0));
  const auto& original = object(size);
  for (auto _ : state) {
    json::value v = original;
    benchmark::DoNotOptimize(v);
  }
  label(state, size);
}

void BM_Validate(benchmark::State& state) {
  int size = static_cast<int>(state.range(0));
  const auto& schema = *fixture().schema;
  json::value v = object(size);
  schema.prune(v);
  schema.apply_defaults(v);
  for (auto _ : state) {
    auto causes = schema.validate(v);
    benchmark::DoNotOptimize(causes);
  }
  label(state, size);
}

void BM_Parse(benchmark::State& state) {
  int size = static_cast<int>(state.range(0));
  const auto& t = text(size);
  for (auto _ : state) {
    auto v = kwatch::apimachinery::parse_json(t);
    benchmark::DoNotOptimize(v);
  }
  label(state, size);
}

void BM_Compile(benchmark::State& state) {
  auto schema = json::parse(kDeploymentSchema);
  for (auto _ : state) {
    auto r = StructuralSchema::compile(schema);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

// Argument 1: the ~1 KiB object; 20: the ~20 KiB one.
// The built-in apps/v1 Deployment as a write runs it: the kind's compiled-in schema (from
// schema/schemas/builtin.json) prunes, kube's defaulting hook fills, the schema validates.
void BM_BuiltinDeployment(benchmark::State& state) {
  static const auto scheme = kwatch::kinds::Scheme::builtin();
  auto info = scheme->find("apps", "v1", "deployments");
  int size = static_cast<int>(state.range(0));
  const auto& original = object(size);
  for (auto _ : state) {
    json::value v = original;
    auto pruned = info->schema->prune(v);
    auto quantities = info->schema->canonicalize_quantities(v);
    benchmark::DoNotOptimize(quantities);
    info->schema->apply_defaults(v);
    info->hooks.set_defaults(v.get_object());
    auto causes = info->schema->validate(v);
    benchmark::DoNotOptimize(pruned);
    benchmark::DoNotOptimize(causes);
  }
  label(state, size);
}

// The quantities pass of that write alone (the pod template's resources: `cpu: 1` becomes "1").
void BM_BuiltinDeploymentQuantities(benchmark::State& state) {
  static const auto scheme = kwatch::kinds::Scheme::builtin();
  auto info = scheme->find("apps", "v1", "deployments");
  int size = static_cast<int>(state.range(0));
  const auto& original = object(size);
  json::value v = original;
  for (auto _ : state) {
    auto bad = info->schema->canonicalize_quantities(v);
    benchmark::DoNotOptimize(bad);
  }
  label(state, size);
}

BENCHMARK(BM_Pipeline)->Arg(1)->Arg(20);
BENCHMARK(BM_BuiltinDeploymentQuantities)->Arg(1)->Arg(20);
BENCHMARK(BM_BuiltinDeployment)->Arg(1)->Arg(20);
BENCHMARK(BM_Copy)->Arg(1)->Arg(20);
BENCHMARK(BM_Validate)->Arg(1)->Arg(20);
BENCHMARK(BM_Parse)->Arg(1)->Arg(20);
BENCHMARK(BM_Compile);

}  // namespace

BENCHMARK_MAIN();
