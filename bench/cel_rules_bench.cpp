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
//   ValidateHTTPRoute16Varied  a route of 16 rules that are as unlike as Gateway API allows
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

// The same size of route, its rules as unlike as Gateway API allows: ten filter sets, one or
// two matches, one to three backends, so that no two rules agree on what the rules[] checks
// read (only filters of one type agree, as they must with seven types). What a route gets
// when its rules do not repeat one shape.
json::value route16_varied() {
  static constexpr const char* kFilterSets[] = {
      R"([{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}]}}])",
      R"([{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": ["x-b"]}}])",
      R"([{"type": "RequestHeaderModifier", "requestHeaderModifier": {"add": [{"name": "x-c", "value": "2"}]}},
          {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [{"name": "x-d", "value": "3"}]}}])",
      R"([{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/full"}}}])",
      R"([{"type": "URLRewrite", "urlRewrite": {"hostname": "h.example.com", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/p"}}}])",
      R"([{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "mirror", "port": 80}}}])",
      R"([{"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["x-e"]}},
          {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/g"}}}])",
      "[]",
      R"([{"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-f", "value": "4"}]}},
          {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m2", "port": 81}, "percent": 10}}])",
      R"([{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-g", "value": "5"}]}},
          {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"remove": ["x-h"]}},
          {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m3", "port": 82}}}])",
  };
  json::array rules;
  for (int i = 0; i < 16; ++i) {
    const std::string n = std::to_string(i);
    json::object rule;
    const json::value filters = json::parse(kFilterSets[i % 10]);
    if (!filters.as_array().empty()) rule["filters"] = filters;
    const bool prefix_rewrite = i % 10 == 4;  // one PathPrefix match, as Gateway API requires
    json::array matches;
    matches.push_back(json::parse(R"({"path": {"type": "PathPrefix", "value": "/p)" + n + R"("}})"));
    if (i % 2 == 1 && !prefix_rewrite) {
      matches.push_back(json::parse(R"({"path": {"type": "Exact", "value": "/e)" + n + R"("},
                                        "method": "POST"})"));
    }
    rule["matches"] = std::move(matches);
    json::array backends;
    for (int b = 0; b <= i % 3; ++b) {
      backends.push_back(json::parse(R"({"name": "svc-)" + n + "-" + std::to_string(b) +
                                     R"(", "port": 8080, "weight": 1})"));
    }
    rule["backendRefs"] = std::move(backends);
    rules.push_back(std::move(rule));
  }
  json::value route = route16();
  route.as_object()["spec"].as_object()["rules"] = std::move(rules);
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
    json::value varied = route16_varied();
    schema->apply_defaults(varied);
    {
      const auto causes = schema->validate(varied);
      if (!causes.empty()) throw std::runtime_error("the varied route is invalid: " + causes[0].field + ": " + causes[0].message);
    }
    benchmark::RegisterBenchmark("ValidateHTTPRoute16Varied", [schema, varied](benchmark::State& state) {
      for (auto _ : state) benchmark::DoNotOptimize(schema->validate(varied));
    })->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("ValidateHTTPRoute16VariedWithoutRules",
                                 [plain, varied](benchmark::State& state) {
                                   for (auto _ : state) benchmark::DoNotOptimize(plain->validate(varied));
                                 })->Unit(benchmark::kMicrosecond);
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

// Gateway-API-shaped rules without Gateway API: 64 items, each with a `kind` and one of seven
// members, and the rule pairs such a union carries ("the member is set exactly when kind names
// it": 14 rules per item), plus the list's own "at most one of each kind" rules (7 filters over
// the list). The counter `evaluations` is rules run per second; its inverse is the time per rule.
json::value union_schema(int with_rules) {
  static constexpr const char* kMembers[] = {"alpha", "bravo", "charlie", "delta", "echo",
                                             "foxtrot", "golf"};
  json::object props;
  props["kind"] = json::parse(R"({"type": "string", "maxLength": 32})");
  json::array item_rules;
  json::array list_rules;
  for (const char* m : kMembers) {
    props[m] = json::parse(R"({"type": "object", "properties": {"v": {"type": "string",
                              "maxLength": 64}}})");
    std::string kind(m);
    kind[0] = static_cast<char>(kind[0] - 'a' + 'A');
    item_rules.push_back(json::object{
        {"rule", "!(has(self." + std::string(m) + ") && self.kind != '" + kind + "')"}});
    item_rules.push_back(json::object{
        {"rule", "!(!has(self." + std::string(m) + ") && self.kind == '" + kind + "')"}});
    list_rules.push_back(
        json::object{{"rule", "self.filter(f, f.kind == '" + kind + "').size() <= 10"}});
  }
  json::object item{{"type", "object"}, {"properties", std::move(props)}};
  json::object list{{"type", "array"}, {"maxItems", 64}};
  if (with_rules & 1) item["x-kubernetes-validations"] = std::move(item_rules);
  if (with_rules & 2) {
    list["x-kubernetes-validations"] = std::move(list_rules);
  }
  list["items"] = std::move(item);
  return json::object{{"type", "object"},
                      {"properties", json::object{{"items", std::move(list)}}}};
}

json::value union_object() {
  static constexpr const char* kMembers[] = {"alpha", "bravo", "charlie", "delta", "echo",
                                             "foxtrot", "golf"};
  json::array items;
  for (int i = 0; i < 64; ++i) {
    std::string m = kMembers[i % 7];
    std::string kind = m;
    kind[0] = static_cast<char>(kind[0] - 'a' + 'A');
    items.push_back(json::object{{"kind", kind},
                                 {m, json::object{{"v", "value-" + std::to_string(i)}}}});
  }
  return json::object{{"items", std::move(items)}};
}

void UnionRules(benchmark::State& state) {
  const auto schema = compile(union_schema(static_cast<int>(state.range(0))));
  const json::value obj = union_object();
  if (!schema->validate(obj).empty()) throw std::runtime_error("the union object is invalid");
  for (auto _ : state) benchmark::DoNotOptimize(schema->validate(obj));
  // 64 items x 14 rules, and the list's 7.
  const auto rules = state.range(0);
  const double per_run = ((rules & 1) != 0 ? 64 * 14 : 0) + ((rules & 2) != 0 ? 7 : 0);
  if (per_run > 0) {
    state.counters["evaluations"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * per_run, benchmark::Counter::kIsRate);
  }
}
// rules: 3 all of them, 1 the items' only, 2 the list's only, 0 none (the walk and the schema).
BENCHMARK(UnionRules)->Arg(3)->Arg(1)->Arg(2)->Arg(0)->ArgName("rules")->Unit(benchmark::kMicrosecond);

}  // namespace
