// devmesh/comm/group_args.h
// -----------------------------------------------------------------------------
// The checks every backend's CreateCommunicator makes on (rank, size,
// options) before it touches the network, in one place.
#ifndef DEVMESH_COMM_GROUP_ARGS_H_
#define DEVMESH_COMM_GROUP_ARGS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/options.h"

namespace devmesh {

// The group's global ranks: options.global_ranks, or 0..size-1 when empty.
// InvalidArgument, each message prefixed "<backend>: ": size < 1, rank
// outside [0, size), a timeout that is not positive, global_ranks of a
// length other than size.
absl::StatusOr<std::vector<int>> ResolveGroupRanks(absl::string_view backend,
                                                   int rank, int size,
                                                   const CommOptions& options);

}  // namespace devmesh

#endif  // DEVMESH_COMM_GROUP_ARGS_H_
