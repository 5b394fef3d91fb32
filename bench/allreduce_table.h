// devmesh/bench/allreduce_table.h
// -----------------------------------------------------------------------------
// The figures of an all-reduce measurement and their nccl-tests-style table.
// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n for an all-reduce over n
// ranks (nccl-tests' doc/PERFORMANCE.md), both in GB/s (1e9 bytes/s).
#ifndef DEVMESH_BENCH_ALLREDUCE_TABLE_H_
#define DEVMESH_BENCH_ALLREDUCE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace devmesh {

// algbw in GB/s of `bytes` moved in `seconds`; 0 when seconds <= 0.
double AlgBandwidthGBps(int64_t bytes, double seconds);
// busbw in GB/s of an all-reduce of `bytes` over `nranks` in `seconds`.
double AllReduceBusBandwidthGBps(int64_t bytes, int nranks, double seconds);

struct AllReduceRow {
  int64_t bytes = 0;
  int64_t count = 0;        // elements
  std::string dim;          // mesh dim name
  int group_size = 0;       // ranks in the dim's group
  int batch = 1;            // all-reduces timed together in one run
  int iters = 0;            // timed iterations (a run on each group)
  // Seconds per all-reduce: the median over iterations of a run's time
  // (its slowest rank's) divided by `batch`.
  double mesh_seconds = 0;  // through the DeviceMesh group
  double raw_seconds = 0;   // on a group made with //comm
  int64_t wrong = 0;        // wrong elements over all ranks, both groups
  // mesh busbw / raw busbw from paired runs: the interquartile mean, over
  // iterations, of raw run time / mesh run time.
  double paired_ratio = 0;
  // Half the width of paired_ratio's 95% bootstrap interval.
  double ratio_ci95 = 0;
};

// The table: one header block, then a line per row with the batch, iterations, time (us), algbw,
// busbw, #wrong, the raw group's time and busbw, the paired devmesh/raw busbw
// ratio and its 95% interval's half width.
std::string FormatAllReduceTable(const std::string& title,
                                 const std::vector<AllReduceRow>& rows);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_ALLREDUCE_TABLE_H_
