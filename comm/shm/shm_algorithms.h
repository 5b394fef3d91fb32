// devmesh/comm/shm/shm_algorithms.h
// -----------------------------------------------------------------------------
// The collectives of the shared-memory backend, over one group's segment
// (shm_segment.h) and steps (shm_sync.h). Host buffers; counts in elements
// of `elem` bytes; arguments are checked by the caller (ShmCommunicator).
//
// Rounds. A message larger than a slot goes through the segment in rounds;
// each round uses the slots of one parity (0, 1, 0, ...). A member writes its
// slot of parity p in round r only after every member arrived at a step of
// round r-1, which each does only after it finished reading round r-2 (the
// same parity): double buffering with no extra step.
//
// All-reduce, two algorithms (DeepSpeed's and vLLM's shared-memory
// all-reduce work the same way):
//  - one-shot: each member copies its chunk into its slot; one step; each
//    member reduces every slot, in group-rank order, into its output. One
//    step a round; reads size x bytes per member.
//  - two-step (reduce-scatter, then all-gather): each member copies into its
//    slot the parts of its chunk that the other members reduce; one step;
//    member i reduces part i (its own input and every other slot, in rank
//    order) into its slot; one step; each member copies every other part from
//    its owner's slot. Two steps a round; about 4 x bytes of memory traffic
//    per member whatever the size, against 2 + size for one-shot. From
//    kStreamOutputMinBytes the writes into recv are non-temporal.
//  - single copy (shm_single_copy.h), from 1 MiB (kSingleCopyMinBytes),
//    when every member can read every other's memory: the two-step's parts,
//    read from the peers' own buffers with process_vm_readv; three steps, no
//    rounds.
// Every member computes the same bits: one-shot reduces in rank order on each
// member, two-step has one member reduce each part. float16 and bfloat16 are
// reduced pairwise in float32 and rounded back at each step, as the Gloo
// backend does.
//
// kOneShotMaxBytes is where two-step starts (DEVMESH_SHM_ONESHOT_MAX
// overrides it; the same on every member). Why these bounds:
// docs/design_figures.md.
#ifndef DEVMESH_COMM_SHM_SHM_ALGORITHMS_H_
#define DEVMESH_COMM_SHM_SHM_ALGORITHMS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/reduce_functions.h"
#include "comm/shm/shm_segment.h"
#include "comm/shm/shm_sync.h"

namespace devmesh {
namespace shm_internal {

inline constexpr size_t kOneShotMaxBytes = size_t{8} << 10;

// From this size the two-step all-reduce writes its result into recv with
// non-temporal stores (shm_copy.h's StreamBytes): a result larger than a
// core's L2 (4 MiB on this machine kind) is not read back before it leaves
// the cache, so the read of each output line before its write is pure cost.
// Per process, no effect on the bits: members need not agree on it. The
// measurements: docs/design_figures.md.
inline constexpr size_t kStreamOutputMinBytes = size_t{4} << 20;

// Where the single-copy all-reduce (shm_single_copy.h) starts, when the
// group's set-up allowed it: 1 MiB, where it took 0.86-0.96 of the slots'
// CPU from 1 to 4 MiB and was level with them at 16 and 64 MiB on this
// machine kind's current hosts (an earlier host had it behind at every
// size: it was off then). DEVMESH_SHM_SINGLE_COPY_MIN sets it (read once; like
// DEVMESH_SHM_ONESHOT_MAX it must be the same in every member's environment:
// members that choose different algorithms for one call misalign their
// steps).
// The measurements behind the default: docs/design_figures.md.
inline constexpr size_t kSingleCopyMinBytes = size_t{1} << 20;

// The group: its segment and its steps, whether every member may read
// every other's memory (ShmSetup::single_copy), and the all-reduce's bounds
// (fixed when the group is made, so that every call of every member picks
// its algorithm alike: ShmBounds).
struct ShmGroup {
  const ShmSegment* segment;
  ShmSync* sync;
  bool single_copy = false;
  size_t oneshot_max_bytes = kOneShotMaxBytes;
  size_t single_copy_min_bytes = kSingleCopyMinBytes;
};

// The all-reduce bounds from the process's settings now
// (DEVMESH_SHM_ONESHOT_MAX, DEVMESH_SHM_SINGLE_COPY_MIN; config/settings.h),
// read once per group when it is made.
struct ShmBounds {
  size_t oneshot_max_bytes;
  size_t single_copy_min_bytes;
};
ShmBounds CurrentShmBounds();

// Where part `part` of `size` parts of a chunk of `count` elements of `elem`
// bytes starts (part `size` is `count`): on 64-byte boundaries where the
// element size allows, so two members never write one cache line.
size_t PartStart(size_t count, size_t elem, int part, int size);

// recv[i] = reduce over members of send[i], i < count. send == recv is in
// place; partly overlapping buffers are the caller's to separate.
absl::Status ShmAllReduce(ShmGroup g, const char* send, char* recv,
                          size_t count, size_t elem,
                          const reduce_internal::ReduceFunc& reduce,
                          OpName what);
// The algorithms themselves, for benchmarks and tests.
absl::Status ShmAllReduceOneShot(ShmGroup g, const char* send, char* recv,
                                 size_t count, size_t elem,
                                 const reduce_internal::ReduceFunc& reduce,
                                 OpName what);
absl::Status ShmAllReduceTwoStep(ShmGroup g, const char* send, char* recv,
                                 size_t count, size_t elem,
                                 const reduce_internal::ReduceFunc& reduce,
                                 OpName what);

// recv holds size x bytes; member j's send lands at recv + j * bytes. send
// may be recv + rank * bytes (in place).
absl::Status ShmAllGather(ShmGroup g, const char* send, char* recv,
                          size_t bytes, OpName what);

// send holds size blocks of count elements; recv gets block rank, reduced.
// recv may be send + rank * count * elem (in place).
absl::Status ShmReduceScatter(ShmGroup g, const char* send, char* recv,
                              size_t count, size_t elem,
                              const reduce_internal::ReduceFunc& reduce,
                              OpName what);

// root's send to every member's recv (root's too, unless send == recv).
absl::Status ShmBroadcast(ShmGroup g, const char* send, char* recv,
                          size_t bytes, int root, OpName what);

// Block j of send (bytes each) to member j; block i of recv from member i.
// send == recv is allowed; partly overlapping buffers are not.
absl::Status ShmAllToAll(ShmGroup g, const char* send, char* recv,
                         size_t bytes, OpName what);

// Per-member blocks (AllToAllV, in bytes): send_bytes[j] from send +
// send_offsets[j] to member j, recv_bytes[i] from member i to recv +
// recv_offsets[i]. Every member passes the same max_bytes (the largest
// block of any pair, agreed beforehand), which sets the number of rounds,
// and pairs agree (member i's send_bytes[j] is member j's recv_bytes[i]).
// send and recv must not overlap.
absl::Status ShmAllToAllV(ShmGroup g, const char* send,
                          const size_t* send_bytes, const size_t* send_offsets,
                          char* recv, const size_t* recv_bytes,
                          const size_t* recv_offsets, size_t max_bytes,
                          OpName what);

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_ALGORITHMS_H_
