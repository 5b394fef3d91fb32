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
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "comm/shrinkable_communicator.h"
#include "comm/work.h"
#include "store/store.h"
#include "sync/annotated_mutex.h"

// What the NCCL this is compiled against can do, from nccl.h's
// NCCL_VERSION_CODE (the bounds PyTorch's NCCLUtils.hpp uses):
// ncclCommShrink and NCCL_SHRINK_ABORT from 2.27.0 (NCCL_HAS_COMM_SHRINK);
// ncclCommRevoke from 2.28.7 (pytorch/pytorch#190753). Without them the
// same functions exist and answer Unimplemented.
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define DEVMESH_NCCL_HAS_SHRINK 1
#else
#define DEVMESH_NCCL_HAS_SHRINK 0
#endif
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 7)
#define DEVMESH_NCCL_HAS_REVOKE 1
#else
#define DEVMESH_NCCL_HAS_REVOKE 0
#endif
// ncclCommGrow and ncclCommGetUniqueId from 2.29.0 (NCCL's nccl.h.in:
// "Grow communicator by adding new ranks"). Defined already only by
// tests/comm/nccl_grow's compile check, which compiles nccl_grow.cc's 2.29
// branch against the documented declarations.
#ifndef DEVMESH_NCCL_HAS_GROW
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#define DEVMESH_NCCL_HAS_GROW 1
#else
#define DEVMESH_NCCL_HAS_GROW 0
#endif
#endif

namespace devmesh {
namespace nccl_internal {

// Waits until `comm` is no longer ncclInProgress, polling
// ncclCommGetAsyncError every 200 us; past `deadline` aborts it and returns
// DeadlineExceeded naming `what`. `cancel` (CommOptions::creation_cancel,
// for init and split; may be empty) is asked about every 50 ms: its error
// aborts `comm` and is returned with its code, prefixed with `what`.
// `abort` (may be empty: ncclCommAbort(comm)) is how it aborts.
absl::Status WaitForComm(ncclComm_t comm, absl::Time deadline,
                         absl::string_view what,
                         const std::function<absl::Status()>& cancel = nullptr,
                         const std::function<void()>& abort = nullptr);

// Makes the device for a new communicator of `options` the calling thread's
// (options.nccl.cuda_device, else LOCAL_RANK modulo the visible devices,
// else the current one) and returns it. Errors: CudaDeviceCount's;
// InvalidArgument for a device out of range; cudaSetDevice's.
absl::StatusOr<int> SetDeviceFor(const CommOptions& options);

// An ncclConfig_t from the options; non-blocking (the blocking option is
// honoured for calls after init by polling to completion ourselves).
ncclConfig_t MakeConfig(const NcclOptions& options);

// What a communicator shares with the Works of its I* calls, which may
// outlive it: the NCCL handle while it is alive, and whether it was
// aborted or revoked.
struct NcclShared {
  std::atomic<bool> aborted{false};
  // ncclCommRevoke was called: calls fail, and teardown is ncclCommAbort.
  std::atomic<bool> revoked{false};
  sync_internal::Mutex mu;
  // Null once the communicator is being destroyed.
  ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
};

// ShrinkableCommunicator (comm/shrinkable_communicator.h): Shrink and
// Revoke are in nccl_shrink.cc.
class NcclCommunicator final : public Communicator,
                               public ShrinkableCommunicator {
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

 protected:
  // The backend interface (comm/communicator.h).
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override;
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override;
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override;
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override;
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override;
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoBarrier() override;
  // The rooted collectives, AllToAllV and BatchSendRecv over device
  // memory: ncclReduce, and ncclSend/ncclRecv in one group for the others
  // (NCCL's own recipe for gather, scatter and all-to-all-v). No count
  // check across members (NCCL's rule: a mismatch is undefined).
  absl::Status DoReduce(const void* send, void* recv, size_t count,
                        DataType dtype, ReduceOp op, int root) override;
  absl::Status DoGather(const void* send, void* recv, size_t count,
                        DataType dtype, int root) override;
  absl::Status DoScatter(const void* send, void* recv, size_t count,
                         DataType dtype, int root) override;
  absl::Status DoBatchSendRecv(absl::Span<const P2POp> ops) override;
  absl::Status DoAllToAllV(const void* send,
                           absl::Span<const size_t> send_counts,
                           absl::Span<const size_t> send_offsets, void* recv,
                           absl::Span<const size_t> recv_counts,
                           absl::Span<const size_t> recv_offsets,
                           DataType dtype) override;
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override;
  absl::Status DoAbort() override;
  // I* calls: enqueued by the caller's thread, ended by an event.
  bool StartsAsyncItself() const override { return true; }
  Work StartAsync(std::function<absl::Status()> call) override;

 public:
  bool CanShrink() const override;
  absl::Status Revoke() override;
  absl::StatusOr<std::unique_ptr<Communicator>> Shrink(
      absl::Span<const int> exclude_ranks, bool abort_in_flight) override;
#if DEVMESH_NCCL_HAS_GROW
  // GrowNcclCommunicator (nccl_communicator.h) on a member: ncclCommGrow
  // from this communicator (nccl_grow.cc). `global_ranks`: the grown
  // group's, already checked. Only where NCCL has ncclCommGrow: without it
  // GrowNcclCommunicator re-creates the group instead.
  absl::StatusOr<std::unique_ptr<Communicator>> GrowAsMember(
      Store& store, int new_size, std::vector<int> global_ranks,
      const CommOptions& options);
#endif

 private:
  NcclCommunicator() = default;
  // Sets the device and the call's stream (NcclStreamScope's, else
  // stream_); FailedPrecondition after Abort or Revoke.
  absl::Status CheckOpen(absl::string_view op);
  // After enqueueing: waits for NCCL (non-blocking mode) and, when
  // synchronize or `wait_stream`, for the stream; both bounded by the
  // timeout (past it: ncclCommAbort, DeadlineExceeded). In StartAsync's
  // call, only for NCCL: the Work waits for the stream.
  absl::Status Finish(ncclResult_t result, absl::string_view what,
                      bool wait_stream = false);
  // Aborts the communicator once (ncclCommAbort), under shared_->mu, so
  // that no Work's poll uses the handle during or after it; returns
  // ncclCommAbort's result (ncclSuccess when it was aborted already).
  ncclResult_t AbortComm();

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> global_ranks_;
  CommOptions options_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  void* scratch_ = nullptr;  // 2 * size int32 on the device (Split, Barrier).
  std::shared_ptr<NcclShared> shared_ = std::make_shared<NcclShared>();
  // The stream of the call in progress (CheckOpen sets it).
  cudaStream_t call_stream_ = nullptr;
  // StartAsync's call is running: enqueue only.
  bool enqueue_only_ = false;
  // What the last enqueued call was, for messages.
  std::string last_call_;
};

}  // namespace nccl_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_IMPL_H_
