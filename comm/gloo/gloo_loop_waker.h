// devmesh/comm/gloo/gloo_loop_waker.h
// -----------------------------------------------------------------------------
// A Gloo TCP device's event loop without the idle tick.
//
// Debian's Gloo (2022-05, transport/tcp/loop.cc) runs its event loop as
// `epoll_wait(..., 10)`: an idle device wakes 100 times a second, so a few
// hundred idle ranks on a host spend a large share of its CPU on idle
// ticks, and group creation crawls.
//
// Two pieces:
//  - WithLoopThreadSettings: runs the call that makes a device (and so
//    starts its loop thread) on a helper thread whose timer slack (prctl
//    PR_SET_TIMERSLACK) is kIdleTickSlack (and whose policy is SCHED_BATCH,
//    see below). A thread inherits its creator's slack, and
//    Linux lets epoll_wait's timeout fire up to the slack late, so the idle
//    tick fires about once per kIdleTickSlack instead of every 10 ms. A
//    socket event still wakes the loop at once: the slack delays only the
//    timeout.
//  - LoopWaker: the tick is also what Gloo's Loop::unregisterDescriptor waits
//    for (every close of a connected pair, from a thread other than the
//    loop's) and what the loop's destructor waits for (to see its done_
//    flag). With a slow tick those waits would take up to kIdleTickSlack
//    each, so the waker registers an eventfd on the loop (edge-triggered, no
//    handler work) and, while a ScopedLoopKick is alive, writes it on the
//    schedule of kFirstKick/kLastKick: the loop turns, and such a wait ends
//    soon. Every place devmesh makes Gloo wait for a turn holds a kick: each
//    pair connect (Debian's Gloo first takes the pair's own listening socket
//    out of the loop: without the kick each connect that this side makes
//    would take the whole slack), AbortableContext's destructor
//    and Abort (pair closes), the connect watchdog, the device's last
//    release (gloo_device.cc), and, from its timeout on, every buffer wait
//    (ScopedDeadlineKick: a timed-out wait makes Gloo close every pair on the
//    waiting thread). A wait devmesh holds no kick for still ends, at the
//    latest when the slowed tick fires.
//
// Thread-safety: every function here may be called from any thread.
#ifndef DEVMESH_COMM_GLOO_GLOO_LOOP_WAKER_H_
#define DEVMESH_COMM_GLOO_GLOO_LOOP_WAKER_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "gloo/transport/device.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace gloo_internal {

// How late the kernel may fire an idle loop's 10 ms tick; a pair close
// devmesh holds no kick for (none known) waits at most this long.
inline constexpr absl::Duration kIdleTickSlack = absl::Seconds(1);

// How a held kick wakes the loop: at once, then after kFirstKick, the gap
// doubling up to kLastKick (Gloo's own tick) for as long as it is held; each
// new kick starts the series again. A wait for a loop turn that begins just
// after a kick starts (a pair connect's first step, a pair close) ends within
// about kFirstKick; a kick held for long (a connect waiting for a slow peer)
// costs no more than Gloo's own 10 ms tick. One uniform period would be
// either slow for the first case or, with 1024 ranks connecting at once, a
// CPU cost of its own.
inline constexpr absl::Duration kFirstKick = absl::Microseconds(100);
inline constexpr absl::Duration kLastKick = absl::Milliseconds(10);

// Calls `make_device` (which starts Gloo's loop thread) on a short-lived
// helper thread whose timer slack is kIdleTickSlack and whose scheduling
// policy is SCHED_BATCH, so that the loop thread inherits both; the calling
// thread's own slack and policy are never changed. SCHED_BATCH only when
// the caller runs under the default policy (SCHED_OTHER) and
// DEVMESH_GLOO_LOOP_BATCH is not "0"; where prctl or sched_setscheduler
// refuse, that setting stays as inherited. Exceptions from `make_device`
// (and std::system_error when no thread can be started) propagate to the
// caller. Blocks until `make_device` returns.
//
// Why SCHED_BATCH. Gloo's loop handles a readable pair by try-locking the
// pair and, when the rank's own thread holds that lock (posting a send or a
// receive), returning at once; epoll is level-triggered, so the loop spins.
// When a rank is bound to one core (allreduce_2d, torchrun with numactl,
// srun --cpu-bind), the loop thread, woken by the data, preempts the rank's
// thread while that thread holds the lock, then spins until the scheduler's
// tick takes the core back, so every small all-reduce takes a scheduler
// tick. A SCHED_BATCH thread never
// preempts on wake-up, so the lock holder finishes first, and it keeps a
// normal thread's share of the CPU (SCHED_IDLE and nice 19 were faster
// still but starve the loop while any other thread on its core runs).
// The cost: where other threads keep the loop's core busy, a receive waits
// for the running thread's slice to end instead of preempting it (the
// measurements: docs/design_figures.md).
void WithLoopThreadSettings(const std::function<void()>& make_device);

// How long the kick thread keeps planning a wake-up after the last
// ScopedDeadlineKick began, so that a stream of collectives (one deadline
// kick per wait) does not wake it once per wait.
inline constexpr absl::Duration kDeadlineLinger = absl::Seconds(1);

// An eventfd registered on one TCP device's loop, and a thread (started on
// the first kick) that writes it while kicks are held or due.
class LoopWaker {
 public:
  // nullptr when `device` is not Gloo's TCP device or no eventfd can be
  // made (kicks are then no-ops, and waits end at the slowed tick). Never
  // throws.
  static std::shared_ptr<LoopWaker> Attach(::gloo::transport::Device& device);

  // Stops the kick thread and closes the eventfd (which takes it out of the
  // loop's epoll set; the registered handler does nothing, so a turn already
  // under way is harmless). In a child of fork() the parent's thread does
  // not exist: its handle is left alone.
  ~LoopWaker();
  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;

  // Wakes the loop once.
  void Wake();

 private:
  friend class ScopedLoopKick;
  friend class ScopedDeadlineKick;
  using Deadlines = std::multiset<absl::Time>;
  explicit LoopWaker(int event_fd);
  void Begin() ABSL_LOCKS_EXCLUDED(mu_);
  void End() ABSL_LOCKS_EXCLUDED(mu_);
  Deadlines::iterator Arm(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void Disarm(Deadlines::iterator it) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the kick thread if it is not running; false when it cannot be
  // started (or in a child of fork()).
  bool EnsureThreadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the loop must be kicked now.
  bool DueLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const int event_fd_;
  const int owner_pid_;  // the process that made this waker
  sync_internal::Mutex mu_;
  sync_internal::CondVar cv_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;          // ScopedLoopKicks alive
  uint64_t begins_ ABSL_GUARDED_BY(mu_) = 0;   // kicks begun so far
  uint64_t notices_ ABSL_GUARDED_BY(mu_) = 0;  // wake-ups asked of the thread
  Deadlines deadlines_ ABSL_GUARDED_BY(mu_);   // ScopedDeadlineKicks alive
  absl::Time last_arm_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time planned_wake_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread* thread_ ABSL_GUARDED_BY(mu_) = nullptr;  // EnsureThreadLocked
};

// While alive, the loop of `waker` is woken (kFirstKick, kLastKick). A null
// waker makes it a no-op. Never throws.
class ScopedLoopKick {
 public:
  explicit ScopedLoopKick(std::shared_ptr<LoopWaker> waker) noexcept;
  ~ScopedLoopKick();
  ScopedLoopKick(const ScopedLoopKick&) = delete;
  ScopedLoopKick& operator=(const ScopedLoopKick&) = delete;

 private:
  std::shared_ptr<LoopWaker> waker_;
};

// A kick that starts only if it is still alive at `deadline`: held around a
// wait that Gloo ends at its timeout by closing every pair of the context on
// the waiting thread (tcp::UnboundBuffer's waitRecv / waitSend call
// signalException), each close waiting for a loop turn. Costs a mutex and a
// set insertion per wait; the kick thread is woken only when it has no
// earlier wake-up planned (kDeadlineLinger). A null waker makes it a no-op.
// Never throws.
class ScopedDeadlineKick {
 public:
  // `waker` (may be null) must outlive this; taken as a plain pointer so that
  // a wait costs no reference count.
  ScopedDeadlineKick(LoopWaker* waker, absl::Time deadline) noexcept;
  ~ScopedDeadlineKick();
  ScopedDeadlineKick(const ScopedDeadlineKick&) = delete;
  ScopedDeadlineKick& operator=(const ScopedDeadlineKick&) = delete;

 private:
  LoopWaker* const waker_;
  bool armed_ = false;
  std::multiset<absl::Time>::iterator it_;
};

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_LOOP_WAKER_H_
