// devmesh/comm/shm/shm_communicator.h
// -----------------------------------------------------------------------------
// The shared-memory backend of Communicator ("shm"): collectives through one
// segment that every member of the group maps (shm_segment.h), with futex
// waits (shm_sync.h) and the algorithms of shm_algorithms.h. For CPU groups
// whose members share memory; across hosts the cross-host backend ("ucx" by
// default; config/settings.h's CrossHostBackendName) carries them.
//
// Two ways to make one:
//  - CreateShmGroup (what device_mesh and CreateCommunicator("shm") use):
//    over the store alone. The set-up exchange goes through store keys under
//    the group's prefix; Send and Recv connect a two-member group of the
//    cross-host backend per peer on first use (shm_links.h); Split
//    exchanges (color, key) through the store (comm/store_exchange.h). A
//    group that only runs collectives makes no pair and no socket.
//  - ShareMemory: on an existing group of the same members (any
//    communicator, e.g. a "ucx" one): the set-up runs over it, and Send,
//    Recv and Split go through it.
// Set-up, every member:
//  1. rank 0 creates a segment with a random name and nonce (shm_segment.h);
//  2. broadcasts name and nonce over the group (or the store);
//  3. every member opens and maps it, checks magic, nonce and layout (a value
//     written by another member, seen through its own mapping), and writes
//     its process identity (pid, start time) into its member line; the
//     last member to map it unlinks it (a count in the segment's header),
//     so that from then on nothing is left in /dev/shm whatever happens;
//  4. all-gather of each member's result; rank 0 unlinks the segment if it
//     is still there (a member could not map it; from here on, nothing is
//     left in /dev/shm). A member that could not map it fails the set-up
//     the same way on every member. Only a SIGKILL of rank 0 before every
//     member mapped the segment, with some member also dead or never
//     mapping, leaves its name behind;
//  5. every member checks, for every other member, that the identity in the
//     segment is the one it announced over the group (the mapping is truly
//     shared) and that /proc shows that process (one pid namespace, so that
//     a dead member can be noticed);
//  6. the verdicts meet in the segment, which every member has mapped: each
//     member writes its own into its member line, wakes the others and
//     waits for theirs (a futex; a member missing at the group's timeout is
//     named, DeadlineExceeded, and one whose process exits meanwhile when
//     /proc is next read, after 10 ms then at doubling intervals up to 1 s,
//     Unavailable); every member reaches the same decision. Each
//     verdict also says whether the member could read every other's
//     memory with process_vm_readv (a probe of a word the other published
//     the address of); when all could, all-reduces of at least
//     DEVMESH_SHM_SINGLE_COPY_MIN bytes (unset: 1 MiB, kSingleCopyMinBytes in
//     shm_algorithms.h) take the single-copy path
//     (shm_single_copy.h; single_copy()). A host that forbids cross-memory
//     attach keeps the slots, with no error.
// Cost: one broadcast and one all-gather over the underlying group, and one
// segment of SegmentBytes(size, slot_bytes) bytes. Over the store: 3 round
// trips per member (member 0: Set, Set, MultiGet; the others: Get, Set,
// MultiGet) and about 70 x size bytes per member, keys included (the
// records travel without their trailing zeros: 24 bytes a report).
//
// Semantics: comm/communicator.h, as the other CPU backends (every dtype and op;
// float16/bfloat16 reduced in float32 and rounded back at each step; integer
// sum/prod wrap; avg = sum, then divide by size(), integers truncating toward
// zero). Every member gets the same bits. In place as in NCCL.
//
// Bounds: every wait ends by the group's timeout (DeadlineExceeded naming
// the members that did not arrive); a member that dies mid-call is reported
// at once where pidfds work (shm_exit_watch.h), else within kLivenessSlice
// (50 ms) plus one /proc read; one that destroys its communicator at once
// (Unavailable naming it); Abort on any member, from any thread, ends
// every member's waits at once (a first Send/Recv still connecting its pair
// within 100 ms, shm_links.h).
//
// Thread-safety: one collective at a time per communicator; distinct
// communicators (the dp and tp groups of one rank, say) from distinct threads
// at once; Abort from any thread.
#ifndef DEVMESH_COMM_SHM_SHM_COMMUNICATOR_H_
#define DEVMESH_COMM_SHM_SHM_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/options.h"
#include "comm/shm/shm_algorithms.h"
#include "comm/shm/shm_links.h"
#include "comm/shm/shm_segment.h"
#include "comm/shm/shm_sync.h"
#include "store/store.h"

namespace devmesh {
namespace shm_internal {
struct ShmSetup;
}  // namespace shm_internal

struct ShmOptions {
  // true: a group whose members cannot share a segment is an error
  // (backend "shm"); false: it keeps its underlying group (backend "auto").
  bool require = false;
  // Bytes per member per parity (2 slots a member). Raised to 64 x size when
  // smaller, so every member has a 64-byte piece in the block collectives.
  size_t slot_bytes = shm_internal::kDefaultSlotBytes;
  // Bound on every wait of the set-up and of each collective.
  absl::Duration timeout = absl::Seconds(300);
  // The per-call check (comm/call_check.h: members whose calls differ all
  // get InvalidArgument at the call). Group rank 0's value is the group's
  // (it travels in the segment's header). false only to measure what the
  // check costs (bench/allreduce_2d --raw_call_check=false).
  bool check_calls = true;
};

// Gives `group` a shared-memory transport (collective over `group`: every
// member calls it, with the same options). Returns a shm Communicator over
// `group`; or, when the members cannot all share one segment and
// options.require is false, `group` itself. A group of size 1 is shm at no
// cost (no segment). Errors: InvalidArgument for a null group or a timeout
// that is not positive; FailedPrecondition (require only) naming a member
// that cannot share memory and why ("no shared-memory segment ... here":
// another /dev/shm; "its identity in the segment ... is not the one it
// announced": a mapping not shared, found by each member on its own; "pid
// ... not visible": another pid namespace); the underlying group's errors
// from the set-up exchange (DeadlineExceeded, Unavailable); step 6's
// (CreateShmGroup's list; its wait bounded by options.timeout from its
// start).
absl::StatusOr<std::shared_ptr<Communicator>> ShareMemory(
    std::shared_ptr<Communicator> group, const ShmOptions& options);

// A shared-memory group over `store` alone, keys under "shm/" (collective:
// every member calls it with the same size, options.global_ranks and
// shm.require; rank in [0, size)). The set-up is bounded by
// options.timeout as a whole; options.timeout also bounds each collective
// (shm.timeout is ignored). Returns nullptr when the members cannot all
// share one segment and !shm.require (every member alike: the caller may
// then make a cross-host group of the same members under the same store, as
// device_mesh does for backend "auto"). Errors: InvalidArgument as the
// other backends' argument checks (comm/group_args.h: size < 1, rank
// outside [0, size), a timeout that is not positive, global_ranks of
// another length, negative or repeated); FailedPrecondition (require) as ShareMemory's;
// DeadlineExceeded "shm set-up (...): global rank(s) [..] did not join the
// group before the group's deadline", naming the members whose record is
// missing, or "... mapped the group's segment but did not check it before
// the group's deadline" (step 6); Unavailable "... global rank N (pid P)
// exited before it checked the group's segment" (with kProcessGonePayload)
// or "... global rank N gave up the set-up" (its own exchange failed); the
// store's errors with their code, prefixed. Thread-safe (one call per
// (store, group)).
absl::StatusOr<std::unique_ptr<Communicator>> CreateShmGroup(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options, const ShmOptions& shm);

// CreateCommunicator("shm", ...): CreateShmGroup with require = true.
absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options);

class ShmCommunicator final : public Communicator {
 public:
  // Use ShareMemory. `setup` comes from shm_internal::SetUpSharedMemory over
  // `group`.
  ShmCommunicator(std::shared_ptr<Communicator> group,
                  shm_internal::ShmSetup setup);
  // Use CreateShmGroup. `setup` comes from SetUpSharedMemory over the store
  // channel under `prefix` in `store`; `options` are the group's (its
  // global_ranks given, one per member).
  ShmCommunicator(std::shared_ptr<Store> store, std::string prefix, int rank,
                  const CommOptions& options, shm_internal::ShmSetup setup);
  ~ShmCommunicator() override;

  absl::string_view backend() const override { return "shm"; }
  // Whether all-reduces of at least kSingleCopyMinBytes read the members'
  // buffers directly (process_vm_readv, probed at set-up and allowed by
  // DEVMESH_SHM_SINGLE_COPY; comm/shm/shm_single_copy.h) instead of going
  // through the segment's slots. Thread-safe (fixed at creation).
  bool single_copy() const { return single_copy_; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(global_ranks_.size()); }
  const std::vector<int>& global_ranks() const override {
    return global_ranks_;
  }

 protected:
  // The backend interface (comm/communicator.h).
  absl::Status DoAllReduce(const void* send, void* recv, size_t count,
                           DataType dtype, ReduceOp op) override;
  absl::Status DoAllGather(const void* send, void* recv, size_t count,
                           DataType dtype) override;
  absl::Status DoReduceScatter(const void* send, void* recv, size_t count,
                               DataType dtype, ReduceOp op) override;
  absl::Status DoBroadcast(const void* send, void* recv, size_t count,
                           DataType dtype, int root) override;
  absl::Status DoAllToAll(const void* send, void* recv, size_t count,
                          DataType dtype) override;
  // Through the underlying group's pairs; for a group made over the store,
  // through a pair connected on the first call with that peer
  // (shm_links.h: DeadlineExceeded naming the peer when it does not make
  // the matching call within the timeout).
  // Agreed counts (AgreeOnAllToAllV), then the exact blocks through the
  // segment, no padding (ShmAllToAllV).
  absl::Status DoAllToAllV(const void* send,
                           absl::Span<const size_t> send_counts,
                           absl::Span<const size_t> send_offsets, void* recv,
                           absl::Span<const size_t> recv_counts,
                           absl::Span<const size_t> recv_offsets,
                           DataType dtype) override;
  absl::Status DoSend(const void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoRecv(void* buf, size_t count, DataType dtype,
                      int peer) override;
  absl::Status DoBarrier() override;
  // Splits the underlying group, then ShareMemory on the child with this
  // communicator's options (and the child's timeout): children are shm when
  // their members share memory. A group made over the store exchanges
  // (color, key) through the store (comm/store_exchange.h: DeadlineExceeded
  // naming the members that did not call Split) and makes each child with
  // CreateShmGroup under "<prefix>split/<n>/<color>/" within the Split's
  // deadline; a child whose segment cannot be made (not required) is a
  // group of the cross-host backend (CrossHostBackendName; NotFound when
  // that backend is not linked) of its members under the same keys, with a
  // timeout of its own.
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override;
  // Aborts the group for every member (shm_sync.h) and the underlying group
  // or the point-to-point pairs.
  absl::Status DoAbort() override;

 public:
  // The underlying group of a ShareMemory group; null for a group
  // made over the store.
  const std::shared_ptr<Communicator>& underlying() const { return group_; }
  // Point-to-point pairs connected so far (0 for ShareMemory groups).
  // Thread-safe.
  int peer_links() const;

 private:
  absl::Status CheckOpen(shm_internal::OpName what) const;
  // CheckOpen, then the per-call check's record of current_call()
  // (ShmSync::BeginCall): the start of every collective.
  absl::Status BeginCall(shm_internal::OpName what);
  // A collective with nothing to move: one step, so that the members' calls
  // are still compared (a member passing 0 elements where another passes 8
  // is a mismatch, not an OK).
  absl::Status EmptyCall(shm_internal::OpName what);
  absl::StatusOr<std::unique_ptr<Communicator>> SplitOverStore(
      int color, int key, const SplitOptions& options);

  int rank_ = 0;
  std::vector<int> global_ranks_;
  std::shared_ptr<Communicator> group_;  // ShareMemory's; else null
  // CreateShmGroup's: the store, its key prefix, the group's options (for
  // Split's children) and the point-to-point pairs.
  std::shared_ptr<Store> store_;
  std::string prefix_;
  CommOptions comm_options_;
  std::unique_ptr<shm_internal::ShmLinks> links_;
  int64_t split_count_ = 0;
  ShmOptions options_;
  std::unique_ptr<shm_internal::ShmSegment> segment_;
  std::unique_ptr<shm_internal::ShmSync> sync_;
  bool single_copy_ = false;  // ShmSetup::single_copy
  // The all-reduce's bounds, read from the settings when the group is made.
  shm_internal::ShmBounds bounds_ = shm_internal::CurrentShmBounds();
  std::atomic<bool> aborted_{false};
};

}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_COMMUNICATOR_H_
