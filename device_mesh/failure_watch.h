// devmesh/device_mesh/failure_watch.h
// -----------------------------------------------------------------------------
// FailureWatch: a job-wide verdict on which rank died, per epoch, so that a
// death anywhere ends every survivor's blocked collective within about a
// second, every survivor's error names the same rank, and DeviceMesh::Shrink
// can go on without it.
//
// Epochs. A job starts in epoch 0 with every world rank a member; each
// DeviceMesh::Shrink that succeeds moves the survivors to the next epoch
// with fewer members (AdvanceEpoch). Every store key of an epoch is under
// "devmesh/epoch/<e>/", so no key of an old epoch is ever read as a new
// one's.
//
// Leases (rank_liveness.h picks by the store; the lease is job-wide, across
// epochs): over most stores the counter "devmesh/job/lease/<rank>", which
// the rank adds 1 to every period; over an EtcdStore an etcd lease of TTL
// `silence` with that key attached, kept alive every period and revoked at a
// clean exit, so that a lease's end is etcd's verdict, on etcd's clock.
//
// Per runtime, one thread (started with the runtime's first group):
//   - renews this rank's lease every `period`;
//   - watches the lease of its successor among the epoch's members (the
//     next member in rank order, cyclic): a lease that has started and then
//     lapses (and no "left" mark) is a death, with no error needed as
//     evidence, so a rank that is SIGSTOPped longer than `silence` is
//     declared dead even while its peers wait on it quietly. A counter
//     lapses when it has not advanced for `silence`, counted from the
//     watcher's first read of the stale value, one read per period, each
//     read adding the time since the one before but never more than 2
//     periods: with the watcher on schedule, a stop is found silence to
//     silence + 2 periods after it began; a round that ran late (this
//     process got no CPU, or the store was slow) does not count its lateness
//     against the successor. An etcd lease lapses when etcd deletes its key
//     at expiry, which a watch on that key sees (no polling). A successor whose
//     process this kernel shows alive and not stopped (running, runnable or
//     waiting) is slow, not dead, until a hard limit of max(30 s, 4 x
//     silence) (a process stuck in the kernel, frozen by its cgroup, or
//     whose lease thread no longer runs): an overloaded host can leave a
//     healthy rank's lease unrenewed for seconds (docs/guides/errors.md).
//     The hard limit counts only the part of the lapse during which the
//     store answered this rank's own lease calls in time (rank_liveness.h,
//     AnsweredTime): an overloaded store that serves neither lease is no
//     evidence against the successor;
//   - waits on the store for the epoch's verdict key
//     "devmesh/epoch/<e>/death" (a parked Get of `period`, on a connection of
//     its own: store clients open one per concurrent call), and when it
//     appears tells every registered group (WatchedGroup::OnVerdict): a
//     group refuses new calls, and one that holds the dead rank or has a
//     call in flight is aborted (Gloo's Abort wakes waits at once,
//     comm/gloo/gloo_shutdown.h), or revoked where the backend can shrink
//     it later (NCCL's ncclCommRevoke; GuardedCommunicator). An idle group
//     of live members is left intact, so that Shrink can keep it;
//   - when the store does not answer, notes it for Explain (which then adds
//     it to the error, keeping its code) without aborting anything, and goes
//     on renewing should it come back.
// A rank whose runtime ends sets "devmesh/job/left/<rank>": it left, and is
// never called dead.
//
// Fencing. A rank that learns a verdict naming itself (it was stopped for
// longer than the lease and came back) is fenced: every later call of every
// registered group returns FailedPrecondition, and so does Shrink; it never
// takes part in a collective again.
//
// Processes on this host. Each watch also publishes where its process can
// be found ("devmesh/job/proc/<rank>": boot id, PID namespace, PID, start
// time). A rank whose process runs on the same kernel and PID namespace
// and is gone (no /proc entry, a zombie, or another process under its PID)
// is dead at once when a call failed on it (Explain), it did not come to
// Shrink (epoch_agreement.h) or a rebuild's store wait is for it
// (JudgeGoneMembers): the kernel's word, not a peer's. Across hosts (or
// namespaces) the same holds through the rank's liveness beacon
// (liveness_beacon.h: a port that its process holds open until it dies,
// published with its identity at the host its groups are reached at): a
// refused connection there is its kernel's word that the process is gone.
// A host that dies, a process that is stopped, or a beacon that cannot be
// reached leaves it to the lease (a rebuild's wait reads the leases of the
// members it waits for: JudgeGoneMembers). The successor check uses it only
// after the silence (a process that exits at the end of its job is gone
// too, and only an error says that a peer needed it): to spare a process
// that is alive and not stopped, and to say "its process on this host is
// gone" or "is stopped" in the verdict.
//
// Explain(error, members), called by device_mesh's communicators when a
// collective fails with Unavailable or DeadlineExceeded: a verdict already
// known is returned at once; else the error's peer (PeerRank: its
// kPeerPayload, or the kProcessGonePayload of a member the backend found
// gone, which spares the store read of its process identity; comm/
// error_info.h), when its process is gone on this host, is
// published dead at once, before the verdict is read (CompareSet keeps a
// verdict already there); else, the verdict read and none found, a suspect
// (that peer; every other member when the error names none) whose process
// is gone on this host is dead now; else
// the suspects' leases are read twice, `kLeaseMisses` periods apart (an
// etcd lease: its TTL and a second apart, or none when expired already):
// unchanged (expired), without a "left" mark, means dead (the error is the
// evidence, the lease decides), and the verdict is published with CompareSet, so the
// first publisher's text is everyone's; else the verdict key is waited for a
// few periods (a rank woken by the abort names a live peer). The returned
// status is Unavailable "global rank X died (its lease was not renewed for
// T; first reported by global rank Y) -- this call: <the original error>",
// the same prefix on every survivor; or `error` itself when there is no
// verdict (the peer is alive: it aborted or closed its group).
//
// Bounds: detection of a killed rank = the failed call's Explain: at once
// on the same host or by its beacon (a round trip to its host), else (its
// host died or cannot be reached) its lease: kLeaseMisses periods (counter,
// + store round trips), or its etcd lease's TTL and a second (etcd's
// expiry scan runs twice a second); of a silent one, `silence`;
// propagation = one parked Get on every other rank (immediate) + one Abort.
// Explain, too, never calls dead a
// suspect whose process this kernel shows running: its error stands.
//
// Thread-safety: every method may be called from any thread. The thread is
// detached at Start and ends within one period after the watch is
// destroyed (it owns what it touches through shared pointers). Every rank
// of a job must use the same lease period and silence
// (DEVMESH_LEASE_PERIOD_MS, DEVMESH_LEASE_SILENCE_MS; mesh_runtime.h).
#ifndef DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_
#define DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/store.h"

namespace devmesh {
namespace device_mesh_internal {
class RankLiveness;  // rank_liveness.h
}  // namespace device_mesh_internal

// What a verdict is told to (GuardedCommunicator).
// A job's verdict on a death: the rank it names (-1 for none) and its text
// for people ("global rank 3 died (...)"). The rank travels beside the text,
// never read out of it.
struct Verdict {
  int rank = -1;
  std::string text;
};

class WatchedGroup {
 public:
  virtual ~WatchedGroup() = default;
  // The job's verdict of this group's epoch: global rank `dead` died
  // (`verdict` is the text); `fenced` when `dead` is this rank. Refuse new
  // calls; abort (or revoke, GuardedCommunicator) when the group holds
  // `dead` or has a call in flight.
  virtual void OnVerdict(int dead, const std::string& verdict,
                         bool fenced) = 0;
};

// What FailureWatch::Subscribe returns: destroying it ends the
// subscription.
class VerdictSubscription {
 public:
  virtual ~VerdictSubscription() = default;
};

class FailureWatch {
 public:
  // Lease periods without renewal after which a peer that an error names
  // is dead.
  static constexpr int kLeaseMisses = 3;

  // Store keys (every rank derives the same).
  static std::string LeaseKey(int rank);
  static std::string LeftKey(int rank);
  // "<boot id>|<pid namespace inode>|<pid>|<start time>" of the rank's
  // process, set when its watch starts, followed by its liveness beacon's
  // "|<net namespace inode>|<host>|<port>|<nonce>" (when it listens).
  static std::string ProcKey(int rank);
  // This process's identity, the value Start sets at ProcKey (with its
  // beacon at `beacon_host`, as Start's): for a process that publishes it
  // before its watch starts (a spare, JoinAsSpare).
  static std::string ProcessIdentity(const std::string& beacon_host = "");
  static std::string EpochKey(int64_t epoch, absl::string_view what);

  // Starts the thread for rank `rank` of a world of `world_size` over
  // `store` (the runtime's, not counted in its round trips) with lease
  // period `period` (> 0; MeshRuntime passes a positive one) and silence
  // `silence` (raised to 2 periods when shorter). Before it returns it
  // publishes ProcKey and renews the lease once (2 store requests; failures
  // are ignored, the thread renews again), so a rank that dies at once
  // after its first group is judged like any other.
  // The watch starts in `epoch` with `members` (sorted global ranks, this
  // rank among them; empty: every world rank), as a spare that
  // DeviceMesh::Grow admitted into that epoch does: it never learns an
  // older epoch's verdict (which may name its rank).
  // `beacon_host`: the IPv4 address other hosts reach this process at (the
  // one its groups advertise), published with its liveness beacon's port;
  // empty: 127.0.0.1 (a beacon only this host's network namespace uses).
  static std::shared_ptr<FailureWatch> Start(std::shared_ptr<Store> store,
                                             int rank, int world_size,
                                             absl::Duration period,
                                             absl::Duration silence,
                                             int64_t epoch = 0,
                                             std::vector<int> members = {},
                                             std::string beacon_host = "");
  ~FailureWatch();
  FailureWatch(const FailureWatch&) = delete;
  FailureWatch& operator=(const FailureWatch&) = delete;

  // Tells `group` of the current epoch's verdict (held weakly: a group
  // already gone is skipped); one registered after the verdict is told at
  // once.
  void Register(std::weak_ptr<WatchedGroup> group);

  // See the top of this file. OK stays OK; codes other than Unavailable and
  // DeadlineExceeded are returned as they are. `members`: the failed call's
  // group (global ranks), the suspects when the error names no peer.
  // FailedPrecondition when the verdict names this rank (fenced).
  absl::Status Explain(const absl::Status& error,
                       const std::vector<int>& members);

  // The current epoch's verdict, once there is one ("" before); the dead
  // rank it names (-1 before); when it was learnt here.
  std::string verdict() const;
  int verdict_rank() const;
  absl::Time verdict_time() const;
  // The verdict of `epoch` as it stands in the store now (NotFound when
  // there is none; the store's error when it does not answer). Learns it
  // when `epoch` is the current one; when it was learnt already (the
  // watch's thread, an Explain), returns it with no store read: a verdict
  // is written once.
  absl::StatusOr<Verdict> ReadVerdict(int64_t epoch);

  // Blocks until this rank knows epoch `epoch`'s verdict, or is fenced, and
  // returns it: the dead global rank and the verdict's text (a fenced rank:
  // its own rank, and the verdict naming it or why it was fenced). Known
  // before the call: returned at once. A verdict written by another rank is
  // learnt by the watch's thread within about one period.
  // Errors: FailedPrecondition when `epoch` is not the current epoch, or
  // stops being it while waiting (AdvanceEpoch: a Shrink or a Grow);
  // DeadlineExceeded when `deadline` passes first (a past deadline asks
  // without waiting); Cancelled when the watch is destroyed first.
  absl::StatusOr<Verdict> WaitForVerdict(int64_t epoch,
                                         absl::Time deadline) const;

  // Calls `callback` once, on the watch's thread, when this rank learns
  // epoch `epoch`'s verdict or is fenced (with what WaitForVerdict
  // returns); at once, on this thread, when it knows one already. Never
  // after AdvanceEpoch. The callback must not block for long (the watch's
  // lease renewals wait for it) and must not destroy its subscription. It is
  // not called once the subscription is destroyed, whose destructor waits
  // for a call in progress on another thread.
  // Errors: FailedPrecondition when `epoch` is not the current epoch.
  absl::StatusOr<std::unique_ptr<VerdictSubscription>> Subscribe(
      int64_t epoch, std::function<void(const Verdict&)> callback);

  // "" or why this rank is fenced (FailedPrecondition text).
  std::string fenced() const;
  // Fences this rank with `why` (Shrink, when the agreement counts it dead
  // or it comes back after the survivors moved on): every registered group
  // refuses from now on.
  void Fence(const std::string& why);

  // True when `rank`'s process runs on this kernel, in this PID namespace,
  // and is gone (no such process, a zombie, or another process under its
  // PID), or runs elsewhere and its liveness beacon refused a connection
  // (liveness_beacon.h). False when it is alive, stopped, or unknown.
  bool ProcessGoneHere(int rank);
  // True when `rank`'s process runs on this kernel, in this PID namespace,
  // alive and not stopped (running, runnable or waiting): slow, not dead,
  // whatever its lease shows (an overloaded host), as the successor check
  // and Explain treat it.
  bool ProcessRunningHere(int rank);

  // For a wait on `members` (global ranks) that has run a while, such as a
  // rebuild's store wait for their keys: the first member other than this
  // rank, among the current epoch's members (a rank that a Grow admits is
  // judged once the epoch includes it, when its new process's identity is
  // read), whose process this kernel (or its beacon) shows gone
  // (ProcessGoneHere) and that
  // has no "left" mark is published dead at once (the kernel's word, with
  // the wait as the evidence that it was needed; CompareSet keeps a verdict
  // already there). Else a member whose process is on another host (or
  // one this kernel cannot see) and whose watch started is judged by its
  // lease, read at most once a RebuildSlice (rank_liveness.h; a tenth of a
  // period, at least 25 ms): one that shows no renewal for
  // RankLiveness::confirm_wait() (counter: CounterConfirmWait, 3 periods
  // cut to fit max(2 s, 2 periods), from the first read of its current
  // count; etcd: its key gone at the lease's expiry) and has no "left"
  // mark is published dead ("its lease was not renewed for T while a
  // rebuild waited for it"), as Explain does with a failed call's suspect.
  // So a wait that calls this every slice ends within confirm_wait plus two
  // slices of a death on another host (counter), rather than at the
  // successor's verdict after the silence. Returns true when
  // the current epoch has a verdict after the call (this one or another),
  // false otherwise (every member alive or unknown, or the store did not
  // answer). Costs one store read per member the first time (its process
  // identity), then /proc reads, one lease read per member on another host
  // every half period, plus one read of a dead member's "left" mark and
  // the publish.
  bool JudgeGoneMembers(const std::vector<int>& members);

  int64_t epoch() const;
  std::vector<int> members() const;
  // Moves this rank to `epoch` (> the current one) with `members` (sorted
  // global ranks, this rank among them): the verdict is cleared, every group
  // registered so far refuses from now on (told OnVerdict with dead = -1),
  // and the thread watches the new epoch's verdict key and successor. What
  // was learnt of the processes of members new to the epoch (ranks a Grow
  // admitted, whose processes may be new) is forgotten and read again.
  void AdvanceEpoch(int64_t epoch, std::vector<int> members);

  // This rank, the lease period and silence it was started with, and the
  // store it renews its lease in (for device_mesh/epoch_agreement.h).
  int rank() const;
  absl::Duration period() const;
  absl::Duration silence() const;
  Store& store() const;
  // This rank's lease and the judge of other ranks' (rank_liveness.h: a
  // counter in the store, or etcd leases over an EtcdStore).
  device_mesh_internal::RankLiveness& liveness() const;

 private:
  struct State;
  explicit FailureWatch(std::shared_ptr<State> state)
      : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// The stored form of a verdict (the value of EpochKey(epoch, "death")),
// "<rank>\n<text>", and back; DecodeVerdict gives rank -1 and the whole
// value as the text for a value without a rank line.
std::string EncodeVerdict(const Verdict& verdict);
Verdict DecodeVerdict(absl::string_view stored);

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_FAILURE_WATCH_H_
