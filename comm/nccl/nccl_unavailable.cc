// devmesh/comm/nccl/nccl_unavailable.cc
// The NCCL backend of a build without a CUDA toolkit: same API, Unavailable.
#include "absl/status/status.h"
#include "comm/nccl/nccl_communicator.h"

namespace devmesh {

bool NcclBuiltIn() { return false; }
bool NcclShrinkBuiltIn() { return false; }
bool NcclRevokeBuiltIn() { return false; }
bool NcclGrowBuiltIn() { return false; }

absl::StatusOr<int> CudaDeviceCount() {
  return absl::UnavailableError(
      "no CUDA device visible: devmesh was built without NCCL");
}

absl::Status UseLocalCudaDevice(int) {
  return absl::UnavailableError(
      "no CUDA device visible: devmesh was built without NCCL");
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    std::shared_ptr<Store>, int, int, const CommOptions&) {
  return absl::UnavailableError("devmesh was built without NCCL");
}

absl::StatusOr<NcclGrowResult> GrowNcclCommunicator(
    Communicator*, std::shared_ptr<Store>, int, int, int, const CommOptions&) {
  return absl::UnavailableError("devmesh was built without NCCL");
}

}  // namespace devmesh
