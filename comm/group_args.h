// devmesh/comm/group_args.h
// -----------------------------------------------------------------------------
// The checks every backend's CreateCommunicator and Split make on (rank,
// size, options) before they touch the network, and the CPU backends' checks
// of a collective's buffers and op, in one place.
#ifndef DEVMESH_COMM_GROUP_ARGS_H_
#define DEVMESH_COMM_GROUP_ARGS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/options.h"

namespace devmesh {

// The group's global ranks: options.global_ranks, or 0..size-1 when empty.
// InvalidArgument, each message prefixed "<backend>: ": size < 1, rank
// outside [0, size), a timeout that is not positive, global_ranks of a
// length other than size.
absl::StatusOr<std::vector<int>> ResolveGroupRanks(absl::string_view backend,
                                                   int rank, int size,
                                                   const CommOptions& options);

// The options of a Split child: `parent`'s, with `timeout` when set
// (SplitOptions::timeout). InvalidArgument "<backend> split: timeout (...)
// must be positive" for a timeout <= 0.
absl::StatusOr<CommOptions> SplitChildOptions(
    absl::string_view backend, const CommOptions& parent,
    const std::optional<absl::Duration>& timeout);

// A collective's buffer `name` of `blocks` x `count` elements of `dtype`.
// InvalidArgument "<backend> <op>: ..." for a dtype outside the enum, a byte
// count that overflows size_t, or a null pointer with count > 0.
absl::Status CheckBufferArg(absl::string_view backend, absl::string_view op,
                            absl::string_view name, const void* ptr,
                            size_t count, size_t blocks, DataType dtype);

// InvalidArgument "<backend> <op>: invalid ReduceOp value N" for a value
// outside the enum.
absl::Status CheckReduceOpArg(absl::string_view backend, absl::string_view op,
                              ReduceOp reduce);

}  // namespace devmesh

#endif  // DEVMESH_COMM_GROUP_ARGS_H_
