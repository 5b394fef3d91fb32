// devmesh/comm/nccl/nccl_status.cc
#include "comm/nccl/nccl_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace devmesh {
namespace nccl_internal {

absl::Status NcclStatus(ncclResult_t result, absl::string_view what,
                        ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", ncclGetErrorString(result));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, " (", last, ")");
  }
  switch (result) {
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(message);
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(message);
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string detail = absl::StrCat(cudaGetErrorName(error), ": ",
                                    cudaGetErrorString(error));
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device visible: ", what, ": ", detail));
  }
  return absl::InternalError(absl::StrCat(what, ": ", detail));
}

}  // namespace nccl_internal
}  // namespace devmesh
