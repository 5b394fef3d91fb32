// devmesh/device_mesh/device_mesh_failure.cc
// DeviceMesh::WaitForFailure and DeviceMesh::OnFailure: the failure watch's
// verdict for engines (device_mesh/failure_watch.h).
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/failure_watch.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

// The watch of `runtime`, for a mesh of `epoch`.
absl::StatusOr<std::shared_ptr<FailureWatch>> WatchFor(MeshRuntime& runtime,
                                                       int64_t epoch) {
  std::shared_ptr<FailureWatch> watch = runtime.watch();
  if (watch == nullptr) {
    return absl::FailedPreconditionError(
        "no failure watch: the runtime is detached or DEVMESH_FAILURE_WATCH=0 "
        "(a death is then learnt only from a failed collective)");
  }
  if (watch->epoch() > epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this mesh belongs to epoch ", epoch, " and the job moved on to epoch ",
        watch->epoch(), ": use the mesh DeviceMesh::Shrink returned"));
  }
  return watch;
}

}  // namespace

absl::StatusOr<Verdict> DeviceMesh::WaitForFailure(absl::Time deadline) const {
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<FailureWatch> watch,
                           WatchFor(*runtime_, epoch()));
  return watch->WaitForVerdict(deadline);
}

absl::StatusOr<std::unique_ptr<VerdictSubscription>> DeviceMesh::OnFailure(
    std::function<void(const Verdict&)> callback) const {
  if (!callback) {
    return absl::InvalidArgumentError("OnFailure: the callback is empty");
  }
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<FailureWatch> watch,
                           WatchFor(*runtime_, epoch()));
  return watch->Subscribe(std::move(callback));
}

}  // namespace devmesh
