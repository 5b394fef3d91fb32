// devmesh/comm/shm/shm_copy.h
// -----------------------------------------------------------------------------
// CopyBytes: the shared-memory backend's copies (between a user's buffer and
// a segment slot, and a member's own block between its send and recv
// buffers). memcpy, except where glibc's memcpy is slow on this machine
// kind: a copy of 2 KiB to 1 MiB whose destination sits 1-63 bytes past the
// source modulo 4 KiB (4K aliasing) takes a backward 64-byte loop instead.
//
// A copy out of a slot (slots start on page boundaries) into a buffer from
// malloc (its data 16 bytes into a page when malloc mmaps it) has
// (dst - src) mod 4096 == 16; the backward loop (16-byte SSE2 loads and
// stores) reads below what it just wrote, so no load waits on a store 4 KiB
// away. The measurements: docs/design_figures.md.
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

// As CopyBytes, but the destination is written with non-temporal stores
// where the CPU has them (SSE2 `movntdq`): the lines go to memory without
// being read first (no read-for-ownership) and without displacing the
// caches. For a destination that is written once and not read again soon
// (the user's output of a large collective). Ends with a store fence, so
// the bytes are ordered before any later store of this thread (a step's
// release). Never fails.
void StreamBytes(void* dst, const void* src, size_t bytes);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_COPY_H_
