// devmesh/comm/shm/shm_single_copy.h
// -----------------------------------------------------------------------------
// The single-copy all-reduce of the shared-memory backend: members read one
// another's buffers directly with process_vm_readv (Linux cross-memory
// attach, what Open MPI's vader BTL calls CMA), so that a large message
// crosses between processes once, with no copy into the segment's slots and
// no rounds. Used by ShmAllReduce for messages of at least
// DEVMESH_SHM_SINGLE_COPY_MIN bytes (unset: 1 MiB; kSingleCopyMinBytes in
// shm_algorithms.h says why) when the set-up found that every member can
// read every other (shm_setup.h; DEVMESH_SHM_SINGLE_COPY=0 turns it off).
//
// Algorithm, for member i of n (three steps, whatever the size):
//   publish the addresses of its send and recv buffers in its member line;
//   step A;
//   reduce-scatter: part i of the message (the parts of shm_algorithms.cc's
//     two-step, on 64-byte boundaries) is reduced in group-rank order into
//     its own recv, block by block: each other member's block is read into a
//     buffer of this thread (in L1/L2; one block and a page, the block
//     placed at the peer's offset within a page, so that the kernel's copy
//     meets no 4K aliasing) and reduced from there;
//   step B (every part is reduced in its owner's recv);
//   all-gather: each other part j is read from member j's recv straight
//     into this member's recv (one process_vm_readv per member);
//   step C (no member returns, and so frees or reuses its buffers, while a
//     peer may still read them).
// Memory traffic per member: (n-1)/n of the message read from the peers
// twice, once its own part; against the slots' copy in, reduce and copy out
// in rounds of a slot each, two steps a round.
// Every member computes the same bits: one member reduces each part, in
// rank order, as in the two-step.
//
// Errors: those of the steps (shm_sync.h). A read that fails (the peer
// died, or left the call on an error of its own and freed its buffer) stops
// this member's reads, not its steps: the steps then end with the error
// that names the dead or departed member, as on the slot path. When every
// step passes (every member alive), a member whose read failed says so in
// its member line before the last step, and the call fails on every member:
// Unavailable naming the member whose buffer could not be read (with
// errno's text) on that member, naming that member on the others; it also
// aborts the group, so later calls fail everywhere too. No member returns
// OK with an incomplete part. ResourceExhausted when this thread's block
// buffers (about 200 KiB) cannot be allocated; the member then aborts the
// group first, so that its peers fail at once (Unavailable naming it)
// instead of waiting at the first step.
//
// Thread-safety: as the other algorithms (one collective at a time per
// group); the block buffers are per thread.
#ifndef DEVMESH_COMM_SHM_SHM_SINGLE_COPY_H_
#define DEVMESH_COMM_SHM_SHM_SINGLE_COPY_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>

#include "absl/status/status.h"
#include "comm/reduce_functions.h"
#include "comm/shm/shm_segment.h"
#include "comm/shm/shm_sync.h"

namespace devmesh {
namespace shm_internal {

// recv[i] = reduce over members of send[i], i < count; send == recv is in
// place. Every member must call it with the same count (ShmAllReduce's
// choice of path depends on the size alone).
absl::Status ShmAllReduceSingleCopy(const ShmSegment& segment, ShmSync& sync,
                                    const char* send, char* recv,
                                    size_t count, size_t elem,
                                    const reduce_internal::ReduceFunc& reduce,
                                    OpName what);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_SINGLE_COPY_H_
