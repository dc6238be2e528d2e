// CRD validation rules (x-kubernetes-validations): what compiling a definition's rules and
// running them at a write costs. In-process Google Benchmark (not a ctest test).
//
//   bench/cel-rules <gateway-api checkout>     (converts the CRDs to JSON, builds, runs)
//
// The definitions are Gateway API's standard CRDs (heavy CEL), read as JSON from the directory
// in KWATCH_GATEWAY_API_JSON; they are not kept in this repository. Each benchmark has a twin
// over the same schema with its rules removed, so that the rules' share is the difference:
//   Compile/<crd>            StructuralSchema::compile of the served version's schema
//   ValidateHTTPRoute16      validate() of an HTTPRoute with 16 rules (every rule kind used:
//                            matches, filters, backendRefs), as a create (no old object)
//   ValidateHTTPRoute16Update  the same as an update with an old object one field different
#include <boost/json.hpp>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "schema/structural_schema.hpp"

namespace {

namespace json = boost::json;
using kwatch::schema::StructuralSchema;

std::string dir() {
  const char* d = std::getenv("KWATCH_GATEWAY_API_JSON");
  if (d == nullptr) throw std::runtime_error("set KWATCH_GATEWAY_API_JSON (see bench/cel-rules)");
  return d;
}

json::value read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  json::parse_options options;
  options.max_depth = 1000;
  return json::parse(ss.str(), {}, options);
}

// The schema of the CRD's storage version.
json::value storage_schema(const json::value& crd) {
  for (const auto& v : crd.at("spec").at("versions").as_array()) {
    if (v.as_object().at("storage").as_bool()) {
      return v.at("schema").at("openAPIV3Schema");
    }
  }
  throw std::runtime_error("no storage version");
}

void strip_rules(json::value& v) {
  if (auto* o = v.if_object()) {
    o->erase("x-kubernetes-validations");
    for (auto& kv : *o) strip_rules(kv.value());
  } else if (auto* a = v.if_array()) {
    for (auto& e : *a) strip_rules(e);
  }
}

std::shared_ptr<const StructuralSchema> compile(const json::value& schema) {
  auto r = StructuralSchema::compile(schema);
  if (!r) throw std::runtime_error("compile failed: " + r.error().message);
  return *r;
}

json::value route16() {
  json::array rules;
  for (int i = 0; i < 16; ++i) {
    const std::string n = std::to_string(i);
    rules.push_back(json::parse(R"({
      "matches": [{"path": {"type": "PathPrefix", "value": "/svc)" + n + R"("},
                   "headers": [{"name": "x-tenant", "value": "t)" + n + R"("}],
                   "method": "GET"}],
      "filters": [{"type": "RequestHeaderModifier",
                   "requestHeaderModifier": {"set": [{"name": "x-route", "value": "r)" + n + R"("}],
                                             "remove": ["x-debug"]}},
                  {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch",
                                                                  "replacePrefixMatch": "/v2"}}}],
      "backendRefs": [{"name": "backend-)" + n + R"(-a", "port": 8080, "weight": 90},
                      {"name": "backend-)" + n + R"(-b", "port": 8080, "weight": 10}]})"));
  }
  json::object route = json::parse(R"({"apiVersion": "gateway.networking.k8s.io/v1",
      "kind": "HTTPRoute", "metadata": {"name": "bench", "namespace": "default"},
      "spec": {"parentRefs": [{"name": "gw", "sectionName": "https"}],
               "hostnames": ["app.example.com", "api.example.com"]}})").as_object();
  route["spec"].as_object()["rules"] = std::move(rules);
  return route;
}

void register_all() {
  for (const auto& entry : std::filesystem::directory_iterator(dir())) {
    if (entry.path().extension() != ".json") continue;
    const json::value crd = read_json(entry.path().string());
    const std::string name = entry.path().stem().string();
    const json::value with = storage_schema(crd);
    json::value without = with;
    strip_rules(without);
    benchmark::RegisterBenchmark(("Compile/" + name).c_str(), [with](benchmark::State& state) {
      for (auto _ : state) benchmark::DoNotOptimize(compile(with));
    })->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("CompileWithoutRules/" + name).c_str(),
                                 [without](benchmark::State& state) {
                                   for (auto _ : state) benchmark::DoNotOptimize(compile(without));
                                 })->Unit(benchmark::kMillisecond);
    if (name.find("httproutes") == std::string::npos) continue;
    const auto schema = compile(with);
    const auto plain = compile(without);
    // As a write has it: defaults applied (parentRefs' group and kind, backendRefs' kind).
    json::value route = route16();
    schema->apply_defaults(route);
    {
      const auto causes = schema->validate(route);
      if (!causes.empty()) throw std::runtime_error("the route is invalid: " + causes[0].field + ": " + causes[0].message);
    }
    json::value old = route;
    old.as_object()["spec"].as_object()["hostnames"].as_array()[1] = "old.example.com";
    const json::object old_object = old.as_object();
    const json::value& route_ref = route;
    (void)route_ref;
    benchmark::RegisterBenchmark("ValidateHTTPRoute16", [schema, route](benchmark::State& state) {
      for (auto _ : state) benchmark::DoNotOptimize(schema->validate(route));
    })->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("ValidateHTTPRoute16WithoutRules",
                                 [plain, route](benchmark::State& state) {
                                   for (auto _ : state) benchmark::DoNotOptimize(plain->validate(route));
                                 })->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("ValidateHTTPRoute16Update",
                                 [schema, route, old_object](benchmark::State& state) {
                                   std::vector<std::string> warnings;
                                   for (auto _ : state) {
                                     benchmark::DoNotOptimize(
                                         schema->validate(route, {}, &old_object, &warnings));
                                   }
                                 })->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

namespace {

// One small object with one cheap rule: the fixed cost of running a rule at a node.
void TrivialRule(benchmark::State& state) {
  const auto schema = compile(json::parse(R"({"type": "object", "properties": {"spec": {
      "type": "object", "properties": {"type": {"type": "string", "maxLength": 32},
      "full": {"type": "string", "maxLength": 16}}, "x-kubernetes-validations": [
      {"rule": "has(self.full) ? self.type == 'ReplaceFullPath' : true"}]}}})"));
  const json::value obj = json::parse(R"({"spec": {"type": "ReplacePrefixMatch"}})");
  for (auto _ : state) benchmark::DoNotOptimize(schema->validate(obj));
}
BENCHMARK(TrivialRule);

void TrivialRuleWithoutRules(benchmark::State& state) {
  const auto schema = compile(json::parse(R"({"type": "object", "properties": {"spec": {
      "type": "object", "properties": {"type": {"type": "string", "maxLength": 32},
      "full": {"type": "string", "maxLength": 16}}}}})"));
  const json::value obj = json::parse(R"({"spec": {"type": "ReplacePrefixMatch"}})");
  for (auto _ : state) benchmark::DoNotOptimize(schema->validate(obj));
}
BENCHMARK(TrivialRuleWithoutRules);

}  // namespace
