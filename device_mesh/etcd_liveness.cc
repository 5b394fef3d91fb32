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

class EtcdLiveness final : public RankLiveness {
 public:
  EtcdLiveness(std::shared_ptr<EtcdStore> store, int rank,
               absl::Duration period, absl::Duration silence)
      : store_(std::move(store)),
        rank_(rank),
        period_(period),
        silence_(silence),
        ttl_ms_(absl::ToInt64Milliseconds(
            std::max(absl::Seconds(2), absl::Ceil(silence, absl::Seconds(1))))) {}

  ~EtcdLiveness() override {
    sync_internal::MutexLock lock(&follow_mu_);
    if (follow_ != nullptr) follow_->stop.store(true);
  }

  absl::Status Renew() override {
    sync_internal::MutexLock lock(&mu_);
    if (ended_) return absl::OkStatus();
    // A lease kept alive less than a third of its TTL ago needs nothing yet
    // (etcd's own client renews at TTL/3). The watch calls this every
    // period, and the TTL is the silence (8 periods by default): a keepalive
    // every period was 8 requests per TTL per rank, and at 512 ranks and
    // more they kept an etcd member too busy for the job's own requests
    // (helper-28's rounds, docs/etcd_store.md).
    if (lease_id_ != 0 && key_put_ && absl::Now() < kept_at_ + ttl() / 3) {
      return absl::OkStatus();
    }
    if (lease_id_ != 0) {
      const absl::Time sent = absl::Now();
      absl::Status kept = store_->KeepAlive(lease_id_);
      if (kept.ok()) kept_at_ = sent;
      if (kept.ok() && key_put_) return kept;
      if (!kept.ok() && !absl::IsNotFound(kept)) return kept;
      // NotFound: the lease expired (this rank was silent past its TTL) and
      // its key is gone. A verdict may name this rank (the watch then
      // fences it); if none does, it is still a member: a new lease.
      if (!kept.ok()) lease_id_ = 0;
    }
    if (lease_id_ == 0) {
      const absl::Time sent = absl::Now();  // etcd starts the TTL after this
      absl::StatusOr<EtcdStore::Lease> lease = store_->GrantLease(silence_);
      if (!lease.ok()) return lease.status();
      lease_id_ = lease->id;
      key_put_ = false;
      kept_at_ = sent;
      ttl_ms_.store(absl::ToInt64Milliseconds(lease->ttl));
    }
    absl::Status put = store_->SetWithLease(LeaseKeyOf(rank_), "1", lease_id_);
    key_put_ = put.ok();
    return put;
  }

  void End() override {
    sync_internal::MutexLock lock(&mu_);  // after a Renew in progress
    if (ended_) return;
    ended_ = true;
    if (lease_id_ != 0) (void)store_->RevokeLease(lease_id_);
  }

  std::optional<absl::Duration> Lapsed(int peer) override {
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
    return absl::Now() - f->lapsed_at + ttl();
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
  // When the last keepalive (or grant) that etcd answered was sent.
  absl::Time kept_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
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
