// devmesh/comm/shm/shm_algorithms.cc
#include "comm/shm/shm_algorithms.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "comm/shm/shm_copy.h"
#include "comm/shm/shm_single_copy.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {

size_t PartStart(size_t count, size_t elem, int part, int size) {
  if (part <= 0) return 0;
  if (part >= size) return count;
  const size_t align = std::max<size_t>(1, kCacheLine / elem);
  const size_t raw = count * static_cast<size_t>(part) / size;
  return raw / align * align;
}

namespace {

using reduce_internal::ReduceFunc;

// out = x(0) op x(1) op ... op x(size-1), in rank order, pairwise (so
// float16/bfloat16 round at each step, as the Gloo backend's chain does).
template <typename Source>
void ReduceInOrder(char* out, int size, size_t count,
                   const ReduceFunc& reduce, Source x) {
  reduce(out, x(0), x(1), count);
  for (int j = 2; j < size; ++j) reduce(out, out, x(j), count);
}

using CopyFunc = void (*)(void*, const void*, size_t);

// ReduceInOrder into `acc`, then a copy of it to `out`, block by block: each
// block is copied while it is still in L1, so the copy costs its write only.
constexpr size_t kBlockBytes = size_t{16} << 10;
template <typename Source>
void ReduceInOrderAndCopy(char* acc, char* out, int size, size_t count,
                          size_t elem, const ReduceFunc& reduce, Source x,
                          CopyFunc copy = &CopyBytes) {
  const size_t block = kBlockBytes / elem;
  for (size_t off = 0; off < count; off += block) {
    const size_t c = std::min(block, count - off);
    const size_t at = off * elem;
    ReduceInOrder(acc + at, size, c, reduce,
                  [&](int j) -> const char* { return x(j) + at; });
    copy(out + at, acc + at, c * elem);
  }
}

}  // namespace

absl::Status ShmAllReduceOneShot(ShmGroup g, const char* send, char* recv,
                                 size_t count, size_t elem,
                                 const ReduceFunc& reduce,
                                 OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  const size_t chunk = seg.slot_bytes() / elem;
  for (size_t off = 0; off < count; off += chunk) {
    const size_t c = std::min(chunk, count - off);
    const int p = g.sync->NextRoundParity();
    CopyBytes(seg.slot(p, me), send + off * elem, c * elem);
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    // Every member reads its own contribution from its slot too: recv may
    // alias send, and the chain writes recv as it goes.
    ReduceInOrder(recv + off * elem, n, c, reduce,
                  [&](int j) -> const char* { return seg.slot(p, j); });
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduceTwoStep(ShmGroup g, const char* send, char* recv,
                                 size_t count, size_t elem,
                                 const ReduceFunc& reduce,
                                 OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  const size_t chunk = seg.slot_bytes() / elem;
  // A result too large for a core's L2 goes to recv with non-temporal
  // stores: no read of each output line before its write.
  const CopyFunc copy_out =
      count * elem >= kStreamOutputMinBytes ? &StreamBytes : &CopyBytes;
  for (size_t off = 0; off < count; off += chunk) {
    const size_t c = std::min(chunk, count - off);
    const int p = g.sync->NextRoundParity();
    char* mine = seg.slot(p, me);
    const char* in = send + off * elem;
    char* out = recv + off * elem;
    const size_t lo = PartStart(c, elem, me, n);
    const size_t hi = PartStart(c, elem, me + 1, n);
    // The others reduce every part but this member's own: copy only those.
    CopyBytes(mine, in, lo * elem);
    CopyBytes(mine + hi * elem, in + hi * elem, (c - hi) * elem);
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    if (hi > lo) {
      // Reduce part `me` into this member's own slot (never written by the
      // copy above), reading its own input directly; then publish it.
      ReduceInOrderAndCopy(
          mine + lo * elem, out + lo * elem, n, hi - lo, elem, reduce,
          [&](int j) -> const char* {
            return j == me ? in + lo * elem : seg.slot(p, j) + lo * elem;
          },
          copy_out);
    }
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      const size_t jlo = PartStart(c, elem, j, n);
      const size_t jhi = PartStart(c, elem, j + 1, n);
      copy_out(out + jlo * elem, seg.slot(p, j) + jlo * elem,
               (jhi - jlo) * elem);
    }
  }
  return absl::OkStatus();
}

ShmBounds CurrentShmBounds() {
  const Settings& settings = ProcessSettings();
  return ShmBounds{
      settings.shm_oneshot_max_bytes.value_or(kOneShotMaxBytes),
      settings.shm_single_copy_min_bytes.value_or(kSingleCopyMinBytes)};
}

absl::Status ShmAllReduce(ShmGroup g, const char* send, char* recv,
                          size_t count, size_t elem, const ReduceFunc& reduce,
                          OpName what) {
  if (g.single_copy && count * elem >= g.single_copy_min_bytes) {
    return ShmAllReduceSingleCopy(*g.segment, *g.sync, send, recv, count, elem,
                                  reduce, what);
  }
  if (count * elem <= g.oneshot_max_bytes) {
    return ShmAllReduceOneShot(g, send, recv, count, elem, reduce, what);
  }
  return ShmAllReduceTwoStep(g, send, recv, count, elem, reduce, what);
}

absl::Status ShmAllGather(ShmGroup g, const char* send, char* recv,
                          size_t bytes, OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  const size_t chunk = seg.slot_bytes();
  char* own_block = recv + static_cast<size_t>(me) * bytes;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t c = std::min(chunk, bytes - off);
    const int p = g.sync->NextRoundParity();
    CopyBytes(seg.slot(p, me), send + off, c);
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      CopyBytes(recv + static_cast<size_t>(j) * bytes + off, seg.slot(p, j),
                c);
    }
  }
  if (send != own_block) CopyBytes(own_block, send, bytes);
  return absl::OkStatus();
}

absl::Status ShmReduceScatter(ShmGroup g, const char* send, char* recv,
                              size_t count, size_t elem,
                              const ReduceFunc& reduce,
                              OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  // A slot holds one piece of each of the n blocks.
  const size_t piece = std::max<size_t>(1, seg.slot_bytes() / n / elem);
  for (size_t off = 0; off < count; off += piece) {
    const size_t q = std::min(piece, count - off);
    const int p = g.sync->NextRoundParity();
    char* mine = seg.slot(p, me);
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      CopyBytes(mine + j * piece * elem,
                send + (static_cast<size_t>(j) * count + off) * elem,
                q * elem);
    }
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    const char* own = send + (static_cast<size_t>(me) * count + off) * elem;
    ReduceInOrderAndCopy(mine + me * piece * elem, recv + off * elem, n, q,
                         elem, reduce, [&](int j) -> const char* {
                           return j == me ? own
                                          : seg.slot(p, j) + me * piece * elem;
                         });
  }
  return absl::OkStatus();
}

absl::Status ShmBroadcast(ShmGroup g, const char* send, char* recv,
                          size_t bytes, int root, OpName what) {
  const ShmSegment& seg = *g.segment;
  const int me = g.sync->rank();
  const size_t chunk = seg.slot_bytes();
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t c = std::min(chunk, bytes - off);
    const int p = g.sync->NextRoundParity();
    if (me == root) CopyBytes(seg.slot(p, root), send + off, c);
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    if (me != root) CopyBytes(recv + off, seg.slot(p, root), c);
  }
  if (me == root && send != recv) std::memmove(recv, send, bytes);
  return absl::OkStatus();
}

absl::Status ShmAllToAll(ShmGroup g, const char* send, char* recv,
                         size_t bytes, OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  const size_t piece =
      std::max<size_t>(kCacheLine, seg.slot_bytes() / n / kCacheLine *
                                       kCacheLine);
  const size_t own = static_cast<size_t>(me) * bytes;
  if (send != recv) CopyBytes(recv + own, send + own, bytes);
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t q = std::min(piece, bytes - off);
    const int p = g.sync->NextRoundParity();
    char* mine = seg.slot(p, me);
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      CopyBytes(mine + j * piece, send + static_cast<size_t>(j) * bytes + off,
                q);
    }
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      CopyBytes(recv + static_cast<size_t>(j) * bytes + off,
                seg.slot(p, j) + me * piece, q);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmAllToAllV(ShmGroup g, const char* send,
                          const size_t* send_bytes, const size_t* send_offsets,
                          char* recv, const size_t* recv_bytes,
                          const size_t* recv_offsets, size_t max_bytes,
                          OpName what) {
  const ShmSegment& seg = *g.segment;
  const int n = g.sync->size();
  const int me = g.sync->rank();
  const size_t piece =
      std::max<size_t>(kCacheLine, seg.slot_bytes() / n / kCacheLine *
                                       kCacheLine);
  if (send_bytes[me] > 0) {
    CopyBytes(recv + recv_offsets[me], send + send_offsets[me],
              send_bytes[me]);
  }
  // The part of a `total`-byte block in the round at `off`.
  auto part = [&](size_t total, size_t off) {
    return total > off ? std::min(piece, total - off) : size_t{0};
  };
  for (size_t off = 0; off < max_bytes; off += piece) {
    const int p = g.sync->NextRoundParity();
    char* mine = seg.slot(p, me);
    for (int j = 0; j < n; ++j) {
      const size_t q = j == me ? 0 : part(send_bytes[j], off);
      if (q > 0) CopyBytes(mine + j * piece, send + send_offsets[j] + off, q);
    }
    DEVMESH_RETURN_IF_ERROR(g.sync->Step(what));
    for (int j = 0; j < n; ++j) {
      const size_t q = j == me ? 0 : part(recv_bytes[j], off);
      if (q > 0) {
        CopyBytes(recv + recv_offsets[j] + off, seg.slot(p, j) + me * piece,
                  q);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace shm_internal
}  // namespace devmesh
