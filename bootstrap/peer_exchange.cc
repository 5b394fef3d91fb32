// ExchangePeerInfo: every rank publishes what it believes, rank 0 checks that
// the beliefs agree, and one verdict reaches every rank (see peer_info.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bootstrap/peer_info.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

constexpr char kVerdictKey[] = "devmesh/peers/verdict";
constexpr char kReadKey[] = "devmesh/peers/read";
constexpr char kOk[] = "ok:";
constexpr char kError[] = "error:";
// A verdict of rank 0's rendezvous timeout, so that every rank that joined
// ends with the same missing-rank message (not with the store closing).
constexpr char kDeadline[] = "deadline:";
// A verdict of the launcher that hosts the store: a rank's process ended
// before the rendezvous completed (ReportEndBeforeRendezvous).
constexpr char kGone[] = "gone:";
// WaitOrVerdict's own timeout (its callers then say who is missing), as
// opposed to a DeadlineExceeded verdict published by rank 0.
constexpr char kOwnTimeout[] = "rendezvous timed out";
bool IsOwnTimeout(const absl::Status& s) {
  return absl::IsDeadlineExceeded(s) && s.message() == kOwnTimeout;
}
// How often a waiting rank prints where the rendezvous stands (torchrun's
// agent does the same); DEVMESH_RENDEZVOUS_PROGRESS_S overrides it (0: off).
constexpr int kProgressSeconds = 30;
// How often a waiting rank looks for a verdict that ends its wait early.
constexpr absl::Duration kPollInterval = absl::Milliseconds(500);

std::string RankKey(int64_t r) { return absl::StrCat("devmesh/peers/rank/", r); }

std::string Describe(const PeerInfo& p) {
  return absl::StrCat("pid ", p.pid, " on ", p.hostname);
}

// Publishes `message` as the job's verdict unless one is already there.
// Returns the verdict that stands (ours or the earlier one).
absl::StatusOr<std::string> PublishError(Store& store,
                                         const std::string& message) {
  return store.CompareSet(kVerdictKey, "", absl::StrCat(kError, message));
}

// The outcome a verdict gives to `self`.
absl::StatusOr<std::vector<PeerInfo>> Interpret(const std::string& verdict,
                                                const PeerInfo& self) {
  if (absl::StartsWith(verdict, kDeadline)) {
    return absl::DeadlineExceededError(verdict.substr(sizeof(kDeadline) - 1));
  }
  if (absl::StartsWith(verdict, kGone)) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous failed: ", verdict.substr(sizeof(kGone) - 1)));
  }
  if (absl::StartsWith(verdict, kError)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous failed: ", verdict.substr(sizeof(kError) - 1)));
  }
  if (!absl::StartsWith(verdict, kOk)) {
    return absl::InvalidArgumentError("rendezvous verdict is malformed");
  }
  DEVMESH_ASSIGN_OR_RETURN(
      std::vector<PeerInfo> peers,
      DecodePeerTable(absl::string_view(verdict).substr(sizeof(kOk) - 1)));
  if (static_cast<int64_t>(peers.size()) != self.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", self.rank, " has world size ", self.world_size,
                     " but rank 0 completed the rendezvous with ", peers.size(),
                     " ranks (check WORLD_SIZE on ", self.hostname, ")"));
  }
  if (!(peers[self.rank] == self)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", self.rank, " is held by ", Describe(peers[self.rank]),
        ", not by this process (", Describe(self), ")"));
  }
  return peers;
}

// The ranks that joined (set their claim key) and the first missing ones.
// The join is the claim itself: no counter that every rank adds to (on etcd
// an Add is a compare-and-swap txn, and 1024 ranks adding to one key at
// once cost tens of thousands of Raft writes).
struct JoinTally {
  int joined = 0;      // claim keys found set
  bool exact = true;   // false: the Check budget ran out, `joined` is a floor
  std::vector<int> missing;  // the first kMaxMissingNamed missing, in order
};
constexpr size_t kMaxMissingNamed = 8;
// Checks one JoinTally may cost (a progress line of every waiting rank).
constexpr int kMaxTallyChecks = 128;

// Counts the set claim keys in [lo, hi) by halving: one Check of the whole
// range, then of each half that lacks a key, so k missing ranks cost about
// 2k log(n / k) Checks, not one per rank (1024 waiting ranks scanning 1024
// keys one by one were a million requests each progress period). Past
// `*budget` Checks the rest is left uncounted (tally->exact = false).
void Tally(Store& store, int lo, int hi, int* budget, JoinTally* tally) {
  if (lo >= hi) return;
  if (*budget <= 0) {
    tally->exact = false;
    return;
  }
  --*budget;
  std::vector<std::string> keys;
  keys.reserve(hi - lo);
  for (int r = lo; r < hi; ++r) keys.push_back(RankKey(r));
  absl::StatusOr<bool> all_set = store.Check(keys);
  if (!all_set.ok()) {
    tally->exact = false;
    return;
  }
  if (*all_set) {
    tally->joined += hi - lo;
    return;
  }
  if (hi - lo == 1) {
    if (tally->missing.size() < kMaxMissingNamed) tally->missing.push_back(lo);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  Tally(store, lo, mid, budget, tally);
  Tally(store, mid, hi, budget, tally);
}

JoinTally TallyJoins(Store& store, int world_size, int budget) {
  JoinTally tally;
  Tally(store, 0, world_size, &budget, &tally);
  return tally;
}

// How many ranks joined ("3 of 4 ranks joined the rendezvous at S"; "at
// least 700 of 1024 ..." when the Check budget ran out) and "; missing
// ranks: a, b" (up to 8; empty when none is known missing).
std::pair<std::string, std::string> JoinCounts(Store& store,
                                               const PeerInfo& self) {
  const JoinTally tally = TallyJoins(store, self.world_size, kMaxTallyChecks);
  return {absl::StrCat(tally.exact ? "" : "at least ", tally.joined, " of ",
                       self.world_size, " ranks joined the rendezvous at ",
                       self.store),
          tally.missing.empty()
              ? std::string()
              : absl::StrCat("; missing ranks: ",
                             absl::StrJoin(tally.missing, ", "))};
}

std::string JoinState(Store& store, const PeerInfo& self) {
  auto [joined, missing] = JoinCounts(store, self);
  return joined + missing;
}

// DeadlineExceeded naming how many ranks joined and which are missing. On
// rank 0 the message is also published as the verdict, so that every rank
// that joined ends with it.
absl::Status JoinTimeout(Store& store, const PeerInfo& self,
                         absl::Duration timeout) {
  auto [joined, missing] = JoinCounts(store, self);
  const std::string message = absl::StrCat(
      joined, " within ", absl::FormatDuration(timeout), missing,
      " (is every rank started, with the same store address and world "
      "size?)");
  if (self.rank == 0) {
    absl::StatusOr<std::string> stands =
        store.CompareSet(kVerdictKey, "", absl::StrCat(kDeadline, message));
    if (stands.ok() && absl::StartsWith(*stands, kDeadline)) {
      return absl::DeadlineExceededError(
          stands->substr(sizeof(kDeadline) - 1));
    }
  }
  return absl::DeadlineExceededError(message);
}

absl::Duration ProgressPeriod() {
  return absl::Seconds(
      ProcessSettings().rendezvous_progress_s.value_or(kProgressSeconds));
}

// Waits until every key in `keys` is set. Every kPollInterval it looks for a
// verdict: one that appears first ends the wait with its outcome (an error
// published by another rank). nullopt: the keys are all set. A wait for the
// verdict key alone needs no such look: it waits in one Wait up to the next
// progress line (one watch at a time on etcd, not three requests every
// kPollInterval from every waiting rank).
absl::StatusOr<std::optional<std::vector<PeerInfo>>> WaitOrVerdict(
    Store& store, const std::vector<std::string>& keys, const PeerInfo& self,
    absl::Time deadline) {
  const absl::Time start = absl::Now();
  absl::Time next_progress = start + ProgressPeriod();
  const bool verdict_only = keys.size() == 1 && keys[0] == kVerdictKey;
  while (true) {
    const absl::Time now = absl::Now();
    const absl::Duration left = deadline - now;
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(kOwnTimeout);
    }
    if (ProgressPeriod() > absl::ZeroDuration() && now >= next_progress) {
      std::fprintf(stderr, "devmesh: rank %d waiting: %s (%s left)\n",
                   self.rank, JoinState(store, self).c_str(),
                   absl::FormatDuration(absl::Trunc(left, absl::Milliseconds(100)))
                       .c_str());
      std::fflush(stderr);
      next_progress = now + ProgressPeriod();
    }
    absl::Duration slice = std::min(left, kPollInterval);
    if (verdict_only) {
      slice = left;
      if (ProgressPeriod() > absl::ZeroDuration()) {
        slice = std::min(left, std::max(next_progress - absl::Now(),
                                        absl::Milliseconds(1)));
      }
    }
    absl::Status waited = store.Wait(keys, slice);
    if (waited.ok()) return std::nullopt;
    if (!absl::IsDeadlineExceeded(waited)) return waited;
    if (verdict_only) continue;
    DEVMESH_ASSIGN_OR_RETURN(bool has_verdict, store.Check({kVerdictKey}));
    if (has_verdict) {
      DEVMESH_ASSIGN_OR_RETURN(std::string verdict, store.Get(kVerdictKey));
      DEVMESH_ASSIGN_OR_RETURN(std::vector<PeerInfo> outcome,
                               Interpret(verdict, self));
      return std::optional<std::vector<PeerInfo>>(std::move(outcome));
    }
  }
}

// The first way `peer` disagrees with `reference` (rank 0), or "".
std::string Disagreement(const PeerInfo& peer, const PeerInfo& reference) {
  if (peer.world_size != reference.world_size) {
    return absl::StrCat("rank ", peer.rank, " (", Describe(peer),
                        ") has world size ", peer.world_size, " but rank ",
                        reference.rank, " (", Describe(reference),
                        ") has world size ", reference.world_size,
                        ": every rank must get the same WORLD_SIZE");
  }
  if (peer.store != reference.store) {
    return absl::StrCat("rank ", peer.rank, " (", Describe(peer),
                        ") was given store ", peer.store, " but rank ",
                        reference.rank, " (", Describe(reference),
                        ") was given ", reference.store,
                        ": every rank must get the same MASTER_ADDR and "
                        "MASTER_PORT");
  }
  return "";
}

absl::StatusOr<std::vector<PeerInfo>> Exchange(Store& store,
                                               const PeerInfo& self,
                                               absl::Duration timeout) {
  if (self.world_size < 1 || self.rank < 0 || self.rank >= self.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", self.rank, " is outside [0, world_size=",
                     self.world_size, ")"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  const std::string mine = EncodePeerInfo(self);

  // 1. Claim the rank index: the first process to claim it keeps it.
  std::optional<absl::Status> claim_error;
  DEVMESH_ASSIGN_OR_RETURN(std::string claimed,
                           store.CompareSet(RankKey(self.rank), "", mine));
  if (claimed != mine) {
    absl::StatusOr<PeerInfo> holder = DecodePeerInfo(claimed);
    const std::string holder_text =
        holder.ok() ? Describe(*holder) : std::string("another process");
    // A rendezvous that already completed here (its table is published) is
    // another job's, alive or over: say so, and leave its keys alone (no
    // error verdict, no join that its rank 0 would wait for at exit).
    absl::StatusOr<std::string> table =
        store.Get(kVerdictKey, absl::Milliseconds(1));
    if (table.ok() && absl::StartsWith(*table, kOk)) {
      absl::StatusOr<std::vector<PeerInfo>> joined = DecodePeerTable(
          absl::string_view(*table).substr(sizeof(kOk) - 1));
      // An etcd store (self.store "etcd://...") keeps a job's keys until
      // they are deleted; a TCP store until it restarts.
      const bool etcd = absl::StartsWith(self.store, "etcd://");
      const std::string remedy =
          etcd ? absl::StrCat(
                     "give this job a key prefix of its own "
                     "(DEVMESH_STORE_ADDR=etcd://host:port/<prefix>), or "
                     "delete that job's keys once it has ended (etcdctl del "
                     "--prefix <prefix>; etcd keeps a job's keys); store ",
                     self.store)
               : std::string(
                     "give this job a store of its own (another MASTER_PORT, "
                     "or DEVMESH_STORE_ADDR), or restart the store once that "
                     "job has ended (a store keeps a job's keys)");
      return absl::FailedPreconditionError(absl::StrCat(
          "another job is using this store: its rendezvous of ",
          joined.ok() ? absl::StrCat(joined->size()) : std::string("its"),
          " ranks completed, and its rank ", self.rank, " is ", holder_text,
          "; this process (", Describe(self), ") asked for rank ", self.rank,
          " again: ", remedy));
    }
    const std::string message = absl::StrCat(
        "rank ", self.rank, " was started twice: by ", holder_text, " and by ",
        Describe(self), ": every process needs its own RANK");
    DEVMESH_RETURN_IF_ERROR(PublishError(store, message).status());
    claim_error = absl::InvalidArgumentError(message);
  }

  // 2. The claim is the join: a duplicate has published its error verdict
  // (above) and stops here; nothing else is counted (JoinTally).
  if (claim_error) return *claim_error;

  std::string verdict;
  if (self.rank == 0) {
    // 3a. Rank 0 waits for every rank's claim, checks every rank against
    // itself and publishes the table.
    std::vector<std::string> keys;
    keys.reserve(self.world_size);
    for (int r = 0; r < self.world_size; ++r) keys.push_back(RankKey(r));
    auto all_claimed = WaitOrVerdict(store, keys, self, deadline);
    if (!all_claimed.ok()) {
      return IsOwnTimeout(all_claimed.status())
                 ? JoinTimeout(store, self, timeout)
                 : all_claimed.status();
    }
    if (all_claimed->has_value()) return std::move(**all_claimed);
    DEVMESH_ASSIGN_OR_RETURN(std::vector<std::string> values,
                             store.MultiGet(keys, deadline - absl::Now()));
    std::vector<PeerInfo> peers;
    std::string problem;
    for (int r = 0; r < self.world_size && problem.empty(); ++r) {
      absl::StatusOr<PeerInfo> p = DecodePeerInfo(values[r]);
      if (!p.ok()) {
        problem = absl::StrCat("rank ", r, "'s peer info is corrupt");
      } else {
        problem = Disagreement(*p, self);
        peers.push_back(std::move(*p));
      }
    }
    DEVMESH_ASSIGN_OR_RETURN(
        verdict,
        problem.empty()
            ? store.CompareSet(kVerdictKey, "",
                               absl::StrCat(kOk, EncodePeerTable(peers)))
            : PublishError(store, problem));
  } else {
    // 3b. Every other rank compares itself with rank 0 (which may be the odd
    // one out), then waits for rank 0's verdict.
    auto rank0_there = WaitOrVerdict(store, {RankKey(0)}, self, deadline);
    if (!rank0_there.ok()) {
      return IsOwnTimeout(rank0_there.status())
                 ? JoinTimeout(store, self, timeout)
                 : rank0_there.status();
    }
    if (rank0_there->has_value()) return std::move(**rank0_there);
    DEVMESH_ASSIGN_OR_RETURN(std::string rank0_bytes, store.Get(RankKey(0)));
    DEVMESH_ASSIGN_OR_RETURN(PeerInfo rank0, DecodePeerInfo(rank0_bytes));
    if (std::string problem = Disagreement(self, rank0); !problem.empty()) {
      DEVMESH_RETURN_IF_ERROR(PublishError(store, problem).status());
    }
    auto decided = WaitOrVerdict(store, {kVerdictKey}, self, deadline);
    if (!decided.ok()) {
      return IsOwnTimeout(decided.status())
                 ? JoinTimeout(store, self, timeout)
                 : decided.status();
    }
    if (decided->has_value()) return std::move(**decided);
    DEVMESH_ASSIGN_OR_RETURN(verdict, store.Get(kVerdictKey));
  }
  return Interpret(verdict, self);
}

}  // namespace

absl::StatusOr<std::vector<PeerInfo>> ExchangePeerInfo(Store& store,
                                                       const PeerInfo& self,
                                                       absl::Duration timeout) {
  absl::StatusOr<std::vector<PeerInfo>> result = Exchange(store, self, timeout);
  // A rank other than 0 that learned a verdict says so, so that a rank 0 that
  // hosts the store keeps it up until the error has reached everyone.
  // (Not on etcd: no rank hosts that store, and 1024 failing ranks' Adds of
  // one key would cost etcd thousands of txns.)
  if (self.rank != 0 && !absl::StartsWith(self.store, "etcd://") &&
      (absl::IsInvalidArgument(result.status()) ||
       absl::IsDeadlineExceeded(result.status()))) {
    (void)store.Add(kReadKey, 1);
  }
  return result;
}

absl::StatusOr<bool> ReportEndBeforeRendezvous(Store& store,
                                               absl::string_view what) {
  DEVMESH_ASSIGN_OR_RETURN(
      std::string stands,
      store.CompareSet(kVerdictKey, "",
                       absl::StrCat(kGone, what,
                                    " before the rendezvous "
                                    "completed (reported by the launcher)")));
  return !absl::StartsWith(stands, kOk);
}

void WaitForVerdictReaders(Store& store, int world_size,
                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // The ranks that joined (claimed), counted once: a rank that claims later
  // reads the verdict too, and the wait ends when `read` reaches the count.
  const int joined =
      TallyJoins(store, world_size, std::numeric_limits<int>::max()).joined;
  while (absl::Now() < deadline) {
    absl::StatusOr<int64_t> read = store.Add(kReadKey, 0);
    if (!read.ok() || *read >= joined - 1) return;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<std::optional<std::vector<PeerInfo>>> ReadPeerTable(
    Store& store) {
  DEVMESH_ASSIGN_OR_RETURN(std::optional<std::string> verdict,
                           store.GetIfSet(kVerdictKey));
  if (!verdict.has_value() || !absl::StartsWith(*verdict, kOk)) {
    return std::optional<std::vector<PeerInfo>>();
  }
  DEVMESH_ASSIGN_OR_RETURN(
      std::vector<PeerInfo> peers,
      DecodePeerTable(absl::string_view(*verdict).substr(sizeof(kOk) - 1)));
  return std::optional<std::vector<PeerInfo>>(std::move(peers));
}

}  // namespace devmesh
