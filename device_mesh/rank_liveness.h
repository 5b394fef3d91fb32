// devmesh/device_mesh/rank_liveness.h
// -----------------------------------------------------------------------------
// RankLiveness (internal to //device_mesh): how the failure watch
// (failure_watch.h) keeps this rank's lease and judges another rank's. It is
// the one place that knows the kind of store; MakeRankLiveness picks:
//
//   counter (any Store: devmesh's TCP store, c10d's, a memory store): the
//     lease is the counter "devmesh/job/lease/<rank>", which Renew adds 1 to.
//     A followed peer's lease has lapsed when its counter has not advanced
//     for `silence`, counted from the follower's reads: one per Lapsed call
//     (the watch makes one a period), each adding the time since the one
//     before, never more than 2 periods, so a late round does not count its
//     lateness against the peer. Read is the counter's value.
//   etcd (an EtcdStore, store/etcd_store.h): the lease is an etcd lease of
//     TTL `silence` (whole seconds, at least etcd's minimum, 2 s by
//     default), granted by the first Renew with "devmesh/job/lease/<rank>"
//     attached, kept alive at a third of its TTL by a thread of the
//     liveness's own from then on (a later Renew sends nothing: it returns
//     the last keepalive's error, if any), revoked by End. A lease that
//     expired (the rank was silent past its TTL and is back) is granted anew
//     by the next Renew, its key put again. A followed peer's lease has lapsed when etcd
//     deleted its key at the lease's expiry (etcd's clock, the leader's),
//     seen by a watch on that key on a thread of the follower's own: no
//     polling of the store. Read is whether the key is gone.
//
// Both also record when the store answered this rank's own lease calls in
// time (AnsweredTime): a lapse (Lapsed) says how much of
// its wall time the store was answering, and the failure watch's hard limit
// for a successor whose process runs counts only that part, so that a store
// too slow to serve anyone's lease is no evidence against the successor.
// A call answered in time: counter, a Renew answered within 2 periods of
// its sending; etcd, a keepalive, grant or key put answered within half the
// TTL (keepalives go out every third of it).
//
// Either way the caller's rules stay the same: a "left" mark
// (FailureWatch::LeftKey) is set before End, so a revoked lease is never a
// death; a lapse is only a death when the watch finds no "left" mark.
//
// Thread-safety: every method may be called from any thread. End waits for
// a Renew in progress, and no Renew after End renews anything. An etcd
// follower's thread ends within 5 s (a watch slice) of the object's end; the
// keepalive thread at End or the object's end (after a keepalive in flight).
#ifndef DEVMESH_DEVICE_MESH_RANK_LIVENESS_H_
#define DEVMESH_DEVICE_MESH_RANK_LIVENESS_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/store.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
class EtcdStore;
namespace device_mesh_internal {

// One reading of a rank's lease (RankLiveness::Read).
struct LeaseReading {
  bool expired = false;  // etcd: the lease's key is gone (never, counter)
  int64_t count = 0;     // counter: its value (0, etcd)
};

// A lapsed lease (RankLiveness::Lapsed).
struct Lapse {
  // How long (wall time) the peer has not renewed its lease.
  absl::Duration wall;
  // The part of `wall` during which the store answered this rank's own
  // lease calls in time (AnsweredTime::Within): at most `wall`.
  absl::Duration answered;
};

// When the store answered this rank's lease calls in time. A call sent at
// `s` and answered within `grace` of it shows the store answering over
// [s, s + grace]; the union of those spans is kept (merged; the last 256
// disjoint ones, a span starts only after the store failed to answer for
// longer than the grace).
//
// Example (grace 2 s): Note(0 s, 0.1 s), Note(1 s, 1.2 s), Note(10 s, 13 s)
// (late: ignored), Note(20 s, 20.5 s): Within(0 s, 30 s) is 3 s + 2 s = 5 s.
//
// Thread-safety: every method may be called from any thread.
class AnsweredTime {
 public:
  // `grace` > 0.
  explicit AnsweredTime(absl::Duration grace) : grace_(grace) {}

  // A lease call sent at `sent` answered at `received`; one answered later
  // than `sent` + grace counts for nothing. Calls of several threads may
  // be noted out of the order they were sent in: an answer in time
  // overlaps any span begun since its sending, and is merged into it.
  void Note(absl::Time sent, absl::Time received);

  // How much of [from, to] the noted spans cover (zero when to <= from).
  absl::Duration Within(absl::Time from, absl::Time to) const;

  absl::Duration grace() const { return grace_; }

 private:
  struct Span {
    absl::Time begin, end;
  };
  const absl::Duration grace_;
  mutable sync_internal::Mutex mu_;
  std::deque<Span> spans_ ABSL_GUARDED_BY(mu_);  // disjoint, in time order
};

class RankLiveness {
 public:
  virtual ~RankLiveness() = default;

  // Starts this rank's lease (the first call) or renews it. Errors: the
  // store's (Unavailable, DeadlineExceeded).
  virtual absl::Status Renew() = 0;
  // Ends this rank's lease at a clean exit, after its "left" mark is set
  // (etcd: revokes it, deleting its key; counter: nothing). Errors are
  // ignored: an unrevoked lease expires by itself.
  virtual void End() = 0;

  // Follows `peer`'s lease (following another peer than last call starts
  // over) and returns, once it has lapsed, for how long (wall time) the peer
  // has not renewed it and how much of that time the store answered this
  // rank's own lease calls in time; nullopt while it holds, or
  // before the follower has seen it started. Meant to be called once a
  // period, from one thread.
  virtual std::optional<Lapse> Lapsed(int peer) = 0;

  // A reading of `peer`'s lease now. Errors: the store's.
  virtual absl::StatusOr<LeaseReading> Read(int peer) = 0;
  // Whether `after` shows no sign of life since `before` (both of one
  // peer, `before` first): counter, the same count; etcd, `after` expired.
  virtual bool LapsedBetween(const LeaseReading& before,
                             const LeaseReading& after) const = 0;
  // How long apart two readings must be for LapsedBetween to judge a death
  // (failure_watch.h's Explain, JudgeGoneMembers): counter,
  // CounterConfirmWait(period); etcd, the TTL and one second (etcd's leader
  // looks for expired leases twice a second).
  virtual absl::Duration confirm_wait() const = 0;
  // Said in a verdict on a lapsed lease: "" (counter), "; its etcd lease
  // expired" (etcd).
  virtual std::string lapse_note() const = 0;
  // The slice of a rebuild's store waits and of JudgeGoneMembers' lease
  // readings (epochs after the first): counter, RebuildSlice(period); by
  // default (etcd) the period, between 100 and 250 ms: over etcd each slice
  // is a watch made and cancelled (and a curl handle in flight), and a
  // death on another host is etcd's expiry anyway.
  virtual absl::Duration rebuild_slice(absl::Duration period) const {
    return std::min(std::max(absl::Milliseconds(100), period),
                    absl::Milliseconds(250));
  }
};

// The bound a wait on a dead rank must end within, whatever the group
// timeout: max(2 s, 2 periods) (a rebuild's waits, Shrink's and Grow's).
absl::Duration DeathWaitBound(absl::Duration period);

// A counter lease's confirm_wait: 3 periods (2 missed renewals), cut to
// DeathWaitBound(period) - 0.3 periods - 300 ms where that is shorter (from
// a period of about 430 ms; 1.4 periods at 1 s, 1.55 at 2 s, always more
// than one period), so that the judgement (plus a reading and a wait slice
// of RebuildSlice(period) each, and the next round) fits the bound.
absl::Duration CounterConfirmWait(absl::Duration period);

// The slice of a rebuild's waits (epochs after the first): a tenth of a
// period, at least 25 ms. Waits ask the verdict, and judge the members
// they wait for (FailureWatch::JudgeGoneMembers), once a slice.
absl::Duration RebuildSlice(absl::Duration period);

// The liveness for `store` (an EtcdStore, also behind ForwardingStores:
// etcd leases; any other: the counter) of rank `rank`, renewed every `period`, silent for `silence`
// before a lapse (> 0 both).
std::unique_ptr<RankLiveness> MakeRankLiveness(std::shared_ptr<Store> store,
                                               int rank, absl::Duration period,
                                               absl::Duration silence);

// The etcd kind itself (MakeRankLiveness's choice for an EtcdStore).
std::unique_ptr<RankLiveness> MakeEtcdLiveness(std::shared_ptr<EtcdStore> store,
                                               int rank, absl::Duration period,
                                               absl::Duration silence);

// The key of `rank`'s lease (counter or etcd): "devmesh/job/lease/<rank>".
std::string LeaseKeyOf(int rank);
// The key every rank's watch publishes its process under (after its lease
// started): "devmesh/job/proc/<rank>".
std::string ProcKeyOf(int rank);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_RANK_LIVENESS_H_
