// devmesh/comm/shm/shm_sync.cc
#include "comm/shm/shm_sync.h"

#include <sched.h>

#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/call_check.h"
#include "comm/communicator.h"
#include "comm/shm/shm_exit_watch.h"
#include "comm/shm/shm_futex.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {
namespace shm_internal {
namespace {

// How a waiter waits before it sleeps: kSpinIterations pause hints, then
// sched_yield for up to kYieldFor, then a futex sleep. Four ranks on two
// cores: a spinning member holds the core its peer needs, so the spin is
// short; a yield hands the core to a runnable peer at once (Open MPI's
// mpi_yield_when_idle) and costs one syscall when none is, so a stream of
// collectives never sleeps; a member that waits longer sleeps and costs no
// CPU. DEVMESH_SHM_SPIN and DEVMESH_SHM_YIELD_US override them (tuning knobs,
// as NCCL's NCCL_* variables; read once).
// Measured with bench/allreduce_2d (2x2 mesh, 4 ranks on 2 cores, float32),
// us per all-reduce at 1 KiB / 16 KiB:
//   futex only (no yield):      dp 4.2 / 7.6,  tp 40 / 60
//   yield 500 us, spin 256:     dp 5.1 / 8.3,  tp 15 / 45
//   yield 500 us, spin 64:      dp 2.6 / 5.9,  tp 15 / 32
//   yield 500 us, no spin:      dp 1.8 / 4.9,  tp 18 / 38 (tp noisy: 3-40)
// (the tp figures before allreduce_2d lined ranks up after its barrier;
// since then tp is 4.4 us at 1 KiB, Open MPI's vader 3.2 in the same run).
// Spinning only pays when the peer runs on another CPU at that moment, which
// it often does not here; it never pays when the peer shares this CPU.
constexpr int kSpinIterations = 0;
constexpr int kYieldForMicros = 500;

int SpinIterations() {
  return static_cast<int>(std::min<int64_t>(
      ProcessSettings().shm_spin.value_or(kSpinIterations), INT_MAX));
}

absl::Duration YieldFor() {
  return absl::Microseconds(
      ProcessSettings().shm_yield_us.value_or(kYieldForMicros));
}

}  // namespace

ShmSync::ShmSync(const ShmSegment* segment, int rank,
                 std::vector<int> global_ranks,
                 std::vector<ProcessIdentity> identities,
                 absl::Duration timeout, std::string label)
    : segment_(segment),
      sync_(segment->sync()),
      rank_(rank),
      size_(static_cast<int>(segment->size())),
      global_ranks_(std::move(global_ranks)),
      label_(std::move(label)),
      identities_(std::move(identities)),
      timeout_(timeout),
      check_calls_(segment->header()->check_calls != 0) {
  // Every other member's exit rings the bell at once (shm_exit_watch.h);
  // the liveness slices stay for a member that cannot be watched.
  ExitWatch& watch = ExitWatch::Get();
  for (int i = 0; i < size_ && i < static_cast<int>(identities_.size());
       ++i) {
    if (i == rank_) continue;
    const uint64_t h = watch.Watch(identities_[i], [this, i] { OnExit(i); });
    if (h != 0) watches_.push_back(h);
  }
  if (static_cast<int>(watches_.size()) == size_ - 1) {
    liveness_slice_ = kWatchedLivenessSlice;
  }
}

ShmSync::~ShmSync() {
  ExitWatch& watch = ExitWatch::Get();
  for (uint64_t h : watches_) watch.Unwatch(h);
}

void ShmSync::OnExit(int member) {
  // A member that left (destroyed its communicator) before exiting is not
  // dead to the group: its waiters say it left (CheckMissing).
  if (segment_->member(member)->state.load() != kMemberLeft) {
    uint32_t none = 0;
    sync_->dead_member.compare_exchange_strong(
        none, static_cast<uint32_t>(member) + 1);
  }
  Ring();
}

uint32_t ShmSync::Arrive() {
  const uint32_t step = ++step_;
  segment_->member(rank_)->step.store(step, std::memory_order_relaxed);
  const uint32_t target = step * static_cast<uint32_t>(size_);
  // seq_cst: ordered against the sleepers load below, and against a
  // waiter's sleepers increment and arrivals load (a Dekker pair), so that
  // either the waiter sees the last arrival or the last arriver sees it.
  const uint32_t now = sync_->arrivals.fetch_add(1) + 1;
  if (now == target) {
    sync_->bell.fetch_add(1);
    if (sync_->sleepers.load() > 0) FutexWake(&sync_->bell, INT_MAX);
  }
  return step;
}

bool ShmSync::Reached(uint32_t step) const {
  const uint32_t target = step * static_cast<uint32_t>(size_);
  return static_cast<int32_t>(sync_->arrivals.load() - target) >= 0;
}

void ShmSync::Ring() {
  sync_->bell.fetch_add(1);
  FutexWake(&sync_->bell, INT_MAX);
}

absl::Status ShmSync::CheckOpen(OpName what) const {
  if (!mismatch_.ok()) return mismatch_;
  if (!broken_.ok()) return broken_;
  if (aborted_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what(), ": communicator was aborted"));
  }
  const uint32_t by = sync_->aborted_by.load();
  if (by != 0) {
    const int member = static_cast<int>(by) - 1;
    const int global = member < size_ ? global_ranks_[member] : -1;
    return WithPeer(
        absl::UnavailableError(absl::StrCat(
            what(), ": the group was aborted by global rank ", global)),
        global);
  }
  const uint32_t dead = sync_->dead_member.load();
  if (dead != 0 && static_cast<int>(dead) <= size_) {
    return DeadError(what, static_cast<int>(dead) - 1);
  }
  return absl::OkStatus();
}

std::vector<int> ShmSync::Missing(uint32_t step) const {
  std::vector<int> out;
  for (int i = 0; i < size_; ++i) {
    const uint32_t s = segment_->member(i)->step.load();
    if (static_cast<int32_t>(s - step) < 0) out.push_back(global_ranks_[i]);
  }
  return out;
}

absl::Status ShmSync::DeathFound(OpName what) const {
  const uint32_t dead = sync_->dead_member.load();
  if (dead != 0 && static_cast<int>(dead) <= size_) {
    return DeadError(what, static_cast<int>(dead) - 1);
  }
  return absl::OkStatus();
}

absl::Status ShmSync::DeadError(OpName what, int member) const {
  return WithProcessGone(
      absl::UnavailableError(absl::StrCat(what(), ": global rank ",
                                          global_ranks_[member], " (pid ",
                                          identities_[member].pid, ") died")),
      global_ranks_[member]);
}

absl::Status ShmSync::CheckMissing(uint32_t step, OpName what,
                                   bool check_processes) {
  const uint32_t dead = sync_->dead_member.load();
  if (dead != 0 && static_cast<int>(dead) <= size_) {
    return DeadError(what, static_cast<int>(dead) - 1);
  }
  std::vector<int> missing;
  int left = -1;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    const MemberLine* m = segment_->member(i);
    if (static_cast<int32_t>(m->step.load() - step) >= 0) continue;
    if (m->state.load() == kMemberLeft) {
      // It may have reached the step and left between the two loads (a
      // member stores its step before it leaves; both are sequentially
      // consistent): read the step again before calling it missing. Seen
      // under TSan: a barrier's last member to pass destroyed its group
      // while a slower one checked it, which then failed with "left the
      // group before arriving".
      if (static_cast<int32_t>(m->step.load() - step) >= 0) continue;
      if (left < 0) left = i;
    }
    missing.push_back(i);
  }
  // A member that left may have left because another died: look for the
  // dead one first, so every survivor names the same rank.
  if (check_processes || left >= 0) {
    for (int i : missing) {
      if (CheckLiveness(identities_[i]) != Liveness::kDead) continue;
      uint32_t none = 0;
      sync_->dead_member.compare_exchange_strong(
          none, static_cast<uint32_t>(i) + 1);
      const uint32_t first = sync_->dead_member.load();
      return DeadError(what, static_cast<int>(first) - 1);
    }
  }
  if (left >= 0) {
    return WithPeerLeft(
        absl::UnavailableError(absl::StrCat(
            what(), ": global rank ", global_ranks_[left],
            " left the group (its communicator was destroyed) before "
            "arriving")),
        global_ranks_[left]);
  }
  return absl::OkStatus();
}

void ShmSync::BeginCall(const CallRecord& call) {
  if (!check_calls_) return;
  CallSlot& slot = segment_->member(rank_)->call[++checked_calls_ & 1];
  slot.seq = call.seq;
  slot.count = call.count;
  slot.what = static_cast<uint32_t>(call.kind) |
              static_cast<uint32_t>(call.dtype) << 8 |
              static_cast<uint32_t>(call.op) << 16;
  slot.root = call.root;
  check_next_ = true;
}

absl::Status ShmSync::CheckCalls() {
  const int parity = static_cast<int>(checked_calls_ & 1);
  auto record = [&](int member) {
    const CallSlot& slot = segment_->member(member)->call[parity];
    CallRecord r;
    r.seq = slot.seq;
    r.count = slot.count;
    r.kind = static_cast<CallKind>(slot.what & 0xff);
    r.dtype = static_cast<DataType>((slot.what >> 8) & 0xff);
    r.op = static_cast<ReduceOp>((slot.what >> 16) & 0xff);
    r.root = slot.root;
    return r;
  };
  // Every member compares each with group rank 0, so all name the same.
  const CallRecord first = record(0);
  for (int i = 1; i < size_; ++i) {
    const CallRecord other = record(i);
    if (SameCall(first, other)) continue;
    mismatch_ =
        CallMismatchError("shm", global_ranks_[0], first, global_ranks_[i],
                          other, global_ranks_, label_);
    return mismatch_;
  }
  return absl::OkStatus();
}

absl::Status ShmSync::WaitAll(uint32_t step, OpName what) {
  absl::Status s = WaitStep(step, what);
  if (absl::IsDeadlineExceeded(s) && broken_.ok()) {
    // This member arrived at a step a member did not reach in time: its
    // next call's steps would pair with that member's late ones (only a
    // call's first step is checked). It takes no further step; the late
    // member then completes this step and times out at its next.
    broken_ = absl::FailedPreconditionError(
        absl::StrCat(what(),
                     ": refused: an earlier step of this group timed out, so "
                     "this member's steps no longer line up with the others' (",
                     s.message(), ")"));
  }
  if (!check_next_) return s;
  check_next_ = false;
  return s.ok() ? CheckCalls() : s;
}

absl::Status ShmSync::WaitStep(uint32_t step, OpName what) {
  // A step every member reached is complete, whatever happened since (a
  // member that aborts or leaves right after its last step must not fail
  // peers still reading that step's data); the next call's CheckOpen sees it.
  if (Reached(step)) return absl::OkStatus();
  for (int i = SpinIterations(); i > 0; --i) {
    CpuRelax();
    if (Reached(step)) return absl::OkStatus();
  }
  const absl::Time start = absl::Now();
  if (YieldFor() > absl::ZeroDuration()) {
    const absl::Time yield_until = start + YieldFor();
    do {
      sched_yield();
      if (Reached(step)) return absl::OkStatus();
      if (sync_->aborted_by.load() != 0) break;
    } while (absl::Now() < yield_until);
  }
  const absl::Time deadline = start + timeout_;
  absl::Time next_check = start + liveness_slice_;
  while (true) {
    const uint32_t bell = sync_->bell.load();
    if (Reached(step)) break;
    DEVMESH_RETURN_IF_ERROR(CheckOpen(what));
    // A member that left (or was marked dead) before `bell` was read rang
    // the bell already: see it now rather than at the end of the slice.
    DEVMESH_RETURN_IF_ERROR(CheckMissing(step, what, false));
    sync_->sleepers.fetch_add(1);
    if (!Reached(step) && sync_->aborted_by.load() == 0) {
      FutexWait(&sync_->bell, bell,
                std::min(next_check, deadline) - absl::Now());
    }
    sync_->sleepers.fetch_sub(1);
    if (Reached(step)) break;
    DEVMESH_RETURN_IF_ERROR(CheckOpen(what));
    const absl::Time now = absl::Now();
    const bool slice_over = now >= next_check;
    if (slice_over) next_check = now + liveness_slice_;
    DEVMESH_RETURN_IF_ERROR(CheckMissing(step, what, slice_over));
    if (now >= deadline) {
      if (Reached(step)) break;
      return absl::DeadlineExceededError(absl::StrCat(
          what(), ": global rank(s) [", absl::StrJoin(Missing(step), ", "),
          "] did not arrive within ", absl::FormatDuration(timeout_)));
    }
  }
  return absl::OkStatus();
}

void ShmSync::Abort() {
  aborted_.store(true);
  uint32_t none = 0;
  sync_->aborted_by.compare_exchange_strong(none,
                                            static_cast<uint32_t>(rank_) + 1);
  Ring();
}

void ShmSync::Leave() {
  segment_->member(rank_)->state.store(kMemberLeft);
  Ring();
}

}  // namespace shm_internal
}  // namespace devmesh
