// devmesh/comm/composite_collectives.cc
// The default DoReduce, DoGather, DoScatter, DoAllToAllV and
// DoBatchSendRecv of comm/communicator.h: each composed of the backend's
// own primitives (its Do* functions, so the front counts one call and the
// per-call check sees the outer call's record on every step), over host
// memory.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/communicator.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

// InvalidArgument unless `blocks` x `count` elements of `width` bytes fit in
// size_t (a rank off the root, whose buffer the front did not size).
absl::Status CheckScratch(absl::string_view backend, absl::string_view op,
                          size_t count, size_t blocks, size_t width) {
  if (count > std::numeric_limits<size_t>::max() / width / blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend, " ", op, ": count ", count, " x ", blocks,
                     " blocks overflows the byte count"));
  }
  return absl::OkStatus();
}

}  // namespace

char* Communicator::Scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    scratch_.reset(new char[bytes]);
    scratch_bytes_ = bytes;
  }
  return scratch_.get();
}

absl::Status Communicator::DoReduce(const void* send, void* recv,
                                    size_t count, DataType dtype, ReduceOp op,
                                    int root) {
  if (rank() == root) return DoAllReduce(send, recv, count, dtype, op);
  return DoAllReduce(send, Scratch(count * DataTypeSize(dtype)), count, dtype,
                     op);
}

absl::Status Communicator::DoGather(const void* send, void* recv, size_t count,
                                    DataType dtype, int root) {
  if (rank() == root) return DoAllGather(send, recv, count, dtype);
  const size_t n = static_cast<size_t>(size());
  const size_t width = DataTypeSize(dtype);
  DEVMESH_RETURN_IF_ERROR(CheckScratch(backend(), "gather", count, n, width));
  return DoAllGather(send, Scratch(n * count * width), count, dtype);
}

absl::Status Communicator::DoScatter(const void* send, void* recv,
                                     size_t count, DataType dtype, int root) {
  const size_t n = static_cast<size_t>(size());
  const size_t width = DataTypeSize(dtype);
  const size_t bytes = count * width;
  if (rank() == root) {
    // The root's buffer is sent in place (Broadcast with send == recv
    // writes nothing new into it), then its own block is copied out.
    void* whole = const_cast<void*>(send);
    DEVMESH_RETURN_IF_ERROR(DoBroadcast(send, whole, n * count, dtype, root));
    const char* mine = static_cast<const char*>(send) + root * bytes;
    if (recv != mine && bytes > 0) std::memmove(recv, mine, bytes);
    return absl::OkStatus();
  }
  DEVMESH_RETURN_IF_ERROR(CheckScratch(backend(), "scatter", count, n, width));
  char* whole = Scratch(n * bytes);
  DEVMESH_RETURN_IF_ERROR(DoBroadcast(whole, whole, n * count, dtype, root));
  if (bytes > 0) {
    std::memcpy(recv, whole + static_cast<size_t>(rank()) * bytes, bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Communicator::AgreeOnAllToAllV(
    absl::Span<const size_t> send_counts,
    absl::Span<const size_t> recv_counts, DataType dtype) {
  const int n = size();
  const int me = rank();
  // Counts travel as int64; a count above this is refused here (no buffer
  // that large exists).
  constexpr size_t kMaxCount = size_t{1} << 62;
  for (int j = 0; j < n; ++j) {
    if (send_counts[j] > kMaxCount || recv_counts[j] > kMaxCount) {
      return absl::InvalidArgumentError(absl::StrCat(
          backend(), " alltoallv: a count of block ", j, " is above 2^62"));
    }
  }
  // 1. Each member tells each peer how much it sends it: in[i] is what
  // group rank i sends this one.
  std::vector<int64_t> out(n), in(n);
  for (int j = 0; j < n; ++j) out[j] = static_cast<int64_t>(send_counts[j]);
  DEVMESH_RETURN_IF_ERROR(
      DoAllToAll(out.data(), in.data(), 1, DataType::kInt64));
  // 2. One all-reduce (max) of the largest block and of the first pair that
  // differs, ordered by (receiver, sender) and encoded so that the lowest
  // pair is the largest value (0: none).
  const int64_t pairs = static_cast<int64_t>(n) * n;
  int64_t agreed[2] = {0, 0};
  for (int i = 0; i < n; ++i) {
    agreed[0] = std::max(agreed[0], out[i]);
    if (in[i] != static_cast<int64_t>(recv_counts[i]) && agreed[1] == 0) {
      agreed[1] = pairs - (static_cast<int64_t>(me) * n + i);
    }
  }
  DEVMESH_RETURN_IF_ERROR(
      DoAllReduce(agreed, agreed, 2, DataType::kInt64, ReduceOp::kMax));
  if (agreed[1] != 0) {
    // 3. Only on a mismatch: the receiver tells every member both counts,
    // so that all word the same error.
    const int64_t pair = pairs - agreed[1];
    const int receiver = static_cast<int>(pair / n);
    const int sender = static_cast<int>(pair % n);
    int64_t counts[2] = {0, 0};
    if (me == receiver) {
      counts[0] = in[sender];
      counts[1] = static_cast<int64_t>(recv_counts[sender]);
    }
    DEVMESH_RETURN_IF_ERROR(
        DoBroadcast(counts, counts, 2, DataType::kInt64, receiver));
    const std::vector<int>& global = global_ranks();
    return WithDisagreement(
        absl::InvalidArgumentError(absl::StrCat(
            backend(), " alltoallv call #", current_call().seq,
            ": the members' counts differ: global rank ", global[sender],
            " sends ", counts[0], " ", DataTypeName(dtype),
            " elements to global rank ", global[receiver],
            ", which expects ", counts[1],
            " from it; nothing was delivered (group of global ranks [",
            absl::StrJoin(global, ", "), "])")),
        global[receiver]);
  }
  const size_t block = static_cast<size_t>(agreed[0]);
  const size_t width = DataTypeSize(dtype);
  if (block > std::numeric_limits<size_t>::max() / width / n / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend(), " alltoallv: the largest block (", block,
                     " elements) x ", n, " overflows the byte count"));
  }
  return block;
}

absl::Status Communicator::DoAllToAllV(const void* send,
                                       absl::Span<const size_t> send_counts,
                                       absl::Span<const size_t> send_offsets,
                                       void* recv,
                                       absl::Span<const size_t> recv_counts,
                                       absl::Span<const size_t> recv_offsets,
                                       DataType dtype) {
  const int n = size();
  const size_t width = DataTypeSize(dtype);
  DEVMESH_ASSIGN_OR_RETURN(const size_t block,
                           AgreeOnAllToAllV(send_counts, recv_counts, dtype));
  // The data, as one all-to-all of blocks padded to the largest.
  if (block == 0) return absl::OkStatus();
  const size_t stride = block * width;
  char* packed = Scratch(2 * n * stride);
  char* unpacked = packed + n * stride;
  const char* in_bytes = static_cast<const char*>(send);
  for (int j = 0; j < n; ++j) {
    if (send_counts[j] == 0) continue;
    std::memcpy(packed + j * stride, in_bytes + send_offsets[j] * width,
                send_counts[j] * width);
  }
  DEVMESH_RETURN_IF_ERROR(DoAllToAll(packed, unpacked, block, dtype));
  char* out_bytes = static_cast<char*>(recv);
  for (int i = 0; i < n; ++i) {
    if (recv_counts[i] == 0) continue;
    std::memcpy(out_bytes + recv_offsets[i] * width,
                unpacked + i * stride, recv_counts[i] * width);
  }
  return absl::OkStatus();
}

absl::Status Communicator::DoBatchSendRecv(absl::Span<const P2POp> ops) {
  // Peers in ascending order: every member meets its pairs in the order of
  // (lower rank, higher rank), one global order, so the first unfinished
  // pair is next on both of its members and nothing waits in a cycle.
  std::vector<size_t> order(ops.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ops[a].peer < ops[b].peer;
  });
  auto run = [&](const P2POp& op) {
    return op.kind == P2POp::Kind::kSend
               ? DoSend(op.buf, op.count, op.dtype, op.peer)
               : DoRecv(op.buf, op.count, op.dtype, op.peer);
  };
  for (size_t begin = 0; begin < order.size();) {
    const int peer = ops[order[begin]].peer;
    size_t end = begin;
    while (end < order.size() && ops[order[end]].peer == peer) ++end;
    // Within the pair, the lower rank sends first and the higher receives
    // first, each in the batch's order (messages between two members match
    // in order).
    const P2POp::Kind first =
        rank() < peer ? P2POp::Kind::kSend : P2POp::Kind::kRecv;
    for (bool first_pass : {true, false}) {
      for (size_t k = begin; k < end; ++k) {
        const P2POp& op = ops[order[k]];
        if ((op.kind == first) != first_pass) continue;
        DEVMESH_RETURN_IF_ERROR(run(op));
      }
    }
    begin = end;
  }
  return absl::OkStatus();
}

}  // namespace devmesh
