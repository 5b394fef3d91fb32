// devmesh/comm/nccl/nccl_communicator_impl.h
// -----------------------------------------------------------------------------
// NcclCommunicator: the class behind CreateNcclCommunicator (compiled only
// when HAS_NCCL). Internal to //comm:nccl; see nccl_communicator.h for the
// contract.
#ifndef DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_IMPL_H_
#define DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_IMPL_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/options.h"

namespace devmesh {
namespace nccl_internal {

// Waits until `comm` is no longer ncclInProgress, polling
// ncclCommGetAsyncError every 200 us; past `deadline` aborts it and returns
// DeadlineExceeded naming `what`. `cancel` (CommOptions::creation_cancel,
// for init and split; may be empty) is asked about every 50 ms: its error
// aborts `comm` and is returned with its code, prefixed with `what`.
absl::Status WaitForComm(
    ncclComm_t comm, absl::Time deadline, absl::string_view what,
    const std::function<absl::Status()>& cancel = nullptr);

// An ncclConfig_t from the options; non-blocking (the blocking option is
// honoured for calls after init by polling to completion ourselves).
ncclConfig_t MakeConfig(const NcclOptions& options);

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`; makes or adopts the stream.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Wrap(
      ncclComm_t comm, int device, std::vector<int> global_ranks,
      const CommOptions& options);
  ~NcclCommunicator() override;

  absl::string_view backend() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }
  absl::Status AllReduce(const void* send, void* recv, size_t count,
                         DataType dtype, ReduceOp op) override;
  absl::Status AllGather(const void* send, void* recv, size_t count,
                         DataType dtype) override;
  absl::Status ReduceScatter(const void* send, void* recv, size_t count,
                             DataType dtype, ReduceOp op) override;
  absl::Status Broadcast(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override;
  absl::Status AllToAll(const void* send, void* recv, size_t count,
                        DataType dtype) override;
  absl::Status Send(const void* buf, size_t count, DataType dtype,
                    int peer) override;
  absl::Status Recv(void* buf, size_t count, DataType dtype,
                    int peer) override;
  absl::Status Barrier() override;
  DEVMESH_USING_COMMUNICATOR_OVERLOADS;
  absl::StatusOr<std::unique_ptr<Communicator>> Split(
      int color, int key, const SplitOptions& options) override;
  absl::Status Abort() override;

 private:
  NcclCommunicator() = default;
  absl::Status Check(absl::string_view op, const void* a, const void* b,
                     size_t count, DataType dtype) const;
  // After enqueueing: waits for NCCL (non-blocking mode) and, when
  // synchronize or `wait_stream`, for the stream; both bounded by the
  // timeout (past it: ncclCommAbort, DeadlineExceeded).
  absl::Status Finish(ncclResult_t result, absl::string_view what,
                      bool wait_stream = false);

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> global_ranks_;
  CommOptions options_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  void* scratch_ = nullptr;  // 2 * size int32 on the device (Split, Barrier).
  std::atomic<bool> aborted_{false};
};

}  // namespace nccl_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_IMPL_H_
