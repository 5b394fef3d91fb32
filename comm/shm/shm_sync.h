// devmesh/comm/shm/shm_sync.h
// -----------------------------------------------------------------------------
// ShmSync: the steps of one shared-memory group. Every collective is a
// sequence of steps; at each step every member calls Arrive() then
// WaitAll(), which returns once every member has arrived at that step.
// Steps are numbered alike on every member (collectives are called in the
// same order, NCCL's rule), so the shared arrival counter reaches
// size * step exactly when the step is complete.
//
// Waiting. WaitAll yields the CPU (sched_yield) for up to 500 us, so that a
// peer on the same core runs at once and a stream of collectives never
// sleeps, then sleeps on the segment's futex word (the "bell"); the last
// member to arrive rings it and wakes the sleepers, with one syscall per
// step, and none when nobody sleeps. A short spin before yielding is
// possible (DEVMESH_SHM_SPIN) but off: it lost on every size measured (the
// figures are in shm_sync.cc).
//
// Bounds. Each WaitAll ends by the group's timeout: DeadlineExceeded naming
// the global ranks that did not arrive; every later call of that member is
// then a FailedPrecondition saying so (its steps no longer line up with the
// others', and it takes no more: a late member pairs with nothing wrong). While
// it sleeps it wakes every liveness slice (kLivenessSlice, or
// kWatchedLivenessSlice when every member's exit is watched) to check the
// members it waits for: one that died (SIGKILL, crash; a zombie counts) or that
// left (destroyed its communicator) ends the wait with Unavailable naming it,
// so a death is noticed within one slice, not at the timeout. Sooner where the
// kernel allows pidfds: every member watches every other's process
// (shm_exit_watch.h), and an exit that is not a leave marks the member dead in
// the segment and rings the bell, so waiters wake with Unavailable naming it at
// once. Abort, from any thread of any member, sets the segment's aborted_by
// word and rings the bell: every member's waits end at once (FailedPrecondition
// on the member that aborted, Unavailable naming it on the others), and so do
// all later steps.
//
// Thread-safety: Arrive/WaitAll/Leave from one thread at a time (the
// communicator's collectives); Abort from any thread.
#ifndef DEVMESH_COMM_SHM_SHM_SYNC_H_
#define DEVMESH_COMM_SHM_SHM_SYNC_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/shm/shm_process.h"
#include "comm/shm/shm_segment.h"

namespace devmesh {
namespace shm_internal {

// How often a sleeping waiter checks the liveness of the members it waits
// for (so a dead member is reported within this, plus one /proc read per
// missing member), in a group where some member's process cannot be watched
// (shm_exit_watch.h: pidfd_open refused).
inline constexpr absl::Duration kLivenessSlice = absl::Milliseconds(50);

// The same where the exit watch covers every other member: a death is
// reported at once by the watch, and the slice is only a safety net. Not 50
// ms: each slice reads /proc/<pid>/stat of every missing member, and with
// 1024 ranks starting on 2 cores, 32-member groups whose members arrive
// seconds apart, those reads were about 8% of all CPU time (perf: in
// do_task_stat and the opens of /proc), with wake-ups on top.
inline constexpr absl::Duration kWatchedLivenessSlice = absl::Seconds(1);

// Names the call in errors ("shm allreduce float32 x 1024 sum"). Called only
// when an error is returned, so that a collective formats no text on its
// way through (a 1 KiB all-reduce takes about 2 us).
using OpName = absl::FunctionRef<std::string()>;

class ShmSync {
 public:
  // `segment` must outlive this. `identities[i]` is group rank i's process;
  // `global_ranks[i]` its world rank (for messages).
  // `label` names the group in the per-call check's error
  // (CommOptions::label).
  ShmSync(const ShmSegment* segment, int rank, std::vector<int> global_ranks,
          std::vector<ProcessIdentity> identities, absl::Duration timeout,
          std::string label = "");
  // Ends the exit watches (no OnExit runs after it).
  ~ShmSync();
  ShmSync(const ShmSync&) = delete;
  ShmSync& operator=(const ShmSync&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Group rank i's world rank and process id.
  int global_rank(int i) const { return global_ranks_[i]; }
  int64_t pid(int i) const { return identities_[i].pid; }

  // Starts the next step and announces this member's arrival at it. Returns
  // the step number.
  uint32_t Arrive();
  // Waits until every member has arrived at `step`; `what` names the call in
  // errors. Errors: DeadlineExceeded,
  // Unavailable (a member died, left, or aborted the group),
  // FailedPrecondition (this member aborted it).
  absl::Status WaitAll(uint32_t step, OpName what);
  // Arrive() then WaitAll() of that step.
  absl::Status Step(OpName what) { return WaitAll(Arrive(), what); }

  // The per-call check (comm/call_check.h): records `call` as this member's
  // next collective, to be compared with every member's at the next step.
  // That step's WaitAll, once every member arrived, reads every member's
  // record and fails with CallMismatchError (InvalidArgument, the same on
  // every member: the first member whose call differs from group rank
  // 0's) when they differ; from then on CheckOpen returns that error.
  // Call it before the collective's first Arrive, after CheckOpen, on every
  // collective that has a step (a collective of no elements must still
  // take one step, so that the others' calls are checked against it). Does
  // nothing in a group made with ShmOptions::check_calls false.
  void BeginCall(const CallRecord& call);

  // The parity of the next round (a round is one or two steps reading and
  // writing the slots of one parity; see shm_algorithms.h).
  int NextRoundParity() { return static_cast<int>(rounds_++ & 1); }

  // OK while the group is usable: FailedPrecondition once this member
  // aborted; Unavailable once another did, or once a member was found dead
  // (naming it); InvalidArgument once the members' calls differed
  // (BeginCall).
  absl::Status CheckOpen(OpName what) const;

  // Unavailable naming the member some member of the group found dead (the
  // first one found), OK when none was. Never waits.
  absl::Status DeathFound(OpName what) const;

  // Aborts the group for every member (see the top of this file). Idempotent.
  void Abort();
  // Marks this member as gone (destruction), waking waiters.
  void Leave();

 private:
  // WaitAll without the per-call check.
  absl::Status WaitStep(uint32_t step, OpName what);
  // Compares every member's record of the current checked call.
  absl::Status CheckCalls();
  // The members that have not arrived at `step`, as global ranks.
  std::vector<int> Missing(uint32_t step) const;
  // Unavailable naming the member found dead (by any member), else a
  // missing one that is dead (checked under /proc when `check_processes` or
  // when a missing member left), else one that left; OK otherwise.
  absl::Status CheckMissing(uint32_t step, OpName what,
                            bool check_processes);
  absl::Status DeadError(OpName what, int member) const;
  bool Reached(uint32_t step) const;
  void Ring();
  // On the exit watch's thread: group rank `member`'s process exited.
  void OnExit(int member);

  const ShmSegment* segment_;
  SyncLine* sync_;
  int rank_;
  int size_;
  std::vector<int> global_ranks_;
  std::string label_;
  std::vector<ProcessIdentity> identities_;
  absl::Duration timeout_;
  uint32_t step_ = 0;
  uint64_t rounds_ = 0;
  // The segment header's check_calls: BeginCall does nothing when false.
  bool check_calls_ = true;
  // Checked calls so far (BeginCall), and whether the next WaitAll checks.
  uint64_t checked_calls_ = 0;
  bool check_next_ = false;
  // The members' calls differed: CheckOpen returns this from then on.
  // Written by the collectives' thread, read by it only.
  absl::Status mismatch_;
  // A step timed out: CheckOpen returns this (FailedPrecondition) from then
  // on. As mismatch_.
  absl::Status broken_;
  std::atomic<bool> aborted_{false};
  std::vector<uint64_t> watches_;  // ExitWatch registrations
  // kWatchedLivenessSlice when watches_ covers every other member, else
  // kLivenessSlice.
  absl::Duration liveness_slice_ = kLivenessSlice;
};

}  // namespace shm_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_SHM_SHM_SYNC_H_
