// devmesh/bench/reduce_kernels.cc
// -----------------------------------------------------------------------------
// The element-wise reduce functions that //comm's Gloo backend hands to
// gloo::allreduce (comm/reduce_functions.cc), timed alone in one
// process: out[i] = a[i] op b[i] over --elements per call, per dtype and op.
// bytes_per_second counts one input buffer per call. This is the compute
// half of an all-reduce (the network half is //bench:gloo_allreduce).
//
//   bazel run -c opt //bench:reduce_kernels
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "comm/dtype.h"
#include "comm/reduce_functions.h"

namespace devmesh {
namespace {

// 2 MiB of float32: the half of a 4 MiB message that one of two ranks
// reduces; fits in L2/L3, so the loop, not memory, is timed.
constexpr size_t kElements = size_t{1} << 19;

void BM_Reduce(benchmark::State& state, DataType dtype, ReduceOp op) {
  const size_t bytes = kElements * DataTypeSize(dtype);
  std::vector<unsigned char> a(bytes), b(bytes), out(bytes);
  // Small positive bit patterns: finite values for every dtype.
  for (size_t i = 0; i < bytes; ++i) {
    a[i] = static_cast<unsigned char>(1 + i % 7);
    b[i] = static_cast<unsigned char>(2 + i % 5);
  }
  auto fn = reduce_internal::GetReduceFunction(dtype, op);
  for (auto _ : state) {
    fn(out.data(), a.data(), b.data(), kElements);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

BENCHMARK_CAPTURE(BM_Reduce, float32_sum, DataType::kFloat32, ReduceOp::kSum);
BENCHMARK_CAPTURE(BM_Reduce, float32_max, DataType::kFloat32, ReduceOp::kMax);
BENCHMARK_CAPTURE(BM_Reduce, float64_sum, DataType::kFloat64, ReduceOp::kSum);
BENCHMARK_CAPTURE(BM_Reduce, bfloat16_sum, DataType::kBFloat16, ReduceOp::kSum);
BENCHMARK_CAPTURE(BM_Reduce, float16_sum, DataType::kFloat16, ReduceOp::kSum);
BENCHMARK_CAPTURE(BM_Reduce, int32_sum, DataType::kInt32, ReduceOp::kSum);
BENCHMARK_CAPTURE(BM_Reduce, int64_prod, DataType::kInt64, ReduceOp::kProd);

}  // namespace
}  // namespace devmesh

// main() is //bench:bench_main_internal's.
