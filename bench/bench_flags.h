// devmesh/bench/bench_flags.h
// -----------------------------------------------------------------------------
// Small parsers shared by the benchmark binaries' absl flags.
#ifndef DEVMESH_BENCH_BENCH_FLAGS_H_
#define DEVMESH_BENCH_BENCH_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace devmesh {

// "2x2" / "2,2,2" / "8" -> {2, 2} ... InvalidArgument naming the text when a
// size is not a positive integer.
absl::StatusOr<std::vector<int64_t>> ParseMeshShape(absl::string_view text);

// "dp,tp" -> {"dp", "tp"}; "" -> {} (unnamed).
std::vector<std::string> ParseDimNames(absl::string_view text);

// Bytes with an optional binary suffix: "1024", "1K", "64M", "1G" (KiB, MiB,
// GiB). InvalidArgument naming the text otherwise.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);

// The sizes from min_bytes to max_bytes (inclusive), doubling, as nccl-tests'
// -f 2. InvalidArgument when min < 1 or min > max.
absl::StatusOr<std::vector<int64_t>> ByteSweep(int64_t min_bytes,
                                               int64_t max_bytes);

}  // namespace devmesh

#endif  // DEVMESH_BENCH_BENCH_FLAGS_H_
