// devmesh/comm/shm/shm_copy.h
// -----------------------------------------------------------------------------
// CopyBytes: the shared-memory backend's copies (between a user's buffer and
// a segment slot, and a member's own block between its send and recv
// buffers). memcpy, except where glibc's memcpy is slow on this machine
// kind: a copy of 2 KiB to 1 MiB whose destination sits 1-63 bytes past the
// source modulo 4 KiB (4K aliasing) takes a backward 64-byte loop instead.
//
// Why. A copy out of a slot (slots start on page boundaries) into a buffer
// from malloc (its data 16 bytes into a page when malloc mmaps it, as it
// does from 128 KiB) has (dst - src) mod 4096 == 16. Debian 12's glibc 2.36
// copies such sizes with `rep movsb`, which on this machine kind (AMD EPYC,
// kernel 6.18, Firecracker VM) ran at 1.3-1.8 GB/s for 4 KiB-256 KiB at that
// distance against 22-62 GB/s at 0, 200, 4032 and 4080 (measured: loops of
// memcpy between two page-aligned arrays, the destination shifted by those
// bytes; at 48, 12-17 GB/s for 64-256 KiB). From about 384 KiB glibc changes
// strategy and the distance no longer matters. The backward loop (16-byte
// SSE2 loads and stores, four per step) reads below what it just wrote, so
// no load waits on a store 4 KiB away: 16-34 GB/s at distance 16, every
// size. In bench/allreduce_2d (2x2, float32, after its warm-up at 64 MiB)
// this was the dp all-reduce of 128-512 KiB: 158-744 us; with CopyBytes
// 29-110 us (Open MPI's vader: 63-181 us in the same runs).
//
// dst and src must not overlap. Thread-safe (no state).
#ifndef DEVMESH_COMM_SHM_SHM_COPY_H_
#define DEVMESH_COMM_SHM_SHM_COPY_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>

namespace devmesh {
namespace shm_internal {

// Copies `bytes` bytes from `src` to `dst`, which must not overlap (a
// partial overlap is undefined, as for memcpy). Never fails.
void CopyBytes(void* dst, const void* src, size_t bytes);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_COPY_H_
