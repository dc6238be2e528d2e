// Strategic merge patch on big lists: in-process Google Benchmark (not a ctest test).
//
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKWATCH_BUILD_BENCH=ON
//   cmake --build build-bench --target strategic_merge_patch_bench -j 2
//   build-bench/bench/strategic_merge_patch_bench --benchmark_filter=Finalizers
//
// Each case times apply_strategic_merge_patch alone: original and patch are parsed once,
// outside the timed loop. Every list case merges a patch of N items into an original of N
// items, half of them shared, so both "merge into an existing item" and "add a new item" run.
#include "schema/strategic_merge_patch.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

namespace json = boost::json;
using kwatch::schema::apply_strategic_merge_patch;
using kwatch::schema::builtin_patch_schema;

std::string finalizer(long i) { return "example.com/finalizer-" + std::to_string(i); }

json::value with_metadata_list(const char* field, json::array list) {
  return json::object{{"metadata", json::object{{field, std::move(list)}}}};
}

json::value with_containers(json::array list) {
  return json::object{{"spec", json::object{{"containers", std::move(list)}}}};
}

// A container of about 80 bytes: N = 40,000 makes a body of about 3 MiB.
json::value container(long i, const char* tag) {
  char image[64];
  std::snprintf(image, sizeof image, "registry.example.com/team/app-%06ld:%s", i, tag);
  char name[32];
  std::snprintf(name, sizeof name, "container-%06ld", i);
  return json::object{{"name", name}, {"image", image}};
}

void run(benchmark::State& state, const json::value& original, const json::value& patch,
         const kwatch::schema::PatchSchema& schema, std::size_t expected_items,
         const char* list_field) {
  for (auto _ : state) {
    auto r = apply_strategic_merge_patch(original, patch, schema);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(r);
    const auto& root = r->as_object();
    const auto& holder = root.contains("metadata") ? root.at("metadata") : root.at("spec");
    if (holder.as_object().at(list_field).as_array().size() != expected_items) {
      state.SkipWithError("wrong number of items in the result");
      return;
    }
  }
  state.counters["patch_bytes"] = static_cast<double>(json::serialize(patch).size());
  state.counters["original_bytes"] = static_cast<double>(json::serialize(original).size());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// metadata.finalizers: N in the original, N in the patch, N/2 shared.
void BM_Finalizers(benchmark::State& state) {
  const long n = state.range(0);
  json::array original, patch;
  for (long i = 0; i < n; ++i) original.emplace_back(finalizer(i));
  for (long i = n / 2; i < n + n / 2; ++i) patch.emplace_back(finalizer(i));
  run(state, with_metadata_list("finalizers", std::move(original)),
      with_metadata_list("finalizers", std::move(patch)), builtin_patch_schema("", "ConfigMap"),
      static_cast<std::size_t>(n + n / 2), "finalizers");
}

// $deleteFromPrimitiveList/finalizers: deletes N/2 of N.
void BM_DeleteFromPrimitiveList(benchmark::State& state) {
  const long n = state.range(0);
  json::array original, remove;
  for (long i = 0; i < n; ++i) original.emplace_back(finalizer(i));
  for (long i = 0; i < n; i += 2) remove.emplace_back(finalizer(i));
  run(state, with_metadata_list("finalizers", std::move(original)),
      with_metadata_list("$deleteFromPrimitiveList/finalizers", std::move(remove)),
      builtin_patch_schema("", "ConfigMap"), static_cast<std::size_t>(n - (n + 1) / 2),
      "finalizers");
}

// spec.containers merged by name: N in the original, N in the patch (N = 40,000: ~3 MiB each).
void BM_ContainersByName(benchmark::State& state) {
  const long n = state.range(0);
  json::array original, patch;
  for (long i = 0; i < n; ++i) original.push_back(container(i, "v1"));
  for (long i = n / 2; i < n + n / 2; ++i) patch.push_back(container(i, "v2"));
  run(state, with_containers(std::move(original)), with_containers(std::move(patch)),
      builtin_patch_schema("", "Pod"), static_cast<std::size_t>(n + n / 2), "containers");
}

// The same with $setElementOrder/containers listing every name (what kubectl sends), reversed,
// and every fourth original item deleted with {"$patch": "delete"}.
void BM_ContainersWithOrderAndDeletes(benchmark::State& state) {
  const long n = state.range(0);
  json::array original, patch, order;
  for (long i = 0; i < n; ++i) original.push_back(container(i, "v1"));
  for (long i = n + n / 2 - 1; i >= 0; --i) {
    if (i < n / 2 && i % 4 == 0) continue;
    char name[32];
    std::snprintf(name, sizeof name, "container-%06ld", i);
    order.push_back(json::object{{"name", name}});
  }
  for (long i = n + n / 2 - 1; i >= n / 2; --i) patch.push_back(container(i, "v2"));
  long deleted = 0;
  for (long i = 0; i < n / 2; i += 4) {
    char name[32];
    std::snprintf(name, sizeof name, "container-%06ld", i);
    patch.push_back(json::object{{"name", name}, {"$patch", "delete"}});
    ++deleted;
  }
  json::value p = json::object{
      {"spec", json::object{{"$setElementOrder/containers", std::move(order)},
                            {"containers", std::move(patch)}}}};
  run(state, with_containers(std::move(original)), p, builtin_patch_schema("", "Pod"),
      static_cast<std::size_t>(n + n / 2 - deleted), "containers");
}

// N finalizers per patch. 20k and 40k are the sizes of the reports; the small ones show the
// growth (and are the only ones short enough to run on quadratic code).
BENCHMARK(BM_Finalizers)
    ->Arg(2500)->Arg(5000)->Arg(10000)->Arg(20000)->Arg(40000)->Arg(200000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DeleteFromPrimitiveList)
    ->Arg(2500)->Arg(5000)->Arg(10000)->Arg(20000)->Arg(40000)->Arg(200000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ContainersByName)
    ->Arg(2500)->Arg(5000)->Arg(10000)->Arg(40000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ContainersWithOrderAndDeletes)
    ->Arg(2500)->Arg(5000)->Arg(10000)->Arg(40000)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
