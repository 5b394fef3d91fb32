// devmesh/bench/bench_main.cc
// -----------------------------------------------------------------------------
// main() for devmesh's plain Google Benchmark binaries, in place of
// benchmark_main / BENCHMARK_MAIN(): the same, with bench/explained_reporter.h
// for display.
#include "bench/explained_reporter.h"

int main(int argc, char** argv) {
  return devmesh::bench::RunBenchmarkMain(argc, argv);
}
