// devmesh/bench/batch_size.h
// -----------------------------------------------------------------------------
// BatchSize: how many collectives of `bytes` bytes the benchmarks time
// together in one run: enough to move at least kBatchBytes (8 MiB), at most
// kMaxBatch (so 1 to 8 from 1 MiB, 16 at 512 KiB, 100 from 64 KiB down).
// Small messages are timed as nccl-tests times them: many back to back,
// divided, so a row is the time of one collective in a stream of them, not
// of one collective after a barrier (whose wake-up latency would dominate).
// tools/peer_bench's PyTorch and Open MPI sides use the same formula
// (stats.py, mpi_allreduce.c). Thread-safe (pure).
#ifndef DEVMESH_BENCH_BATCH_SIZE_H_
#define DEVMESH_BENCH_BATCH_SIZE_H_

#include <algorithm>
#include <cstddef>

namespace devmesh {

inline constexpr size_t kBatchBytes = size_t{8} << 20;
inline constexpr size_t kMaxBatch = 100;

// In [1, kMaxBatch]; `bytes` 0 counts as 1.
inline int BatchSize(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>(
      (kBatchBytes + bytes - 1) / std::max<size_t>(bytes, 1), 1, kMaxBatch));
}

}  // namespace devmesh

#endif  // DEVMESH_BENCH_BATCH_SIZE_H_
