// devmesh/bench/run_stats.h
// -----------------------------------------------------------------------------
// Statistics of benchmark run times (bench/allreduce_2d.cc): a median, the
// interquartile mean and its bootstrap interval. Pure functions; any thread.
#ifndef DEVMESH_BENCH_RUN_STATS_H_
#define DEVMESH_BENCH_RUN_STATS_H_

#include <vector>

namespace devmesh {

// The median of `v` (the mean of the two middle values for an even count);
// 0 for an empty `v`.
double Median(std::vector<double> v);

// The mean of the middle half of the sorted `v` (the values from index
// n/4 to n - n/4 - 1): the interquartile mean, robust to a quarter of
// outliers on each side. The median when `v` has fewer than 4 values.
double InterquartileMean(std::vector<double> v);

// Half the width of the 95% percentile-bootstrap interval of
// InterquartileMean(v): 1000 resamples with replacement, from a fixed seed so
// that the same values always give the same result (and every rank of a run
// computes the same figure). 0 for fewer than 2 values.
double BootstrapHalfWidth95(const std::vector<double>& v);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_RUN_STATS_H_
