// devmesh/comm/shrinkable_communicator.h
// -----------------------------------------------------------------------------
// ShrinkableCommunicator: what a backend whose library can drop members from
// a live group offers beside Communicator. Only the NCCL backend has one
// (NcclCommunicator: ncclCommShrink, NCCL >= 2.27; ncclCommRevoke, NCCL >=
// 2.28.7); Gloo and shm groups do not derive from it, and DeviceMesh::Shrink
// makes theirs anew. Callers find it with dynamic_cast on a backend's
// communicator (DeviceMesh: GuardedCommunicator::inner()).
//
//   auto* s = dynamic_cast<ShrinkableCommunicator*>(comm.get());
//   if (s != nullptr && s->CanShrink()) {
//     // every member but the excluded ones calls it, with the same list
//     auto child = s->Shrink({3}, /*abort_in_flight=*/true);
//   }
//
// Where the behaviour comes from: NCCL's nccl.h (2.28.9) and src/init.cc
// (ncclCommShrink sets the parent's abort flags, waits for its kernels, and
// makes the child with key = parent rank, so survivors keep their order);
// the rule that a parent shrunk with NCCL_SHRINK_ABORT is released with
// ncclCommAbort on every rank, never ncclCommFinalize/Destroy:
// pytorch/pytorch#194679 and its fix #194775 (NCCL 2.31+ hangs in the
// destroy's barrier waiting for the excluded ranks).
//
// Thread-safety: Revoke and CanShrink from any thread (Revoke is what the
// failure watch calls while a collective may be in flight); Shrink as a
// collective (one thread, no collective of this communicator in flight).
#ifndef DEVMESH_COMM_SHRINKABLE_COMMUNICATOR_H_
#define DEVMESH_COMM_SHRINKABLE_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/communicator.h"

namespace devmesh {

class ShrinkableCommunicator {
 public:
  virtual ~ShrinkableCommunicator() = default;

  // Whether Shrink may be tried now: the backend was built against a library
  // that shrinks (NCCL >= 2.27), this communicator was not aborted, and its
  // library reports no error on it (ncclCommGetAsyncError: ncclSuccess, or
  // ncclInProgress while a revoke settles). Every member answers alike
  // unless their states differ; DeviceMesh::Shrink shares the answers
  // through its agreement so that all members take the same path.
  virtual bool CanShrink() const = 0;

  // Stops the calls in flight and refuses every later collective, Send,
  // Recv and Barrier (FailedPrecondition "... was revoked"), but keeps the
  // communicator's resources, so that it can still be Shrink's parent
  // (ncclCommRevoke). Local: peers need not call it. It does not wait for
  // the calls to stop: the next Shrink does, within its timeout. A second
  // Revoke is OK and does nothing. After it, the communicator is released
  // with ncclCommAbort (NCCL: ncclCommFinalize after a revoke is invalid).
  // Errors:
  //   Unimplemented       built against an NCCL without ncclCommRevoke
  //                       (< 2.28.7): the caller aborts instead
  //   FailedPrecondition  the communicator was aborted
  //   others              ncclCommRevoke's error (nccl/nccl_status.h)
  virtual absl::Status Revoke() = 0;

  // Collective over the members not in `exclude_ranks` (group ranks of this
  // communicator, any order), which all call it with the same list; the
  // excluded members do not call it (an excluded member that is alive
  // releases its communicator with Abort). Returns the group of the others:
  // same order, rank = position among them, size = size() - excluded,
  // global_ranks() = this one's without the excluded, and this
  // communicator's options (timeout, NCCL config, stream, synchronize).
  //
  // abort_in_flight true (after a death): NCCL_SHRINK_ABORT (NCCL stops the
  // parent's kernels first), and this communicator is aborted
  // (ncclCommAbort) once ncclCommShrink was called, whether the shrink
  // succeeded or not: it is never finalized or destroyed, on any member
  // (pytorch/pytorch#194679). abort_in_flight false (a planned shrink of an
  // idle, healthy group): NCCL_SHRINK_DEFAULT, and this communicator stays
  // usable unless the shrink failed in NCCL (then it was aborted).
  // Bounded by the communicator's timeout (past it: both aborted,
  // DeadlineExceeded); CommOptions::creation_cancel is asked as for init.
  // Errors (the checks come first and leave this communicator as it was):
  //   InvalidArgument     exclude_ranks empty (ncclCommShrink needs one), a
  //                       rank outside [0, size()), a rank listed twice, all
  //                       size() ranks, or this rank (PlanShrink in
  //                       comm/group_args.h gives the exact messages)
  //   Unimplemented       built against an NCCL without ncclCommShrink
  //                       (< 2.27): the caller makes the group anew
  //   FailedPrecondition  this communicator was aborted
  //   DeadlineExceeded    not done within the timeout (both aborted)
  //   Internal            NCCL's new communicator has another rank or size
  //                       than computed (it is aborted)
  //   others              NCCL's or CUDA's error (nccl/nccl_status.h):
  //                       ncclInvalidUsage -> FailedPrecondition,
  //                       ncclInternalError -> Internal, a peer's failure ->
  //                       Unavailable; the caller makes the group anew
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Shrink(
      absl::Span<const int> exclude_ranks, bool abort_in_flight) = 0;
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_SHRINKABLE_COMMUNICATOR_H_
