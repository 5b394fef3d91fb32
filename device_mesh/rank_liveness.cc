// The counter liveness (rank_liveness.h) and MakeRankLiveness's choice.
#include "device_mesh/rank_liveness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/etcd_store.h"
#include "store/forwarding_store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

// Leases as store counters: Renew adds 1; a follower reads the value.
class CounterLiveness final : public RankLiveness {
 public:
  CounterLiveness(std::shared_ptr<Store> store, int rank,
                  absl::Duration period, absl::Duration silence)
      : store_(std::move(store)),
        rank_(rank),
        period_(period),
        silence_(silence),
        answered_(2 * period) {}

  absl::Status Renew() override {
    const absl::Time sent = absl::Now();
    absl::Status added = store_->Add(LeaseKeyOf(rank_), 1).status();
    if (added.ok()) answered_.Note(sent, absl::Now());
    return added;
  }
  void End() override {}

  std::optional<Lapse> Lapsed(int peer) override {
    if (peer != followed_) {
      followed_ = peer;
      seen_ = -1;
    }
    auto lease = store_->Add(LeaseKeyOf(peer), 0);
    if (!lease.ok()) return std::nullopt;
    const absl::Time now = absl::Now();
    if (*lease != seen_) {
      seen_ = *lease;
      seen_at_ = read_at_ = now;
      counted_ = absl::ZeroDuration();
      return std::nullopt;
    }
    if (seen_ <= 0) return std::nullopt;  // never started: not judged here
    counted_ += std::min(now - read_at_, 2 * period_);
    read_at_ = now;
    if (counted_ < silence_) return std::nullopt;
    return Lapse{now - seen_at_, answered_.Within(seen_at_, now)};
  }

  absl::StatusOr<LeaseReading> Read(int peer) override {
    auto count = store_->Add(LeaseKeyOf(peer), 0);
    if (!count.ok()) return count.status();
    LeaseReading reading;
    reading.count = *count;
    return reading;
  }
  bool LapsedBetween(const LeaseReading& before,
                     const LeaseReading& after) const override {
    return before.count == after.count;
  }
  absl::Duration confirm_wait() const override {
    return CounterConfirmWait(period_);
  }
  std::string lapse_note() const override { return ""; }
  absl::Duration rebuild_slice(absl::Duration period) const override {
    return RebuildSlice(period);
  }

 private:
  const std::shared_ptr<Store> store_;
  const int rank_;
  const absl::Duration period_;
  const absl::Duration silence_;
  // The follower's state; Lapsed is called from one thread (the watch's).
  int followed_ = -1;
  int64_t seen_ = -1;  // the followed counter's value when last changed
  // When that value was first read, when it was last read, and the silence
  // counted since (each read adds the time since the one before, at most 2
  // periods).
  absl::Time seen_at_, read_at_;
  absl::Duration counted_;
  // Renew's calls answered within 2 periods (the next is due after one).
  AnsweredTime answered_;
};

}  // namespace

void AnsweredTime::Note(absl::Time sent, absl::Time received) {
  if (received - sent > grace_) return;  // not in time
  const absl::Time end = sent + grace_;
  sync_internal::MutexLock lock(&mu_);
  if (!spans_.empty() && sent <= spans_.back().end) {
    Span& last = spans_.back();
    last.begin = std::min(last.begin, sent);
    last.end = std::max(last.end, end);
    return;
  }
  spans_.push_back(Span{sent, end});
  if (spans_.size() > 256) spans_.pop_front();
}

absl::Duration AnsweredTime::Within(absl::Time from, absl::Time to) const {
  absl::Duration covered;
  sync_internal::MutexLock lock(&mu_);
  for (const Span& span : spans_) {
    const absl::Time begin = std::max(span.begin, from);
    const absl::Time end = std::min(span.end, to);
    if (end > begin) covered += end - begin;
  }
  return covered;
}

absl::Duration DeathWaitBound(absl::Duration period) {
  return std::max(absl::Seconds(2), 2 * period);
}

absl::Duration CounterConfirmWait(absl::Duration period) {
  return std::min(3 * period, DeathWaitBound(period) - period * 3 / 10 -
                                  absl::Milliseconds(300));
}

absl::Duration RebuildSlice(absl::Duration period) {
  return std::max(absl::Milliseconds(25), period / 10);
}

std::string LeaseKeyOf(int rank) {
  return absl::StrCat("devmesh/job/lease/", rank);
}

std::string ProcKeyOf(int rank) {
  return absl::StrCat("devmesh/job/proc/", rank);
}

std::unique_ptr<RankLiveness> MakeRankLiveness(std::shared_ptr<Store> store,
                                               int rank, absl::Duration period,
                                               absl::Duration silence) {
  // An EtcdStore, or one behind ForwardingStores (a test's fault
  // injector, a user's wrapper): etcd leases either way, so that every rank
  // of a job judges the others alike. The lease calls go to the EtcdStore
  // itself; the wrapper still sees every other call.
  for (Store* s = store.get(); s != nullptr;) {
    if (auto* etcd = dynamic_cast<EtcdStore*>(s)) {
      return MakeEtcdLiveness(std::shared_ptr<EtcdStore>(store, etcd), rank,
                              period, silence);
    }
    auto* forwarding = dynamic_cast<ForwardingStore*>(s);
    s = forwarding != nullptr ? forwarding->base().get() : nullptr;
  }
  return std::make_unique<CounterLiveness>(std::move(store), rank, period,
                                           silence);
}

}  // namespace device_mesh_internal
}  // namespace devmesh
