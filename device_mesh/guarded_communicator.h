// devmesh/device_mesh/guarded_communicator.h
// -----------------------------------------------------------------------------
// GuardedCommunicator: the Communicator a MeshRuntime hands out (mesh groups
// and world communicators). A ForwardingCommunicator over the backend's
// communicator that:
//   - when a collective, Send, Recv or Barrier fails with Unavailable or
//     DeadlineExceeded it returns FailureWatch::Explain of the error: the
//     job's verdict on which rank died, the same on every survivor
//     (device_mesh/failure_watch.h);
//   - when the job's verdict comes (OnVerdict) it refuses every later call
//     (Unavailable with the verdict, or FailedPrecondition when this rank is
//     fenced) and stops the backend's communicator when it holds the dead
//     rank or has a call in flight: a ShrinkableCommunicator (NCCL) is
//     revoked, not aborted, unless this rank is fenced, so that
//     DeviceMesh::Shrink can still shrink it (ncclCommRevoke keeps the
//     parent; comm/shrinkable_communicator.h); where Revoke is Unimplemented
//     (NCCL < 2.28.7) or fails, and for other backends, it is aborted. An
//     idle group of live members is left intact for DeviceMesh::Shrink to
//     keep (it hands the same backend communicator to the next epoch in a
//     new guard);
//   - counts the calls that completed, and whether any failed or was cut
//     short (state()), which Shrink compares across a group's members;
//   - over a backend that starts its I* calls itself (NCCL, enqueued on a
//     CUDA stream), counts such a call in flight until its Work is seen
//     done (by Wait, Test or WaitForStarted), and its Work's error is
//     explained as a blocking call's, verdict included.
// Split's children are guarded too. The cost on success is four atomic
// read-modify-writes (the front's call count among them) and one load.
//
// Thread-safety: as the inner communicator's; OnVerdict and state() may be
// called from any thread.
#ifndef DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_
#define DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "comm/shrinkable_communicator.h"
#include "comm/work.h"
#include "device_mesh/failure_watch.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

class GuardedCommunicator final
    : public ForwardingCommunicator,
      public WatchedGroup,
      public std::enable_shared_from_this<GuardedCommunicator> {
 public:
  // Use Make: the watch holds the guard weakly.
  static std::shared_ptr<GuardedCommunicator> Make(
      std::shared_ptr<Communicator> inner, std::shared_ptr<FailureWatch> watch) {
    auto guard = std::shared_ptr<GuardedCommunicator>(
        new GuardedCommunicator(std::move(inner), watch));
    if (watch != nullptr) watch->Register(guard);
    return guard;
  }
  ~GuardedCommunicator() override { StopAsync(); }

  // What Shrink compares across a group's members: calls that returned OK,
  // and whether the group is clean (no call failed, none in flight, not
  // aborted, the verdict found it idle).
  struct State {
    int64_t completed = 0;
    bool clean = false;
  };
  State state() const {
    return State{completed_.load(),
                 !tainted_.load() && in_flight_.load() == 0};
  }

  // Waits until every I* call that the backend started itself (NCCL) and
  // that was issued through this guard has ended, or `deadline` passes (its
  // Works go on; state() still counts them in flight). After the verdict,
  // such a call's communicator is revoked or aborted, so the wait is short.
  // Returns the number of calls still running at the deadline. CPU
  // backends' I* calls are WaitForAsync's. Thread-safe.
  int WaitForStarted(absl::Time deadline) {
    std::vector<Work> works;
    {
      sync_internal::MutexLock lock(&works_mu_);
      works.swap(started_);
    }
    int running = 0;
    for (const Work& w : works) {
      if (absl::IsDeadlineExceeded(w.Wait(deadline)) && !w.Test()) ++running;
    }
    return running;
  }

  void OnVerdict(int dead, const std::string& verdict, bool fenced) override {
    {
      sync_internal::MutexLock lock(&mu_);
      // The first refusal's text stays, unless this rank is now fenced.
      if (refused_.load() && !fenced) return;
      if (fenced) {
        refusal_ =
            WithFenced(absl::FailedPreconditionError(absl::StrCat(
                           watch_->fenced(), " -- this call was refused")),
                       watch_->rank());
      } else {
        refusal_ = absl::UnavailableError(absl::StrCat(
            verdict,
            " -- this call was refused: go on with the mesh "
            "DeviceMesh::Shrink returns (every survivor calls it on the root "
            "mesh), or exit"));
        if (dead >= 0) refusal_ = WithPeer(std::move(refusal_), dead);
      }
    }
    refused_.store(true);  // seq_cst: pairs with Intercept's in_flight_ add
    const auto& ranks = inner()->global_ranks();
    const bool holds_dead =
        std::find(ranks.begin(), ranks.end(), dead) != ranks.end();
    if (fenced || holds_dead || in_flight_.load() > 0) {
      tainted_.store(true);
      auto* shrinkable = dynamic_cast<ShrinkableCommunicator*>(inner());
      if (!fenced && shrinkable != nullptr && shrinkable->Revoke().ok()) {
        return;
      }
      (void)inner()->Abort();
    }
  }

 protected:
  absl::Status Intercept(CallKind kind,
                         absl::FunctionRef<absl::Status()> call) override {
    (void)kind;
    in_flight_.fetch_add(1);  // seq_cst: either OnVerdict sees it, or we
                              // see refused_
    if (refused_.load()) {
      in_flight_.fetch_sub(1);
      return Refusal();
    }
    absl::Status s = call();
    if (s.ok()) {
      completed_.fetch_add(1);
    } else {
      tainted_.store(true);
    }
    in_flight_.fetch_sub(1);
    return Check(std::move(s));
  }

  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int key, const SplitOptions& options) override;

  // An I* call of a backend that starts it itself (NCCL): Intercept sees
  // only its enqueue, so the guard counts it in flight until its Work ends
  // and explains that Work's error. The Work holds the guard weakly: it may
  // outlive it.
  Work StartAsync(std::function<absl::Status()> call) override {
    if (!StartsAsyncItself()) {
      return ForwardingCommunicator::StartAsync(std::move(call));
    }
    in_flight_.fetch_add(1);  // seq_cst, as Intercept's
    if (refused_.load()) {
      in_flight_.fetch_sub(1);
      return Work(Refusal());
    }
    bool enqueued = false;  // the backend runs `call` before returning
    Work started = ForwardingCommunicator::StartAsync(
        [&enqueued, call = std::move(call)] {
          absl::Status s = call();
          enqueued = s.ok();
          return s;
        });
    if (!enqueued) {  // its error, already explained by Intercept
      in_flight_.fetch_sub(1);
      return started;
    }
    std::weak_ptr<GuardedCommunicator> self = weak_from_this();
    Work work = Work::FromPoll(
        [started, self]() -> std::optional<absl::Status> {
          if (!started.Test()) return std::nullopt;
          absl::Status s = started.Wait(absl::InfinitePast());
          std::shared_ptr<GuardedCommunicator> guard = self.lock();
          if (guard == nullptr) return s;
          return guard->EndStarted(std::move(s));
        });
    {
      sync_internal::MutexLock lock(&works_mu_);
      // Forget the Works seen done (Test of a done Work never polls).
      started_.erase(std::remove_if(started_.begin(), started_.end(),
                                    [](const Work& w) { return w.Test(); }),
                     started_.end());
      started_.push_back(work);
    }
    return work;
  }

  absl::Status DoAbort() override {
    aborted_.store(true);
    tainted_.store(true);
    return inner()->Abort();
  }

 private:
  GuardedCommunicator(std::shared_ptr<Communicator> inner,
                      std::shared_ptr<FailureWatch> watch)
      : ForwardingCommunicator(std::move(inner)), watch_(std::move(watch)) {}

  // The end of a started I* call, seen by its Work's poll.
  absl::Status EndStarted(absl::Status s) {
    if (!s.ok()) tainted_.store(true);  // before in_flight_ drops: state()
    in_flight_.fetch_sub(1);             // never sees it clean meanwhile
    return Check(std::move(s));
  }

  absl::Status Refusal() const {
    if (!refused_.load()) return absl::OkStatus();
    sync_internal::MutexLock lock(&mu_);
    return refusal_;
  }

  absl::Status Check(absl::Status s) {
    if (s.ok() || watch_ == nullptr) return s;
    if (aborted_.load()) return s;  // aborted here: nothing to explain
    if (std::string f = watch_->fenced(); !f.empty()) {
      return WithPayloadsOf(
          WithFenced(absl::FailedPreconditionError(
                         absl::StrCat(f, " -- this call: ", s.message())),
                     watch_->rank()),
          s);
    }
    if (absl::IsFailedPrecondition(s)) {
      // Aborted by the job's verdict: say which.
      if (refused_.load()) {
        sync_internal::MutexLock lock(&mu_);
        return WithPayloadsOf(
            Reworded(refusal_,
                     absl::StrCat(refusal_.message(), " (", s.message(), ")")),
            s);
      }
      return s;
    }
    return watch_->Explain(s, inner()->global_ranks());
  }

  std::shared_ptr<FailureWatch> watch_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> tainted_{false};
  std::atomic<bool> refused_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> completed_{0};
  mutable sync_internal::Mutex mu_;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  // The Works of started I* calls not yet seen done. Their polls may run
  // under it: EndStarted, which a poll calls, never takes it.
  sync_internal::Mutex works_mu_;
  std::vector<Work> started_ ABSL_GUARDED_BY(works_mu_);
};

inline absl::StatusOr<std::unique_ptr<Communicator>>
GuardedCommunicator::DoSplit(int color, int key, const SplitOptions& options) {
  if (absl::Status refused = Refusal(); !refused.ok()) return refused;
  auto child = inner()->Split(color, key, options);
  if (!child.ok()) return Check(child.status());
  if (*child == nullptr || watch_ == nullptr) return child;
  std::shared_ptr<Communicator> shared(std::move(*child));
  // A unique_ptr child: the watch follows it through a guard, owned by the
  // returned view.
  return std::unique_ptr<Communicator>(
      new ForwardingCommunicator(Make(std::move(shared), watch_)));
}

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_GUARDED_COMMUNICATOR_H_
