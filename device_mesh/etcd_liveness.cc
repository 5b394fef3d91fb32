// The etcd liveness (rank_liveness.h): a rank's lease is an etcd lease, and
// a follower watches its peer's lease key for etcd's deletion at expiry.
#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "device_mesh/rank_liveness.h"
#include "store/etcd_store.h"
#include "sync/annotated_mutex.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

// How long one wait of a follower lasts before it looks at its stop flag.
constexpr absl::Duration kFollowSlice = absl::Seconds(5);

// One peer followed, by a thread of its own (detached; it owns this through
// a shared pointer and ends within a slice of `stop`).
struct Follow {
  explicit Follow(int p) : peer(p) {}
  const int peer;
  std::atomic<bool> stop{false};
  sync_internal::Mutex mu;
  bool lapsed ABSL_GUARDED_BY(mu) = false;
  absl::Time lapsed_at ABSL_GUARDED_BY(mu);  // when the key was seen gone
};

void FollowLoop(const std::shared_ptr<EtcdStore>& store,
                const std::shared_ptr<Follow>& f, absl::Duration period) {
  const std::string key = LeaseKeyOf(f->peer);
  bool present = true;  // what the next wait waits to change
  bool seen = false;    // the key was seen there once
  while (!f->stop.load()) {
    absl::StatusOr<bool> now = store->AwaitPresence(key, present, kFollowSlice);
    if (!now.ok()) {
      // The store does not answer: the watch notes it when its own Renew
      // fails; look again in a period.
      absl::SleepFor(period);
      continue;
    }
    if (*now) {
      seen = true;
      present = true;
      sync_internal::MutexLock lock(&f->mu);
      f->lapsed = false;  // (granted anew, after an expiry)
      continue;
    }
    present = false;
    if (!seen) {
      // Never seen: a lapse only when the peer's watch had started (its
      // process key is put after its lease key), else wait for the put.
      absl::StatusOr<bool> started = store->Check({ProcKeyOf(f->peer)});
      if (!started.ok() || !*started) continue;
    }
    sync_internal::MutexLock lock(&f->mu);
    if (!f->lapsed) {
      f->lapsed = true;
      f->lapsed_at = absl::Now();
    }
  }
}

// This rank's lease kept alive by a thread of its own (detached; it owns
// this through a shared pointer and ends at `stop`), a keepalive at a third
// of the TTL after the last one etcd answered, as etcd's own client does.
// Renew only reads what it found. Kept alive from the watch's own loop, a
// keepalive waited behind that loop's other store calls (the parked Get of
// the epoch's death key, a follower's reads), each seconds long when etcd
// is loaded: with 1024 ranks on one member many 9 s leases expired though
// their ranks ran (1931 granted anew in one round).
struct Keeper {
  explicit Keeper(absl::Duration grace) : answered(grace) {}
  // Keepalives, grants and key puts answered in time (its own lock; Lapsed
  // reads it).
  AnsweredTime answered;
  sync_internal::Mutex mu;
  sync_internal::CondVar cv;  // stop, or a new lease to keep
  bool stop ABSL_GUARDED_BY(mu) = false;
  int64_t lease_id ABSL_GUARDED_BY(mu) = 0;  // 0: none to keep
  absl::Duration ttl ABSL_GUARDED_BY(mu);
  // When the last keepalive (or grant) that etcd answered was sent, and
  // when the next keepalive is due (sooner after one that failed).
  absl::Time kept_at ABSL_GUARDED_BY(mu);
  absl::Time due ABSL_GUARDED_BY(mu);
  // A keepalive found the lease gone (NotFound): Renew grants anew.
  bool expired ABSL_GUARDED_BY(mu) = false;
  // The last keepalive's error other than NotFound; OK after an answer.
  absl::Status error ABSL_GUARDED_BY(mu);

  // A lease granted (or put again) at `sent`, to keep from now on.
  void Keep(int64_t id, absl::Duration lease_ttl, absl::Time sent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    lease_id = id;
    ttl = lease_ttl;
    kept_at = sent;
    due = sent + lease_ttl / 3;
    expired = false;
    error = absl::OkStatus();
    cv.SignalAll();
  }
};

void KeepLoop(const std::shared_ptr<EtcdStore>& store,
              const std::shared_ptr<Keeper>& k) {
  sync_internal::MutexLock lock(&k->mu);
  while (!k->stop) {
    if (k->lease_id == 0 || k->expired) {
      k->cv.Wait(&k->mu);  // until Renew hands over a lease
      continue;
    }
    if (absl::Now() < k->due) {
      k->cv.WaitWithDeadline(&k->mu, k->due);
      continue;
    }
    const int64_t id = k->lease_id;
    const absl::Time sent = absl::Now();
    // Waited for until the lease would expire, no longer: an answer after
    // that is of no use, and a keepalive left hanging (a loaded member's
    // default round trip is minutes) held back the next one, so that the
    // lease stayed expired and its key gone until the successor's hard
    // limit declared a running rank dead (1024 ranks on one member, 00:26
    // UTC, docs/etcd_store.md). Then again soon: NotFound, if etcd has
    // expired it meanwhile, and Renew grants anew.
    const absl::Time expiry = k->kept_at + k->ttl;
    k->mu.Unlock();
    absl::Status kept =
        store->KeepAlive(id, std::max(expiry, sent + absl::Seconds(1)));
    k->mu.Lock();
    if (k->lease_id != id) continue;  // another lease was handed over
    if (kept.ok()) {
      k->answered.Note(sent, absl::Now());
      k->kept_at = sent;
      k->due = sent + k->ttl / 3;
      k->error = absl::OkStatus();
    } else if (absl::IsNotFound(kept) || absl::Now() >= expiry) {
      // Gone, or expired by this rank's clock: no keepalive answered within
      // the TTL since the last one sent that was (etcd's TTL runs from its
      // receipt, later). etcd answers a keepalive of a lease it has expired
      // only once its revoke has gone through Raft, which on a loaded member
      // timed out and was retried for tens of seconds ('failed to revoke
      // lease: request timed out'): waiting for that NotFound, ranks 779 and
      // 365 of two 1024-rank rounds stayed without their key past the
      // successor's hard limit and were declared dead while running.
      k->expired = true;
    } else {
      // Not answered: again soon, while the lease may still be alive.
      k->due = absl::Now() + std::min(k->ttl / 6, absl::Seconds(1));
      k->error = std::move(kept);
    }
  }
}

class EtcdLiveness final : public RankLiveness {
 public:
  EtcdLiveness(std::shared_ptr<EtcdStore> store, int rank,
               absl::Duration period, absl::Duration silence)
      : store_(std::move(store)),
        rank_(rank),
        period_(period),
        silence_(silence),
        ttl_ms_(absl::ToInt64Milliseconds(
            std::max(absl::Seconds(2), absl::Ceil(silence, absl::Seconds(1))))),
        // In time: within half the TTL asked for (keepalives go out every
        // third of it, so the spans of answered ones overlap).
        keeper_(std::make_shared<Keeper>(ttl() / 2)) {}

  ~EtcdLiveness() override {
    {
      sync_internal::MutexLock k(&keeper_->mu);
      keeper_->stop = true;
      keeper_->cv.SignalAll();
    }
    sync_internal::MutexLock lock(&follow_mu_);
    if (follow_ != nullptr) follow_->stop.store(true);
  }

  absl::Status Renew() override {
    sync_internal::MutexLock lock(&mu_);
    if (ended_) return absl::OkStatus();
    if (lease_id_ != 0) {
      // Kept alive at a third of its TTL by the keeper's thread (etcd's own
      // client does so; a keepalive every call, every period, was 8 per TTL
      // per rank and kept one member too busy at 512 ranks): here only what
      // it found.
      sync_internal::MutexLock k(&keeper_->mu);
      // Expired: found by a keepalive, or by this rank's clock (no
      // keepalive answered within the TTL; one may still be in flight).
      if (keeper_->expired ||
          absl::Now() >= keeper_->kept_at + keeper_->ttl) {
        // The lease expired (this rank was silent past its TTL) and its key
        // is gone. A verdict may name this rank (the watch then fences it);
        // if none does, it is still a member: a new lease.
        lease_id_ = 0;
      } else if (key_put_) {
        return keeper_->error;
      }
    }
    if (lease_id_ == 0) {
      const absl::Time sent = absl::Now();  // etcd starts the TTL after this
      absl::StatusOr<EtcdStore::Lease> lease = store_->GrantLease(silence_);
      if (!lease.ok()) return lease.status();
      keeper_->answered.Note(sent, absl::Now());
      lease_id_ = lease->id;
      key_put_ = false;
      ttl_ms_.store(absl::ToInt64Milliseconds(lease->ttl));
      sync_internal::MutexLock k(&keeper_->mu);
      keeper_->Keep(lease_id_, lease->ttl, sent);
      if (!keeper_started_) {
        keeper_started_ = true;
        std::thread([store = store_, k = keeper_] { KeepLoop(store, k); })
            .detach();
      }
    }
    const absl::Time put_sent = absl::Now();
    absl::Status put = store_->SetWithLease(LeaseKeyOf(rank_), "1", lease_id_);
    key_put_ = put.ok();
    if (put.ok()) keeper_->answered.Note(put_sent, absl::Now());
    if (absl::IsNotFound(put)) lease_id_ = 0;  // expired already: anew
    return put;
  }

  void End() override {
    sync_internal::MutexLock lock(&mu_);  // after a Renew in progress
    if (ended_) return;
    ended_ = true;
    {
      sync_internal::MutexLock k(&keeper_->mu);
      keeper_->stop = true;
      keeper_->cv.SignalAll();
    }
    if (lease_id_ != 0) (void)store_->RevokeLease(lease_id_);
  }

  std::optional<Lapse> Lapsed(int peer) override {
    std::shared_ptr<Follow> f;
    {
      sync_internal::MutexLock lock(&follow_mu_);
      if (follow_ == nullptr || follow_->peer != peer) {
        if (follow_ != nullptr) follow_->stop.store(true);
        follow_ = std::make_shared<Follow>(peer);
        std::thread([store = store_, f = follow_, period = period_] {
          FollowLoop(store, f, period);
        }).detach();
        return std::nullopt;
      }
      f = follow_;
    }
    sync_internal::MutexLock lock(&f->mu);
    if (!f->lapsed) return std::nullopt;
    // Its last renewal was at least a TTL before etcd deleted the key.
    const absl::Time from = f->lapsed_at - ttl();
    const absl::Time now = absl::Now();
    return Lapse{now - from, keeper_->answered.Within(from, now)};
  }

  absl::StatusOr<LeaseReading> Read(int peer) override {
    absl::StatusOr<bool> there = store_->Check({LeaseKeyOf(peer)});
    if (!there.ok()) return there.status();
    LeaseReading reading;
    reading.expired = !*there;
    return reading;
  }
  bool LapsedBetween(const LeaseReading&,
                     const LeaseReading& after) const override {
    return after.expired;
  }
  absl::Duration confirm_wait() const override {
    return ttl() + absl::Seconds(1);
  }
  std::string lapse_note() const override { return "; its etcd lease expired"; }

 private:
  absl::Duration ttl() const { return absl::Milliseconds(ttl_ms_.load()); }

  const std::shared_ptr<EtcdStore> store_;
  const int rank_;
  const absl::Duration period_;
  const absl::Duration silence_;
  std::atomic<int64_t> ttl_ms_;  // as granted (before: silence, rounded up)
  sync_internal::Mutex mu_;      // held across this rank's lease calls
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool key_put_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  // Keeps lease_id_ alive (KeepLoop), from the first grant on.
  const std::shared_ptr<Keeper> keeper_;
  bool keeper_started_ ABSL_GUARDED_BY(mu_) = false;
  sync_internal::Mutex follow_mu_;
  std::shared_ptr<Follow> follow_ ABSL_GUARDED_BY(follow_mu_);
};

}  // namespace

std::unique_ptr<RankLiveness> MakeEtcdLiveness(std::shared_ptr<EtcdStore> store,
                                               int rank, absl::Duration period,
                                               absl::Duration silence) {
  return std::make_unique<EtcdLiveness>(std::move(store), rank, period,
                                        silence);
}

}  // namespace device_mesh_internal
}  // namespace devmesh
