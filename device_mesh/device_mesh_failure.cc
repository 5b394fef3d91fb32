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

// The watch of `runtime`; the epoch check is the watch's own, made under
// its lock, so that a concurrent Shrink or Grow cannot slip between them.
absl::StatusOr<std::shared_ptr<FailureWatch>> WatchOf(MeshRuntime& runtime) {
  std::shared_ptr<FailureWatch> watch = runtime.watch();
  if (watch == nullptr) {
    return absl::FailedPreconditionError(
        "no failure watch: the runtime is detached or DEVMESH_FAILURE_WATCH=0 "
        "(a death is then learnt only from a failed collective)");
  }
  return watch;
}

// A mesh of an epoch the job left: say which mesh to use instead.
absl::Status ForThisMesh(absl::Status s, int64_t epoch) {
  if (!absl::IsFailedPrecondition(s)) return s;
  return absl::FailedPreconditionError(absl::StrCat(
      "this mesh belongs to epoch ", epoch,
      " and the job moved on: use the mesh the last DeviceMesh::Shrink or "
      "Grow returned"));
}

}  // namespace

absl::StatusOr<Verdict> DeviceMesh::WaitForFailure(absl::Time deadline) const {
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<FailureWatch> watch,
                           WatchOf(*runtime_));
  absl::StatusOr<Verdict> v = watch->WaitForVerdict(epoch(), deadline);
  if (!v.ok()) return ForThisMesh(v.status(), epoch());
  return v;
}

absl::StatusOr<std::unique_ptr<VerdictSubscription>> DeviceMesh::OnFailure(
    std::function<void(const Verdict&)> callback) const {
  if (!callback) {
    return absl::InvalidArgumentError("OnFailure: the callback is empty");
  }
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<FailureWatch> watch,
                           WatchOf(*runtime_));
  auto sub = watch->Subscribe(epoch(), std::move(callback));
  if (!sub.ok()) return ForThisMesh(sub.status(), epoch());
  return sub;
}

}  // namespace devmesh
