// devmesh/comm/group_args.h
// -----------------------------------------------------------------------------
// The checks every backend's CreateCommunicator and Split make on (rank,
// size, options) before they touch the network, the Communicator front's
// checks of a collective's buffers and op (comm/communicator.cc), and a
// shrink's plan (ShrinkableCommunicator::Shrink, DeviceMesh::Shrink), in
// one place.
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
#include "absl/types/span.h"
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

// The group that ShrinkableCommunicator::Shrink makes on a member: its rank
// and global ranks.
struct ShrunkGroup {
  int rank = 0;
  std::vector<int> global_ranks;  // the parent's, without the excluded
};

// Checks a shrink of the group `global_ranks` by its member `rank`
// excluding the group ranks `exclude` (any order), and gives the member's
// new group: the survivors keep their order (NCCL's ncclCommShrink orders
// the child by parent rank). Errors, all InvalidArgument, checked in this
// order, the messages exactly:
//   "<backend> shrink: nothing to exclude (ncclCommShrink needs at least
//    one rank)"
//   "<backend> shrink: excluded rank R is outside [0, N)"
//   "<backend> shrink: rank R is excluded twice"
//   "<backend> shrink: excluding all N ranks leaves no group"
//   "<backend> shrink: this rank (R) is excluded: an excluded member does
//    not call Shrink"
// (each on one line). `rank` is assumed in [0, global_ranks.size()).
absl::StatusOr<ShrunkGroup> PlanShrink(absl::string_view backend, int rank,
                                       const std::vector<int>& global_ranks,
                                       absl::Span<const int> exclude);

// The group ranks of `old_group` (global ranks, in group order) whose
// removal leaves exactly `new_group` (global ranks, in group order), in
// increasing order; nullopt when there is none to remove or `new_group` is
// not `old_group` with some ranks taken out and the others in the same
// order (then a shrink cannot make it: the group is made anew). Example:
// old [0, 2, 4, 6], new [0, 4] -> [1, 3]; new [4, 0] -> nullopt.
std::optional<std::vector<int>> ShrinkExclusions(
    const std::vector<int>& old_group, const std::vector<int>& new_group);

}  // namespace devmesh

#endif  // DEVMESH_COMM_GROUP_ARGS_H_
