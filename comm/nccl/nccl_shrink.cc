// devmesh/comm/nccl/nccl_shrink.cc
// NcclCommunicator's ShrinkableCommunicator side: ncclCommShrink and
// ncclCommRevoke (comm/shrinkable_communicator.h has the contract). Compiled
// against any NCCL; the calls exist only where DEVMESH_NCCL_HAS_SHRINK /
// DEVMESH_NCCL_HAS_REVOKE say so (nccl_communicator_impl.h), else
// Unimplemented.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/group_args.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_communicator_impl.h"
#include "comm/nccl/nccl_status.h"
#include "status/status_macros.h"

namespace devmesh {

bool NcclShrinkBuiltIn() { return DEVMESH_NCCL_HAS_SHRINK != 0; }
bool NcclRevokeBuiltIn() { return DEVMESH_NCCL_HAS_REVOKE != 0; }

namespace nccl_internal {

bool NcclCommunicator::CanShrink() const {
#if DEVMESH_NCCL_HAS_SHRINK
  if (shared_->aborted.load()) return false;
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return false;
  return state == ncclSuccess || state == ncclInProgress;
#else
  return false;
#endif
}

absl::Status NcclCommunicator::Revoke() {
#if DEVMESH_NCCL_HAS_REVOKE
  if (shared_->aborted.load()) {
    return absl::FailedPreconditionError(
        "nccl revoke: communicator was aborted");
  }
  // Once: NCCL answers a second ncclCommRevoke with ncclInvalidArgument.
  if (shared_->revoked.exchange(true)) return absl::OkStatus();
  const ncclResult_t r = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  // Non-blocking communicators answer ncclInProgress: the kernels stop and
  // the state settles to ncclSuccess later (nccl.h); Shrink waits for it.
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  shared_->revoked.store(false);  // NCCL refused: the caller aborts instead.
  return NcclStatus(r, "ncclCommRevoke", comm_);
#else
  // Not a stub: the documented answer where the NCCL built against has no
  // ncclCommRevoke (shrinkable_communicator.h); the failure watch aborts.
  return absl::UnimplementedError(absl::StrCat(
      "nccl revoke: devmesh was built against NCCL ", NCCL_VERSION_CODE,
      "; ncclCommRevoke needs 2.28.7"));
#endif
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Shrink(
    absl::Span<const int> exclude_ranks, bool abort_in_flight) {
  DEVMESH_ASSIGN_OR_RETURN(
      const ShrunkGroup plan,
      PlanShrink("nccl", rank_, global_ranks_, exclude_ranks));
#if DEVMESH_NCCL_HAS_SHRINK
  if (shared_->aborted.load()) {
    return absl::FailedPreconditionError(
        "nccl shrink: communicator was aborted");
  }
  DEVMESH_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  // Released with ncclCommAbort, never ncclCommFinalize/Destroy, once a
  // shrink that aborts in-flight work was started (pytorch/pytorch#194679).
  auto release_parent = [&] {
    if (abort_in_flight) AbortComm();
  };
  const absl::Time deadline = absl::Now() + options_.timeout;
  // NCCL sorts the list in place.
  std::vector<int> exclude(exclude_ranks.begin(), exclude_ranks.end());
  ncclConfig_t config = MakeConfig(options_.nccl);
  ncclComm_t child = nullptr;
  const ncclResult_t r = ncclCommShrink(
      comm_, exclude.data(), static_cast<int>(exclude.size()), &child,
      &config, abort_in_flight ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  if (r != ncclSuccess && r != ncclInProgress) {
    absl::Status status = NcclStatus(r, "ncclCommShrink", comm_);
    release_parent();
    return status;
  }
  // Non-blocking, as Split: the child's creation completes through the
  // parent's state, then the child's own.
  if (auto s = WaitForComm(comm_, deadline, "ncclCommShrink (parent)",
                           options_.creation_cancel, [this] { AbortComm(); });
      !s.ok()) {
    if (child != nullptr) ncclCommAbort(child);
    return s;
  }
  if (child == nullptr) {
    release_parent();
    return absl::InternalError(
        "ncclCommShrink: done, but it returned no communicator");
  }
  if (auto s = WaitForComm(child, deadline, "ncclCommShrink",
                           options_.creation_cancel);
      !s.ok()) {
    release_parent();  // WaitForComm aborted the child.
    return s;
  }
  release_parent();
  auto wrapped = Wrap(child, device_, plan.global_ranks, options_);
  if (!wrapped.ok()) return wrapped.status();  // Wrap's owner released it.
  if ((*wrapped)->rank() != plan.rank ||
      (*wrapped)->size() != static_cast<int>(plan.global_ranks.size())) {
    const std::string got = absl::StrCat(
        "rank ", (*wrapped)->rank(), " of ", (*wrapped)->size());
    (void)(*wrapped)->Abort();
    return absl::InternalError(absl::StrCat(
        "ncclCommShrink made ", got, ", expected rank ", plan.rank, " of ",
        plan.global_ranks.size(), "; the new communicator was aborted"));
  }
  return std::unique_ptr<Communicator>(*std::move(wrapped));
#else
  // Not a stub: the documented answer where the NCCL built against has no
  // ncclCommShrink (shrinkable_communicator.h); DeviceMesh::Shrink then
  // aborts and re-creates the group.
  return absl::UnimplementedError(absl::StrCat(
      "nccl shrink: devmesh was built against NCCL ", NCCL_VERSION_CODE,
      "; ncclCommShrink needs 2.27"));
#endif
}

}  // namespace nccl_internal
}  // namespace devmesh
