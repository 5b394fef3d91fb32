// devmesh/comm/communicator.cc
// The front of comm/communicator.h: the call's record and number, argument
// checks, and the hand-off to the backend's Do* functions.
#include "comm/communicator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/async_queue.h"
#include "comm/group_args.h"
#include "status/status_macros.h"

namespace devmesh {

absl::string_view CallKindName(CallKind kind) {
  switch (kind) {
    case CallKind::kAllReduce:
      return "allreduce";
    case CallKind::kAllGather:
      return "allgather";
    case CallKind::kReduceScatter:
      return "reduce_scatter";
    case CallKind::kBroadcast:
      return "broadcast";
    case CallKind::kAllToAll:
      return "alltoall";
    case CallKind::kSend:
      return "send";
    case CallKind::kRecv:
      return "recv";
    case CallKind::kBarrier:
      return "barrier";
    case CallKind::kReduce:
      return "reduce";
    case CallKind::kGather:
      return "gather";
    case CallKind::kScatter:
      return "scatter";
    case CallKind::kAllToAllV:
      return "alltoallv";
    case CallKind::kBatchSendRecv:
      return "batch_send_recv";
  }
  return "unknown";
}

absl::Status Communicator::CheckBuffer(CallKind kind, absl::string_view name,
                                       const void* ptr, size_t count,
                                       size_t blocks, DataType dtype) const {
  return CheckBufferArg(backend(), CallKindName(kind), name, ptr, count,
                        blocks, dtype);
}

absl::Status Communicator::CheckOp(CallKind kind, ReduceOp op) const {
  return CheckReduceOpArg(backend(), CallKindName(kind), op);
}

absl::Status Communicator::CheckRank(CallKind kind, int value,
                                     bool is_peer) const {
  const int n = size();
  if (value < 0 || value >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend(), " ", CallKindName(kind), ": ",
                     is_peer ? "peer " : "root ", value, " is outside [0, ",
                     n, ")"));
  }
  if (is_peer && value == rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend(), " ", CallKindName(kind), ": peer ", value, " is this rank"));
  }
  return absl::OkStatus();
}

void Communicator::Begin(CallKind kind, DataType dtype, ReduceOp op, int root,
                         size_t count) {
  const int64_t seq = calls_.load(std::memory_order_relaxed) + 1;
  calls_.store(seq, std::memory_order_relaxed);
  current_ =
      CallRecord{seq, kind, dtype, op, root, static_cast<uint64_t>(count)};
}

absl::Status Communicator::AllReduce(const void* send, void* recv,
                                     size_t count, DataType dtype,
                                     ReduceOp op) {
  WaitForAsync();
  Begin(CallKind::kAllReduce, dtype, op, -1, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kAllReduce;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, 1, dtype));
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, 1, dtype));
    DEVMESH_RETURN_IF_ERROR(CheckOp(k, op));
  }
  return DoAllReduce(send, recv, count, dtype, op);
}

absl::Status Communicator::AllGather(const void* send, void* recv,
                                     size_t count, DataType dtype) {
  WaitForAsync();
  Begin(CallKind::kAllGather, dtype, ReduceOp::kSum, -1, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kAllGather;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, 1, dtype));
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, size(), dtype));
  }
  return DoAllGather(send, recv, count, dtype);
}

absl::Status Communicator::ReduceScatter(const void* send, void* recv,
                                         size_t count, DataType dtype,
                                         ReduceOp op) {
  WaitForAsync();
  Begin(CallKind::kReduceScatter, dtype, op, -1, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kReduceScatter;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, size(), dtype));
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, 1, dtype));
    DEVMESH_RETURN_IF_ERROR(CheckOp(k, op));
  }
  return DoReduceScatter(send, recv, count, dtype, op);
}

absl::Status Communicator::Broadcast(const void* send, void* recv,
                                     size_t count, DataType dtype, int root) {
  WaitForAsync();
  Begin(CallKind::kBroadcast, dtype, ReduceOp::kSum, root, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kBroadcast;
    if (auto s = CheckRank(k, root, /*is_peer=*/false); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, 1, dtype));
    if (rank() == root) {
      DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, 1, dtype));
    }
  }
  return DoBroadcast(send, recv, count, dtype, root);
}

absl::Status Communicator::AllToAll(const void* send, void* recv,
                                    size_t count, DataType dtype) {
  WaitForAsync();
  Begin(CallKind::kAllToAll, dtype, ReduceOp::kSum, -1, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kAllToAll;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, size(), dtype));
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, size(), dtype));
  }
  return DoAllToAll(send, recv, count, dtype);
}

absl::Status Communicator::Reduce(const void* send, void* recv, size_t count,
                                  DataType dtype, ReduceOp op, int root) {
  WaitForAsync();
  Begin(CallKind::kReduce, dtype, op, root, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kReduce;
    if (auto s = CheckRank(k, root, /*is_peer=*/false); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, 1, dtype));
    if (rank() == root) {
      DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, 1, dtype));
    }
    DEVMESH_RETURN_IF_ERROR(CheckOp(k, op));
  }
  return DoReduce(send, recv, count, dtype, op, root);
}

absl::Status Communicator::Gather(const void* send, void* recv, size_t count,
                                  DataType dtype, int root) {
  WaitForAsync();
  Begin(CallKind::kGather, dtype, ReduceOp::kSum, root, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kGather;
    if (auto s = CheckRank(k, root, /*is_peer=*/false); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, count, 1, dtype));
    if (rank() == root) {
      DEVMESH_RETURN_IF_ERROR(
          CheckBuffer(k, "recv", recv, count, size(), dtype));
    }
  }
  return DoGather(send, recv, count, dtype, root);
}

absl::Status Communicator::Scatter(const void* send, void* recv, size_t count,
                                   DataType dtype, int root) {
  WaitForAsync();
  Begin(CallKind::kScatter, dtype, ReduceOp::kSum, root, count);
  if (checks_) {
    constexpr CallKind k = CallKind::kScatter;
    if (auto s = CheckRank(k, root, /*is_peer=*/false); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", recv, count, 1, dtype));
    if (rank() == root) {
      DEVMESH_RETURN_IF_ERROR(
          CheckBuffer(k, "send", send, count, size(), dtype));
    }
  }
  return DoScatter(send, recv, count, dtype, root);
}

absl::Status Communicator::CheckAllToAllV(
    const void* send, absl::Span<const size_t> send_counts,
    absl::Span<const size_t> send_offsets, const void* recv,
    absl::Span<const size_t> recv_counts,
    absl::Span<const size_t> recv_offsets, DataType dtype) const {
  constexpr CallKind k = CallKind::kAllToAllV;
  const size_t n = static_cast<size_t>(size());
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend(), " ", CallKindName(k), ": ", parts...));
  };
  const std::pair<absl::string_view, absl::Span<const size_t>> spans[] = {
      {"send_counts", send_counts},
      {"send_offsets", send_offsets},
      {"recv_counts", recv_counts},
      {"recv_offsets", recv_offsets}};
  for (const auto& [name, span] : spans) {
    if (span.size() != n) {
      return error(name, " has ", span.size(), " entries for a group of ", n);
    }
  }
  DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", send, 0, 1, dtype));
  const size_t width = DataTypeSize(dtype);
  // The end of each buffer's last element (bytes), for the null and overlap
  // checks.
  auto extent = [&](absl::string_view name, const void* ptr,
                    absl::Span<const size_t> counts,
                    absl::Span<const size_t> offsets) -> absl::StatusOr<size_t> {
    size_t end = 0;
    for (size_t j = 0; j < n; ++j) {
      if (counts[j] == 0) continue;
      const size_t limit = std::numeric_limits<size_t>::max() / width;
      if (offsets[j] > limit || counts[j] > limit - offsets[j]) {
        return error("block ", j, " of ", name, " (offset ", offsets[j],
                     ", count ", counts[j], ") overflows the byte count");
      }
      end = std::max(end, (offsets[j] + counts[j]) * width);
    }
    if (end > 0 && ptr == nullptr) {
      return error(name, " buffer is null with ", end / width,
                   " elements to ", name == "send" ? "send" : "receive");
    }
    return end;
  };
  DEVMESH_ASSIGN_OR_RETURN(const size_t send_end,
                           extent("send", send, send_counts, send_offsets));
  DEVMESH_ASSIGN_OR_RETURN(const size_t recv_end,
                           extent("recv", recv, recv_counts, recv_offsets));
  const uintptr_t a = reinterpret_cast<uintptr_t>(send);
  const uintptr_t b = reinterpret_cast<uintptr_t>(recv);
  if (send_end > 0 && recv_end > 0 && a < b + recv_end && b < a + send_end) {
    return error("send and recv overlap");
  }
  return absl::OkStatus();
}

absl::Status Communicator::AllToAllV(const void* send,
                                     absl::Span<const size_t> send_counts,
                                     absl::Span<const size_t> send_offsets,
                                     void* recv,
                                     absl::Span<const size_t> recv_counts,
                                     absl::Span<const size_t> recv_offsets,
                                     DataType dtype) {
  WaitForAsync();
  Begin(CallKind::kAllToAllV, dtype, ReduceOp::kSum, -1, 0);
  if (checks_) {
    DEVMESH_RETURN_IF_ERROR(CheckAllToAllV(send, send_counts, send_offsets,
                                           recv, recv_counts, recv_offsets,
                                           dtype));
  }
  return DoAllToAllV(send, send_counts, send_offsets, recv, recv_counts,
                     recv_offsets, dtype);
}

absl::Status Communicator::Send(const void* buf, size_t count, DataType dtype,
                                int peer) {
  WaitForAsync();
  if (checks_) {
    constexpr CallKind k = CallKind::kSend;
    if (auto s = CheckRank(k, peer, /*is_peer=*/true); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "send", buf, count, 1, dtype));
  }
  return DoSend(buf, count, dtype, peer);
}

absl::Status Communicator::Recv(void* buf, size_t count, DataType dtype,
                                int peer) {
  WaitForAsync();
  if (checks_) {
    constexpr CallKind k = CallKind::kRecv;
    if (auto s = CheckRank(k, peer, /*is_peer=*/true); !s.ok()) return s;
    DEVMESH_RETURN_IF_ERROR(CheckBuffer(k, "recv", buf, count, 1, dtype));
  }
  return DoRecv(buf, count, dtype, peer);
}

absl::Status Communicator::BatchSendRecv(absl::Span<const P2POp> ops) {
  WaitForAsync();
  if (checks_) {
    for (size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      const bool send = op.kind == P2POp::Kind::kSend;
      absl::Status s =
          op.kind != P2POp::Kind::kSend && op.kind != P2POp::Kind::kRecv
              ? absl::InvalidArgumentError(absl::StrCat(
                    backend(), " ", CallKindName(CallKind::kBatchSendRecv),
                    ": invalid P2POp::Kind value ",
                    static_cast<int>(op.kind)))
              : CheckRank(send ? CallKind::kSend : CallKind::kRecv, op.peer,
                          /*is_peer=*/true);
      if (s.ok()) {
        s = CheckBuffer(send ? CallKind::kSend : CallKind::kRecv,
                        send ? "send" : "recv", op.buf, op.count, 1,
                        op.dtype);
      }
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(s.message(), " (batch op #", i, ")"));
      }
    }
  }
  return DoBatchSendRecv(ops);
}

absl::Status Communicator::Barrier() {
  WaitForAsync();
  Begin(CallKind::kBarrier, DataType::kUInt8, ReduceOp::kSum, -1, 0);
  return DoBarrier();
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(
    int color, int key, const SplitOptions& options) {
  WaitForAsync();
  if (checks_) {
    if (color < kNoColor) {
      return absl::InvalidArgumentError(
          absl::StrCat(backend(), " split: color ", color,
                       " must be >= 0 or kNoColor (-1)"));
    }
    if (options.timeout.has_value() &&
        *options.timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          backend(), " split: timeout (",
          absl::FormatDuration(*options.timeout), ") must be positive"));
    }
  }
  return DoSplit(color, key, options);
}

absl::Status Communicator::Abort() { return DoAbort(); }

Communicator::Communicator() = default;
Communicator::Communicator(Forwarding) : checks_(false) {}

// Too late for DoAbort here (the backend is gone): the queue's own
// destructor cancels what is queued and waits for a running call.
Communicator::~Communicator() { async_.reset(); }

void Communicator::StopAsync() {
  if (async_ != nullptr) {
    async_->Stop(absl::CancelledError(
                     "the communicator was destroyed before this call ran"),
                 [this] { (void)DoAbort(); });
  }
}

void Communicator::WaitForAsync() {
  if (async_ != nullptr) async_->Drain();
}

Work Communicator::StartAsync(std::function<absl::Status()> call) {
  if (async_ == nullptr) {
    async_ = std::make_unique<comm_internal::AsyncQueue>();
  }
  return async_->Push(std::move(call));
}

Work Communicator::IAllReduce(const void* send, void* recv, size_t count,
                              DataType dtype, ReduceOp op) {
  return Async([=] { return AllReduce(send, recv, count, dtype, op); });
}

Work Communicator::IAllGather(const void* send, void* recv, size_t count,
                              DataType dtype) {
  return Async([=] { return AllGather(send, recv, count, dtype); });
}

Work Communicator::IReduceScatter(const void* send, void* recv, size_t count,
                                  DataType dtype, ReduceOp op) {
  return Async([=] { return ReduceScatter(send, recv, count, dtype, op); });
}

Work Communicator::IBroadcast(const void* send, void* recv, size_t count,
                              DataType dtype, int root) {
  return Async([=] { return Broadcast(send, recv, count, dtype, root); });
}

Work Communicator::IAllToAll(const void* send, void* recv, size_t count,
                             DataType dtype) {
  return Async([=] { return AllToAll(send, recv, count, dtype); });
}

Work Communicator::IReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op, int root) {
  return Async([=] { return Reduce(send, recv, count, dtype, op, root); });
}

Work Communicator::IGather(const void* send, void* recv, size_t count,
                           DataType dtype, int root) {
  return Async([=] { return Gather(send, recv, count, dtype, root); });
}

Work Communicator::IScatter(const void* send, void* recv, size_t count,
                            DataType dtype, int root) {
  return Async([=] { return Scatter(send, recv, count, dtype, root); });
}

Work Communicator::IAllToAllV(const void* send,
                              absl::Span<const size_t> send_counts,
                              absl::Span<const size_t> send_offsets,
                              void* recv, absl::Span<const size_t> recv_counts,
                              absl::Span<const size_t> recv_offsets,
                              DataType dtype) {
  using Sizes = std::vector<size_t>;
  return Async([=, sc = Sizes(send_counts.begin(), send_counts.end()),
                so = Sizes(send_offsets.begin(), send_offsets.end()),
                rc = Sizes(recv_counts.begin(), recv_counts.end()),
                ro = Sizes(recv_offsets.begin(), recv_offsets.end())] {
    return AllToAllV(send, sc, so, recv, rc, ro, dtype);
  });
}

Work Communicator::ISend(const void* buf, size_t count, DataType dtype,
                         int peer) {
  return Async([=] { return Send(buf, count, dtype, peer); });
}

Work Communicator::IRecv(void* buf, size_t count, DataType dtype, int peer) {
  return Async([=] { return Recv(buf, count, dtype, peer); });
}

Work Communicator::IBatchSendRecv(absl::Span<const P2POp> ops) {
  return Async([this, copy = std::vector<P2POp>(ops.begin(), ops.end())] {
    return BatchSendRecv(copy);
  });
}

Work Communicator::IBarrier() {
  return Async([this] { return Barrier(); });
}

}  // namespace devmesh
