// devmesh/comm/nccl/nccl_communicator.cc
// Collectives of the NCCL backend. Creation and Split: nccl_connect.cc.
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/dtype.h"
#include "comm/nccl/nccl_communicator_impl.h"
#include "comm/nccl/nccl_status.h"
#include "comm/nccl/nccl_stream.h"
#include "status/status_macros.h"

namespace devmesh {
namespace nccl_internal {
namespace {

ncclDataType_t ToNccl(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt8: return ncclInt8;
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
  }
  return ncclFloat32;  // Not reached: the front rejects other values.
}

ncclRedOp_t ToNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
  }
  return ncclSum;
}

}  // namespace

absl::Status NcclCommunicator::CheckOpen(absl::string_view op) {
  // Every call, on whatever thread runs it: this communicator's device, and
  // the stream of the caller's NcclStreamScope if any.
  cudaSetDevice(device_);
  CUstream_st* scoped = NcclStreamScope::Current();
  call_stream_ = scoped != nullptr ? scoped : stream_;
  if (shared_->aborted.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("nccl ", op, ": communicator was aborted"));
  }
  if (shared_->revoked.load()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nccl ", op, ": communicator was revoked (ncclCommRevoke)"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Finish(ncclResult_t result,
                                      absl::string_view what,
                                      bool wait_stream) {
  last_call_ = std::string(what);
  if (result != ncclSuccess && result != ncclInProgress) {
    return NcclStatus(result, what, comm_);
  }
  // A Revoke from another thread (the failure watch's verdict) stops the
  // call: its kernels end early and the stream and NCCL then read as done,
  // so the call must not report success.
  auto revoked = [&] {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": stopped: the communicator was revoked (ncclCommRevoke); the "
              "output is undefined"));
  };
  const absl::Time deadline = absl::Now() + options_.timeout;
  if (auto s =
          WaitForComm(comm_, deadline, what, nullptr, [this] { AbortComm(); });
      !s.ok()) {
    return s;  // WaitForComm aborted the communicator (AbortComm).
  }
  if (shared_->revoked.load()) return revoked();
  if (enqueue_only_) return absl::OkStatus();  // StartAsync's Work waits.
  if (!options_.nccl.synchronize && !wait_stream) return absl::OkStatus();
  while (true) {
    cudaError_t e = cudaStreamQuery(call_stream_);
    if (e == cudaSuccess)
      return shared_->revoked.load() ? revoked() : absl::OkStatus();
    if (e != cudaErrorNotReady) return CudaStatus(e, what);
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      AbortComm();
      return NcclStatus(async, what, nullptr);
    }
    if (absl::Now() > deadline) {
      AbortComm();
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": not complete within the timeout; communicator aborted"));
    }
    absl::SleepFor(absl::Microseconds(50));
  }
}

absl::Status NcclCommunicator::DoAllReduce(const void* send, void* recv,
                                           size_t count, DataType dtype,
                                           ReduceOp op) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("allreduce"));
  return Finish(ncclAllReduce(send, recv, count, ToNccl(dtype), ToNccl(op),
                              comm_, call_stream_),
                "ncclAllReduce");
}

absl::Status NcclCommunicator::DoAllGather(const void* send, void* recv,
                                           size_t count, DataType dtype) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("allgather"));
  return Finish(
      ncclAllGather(send, recv, count, ToNccl(dtype), comm_, call_stream_),
      "ncclAllGather");
}

absl::Status NcclCommunicator::DoReduceScatter(const void* send, void* recv,
                                               size_t count, DataType dtype,
                                               ReduceOp op) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("reduce_scatter"));
  return Finish(ncclReduceScatter(send, recv, count, ToNccl(dtype), ToNccl(op),
                                  comm_, call_stream_),
                "ncclReduceScatter");
}

absl::Status NcclCommunicator::DoBroadcast(const void* send, void* recv,
                                           size_t count, DataType dtype,
                                           int root) {
  const void* in = rank_ == root ? send : recv;
  DEVMESH_RETURN_IF_ERROR(CheckOpen("broadcast"));
  return Finish(
      ncclBroadcast(in, recv, count, ToNccl(dtype), root, comm_, call_stream_),
      "ncclBroadcast");
}

absl::Status NcclCommunicator::DoAllToAll(const void* send, void* recv,
                                          size_t count, DataType dtype) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("alltoall"));
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  // In place (send == recv): every block is read and overwritten, so the
  // input is first copied to a stream-ordered temporary.
  void* staged = nullptr;
  if (send == recv && count > 0 && size_ > 1) {
    const size_t total = bytes * size_;
    DEVMESH_RETURN_IF_ERROR(
        CudaStatus(cudaMallocAsync(&staged, total, call_stream_),
                   "cudaMallocAsync (alltoall staging)"));
    if (auto s =
            CudaStatus(cudaMemcpyAsync(staged, send, total,
                                       cudaMemcpyDeviceToDevice, call_stream_),
                       "cudaMemcpyAsync (alltoall staging)");
        !s.ok()) {
      cudaFreeAsync(staged, call_stream_);
      return s;
    }
    in = static_cast<const char*>(staged);
  }
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
    r = ncclSend(in + p * bytes, count, ToNccl(dtype), p, comm_, call_stream_);
    if (r == ncclSuccess) {
      r = ncclRecv(out + p * bytes, count, ToNccl(dtype), p, comm_,
                   call_stream_);
    }
  }
  ncclResult_t end = ncclGroupEnd();
  if (staged != nullptr) {
    DEVMESH_RETURN_IF_ERROR(CudaStatus(cudaFreeAsync(staged, call_stream_),
                                       "cudaFreeAsync (alltoall staging)"));
  }
  return Finish(r != ncclSuccess ? r : end, "ncclSend/ncclRecv (alltoall)");
}

absl::Status NcclCommunicator::DoReduce(const void* send, void* recv,
                                        size_t count, DataType dtype,
                                        ReduceOp op, int root) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("reduce"));
  return Finish(ncclReduce(send, recv, count, ToNccl(dtype), ToNccl(op), root,
                           comm_, call_stream_),
                "ncclReduce");
}

absl::Status NcclCommunicator::DoGather(const void* send, void* recv,
                                        size_t count, DataType dtype,
                                        int root) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("gather"));
  const size_t bytes = count * DataTypeSize(dtype);
  char* out = static_cast<char*>(recv);
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess && rank_ == root) {
    for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
      // In place: the root's own block is already where it belongs.
      if (p == root && send == out + p * bytes) continue;
      r = ncclRecv(out + p * bytes, count, ToNccl(dtype), p, comm_,
                   call_stream_);
    }
  }
  if (r == ncclSuccess && !(rank_ == root && send == out + root * bytes)) {
    r = ncclSend(send, count, ToNccl(dtype), root, comm_, call_stream_);
  }
  ncclResult_t end = ncclGroupEnd();
  return Finish(r != ncclSuccess ? r : end, "ncclSend/ncclRecv (gather)");
}

absl::Status NcclCommunicator::DoScatter(const void* send, void* recv,
                                         size_t count, DataType dtype,
                                         int root) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("scatter"));
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  const bool in_place = rank_ == root && recv == in + root * bytes;
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess && rank_ == root) {
    for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
      if (p == root && in_place) continue;
      r = ncclSend(in + p * bytes, count, ToNccl(dtype), p, comm_,
                   call_stream_);
    }
  }
  if (r == ncclSuccess && !in_place) {
    r = ncclRecv(recv, count, ToNccl(dtype), root, comm_, call_stream_);
  }
  ncclResult_t end = ncclGroupEnd();
  return Finish(r != ncclSuccess ? r : end, "ncclSend/ncclRecv (scatter)");
}

absl::Status NcclCommunicator::DoAllToAllV(
    const void* send, absl::Span<const size_t> send_counts,
    absl::Span<const size_t> send_offsets, void* recv,
    absl::Span<const size_t> recv_counts,
    absl::Span<const size_t> recv_offsets, DataType dtype) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("alltoallv"));
  const size_t width = DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  ncclResult_t r = ncclGroupStart();
  for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
    if (send_counts[p] > 0) {
      r = ncclSend(in + send_offsets[p] * width, send_counts[p], ToNccl(dtype),
                   p, comm_, call_stream_);
    }
    if (r == ncclSuccess && recv_counts[p] > 0) {
      r = ncclRecv(out + recv_offsets[p] * width, recv_counts[p], ToNccl(dtype),
                   p, comm_, call_stream_);
    }
  }
  ncclResult_t end = ncclGroupEnd();
  return Finish(r != ncclSuccess ? r : end, "ncclSend/ncclRecv (alltoallv)");
}

absl::Status NcclCommunicator::DoBatchSendRecv(absl::Span<const P2POp> ops) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("batch_send_recv"));
  ncclResult_t r = ncclGroupStart();
  for (size_t i = 0; i < ops.size() && r == ncclSuccess; ++i) {
    const P2POp& op = ops[i];
    r = op.kind == P2POp::Kind::kSend
            ? ncclSend(op.buf, op.count, ToNccl(op.dtype), op.peer, comm_,
                       call_stream_)
            : ncclRecv(op.buf, op.count, ToNccl(op.dtype), op.peer, comm_,
                       call_stream_);
  }
  ncclResult_t end = ncclGroupEnd();
  return Finish(r != ncclSuccess ? r : end, "ncclSend/ncclRecv (batch)");
}

absl::Status NcclCommunicator::DoSend(const void* buf, size_t count,
                                      DataType dtype, int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("send"));
  return Finish(ncclSend(buf, count, ToNccl(dtype), peer, comm_, call_stream_),
                "ncclSend");
}

absl::Status NcclCommunicator::DoRecv(void* buf, size_t count, DataType dtype,
                                      int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("recv"));
  return Finish(ncclRecv(buf, count, ToNccl(dtype), peer, comm_, call_stream_),
                "ncclRecv");
}

absl::Status NcclCommunicator::DoBarrier() {
  // NCCL has no barrier: an all-reduce of one int on the scratch buffer, then
  // a stream wait (whatever NcclOptions::synchronize says), bounded.
  DEVMESH_RETURN_IF_ERROR(CheckOpen("barrier"));
  // Wait for the stream whatever synchronize says, but bounded: a plain
  // cudaStreamSynchronize would wait forever for a vanished peer.
  return Finish(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_,
                              call_stream_),
                "ncclAllReduce (barrier)", /*wait_stream=*/true);
}

Work NcclCommunicator::StartAsync(std::function<absl::Status()> call) {
  // The call (the blocking form, through any wrappers) runs here, on the
  // caller's thread and stream, and returns once NCCL has enqueued it.
  struct EnqueueOnly {
    bool& flag;
    explicit EnqueueOnly(bool& f) : flag(f) { flag = true; }
    ~EnqueueOnly() { flag = false; }  // also when `call` throws
  };
  call_stream_ = nullptr;
  absl::Status enqueued;
  {
    EnqueueOnly scope(enqueue_only_);
    enqueued = call();
  }
  if (!enqueued.ok()) return Work(std::move(enqueued));
  cudaStream_t stream = call_stream_ != nullptr ? call_stream_ : stream_;
  cudaEvent_t raw = nullptr;
  if (auto s =
          CudaStatus(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming),
                     "cudaEventCreateWithFlags (asynchronous call)");
      !s.ok()) {
    return Work(std::move(s));
  }
  std::shared_ptr<CUevent_st> event(raw,
                                    [](cudaEvent_t e) { cudaEventDestroy(e); });
  if (auto s = CudaStatus(cudaEventRecord(event.get(), stream),
                          "cudaEventRecord (asynchronous call)");
      !s.ok()) {
    return Work(std::move(s));
  }
  const absl::Time deadline = absl::Now() + options_.timeout;
  return Work::FromPoll([shared = shared_, event = std::move(event), deadline,
                         what = last_call_]() -> std::optional<absl::Status> {
    // No cudaSetDevice: neither call below needs the device, and the
    // waiting thread's current device stays its own.
    auto stopped = [&] {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": stopped: the communicator was ",
          shared->revoked.load() ? "revoked (ncclCommRevoke)" : "aborted",
          "; the output is undefined"));
    };
    const cudaError_t e = cudaEventQuery(event.get());
    if (e == cudaSuccess) {
      if (shared->revoked.load() || shared->aborted.load()) {
        return stopped();
      }
      return absl::OkStatus();
    }
    if (e != cudaErrorNotReady) return CudaStatus(e, what);
    sync_internal::MutexLock lock(&shared->mu);
    // Aborted (by Abort, another Work, a Shrink) or revoked: the
    // handle is not used again, and the enqueued work's output is
    // undefined.
    if (shared->aborted.load() || shared->revoked.load()) return stopped();
    const bool past = absl::Now() > deadline;
    if (shared->comm == nullptr) {
      // Being destroyed: its teardown ends the work; bounded all the
      // same.
      if (past) {
        return absl::DeadlineExceededError(
            absl::StrCat(what,
                         ": not complete within the timeout (the communicator "
                         "was destroyed)"));
      }
      return std::nullopt;
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(shared->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      shared->aborted.store(true);
      ncclCommAbort(shared->comm);
      shared->comm = nullptr;
      return NcclStatus(async, what, nullptr);
    }
    if (past) {
      shared->aborted.store(true);
      ncclCommAbort(shared->comm);
      shared->comm = nullptr;
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": not complete within the timeout; communicator aborted"));
    }
    return std::nullopt;
  });
}

}  // namespace nccl_internal
}  // namespace devmesh
