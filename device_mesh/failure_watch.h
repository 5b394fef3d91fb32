// devmesh/device_mesh/failure_watch.h
// -----------------------------------------------------------------------------
// FailureWatch: a job-wide verdict on which rank died, so that a death
// anywhere ends every survivor's blocked collective within about a second,
// and every survivor's error names the same rank (issue 20, first step).
//
// Per runtime, one thread (started with the runtime's first group):
//   - renews this rank's lease: Add("devmesh/job/lease/<rank>", 1) every
//     `period` (the lease counter advancing is the rank being alive);
//   - waits on the store for the verdict key "devmesh/job/death" (a parked
//     Get of `period`, on a connection of its own: store clients open one
//     per concurrent call), and when it appears aborts every communicator
//     registered with Register (Gloo's Abort wakes waits at once,
//     comm/gloo/gloo_shutdown.h), so survivors that are blocked on live
//     peers wake too;
//   - when the store does not answer, notes it for Explain (which then
//     adds it to the error, keeping its code) without aborting anything (a
//     rank 0 that hosts the store may end first while groups that no
//     longer need it finish), and goes on renewing should it come back.
// A rank whose runtime ends sets "devmesh/job/left/<rank>": it left, and
// is never called dead. A communicator registered after a verdict is
// aborted at once.
//
// Explain(error, members), called by device_mesh's communicators when a
// collective fails with Unavailable or DeadlineExceeded: a verdict already
// known is returned at once; else the lease of the peer the error names
// ("global rank N" of the group, as Gloo's errors do; every other member
// when it names none) is read twice, `kLeaseMisses` periods apart:
// unchanged, without a "left" mark, means dead (not on one peer's word: the lease
// decides), and the verdict is published with CompareSet, so the first
// publisher's text is everyone's; else the verdict key is waited for a few
// periods (a rank woken by the abort names a live peer). The returned
// status is Unavailable "global rank X died (its lease was not renewed for
// T; first reported by global rank Y) -- this call: <the original error>",
// the same prefix on every survivor; or `error` itself when there is no
// verdict (the peer is alive: it aborted or closed its group).
//
// Bounds: detection = the failed call's Explain, at most kLeaseMisses
// periods (+ store round trips); propagation = one parked Get on every
// other rank (immediate) + one Abort. With the default period (200 ms), a
// death ends every survivor's wait in about 0.5 s.
//
// Thread-safety: every method may be called from any thread. The thread is
// detached at Start and ends within one period after the watch is
// destroyed (it owns what it touches through shared pointers). Every rank
// of a job must use the same lease period (DEVMESH_LEASE_PERIOD_MS).
#ifndef DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_
#define DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "store/store.h"

namespace devmesh {

class FailureWatch {
 public:
  // Lease periods without renewal after which a suspected peer is dead.
  static constexpr int kLeaseMisses = 3;

  // Starts the thread for rank `rank` over `store` (the runtime's, not
  // counted in its round trips) with lease period `period` (> 0).
  static std::shared_ptr<FailureWatch> Start(std::shared_ptr<Store> store,
                                             int rank, absl::Duration period);
  ~FailureWatch();
  FailureWatch(const FailureWatch&) = delete;
  FailureWatch& operator=(const FailureWatch&) = delete;

  // Aborts `comm` when a verdict comes (held weakly: a communicator already
  // gone is skipped).
  void Register(std::weak_ptr<Communicator> comm);

  // See the top of this file. OK stays OK; codes other than Unavailable and
  // DeadlineExceeded are returned as they are.
  // `members`: the failed call's group (global ranks), the suspects when
  // the error names no peer.
  absl::Status Explain(const absl::Status& error,
                       const std::vector<int>& members);

  // The verdict, once there is one ("" before).
  std::string verdict() const;

 private:
  struct State;
  explicit FailureWatch(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_
