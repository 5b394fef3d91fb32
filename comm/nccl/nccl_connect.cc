// devmesh/comm/nccl/nccl_connect.cc
// Creation, Split, Abort and teardown of NCCL communicators. Shrink and
// Revoke: nccl_shrink.cc.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/group_args.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_communicator_impl.h"
#include "comm/nccl/nccl_status.h"
#include "status/status_macros.h"

namespace devmesh {

bool NcclBuiltIn() { return true; }

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // Clear the sticky runtime error.
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device visible: cudaGetDeviceCount: ", cudaGetErrorName(error),
        ": ", cudaGetErrorString(error)));
  }
  if (count == 0) {
    return absl::UnavailableError("no CUDA device visible: device count is 0");
  }
  return count;
}

absl::Status UseLocalCudaDevice(int local_rank) {
  if (local_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("local rank (", local_rank, ") must be non-negative"));
  }
  DEVMESH_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  return nccl_internal::CudaStatus(cudaSetDevice(local_rank % count),
                                   "cudaSetDevice");
}

namespace nccl_internal {

ncclConfig_t MakeConfig(const NcclOptions& options) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.splitShare = options.split_share;
  if (options.cga_cluster_size >= 0) config.cgaClusterSize = options.cga_cluster_size;
  if (options.min_ctas >= 0) config.minCTAs = options.min_ctas;
  if (options.max_ctas >= 0) config.maxCTAs = options.max_ctas;
  if (!options.net_name.empty()) config.netName = options.net_name.c_str();
  return config;
}

absl::Status WaitForComm(ncclComm_t comm, absl::Time deadline,
                         absl::string_view what,
                         const std::function<absl::Status()>& cancel,
                         const std::function<void()>& abort_fn) {
  auto abort = [&] {
    if (abort_fn) {
      abort_fn();
    } else {
      ncclCommAbort(comm);
    }
  };
  constexpr int kPollsPerCancelCheck = 250;  // 250 x 200 us = 50 ms
  for (int polls = 1;; ++polls) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) {
      // Aborted on every failure, so that a caller that marks it aborted
      // never leaks it.
      absl::Status status = NcclStatus(r, what, comm);
      abort();
      return status;
    }
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      absl::Status status = NcclStatus(state, what, comm);
      abort();
      return status;
    }
    if (absl::Now() > deadline) {
      abort();
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": not done within the timeout; communicator "
                             "aborted (ncclCommAbort)"));
    }
    if (cancel && polls % kPollsPerCancelCheck == 0) {
      if (absl::Status s = cancel(); !s.ok()) {
        abort();
        return Reworded(s, absl::StrCat(what,
                                        ": stopped; communicator aborted "
                                        "(ncclCommAbort): ",
                                        s.message()));
      }
    }
    absl::SleepFor(absl::Microseconds(200));
  }
}

}  // namespace nccl_internal

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options) {
  using nccl_internal::CudaStatus;
  using nccl_internal::NcclStatus;
  if (store == nullptr) return absl::InvalidArgumentError("nccl: store is null");
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> global_ranks,
                           ResolveGroupRanks("nccl", rank, size, options));
  DEVMESH_ASSIGN_OR_RETURN(const int device,
                           nccl_internal::SetDeviceFor(options));
  const absl::Time deadline = absl::Now() + options.timeout;
  ncclUniqueId id;
  const std::string key = "nccl/unique_id";
  if (rank == 0) {
    DEVMESH_RETURN_IF_ERROR(
        NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    absl::Status s = store->Set(
        key, absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id)));
    if (!s.ok()) return s;
  } else {
    DEVMESH_ASSIGN_OR_RETURN(std::string value,
                             store->Get(key, options.timeout));
    if (value.size() != sizeof(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl: store key ", key, " holds ", value.size(),
                       " bytes, expected ", sizeof(id)));
    }
    std::memcpy(&id, value.data(), sizeof(id));
  }
  ncclConfig_t config = nccl_internal::MakeConfig(options.nccl);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclStatus(r, "ncclCommInitRankConfig");
  }
  DEVMESH_RETURN_IF_ERROR(nccl_internal::WaitForComm(
      comm, deadline, "ncclCommInitRankConfig", options.creation_cancel));
  DEVMESH_ASSIGN_OR_RETURN(auto wrapped,
                           nccl_internal::NcclCommunicator::Wrap(
                               comm, device, std::move(global_ranks), options));
  return std::unique_ptr<Communicator>(std::move(wrapped));
}

namespace nccl_internal {

absl::StatusOr<int> SetDeviceFor(const CommOptions& options) {
  DEVMESH_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  int device = options.nccl.cuda_device;
  if (device < 0) {
    const char* local = std::getenv("LOCAL_RANK");
    int local_rank = 0;
    if (local != nullptr && absl::SimpleAtoi(local, &local_rank)) {
      device = local_rank % count;
    } else
      DEVMESH_RETURN_IF_ERROR(
          CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  }
  if (device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl: cuda_device ", device, " but only ", count, " visible"));
  }
  DEVMESH_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  return device;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Wrap(
    ncclComm_t comm, int device, std::vector<int> global_ranks,
    const CommOptions& options) {
  std::unique_ptr<NcclCommunicator> self(new NcclCommunicator());
  self->comm_ = comm;  // Owned from here: the destructor releases it.
  {
    sync_internal::MutexLock lock(&self->shared_->mu);
    self->shared_->comm = comm;
  }
  self->device_ = device;
  self->global_ranks_ = std::move(global_ranks);
  self->options_ = options;
  self->options_.global_ranks.clear();
  DEVMESH_RETURN_IF_ERROR(NcclStatus(ncclCommUserRank(comm, &self->rank_),
                                     "ncclCommUserRank", comm));
  DEVMESH_RETURN_IF_ERROR(
      NcclStatus(ncclCommCount(comm, &self->size_), "ncclCommCount", comm));
  if (options.nccl.stream != nullptr) {
    self->stream_ = static_cast<cudaStream_t>(options.nccl.stream);
  } else {
    DEVMESH_RETURN_IF_ERROR(CudaStatus(
        cudaStreamCreateWithFlags(&self->stream_, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags"));
    self->owns_stream_ = true;
  }
  DEVMESH_RETURN_IF_ERROR(
      CudaStatus(cudaMalloc(&self->scratch_, 2 * sizeof(int32_t) * self->size_),
                 "cudaMalloc(scratch)"));
  return self;
}

NcclCommunicator::~NcclCommunicator() {
  StopAsync();
  {
    // The Works of I* calls that outlive this communicator stop using the
    // handle (they still watch their events).
    sync_internal::MutexLock lock(&shared_->mu);
    shared_->comm = nullptr;
  }
  cudaSetDevice(device_);
  if (comm_ != nullptr && !shared_->aborted.load() && shared_->revoked.load()) {
    // ncclCommFinalize after ncclCommRevoke is invalid (nccl.h).
    ncclCommAbort(comm_);
  } else if (comm_ != nullptr && !shared_->aborted.load()) {
    // Flush, then free. Errors can only be dropped here (destructor);
    // WaitForComm aborts the communicator itself when it fails.
    ncclResult_t r = ncclCommFinalize(comm_);
    if (r == ncclSuccess || r == ncclInProgress) {
      if (WaitForComm(comm_, absl::Now() + options_.timeout, "ncclCommFinalize")
              .ok()) {
        ncclCommDestroy(comm_);
      }
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
}

ncclResult_t NcclCommunicator::AbortComm() {
  sync_internal::MutexLock lock(&shared_->mu);
  shared_->comm = nullptr;
  if (shared_->aborted.exchange(true)) return ncclSuccess;
  return ncclCommAbort(comm_);
}

absl::Status NcclCommunicator::DoAbort() {
  return NcclStatus(AbortComm(), "ncclCommAbort");
}

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::DoSplit(
    int color, int key, const SplitOptions& split_options) {
  // The child's options: the parent's, with the timeout and NCCL config the
  // caller set (the device and stream stay the parent's).
  DEVMESH_ASSIGN_OR_RETURN(
      CommOptions child_options,
      SplitChildOptions("nccl", options_, split_options.timeout));
  if (split_options.nccl.has_value()) {
    const NcclOptions parent = options_.nccl;
    child_options.nccl = *split_options.nccl;
    child_options.nccl.cuda_device = parent.cuda_device;
    child_options.nccl.stream = parent.stream;
  }
  // One deadline (the child's timeout) from here: the (color, key)
  // exchange, then the child's init.
  const absl::Time deadline = absl::Now() + child_options.timeout;
  // The child's global ranks: all-gather (color, key) through NCCL.
  std::vector<int32_t> all(2 * static_cast<size_t>(size_));
  int32_t mine[2] = {color, key};
  int32_t* dev = static_cast<int32_t*>(scratch_);
  DEVMESH_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpy(dev + 2 * rank_, mine, sizeof(mine), cudaMemcpyHostToDevice),
      "cudaMemcpy"));
  DEVMESH_RETURN_IF_ERROR(AllGather(dev + 2 * rank_, dev, 2, DataType::kInt32));
  DEVMESH_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpy(all.data(), dev, all.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost),
                 "cudaMemcpy"));
  ncclConfig_t config = MakeConfig(child_options.nccl);
  ncclComm_t child = nullptr;
  ncclResult_t r = ncclCommSplit(comm_, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color,
                                 key, &child, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    return NcclStatus(r, "ncclCommSplit", comm_);
  }
  if (auto s =
          WaitForComm(comm_, deadline, "ncclCommSplit (parent)",
                      child_options.creation_cancel, [this] { AbortComm(); });
      !s.ok()) {
    // WaitForComm aborted the parent (AbortComm): never finalized.
    if (child != nullptr) ncclCommAbort(child);
    return s;
  }
  if (color == kNoColor || child == nullptr) return std::unique_ptr<Communicator>();
  DEVMESH_RETURN_IF_ERROR(WaitForComm(child, deadline, "ncclCommSplit",
                                      child_options.creation_cancel));
  std::vector<std::pair<int32_t, int>> members;
  for (int p = 0; p < size_; ++p) {
    if (all[2 * p] == color) members.emplace_back(all[2 * p + 1], p);
  }
  std::sort(members.begin(), members.end());
  std::vector<int> globals;
  for (const auto& m : members) globals.push_back(global_ranks_[m.second]);
  DEVMESH_ASSIGN_OR_RETURN(
      auto wrapped, Wrap(child, device_, std::move(globals), child_options));
  return std::unique_ptr<Communicator>(std::move(wrapped));
}

}  // namespace nccl_internal
}  // namespace devmesh
