// devmesh/comm/shm/shm_communicator.cc
#include "comm/shm/shm_communicator.h"

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "comm/group_args.h"
#include "comm/reduce_functions.h"
#include "comm/registry.h"
#include "comm/shm/shm_algorithms.h"
#include "comm/shm/shm_setup.h"
#include "comm/store_exchange.h"
#include "config/settings.h"
#include "status/status_macros.h"
#include "store/prefix_store.h"

namespace devmesh {
namespace {

using shm_internal::ShmGroup;

bool OverlapRanges(const void* a, size_t a_bytes, const void* b,
                   size_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

std::string Describe(absl::string_view op, DataType dtype, size_t count) {
  return absl::StrCat("shm ", op, " ", DataTypeName(dtype), " x ", count);
}

// CreateShmGroup once the arguments are checked (options.global_ranks
// given): the set-up bounded by `deadline`, the collectives by
// options.timeout.
absl::StatusOr<std::unique_ptr<Communicator>> MakeShmGroup(
    std::shared_ptr<Store> store, int rank, const CommOptions& options,
    const ShmOptions& shm, absl::Time deadline) {
  ShmOptions given = shm;
  given.timeout = options.timeout;
  const std::string prefix = "shm/";
  auto channel = shm_internal::StoreChannel(*store, prefix, rank,
                                            options.global_ranks, deadline,
                                            nullptr, options.creation_cancel);
  DEVMESH_ASSIGN_OR_RETURN(std::optional<shm_internal::ShmSetup> setup,
                           shm_internal::SetUpSharedMemory(*channel, given));
  if (!setup.has_value()) return std::unique_ptr<Communicator>();
  return std::unique_ptr<Communicator>(new ShmCommunicator(
      std::move(store), prefix, rank, options, *std::move(setup)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> ShareMemory(
    std::shared_ptr<Communicator> group, const ShmOptions& options) {
  if (group == nullptr) {
    return absl::InvalidArgumentError(
        "shm: ShareMemory needs a group, got null");
  }
  DEVMESH_ASSIGN_OR_RETURN(std::optional<shm_internal::ShmSetup> setup,
                           shm_internal::SetUpSharedMemory(
                               *shm_internal::GroupChannel(*group), options));
  if (!setup.has_value()) return group;
  return std::shared_ptr<Communicator>(
      std::make_shared<ShmCommunicator>(std::move(group), *std::move(setup)));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmGroup(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options, const ShmOptions& shm) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("shm: store is null");
  }
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> resolved,
                           ResolveGroupRanks("shm", rank, size, options));
  absl::flat_hash_set<int> seen;
  for (int g : resolved) {
    if (g < 0 || !seen.insert(g).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shm: global rank ", g, " in global_ranks is negative or repeated"));
    }
  }
  CommOptions group_options = options;
  group_options.global_ranks = std::move(resolved);
  return MakeShmGroup(std::move(store), rank, group_options, shm,
                      absl::Now() + options.timeout);
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options) {
  ShmOptions shm;
  shm.require = true;
  return CreateShmGroup(std::move(store), rank, size, options, shm);
}

ShmCommunicator::ShmCommunicator(std::shared_ptr<Communicator> group,
                                 shm_internal::ShmSetup setup)
    : rank_(group->rank()),
      global_ranks_(group->global_ranks()),
      group_(std::move(group)),
      options_(setup.options),
      segment_(std::move(setup.segment)),
      single_copy_(setup.single_copy) {
  if (segment_ != nullptr) {
    sync_ = std::make_unique<shm_internal::ShmSync>(
        segment_.get(), rank_, global_ranks_, std::move(setup.identities),
        options_.timeout);
  }
}

ShmCommunicator::ShmCommunicator(std::shared_ptr<Store> store,
                                 std::string prefix, int rank,
                                 const CommOptions& options,
                                 shm_internal::ShmSetup setup)
    : rank_(rank),
      global_ranks_(options.global_ranks),
      store_(std::move(store)),
      prefix_(std::move(prefix)),
      comm_options_(options),
      links_(std::make_unique<shm_internal::ShmLinks>(
          store_, prefix_, rank, options.global_ranks, options,
          [this]() -> absl::Status {
            return sync_ == nullptr
                       ? absl::OkStatus()
                       : sync_->CheckOpen([] {
                           return std::string("shm send/recv");
                         });
          })),
      options_(setup.options),
      segment_(std::move(setup.segment)),
      single_copy_(setup.single_copy) {
  if (segment_ != nullptr) {
    sync_ = std::make_unique<shm_internal::ShmSync>(
        segment_.get(), rank_, global_ranks_, std::move(setup.identities),
        options_.timeout, options.label);
  }
}

int ShmCommunicator::peer_links() const {
  return links_ == nullptr ? 0 : links_->connected();
}

ShmCommunicator::~ShmCommunicator() {
  StopAsync();
  if (sync_ != nullptr) sync_->Leave();
}

absl::Status ShmCommunicator::CheckOpen(shm_internal::OpName what) const {
  if (aborted_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what(), ": communicator was aborted"));
  }
  return sync_ == nullptr ? absl::OkStatus() : sync_->CheckOpen(what);
}

absl::Status ShmCommunicator::BeginCall(shm_internal::OpName what) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen(what));
  if (sync_ != nullptr) sync_->BeginCall(current_call());
  return absl::OkStatus();
}

absl::Status ShmCommunicator::EmptyCall(shm_internal::OpName what) {
  if (sync_ == nullptr) return absl::OkStatus();
  sync_->NextRoundParity();
  return sync_->Step(what);
}

absl::Status ShmCommunicator::DoAllReduce(const void* send, void* recv,
                                          size_t count, DataType dtype,
                                          ReduceOp op) {
  auto what = [&] {
    return absl::StrCat(Describe("allreduce", dtype, count), " ",
                        ReduceOpName(op));
  };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  if (count == 0) return EmptyCall(what);
  const size_t elem = DataTypeSize(dtype);
  const size_t bytes = count * elem;
  if (send != recv &&
      (sync_ == nullptr || OverlapRanges(send, bytes, recv, bytes))) {
    std::memmove(recv, send, bytes);
    send = recv;
  }
  if (sync_ == nullptr) return absl::OkStatus();
  auto fn = reduce_internal::GetReduceFunction(dtype, op);
  absl::Status s = shm_internal::ShmAllReduce(
      ShmGroup{segment_.get(), sync_.get(), single_copy_,
               bounds_.oneshot_max_bytes, bounds_.single_copy_min_bytes},
      static_cast<const char*>(send), static_cast<char*>(recv), count, elem, fn,
      what);
  if (!s.ok()) return s;
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(recv, count, dtype, size());
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::DoAllGather(const void* send, void* recv,
                                          size_t count, DataType dtype) {
  auto what = [&] { return Describe("allgather", dtype, count); };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  if (count == 0) return EmptyCall(what);
  const size_t bytes = count * DataTypeSize(dtype);
  char* out = static_cast<char*>(recv);
  const char* in = static_cast<const char*>(send);
  // Anything but exact in-place overlap is staged, so the rounds never
  // overwrite input they have not read yet.
  std::vector<char> staged;
  if (in != out + rank() * bytes &&
      OverlapRanges(in, bytes, out, bytes * size())) {
    staged.assign(in, in + bytes);
    in = staged.data();
  }
  if (sync_ == nullptr) {
    if (in != out) std::memmove(out, in, bytes);
    return absl::OkStatus();
  }
  return shm_internal::ShmAllGather(ShmGroup{segment_.get(), sync_.get()}, in,
                                    out, bytes, what);
}

absl::Status ShmCommunicator::DoReduceScatter(const void* send, void* recv,
                                              size_t count, DataType dtype,
                                              ReduceOp op) {
  auto what = [&] {
    return absl::StrCat(Describe("reducescatter", dtype, count), " ",
                        ReduceOpName(op));
  };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  if (count == 0) return EmptyCall(what);
  const size_t elem = DataTypeSize(dtype);
  const size_t bytes = count * elem;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<char> staged;
  if (out != in + rank() * bytes &&
      OverlapRanges(in, bytes * size(), out, bytes)) {
    staged.assign(in, in + bytes * size());
    in = staged.data();
  }
  if (sync_ == nullptr) {
    if (in != out) std::memmove(out, in, bytes);
    return absl::OkStatus();
  }
  auto fn = reduce_internal::GetReduceFunction(dtype, op);
  absl::Status s = shm_internal::ShmReduceScatter(
      ShmGroup{segment_.get(), sync_.get()}, in, out, count, elem, fn, what);
  if (!s.ok()) return s;
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(recv, count, dtype, size());
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::DoBroadcast(const void* send, void* recv,
                                          size_t count, DataType dtype,
                                          int root) {
  if (rank() == root) {
  }
  auto what = [&] {
    return absl::StrCat(Describe("broadcast", dtype, count), " root ", root);
  };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  if (count == 0) return EmptyCall(what);
  const size_t bytes = count * DataTypeSize(dtype);
  if (sync_ == nullptr) {
    if (send != recv) std::memmove(recv, send, bytes);
    return absl::OkStatus();
  }
  return shm_internal::ShmBroadcast(ShmGroup{segment_.get(), sync_.get()},
                                    static_cast<const char*>(send),
                                    static_cast<char*>(recv), bytes, root,
                                    what);
}

absl::Status ShmCommunicator::DoAllToAll(const void* send, void* recv,
                                         size_t count, DataType dtype) {
  auto what = [&] { return Describe("alltoall", dtype, count); };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  if (count == 0) return EmptyCall(what);
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::vector<char> staged;
  if (in != out && OverlapRanges(in, bytes * size(), out, bytes * size())) {
    staged.assign(in, in + bytes * size());
    in = staged.data();
  }
  if (sync_ == nullptr) {
    if (in != out) std::memmove(out, in, bytes);
    return absl::OkStatus();
  }
  return shm_internal::ShmAllToAll(ShmGroup{segment_.get(), sync_.get()}, in,
                                   out, bytes, what);
}

absl::Status ShmCommunicator::DoAllToAllV(
    const void* send, absl::Span<const size_t> send_counts,
    absl::Span<const size_t> send_offsets, void* recv,
    absl::Span<const size_t> recv_counts,
    absl::Span<const size_t> recv_offsets, DataType dtype) {
  auto what = [&] {
    return absl::StrCat("shm alltoallv ", DataTypeName(dtype));
  };
  DEVMESH_RETURN_IF_ERROR(CheckOpen(what));
  DEVMESH_ASSIGN_OR_RETURN(const size_t block,
                           AgreeOnAllToAllV(send_counts, recv_counts, dtype));
  if (block == 0) return absl::OkStatus();
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  const int n = size();
  const size_t width = DataTypeSize(dtype);
  std::vector<size_t> bytes(4 * static_cast<size_t>(n));
  size_t* send_bytes = bytes.data();
  size_t* send_offs = send_bytes + n;
  size_t* recv_bytes = send_offs + n;
  size_t* recv_offs = recv_bytes + n;
  for (int j = 0; j < n; ++j) {
    send_bytes[j] = send_counts[j] * width;
    send_offs[j] = send_offsets[j] * width;
    recv_bytes[j] = recv_counts[j] * width;
    recv_offs[j] = recv_offsets[j] * width;
  }
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (sync_ == nullptr) {
    if (send_bytes[0] > 0) {
      std::memmove(out + recv_offs[0], in + send_offs[0], send_bytes[0]);
    }
    return absl::OkStatus();
  }
  return shm_internal::ShmAllToAllV(ShmGroup{segment_.get(), sync_.get()}, in,
                                    send_bytes, send_offs, out, recv_bytes,
                                    recv_offs, block * width, what);
}

absl::Status ShmCommunicator::DoSend(const void* buf, size_t count,
                                     DataType dtype, int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen([] { return std::string("shm send"); }));
  if (group_ != nullptr) return group_->Send(buf, count, dtype, peer);
  return links_->Send(buf, count, dtype, peer);
}

absl::Status ShmCommunicator::DoRecv(void* buf, size_t count, DataType dtype,
                                     int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen([] { return std::string("shm recv"); }));
  if (group_ != nullptr) return group_->Recv(buf, count, dtype, peer);
  return links_->Recv(buf, count, dtype, peer);
}

absl::Status ShmCommunicator::DoBarrier() {
  auto what = [] { return std::string("shm barrier"); };
  DEVMESH_RETURN_IF_ERROR(BeginCall(what));
  return EmptyCall(what);
}

absl::StatusOr<std::unique_ptr<Communicator>> ShmCommunicator::DoSplit(
    int color, int key, const SplitOptions& options) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen([] { return std::string("shm split"); }));
  if (group_ == nullptr) return SplitOverStore(color, key, options);
  auto child = group_->Split(color, key, options);
  if (!child.ok() || *child == nullptr) return child;
  ShmOptions shm = options_;
  if (options.timeout.has_value()) shm.timeout = *options.timeout;
  DEVMESH_ASSIGN_OR_RETURN(std::optional<shm_internal::ShmSetup> setup,
                           shm_internal::SetUpSharedMemory(
                               *shm_internal::GroupChannel(**child), shm));
  if (!setup.has_value()) return child;  // members do not share memory
  std::shared_ptr<Communicator> group = std::move(*child);
  return std::unique_ptr<Communicator>(
      new ShmCommunicator(std::move(group), *std::move(setup)));
}

absl::StatusOr<std::unique_ptr<Communicator>> ShmCommunicator::SplitOverStore(
    int color, int key, const SplitOptions& split_options) {
  DEVMESH_ASSIGN_OR_RETURN(
      comm_internal::StoreSplit split,
      comm_internal::BeginStoreSplit("shm", *store_, prefix_, split_count_++,
                                     rank_, global_ranks_, comm_options_,
                                     split_options.timeout, color, key));
  if (split.child_rank < 0) return std::unique_ptr<Communicator>();
  const int child_rank = split.child_rank;
  const int child_size =
      static_cast<int>(split.child_options.global_ranks.size());
  const CommOptions& child_options = split.child_options;
  // The child's set-up within the Split's deadline (SplitOptions' contract).
  auto child_store =
      std::make_shared<PrefixStore>(store_, absl::StrCat(split.base, color));
  auto child = MakeShmGroup(child_store, child_rank, child_options, options_,
                            split.deadline);
  if (!child.ok() || *child != nullptr) return child;
  // The members share the parent's segment, so they can share one; a child
  // whose segment could not be made (options_.require false) is a group of
  // the cross-host backend (config/settings.h's CrossHostBackendName).
  return CreateCommunicator(CrossHostBackendName(ProcessSettings()),
                            std::move(child_store), child_rank, child_size,
                            child_options);
}

absl::Status ShmCommunicator::DoAbort() {
  aborted_.store(true);
  if (sync_ != nullptr) sync_->Abort();
  if (links_ != nullptr) links_->Abort();
  return group_ != nullptr ? group_->Abort() : absl::OkStatus();
}

}  // namespace devmesh
