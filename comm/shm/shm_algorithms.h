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
//    per member whatever the size, against 2 + size for one-shot.
//  - single copy (shm_single_copy.h), off by default (kSingleCopyMinBytes),
//    when every member can read every other's memory: the two-step's parts,
//    read from the peers' own buffers with process_vm_readv; three steps, no
//    rounds.
// Every member computes the same bits: one-shot reduces in rank order on each
// member, two-step has one member reduce each part. float16 and bfloat16 are
// reduced pairwise in float32 and rounded back at each step, as the Gloo
// backend does.
//
// kOneShotMaxBytes is where two-step starts. Measured with
// bench/allreduce_2d (2x2 mesh, 4 ranks on 2 cores, float32, 256 KiB slots;
// DEVMESH_SHM_ONESHOT_MAX overrides it, read once), us per all-reduce, one-shot
// up to 8 KiB / 32 KiB / 256 KiB:
//   dp 32 KiB 7.2 / 8.4 / 8.6,  tp 16 KiB 12.7 / 17.5 / 17.2,
//   tp 32 KiB 13.1 / 18.1 / 21.1, dp 64 KiB 12.3 / 12.1 / 14.8:
// two-step wins from 16 KiB on both dims; at 8 KiB they tie.
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

// Where the single-copy all-reduce (shm_single_copy.h) starts, when the
// group's set-up allowed it: nowhere by default (SIZE_MAX), since it did not
// beat the slots on this machine kind's current hosts.
// DEVMESH_SHM_SINGLE_COPY_MIN sets it (read once; like
// DEVMESH_SHM_ONESHOT_MAX it must be the same in every member's environment:
// members that choose different algorithms for one call misalign their
// steps).
// Measured with bench/allreduce_2d, float32, us per all-reduce, slots
// (two-step) / single copy / Open MPI 4.1 vader with CMA:
//  - 2026-12-01 (an earlier host of this kind), median of 3 runs:
//    one 2-member group on 2 cores (1x2): 1 MiB 205 / 143 / 235, 4 MiB
//    936 / 807 / 911, 16 MiB 5976 / 5104 / 5348; 2x2, 4 ranks on 2 cores:
//    level within the noise (1 MiB tp 475 / 438, 16 MiB tp 13374 / 12812).
//  - 2026-12-03 (kernel 6.18 in a Firecracker VM, AMD EPYC), single copy
//    reading into block buffers 16 bytes into their page (a std::vector's):
//    2-3x slower than the slots at every size (1x2 4 MiB 544-713 /
//    1732-1784; 2x2 dp 64 MiB 21707-25034 / 45680-47203). perf: 45% of all
//    samples in the kernel's copy (_copy_to_iter), which is `rep movsb`
//    meeting 4K aliasing (shm_copy.h), not the cost of crossing processes.
//  - the same host, block buffers read at the peer's page offset, range of
//    3 runs: 1x2 1 MiB 92-102 / 121-155, 4 MiB 384-525 / 402-617, 16 MiB
//    2696-2964 / 2774-3625; 2x2 dp 4 MiB 1125-1383 / 925-1265, tp 16 MiB
//    6148-10530 / 7223-8901, 64 MiB 22769-41245 / 24806-29500: level within
//    the noise, behind at 1 MiB.
// So the slots, which need no cross-process reads, keep every size here; a
// host where single copy wins (the earlier one: from 1 MiB) may set it.
inline constexpr size_t kSingleCopyMinBytes = ~size_t{0};

// The group: its segment and its steps, and whether every member may read
// every other's memory (ShmSetup::single_copy).
struct ShmGroup {
  const ShmSegment* segment;
  ShmSync* sync;
  bool single_copy = false;
};

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

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_ALGORITHMS_H_
