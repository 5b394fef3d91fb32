// devmesh/comm/call_check.h
// -----------------------------------------------------------------------------
// The per-call check: every member of a collective must call the same thing
// (kind, dtype, count, reduce op, root) as its sequence number's collective
// on the group. NCCL and MPI call a mismatch undefined; devmesh's CPU
// backends compare the members' CallRecords (comm/communicator.h) at the
// call's first step, before any member reads another's data, and fail every
// member with the same InvalidArgument, so that a mismatch is never an OK
// with a wrong answer or a wait for the timeout. Backend-independent: a
// backend stores and exchanges the records (shm: in each member's line of
// the segment), this file compares and words them.
//
// Thread-safety: pure functions.
#ifndef DEVMESH_COMM_CALL_CHECK_H_
#define DEVMESH_COMM_CALL_CHECK_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "comm/communicator.h"

namespace devmesh {

// Every field equal.
bool SameCall(const CallRecord& a, const CallRecord& b);

// "allreduce float32 x 8 sum", "allgather int64 x 2", "reduce int32 x 4 max
// to root 1", "alltoallv float32", "broadcast uint8 x 3
// from root 1", "barrier"; "no collective yet" for seq 0 (a record never
// written).
std::string DescribeCall(const CallRecord& call);

// The error every member of a mismatched call returns: InvalidArgument with
// the kDisagreementPayload naming `other_rank`, and the message
//   "<backend> call #<seq>: the members' calls differ: global rank
//    <other_rank> called <other>, global rank <first_rank> <first> (group
//    of global ranks [...]); the group refuses every later call"
// when the sequence numbers agree, else
//   "<backend>: the members are at different collectives: global rank
//    <other_rank> at its #<seq> (<other>), global rank <first_rank> at its
//    #<seq> (<first>): a member skipped or added a collective (one the
//    front rejected on it still counts) (group of global ranks [...]); the
//    group refuses every later call"
// (each on one line). `first` is the reference member's call (the group's
// rank 0, so that every member words it alike) and `other` the first call
// that differs from it.
// With a `label` ("mesh dim 'tp'", CommOptions::label), "along <label>"
// follows "call #<seq>" (and the backend in the second form).
absl::Status CallMismatchError(absl::string_view backend, int first_rank,
                               const CallRecord& first, int other_rank,
                               const CallRecord& other,
                               const std::vector<int>& group,
                               absl::string_view label = "");

// A CallRecord as it travels between members (an all-gather of them over
// a group): every field widened to 8 bytes, 48 bytes in all, in this
// process's byte order (members share one architecture).
struct CallRecordWire {
  int64_t seq;
  int64_t kind;
  int64_t dtype;
  int64_t op;
  int64_t root;
  uint64_t count;
};
static_assert(sizeof(CallRecordWire) == 48, "six 8-byte fields");

CallRecordWire ToCallRecordWire(const CallRecord& call);
CallRecord FromCallRecordWire(const CallRecordWire& wire);

// The members' records, in group order (`all[j]` is group rank j's, and
// `group[j]` its global rank; `group` may be empty: global = group rank),
// compared with group rank 0's: OK when all are the same call, else
// CallMismatchError(backend, ...) naming the first member that differs.
absl::Status CompareCallRecords(absl::string_view backend,
                                absl::Span<const CallRecordWire> all,
                                const std::vector<int>& group,
                                absl::string_view label = "");

}  // namespace devmesh

#endif  // DEVMESH_COMM_CALL_CHECK_H_
