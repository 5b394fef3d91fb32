// devmesh/comm/nccl/nccl_status.h
// -----------------------------------------------------------------------------
// The one place where ncclResult_t and cudaError_t become absl::Status.
// NCCL: ncclInvalidArgument -> InvalidArgument; ncclInvalidUsage ->
// FailedPrecondition; ncclSystemError, ncclRemoteError -> Unavailable (a
// peer or the network failed); ncclUnhandledCudaError, ncclInternalError and
// others -> Internal. The message is `what`, NCCL's error string and, when
// a communicator is given, ncclGetLastError. CUDA: cudaErrorNoDevice and
// cudaErrorInsufficientDriver -> Unavailable("no CUDA device visible: ...");
// others -> Internal with cudaGetErrorName/String. Thread-safe.
#ifndef DEVMESH_COMM_NCCL_NCCL_STATUS_H_
#define DEVMESH_COMM_NCCL_NCCL_STATUS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace devmesh {
namespace nccl_internal {

absl::Status NcclStatus(ncclResult_t result, absl::string_view what,
                        ncclComm_t comm = nullptr);
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

}  // namespace nccl_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_STATUS_H_
