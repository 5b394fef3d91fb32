// devmesh/comm/algorithms/p2p_collectives.cc
#include "comm/algorithms/p2p_collectives.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/reduce_functions.h"
#include "status/status_macros.h"

namespace devmesh {
namespace algorithms {
namespace {

using reduce_internal::ReduceFunc;

constexpr size_t kAlign = 64;

size_t RoundUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// a mod n in [0, n).
int Mod(int a, int n) { return ((a % n) + n) % n; }

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// One send and one receive, posted together (a ring step cannot deadlock).
absl::Status SendRecv(PointToPoint& p2p, int to, const void* send_data,
                      size_t send_bytes, int from, void* recv_data,
                      size_t recv_bytes) {
  const SendSpec send{to, send_data, send_bytes};
  const RecvSpec recv{from, recv_data, recv_bytes};
  return p2p.Exchange({&send, 1}, {&recv, 1});
}

absl::Status SendOnly(PointToPoint& p2p, int to, const void* data,
                      size_t bytes) {
  const SendSpec send{to, data, bytes};
  return p2p.Exchange({&send, 1}, {});
}

absl::Status RecvOnly(PointToPoint& p2p, int from, void* data, size_t bytes) {
  const RecvSpec recv{from, data, bytes};
  return p2p.Exchange({}, {&recv, 1});
}

// `count` elements cut into `n` chunks whose counts differ by at most one
// (the first count % n chunks hold one more).
struct Chunks {
  size_t base;
  size_t extra;
  Chunks(size_t count, int n) : base(count / n), extra(count % n) {}
  size_t Start(int i) const {
    return i * base + std::min(static_cast<size_t>(i), extra);
  }
  size_t Count(int i) const {
    return base + (static_cast<size_t>(i) < extra ? 1 : 0);
  }
};

// Recursive doubling over the largest power of two p2 <= n; rank p2 + i
// first folds its vector into rank i and gets the result back at the end.
// Each combination is (lower part) op (higher part), the same on both
// sides, so the two partners of a step hold the same bits after it.
absl::Status RecursiveDoubling(PointToPoint& p2p, Workspace& ws, char* data,
                               size_t count, size_t elem_size,
                               const ReduceFunc& reduce) {
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t bytes = count * elem_size;
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  if (r >= p2) {
    DEVMESH_RETURN_IF_ERROR(SendOnly(p2p, r - p2, data, bytes));
    return RecvOnly(p2p, r - p2, data, bytes);
  }
  char* tmp = static_cast<char*>(ws.Get(bytes));
  const bool folds = r + p2 < n;
  if (folds) {
    DEVMESH_RETURN_IF_ERROR(RecvOnly(p2p, r + p2, tmp, bytes));
    reduce(data, data, tmp, count);
  }
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int peer = r ^ mask;
    DEVMESH_RETURN_IF_ERROR(SendRecv(p2p, peer, data, bytes, peer, tmp, bytes));
    if (peer < r) {
      reduce(data, tmp, data, count);
    } else {
      reduce(data, data, tmp, count);
    }
  }
  if (folds) return SendOnly(p2p, r + p2, data, bytes);
  return absl::OkStatus();
}

// Ring reduce-scatter then ring all-gather over n blocks, each block in
// pieces of `piece` elements. Block c is reduced along one chain (ranks c,
// c + 1, ..., c - 1: incoming op own) and then copied, so every member gets
// the same bits. Step k of 2(n - 1) sends one block to the next rank and
// receives one from the previous; the block sent at step k + 1 is the one
// received at step k, so each piece is passed on as soon as it is reduced
// (reduce-scatter) or has arrived (all-gather), while later pieces are in
// flight. Every receive is posted first: reduce-scatter's into one scratch
// slot per step, all-gather's straight into `data`. `own` is this rank's
// input (`data` itself, or a buffer that does not overlap it): each block is
// read from it once, by its reduction, so `data` needs no copy of it. A
// receive into `data` lands only after this rank's pieces of that block
// were sent (the block's final value needs them), so it never meets a send
// still reading it.
absl::Status PipelinedRing(PointToPoint& p2p, Workspace& ws, const char* own,
                           char* data, size_t count, size_t elem_size,
                           const ReduceFunc& reduce, size_t piece) {
  const int n = p2p.size();
  const int r = p2p.rank();
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  const Chunks blocks(count, n);
  const int steps = 2 * (n - 1);
  // Reduce-scatter step k receives block r - k - 1; all-gather step
  // t = k - (n - 1) receives block r - t. Step 0 sends block r.
  auto recv_block = [&](int k) {
    return k < n - 1 ? Mod(r - k - 1, n) : Mod(r - (k - (n - 1)), n);
  };
  auto pieces = [&](int b) { return (blocks.Count(b) + piece - 1) / piece; };
  auto piece_count = [&](int b, size_t j) {
    return std::min(piece, blocks.Count(b) - j * piece);
  };
  const size_t slot = RoundUp(blocks.Count(0) * elem_size);
  char* tmp = static_cast<char*>(ws.Get(slot * (n - 1)));
  std::vector<Ticket> recvs;
  std::vector<size_t> first(steps);  // step k's first entry in recvs
  for (int k = 0; k < steps; ++k) {
    const int b = recv_block(k);
    first[k] = recvs.size();
    for (size_t j = 0; j < pieces(b); ++j) {
      char* to = k < n - 1
                     ? tmp + k * slot + j * piece * elem_size
                     : data + (blocks.Start(b) + j * piece) * elem_size;
      DEVMESH_ASSIGN_OR_RETURN(
          Ticket t,
          p2p.Post(RecvSpec{prev, to, piece_count(b, j) * elem_size}));
      recvs.push_back(t);
    }
  }
  for (size_t j = 0; j < pieces(r); ++j) {
    const char* from = own + (blocks.Start(r) + j * piece) * elem_size;
    DEVMESH_RETURN_IF_ERROR(
        p2p.Post(SendSpec{next, from, piece_count(r, j) * elem_size})
            .status());
  }
  for (int k = 0; k < steps; ++k) {
    const int b = recv_block(k);
    for (size_t j = 0; j < pieces(b); ++j) {
      DEVMESH_RETURN_IF_ERROR(p2p.Wait(recvs[first[k] + j]));
      const size_t at = (blocks.Start(b) + j * piece) * elem_size;
      const size_t m = piece_count(b, j);
      if (k < n - 1) {
        reduce(data + at, tmp + k * slot + j * piece * elem_size, own + at, m);
      }
      if (k + 1 < steps) {
        DEVMESH_RETURN_IF_ERROR(
            p2p.Post(SendSpec{next, data + at, m * elem_size}).status());
      }
    }
  }
  return p2p.WaitAll();
}

// AllReduce past its count-0 check, on the ring (`ring`, pieces of
// `chunk_bytes`) or by recursive doubling.
absl::Status AllReduceImpl(PointToPoint& p2p, Workspace& ws, const void* send,
                           void* recv, size_t count, DataType dtype,
                           ReduceOp op, bool ring, size_t chunk_bytes) {
  const size_t elem_size = DataTypeSize(dtype);
  const size_t bytes = count * elem_size;
  const int n = p2p.size();
  char* data = static_cast<char*>(recv);
  const char* own = static_cast<const char*>(send);
  // The ring reads its input block by block; anything else (a partial
  // overlap, recursive doubling, one member) starts from a copy in recv
  // (memmove: send and recv may overlap).
  if (own != data && (!ring || n == 1 || Overlap(own, bytes, data, bytes))) {
    std::memmove(data, own, bytes);
    own = data;
  }
  if (n == 1) return absl::OkStatus();
  const ReduceFunc reduce = reduce_internal::GetReduceFunction(dtype, op);
  absl::Status status =
      ring ? PipelinedRing(p2p, ws, own, data, count, elem_size, reduce,
                           std::max<size_t>(1, chunk_bytes / elem_size))
           : RecursiveDoubling(p2p, ws, data, count, elem_size, reduce);
  if (!status.ok()) return status;
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(data, count, dtype, n);
  }
  return absl::OkStatus();
}

}  // namespace

void* Workspace::Get(size_t bytes) {
  const size_t want = bytes + kAlign - 1;
  if (buffer_.size() < want) {
    buffer_.clear();  // nothing to keep: the growth copies no old bytes
    buffer_.resize(want);
  }
  const auto at = reinterpret_cast<uintptr_t>(buffer_.data());
  return reinterpret_cast<void*>((at + kAlign - 1) & ~(kAlign - 1));
}

absl::Status AllReduce(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype, ReduceOp op) {
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  const bool small = bytes <= kP2pSmallAllReduceBytes ||
                     count < static_cast<size_t>(p2p.size());
  return AllReduceImpl(p2p, ws, send, recv, count, dtype, op, !small,
                       kP2pPipelineChunkBytes);
}

absl::Status RingAllReduce(PointToPoint& p2p, Workspace& ws, const void* send,
                           void* recv, size_t count, DataType dtype,
                           ReduceOp op, size_t chunk_bytes) {
  if (chunk_bytes == 0 || count < static_cast<size_t>(p2p.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RingAllReduce needs chunk_bytes > 0 (got ", chunk_bytes,
        ") and count >= the group's size (got ", count, " for ", p2p.size(),
        " members)"));
  }
  return AllReduceImpl(p2p, ws, send, recv, count, dtype, op, /*ring=*/true,
                       chunk_bytes);
}

absl::Status AllGather(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype) {
  (void)ws;
  if (count == 0) return absl::OkStatus();
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t bytes = count * DataTypeSize(dtype);
  char* data = static_cast<char*>(recv);
  // After this copy send is not read again, so any overlap is harmless.
  if (send != data + r * bytes) std::memmove(data + r * bytes, send, bytes);
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  // Step s: pass on block r - s, receive block r - s - 1.
  for (int s = 0; s < n - 1; ++s) {
    const int out = Mod(r - s, n);
    const int in = Mod(r - s - 1, n);
    DEVMESH_RETURN_IF_ERROR(SendRecv(p2p, next, data + out * bytes, bytes, prev,
                                     data + in * bytes, bytes));
  }
  return absl::OkStatus();
}

absl::Status ReduceScatter(PointToPoint& p2p, Workspace& ws, const void* send,
                           void* recv, size_t count, DataType dtype,
                           ReduceOp op) {
  if (count == 0) return absl::OkStatus();
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t elem_size = DataTypeSize(dtype);
  const size_t bytes = count * elem_size;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (n == 1) {
    if (in != out) std::memmove(out, in, bytes);
    return absl::OkStatus();  // an average over one member is the value
  }
  // recv is written only after the last step, from send's block r: only a
  // partial overlap with that block needs a copy of it.
  const char* own = in + r * bytes;
  const size_t copy_bytes =
      own != out && Overlap(own, bytes, out, bytes) ? bytes : 0;
  char* base = static_cast<char*>(
      ws.Get(RoundUp(copy_bytes) + 2 * RoundUp(bytes)));
  char* acc = base + RoundUp(copy_bytes);
  char* tmp = acc + RoundUp(bytes);
  if (copy_bytes > 0) {
    std::memcpy(base, own, bytes);
    own = base;
  }
  const ReduceFunc reduce = reduce_internal::GetReduceFunction(dtype, op);
  const int next = Mod(r + 1, n);
  const int prev = Mod(r - 1, n);
  // Block b travels b + 1, b + 2, ..., b (incoming op own at each hop).
  // Step s: send the partial of block r - s - 1, receive that of r - s - 2;
  // the last step receives block r.
  for (int s = 0; s < n - 1; ++s) {
    const int out_block = Mod(r - s - 1, n);
    const int in_block = Mod(r - s - 2, n);
    const char* outgoing = s == 0 ? in + out_block * bytes : acc;
    if (absl::Status st =
            SendRecv(p2p, next, outgoing, bytes, prev, tmp, bytes);
        !st.ok()) {
      return st;
    }
    const bool last = s == n - 2;
    reduce(last ? out : acc, tmp, last ? own : in + in_block * bytes, count);
  }
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(out, count, dtype, n);
  }
  return absl::OkStatus();
}

absl::Status Broadcast(PointToPoint& p2p, Workspace& ws, const void* send,
                       void* recv, size_t count, DataType dtype, int root) {
  (void)ws;
  if (count == 0) return absl::OkStatus();
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t bytes = count * DataTypeSize(dtype);
  if (r == root && send != recv) std::memmove(recv, send, bytes);
  if (n == 1) return absl::OkStatus();
  // Virtual rank v (the root is 0). v in [m, 2m) receives from v - m in the
  // round of m (a power of two), then sends to v + 2m, v + 4m, ... below n;
  // its sends are posted together, the largest subtree first.
  const int v = Mod(r - root, n);
  int first = 1;  // the smallest mask whose child v + mask this rank feeds
  if (v > 0) {
    int m = 1;
    while (m * 2 <= v) m *= 2;
    DEVMESH_RETURN_IF_ERROR(RecvOnly(p2p, Mod(v - m + root, n), recv, bytes));
    first = m * 2;
  }
  SendSpec sends[32];  // at most log2(INT_MAX) children
  size_t children = 0;
  int top = first;
  while (top * 2 < n) top *= 2;
  for (int mask = top; mask >= first; mask /= 2) {
    if (v + mask < n) {
      sends[children++] = {Mod(v + mask + root, n), recv, bytes};
    }
  }
  if (children == 0) return absl::OkStatus();
  return p2p.Exchange({sends, children}, {});
}

absl::Status AllToAll(PointToPoint& p2p, Workspace& ws, const void* send,
                      void* recv, size_t count, DataType dtype) {
  if (count == 0) return absl::OkStatus();
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (n == 1) {
    if (in != out) std::memmove(out, in, bytes);
    return absl::OkStatus();
  }
  // Blocks arrive before this rank has sent its own block to that peer:
  // with any overlap (in place included), send from a copy.
  const size_t total = n * bytes;
  if (Overlap(in, total, out, total)) {
    char* copy = static_cast<char*>(ws.Get(total));
    std::memcpy(copy, in, total);
    in = copy;
  }
  std::memcpy(out + r * bytes, in + r * bytes, bytes);
  for (int k = 1; k < n; ++k) {
    const int to = Mod(r + k, n);
    const int from = Mod(r - k, n);
    DEVMESH_RETURN_IF_ERROR(SendRecv(p2p, to, in + to * bytes, bytes, from,
                                     out + from * bytes, bytes));
  }
  return absl::OkStatus();
}

absl::Status Barrier(PointToPoint& p2p) {
  const int n = p2p.size();
  const int r = p2p.rank();
  const char token = 0;
  char sink = 0;
  for (int mask = 1; mask < n; mask <<= 1) {
    DEVMESH_RETURN_IF_ERROR(
        SendRecv(p2p, Mod(r + mask, n), &token, 0, Mod(r - mask, n), &sink, 0));
  }
  return absl::OkStatus();
}

}  // namespace algorithms
}  // namespace devmesh
