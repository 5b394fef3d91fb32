// devmesh/bench/mesh_layout_bench.cc
// -----------------------------------------------------------------------------
// `bazel run -c opt //bench:mesh_layout`: time per MeshLayout operation on a
// strided mesh at world sizes 8, 2^10, 2^15 and 2^20. The mesh is
// (W/8, 2, 4) named (a, b, c) (same ndim at every size, so the time must not
// grow with W); GroupOf uses (W/8, 8) along dim 1, a line of fixed size 8.
// Ranks vary per iteration so nothing is hoisted out of the loop.
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "mesh/mesh_layout.h"

namespace devmesh {
namespace {

MeshLayout Mesh3(int64_t world) {
  return *MeshLayout::FromShape({world / 8, 2, 4}, {"a", "b", "c"});
}

// A cheap walk over [0, world) that visits far-apart ranks.
int64_t NextRank(int64_t r, int64_t world) {
  return (r + 0x9E3779B1) & (world - 1);
}

void BM_CoordinateOf(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = Mesh3(world);
  int64_t r = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.CoordinateOf(r));
    r = NextRank(r, world);
  }
}

void BM_RankAt(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = Mesh3(world);
  std::vector<int64_t> coord = {0, 0, 0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.RankAt(coord));
    coord[0] = (coord[0] + 7) % (world / 8);
    coord[2] = (coord[2] + 1) & 3;
  }
}

void BM_Slice(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = Mesh3(world);
  const std::vector<std::string> names = {"c", "a"};
  std::vector<int64_t> coord = {0, 0, 0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.Slice(names, coord));
    coord[1] ^= 1;
  }
}

void BM_SliceThroughRank(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = Mesh3(world);
  const std::vector<std::string> names = {"b"};
  int64_t r = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.SliceThroughRank(names, r));
    r = NextRank(r, world);
  }
}

void BM_Flatten(benchmark::State& state) {
  const int64_t world = state.range(0);
  // Non-adjacent dims: the flattened dim keeps two modes.
  const MeshLayout m = *Mesh3(world).Slice({"a", "c"});
  for (auto _ : state) benchmark::DoNotOptimize(m.Flatten());
}

void BM_GroupOf(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = *MeshLayout::FromShape({world / 8, 8}, {"dp", "tp"});
  int64_t r = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.GroupOf(r, 1));
    r = NextRank(r, world);
  }
}

void BM_SplitColorKey(benchmark::State& state) {
  const int64_t world = state.range(0);
  const MeshLayout m = Mesh3(world);
  int64_t r = 0;
  int dim = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m.SplitColorKey(r, dim));
    r = NextRank(r, world);
    dim = dim == 2 ? 0 : dim + 1;
  }
}

#define DEVMESH_WORLD_SIZES \
  Arg(8)->Arg(1 << 10)->Arg(1 << 15)->Arg(1 << 20)

BENCHMARK(BM_CoordinateOf)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_RankAt)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_Slice)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_SliceThroughRank)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_Flatten)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_GroupOf)->DEVMESH_WORLD_SIZES;
BENCHMARK(BM_SplitColorKey)->DEVMESH_WORLD_SIZES;

}  // namespace
}  // namespace devmesh
