// devmesh/bench/test_pattern.h
// -----------------------------------------------------------------------------
// The values the all-reduce benchmark sends and the sums it expects, exact in
// every dtype (small integers: exact in float16 and bfloat16 too). Element i
// of global rank g holds ((g % 5) + 1) * ((i % 3) + 1); the sum over a group
// is ((i % 3) + 1) * sum over the group of ((g % 5) + 1).
#ifndef DEVMESH_BENCH_TEST_PATTERN_H_
#define DEVMESH_BENCH_TEST_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"

namespace devmesh {

// The rank factor (g % 5) + 1 of global rank g.
int64_t PatternRankFactor(int global_rank);

// Fills `count` elements of `dtype` at `buf` with rank `global_rank`'s values.
void FillPattern(void* buf, size_t count, DataType dtype, int global_rank);

// The largest integer every value of `dtype` up to which is exact: 127
// (int8), 255 (uint8), 256 (bfloat16), 2048 (float16), 2^24 (float32), ...
// A group whose sums ((factor sum) * 3) pass it cannot be checked exactly.
int64_t PatternExactLimit(DataType dtype);

// Counts the elements of `buf` that differ from the sum over a group whose
// rank factors add up to `factor_sum`.
int64_t CountWrong(const void* buf, size_t count, DataType dtype,
                   int64_t factor_sum);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_TEST_PATTERN_H_
