// devmesh/device_mesh/epoch_agreement.cc
#include "device_mesh/epoch_agreement.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/error_info.h"
#include "device_mesh/rank_liveness.h"
#include "status/status_macros.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

std::string Ranks(const std::vector<int>& ranks) {
  return absl::StrJoin(ranks, ",");
}

absl::StatusOr<std::vector<int>> ParseRanks(absl::string_view text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int r = 0;
    if (!absl::SimpleAtoi(part, &r)) {
      return absl::InternalError(absl::StrCat("bad rank list '", text, "'"));
    }
    out.push_back(r);
  }
  return out;
}

// "<rank>:<bytes>:<payload>" for each survivor, after the decision's first
// line (payloads may hold any byte).
std::string EncodePayloads(const std::vector<int>& survivors,
                           const std::vector<std::string>& payloads) {
  std::string out;
  for (size_t i = 0; i < survivors.size(); ++i) {
    absl::StrAppend(&out, "\n", survivors[i], ":", payloads[i].size(), ":",
                    payloads[i]);
  }
  return out;
}

absl::Status DecodePayloads(absl::string_view text, Agreement& a) {
  const absl::Status bad = absl::InternalError("bad payloads in the decision");
  while (!text.empty()) {
    if (!absl::ConsumePrefix(&text, "\n")) return bad;
    const size_t c1 = text.find(':');
    if (c1 == absl::string_view::npos) return bad;
    const size_t c2 = text.find(':', c1 + 1);
    int rank = 0;
    size_t bytes = 0;
    if (c2 == absl::string_view::npos ||
        !absl::SimpleAtoi(text.substr(0, c1), &rank) ||
        !absl::SimpleAtoi(text.substr(c1 + 1, c2 - c1 - 1), &bytes) ||
        text.size() - c2 - 1 < bytes) {
      return bad;
    }
    a.payloads[rank] = std::string(text.substr(c2 + 1, bytes));
    text.remove_prefix(c2 + 1 + bytes);
  }
  return absl::OkStatus();
}

// The decision's text as an Agreement (payloads included) or its error.
absl::StatusOr<Agreement> ParseDecision(absl::string_view text) {
  if (absl::ConsumePrefix(&text, "error=")) {
    const size_t semi = text.find(';');
    int code = static_cast<int>(absl::StatusCode::kUnknown);
    if (semi == absl::string_view::npos ||
        !absl::SimpleAtoi(text.substr(0, semi), &code)) {
      return absl::InternalError(absl::StrCat("bad decision 'error=", text, "'"));
    }
    return absl::Status(static_cast<absl::StatusCode>(code),
                        text.substr(semi + 1));
  }
  const size_t eol = std::min(text.find('\n'), text.size());
  absl::string_view head = text.substr(0, eol);
  std::vector<absl::string_view> parts = absl::StrSplit(head, ';');
  if (parts.size() != 2 || !absl::ConsumePrefix(&parts[0], "survivors=") ||
      !absl::ConsumePrefix(&parts[1], "dead=")) {
    return absl::InternalError(absl::StrCat("bad decision '", head, "'"));
  }
  Agreement a;
  DEVMESH_ASSIGN_OR_RETURN(auto survivors, ParseRanks(parts[0]));
  DEVMESH_ASSIGN_OR_RETURN(auto dead, ParseRanks(parts[1]));
  a.survivors = std::move(survivors);
  a.dead = std::move(dead);
  DEVMESH_RETURN_IF_ERROR(DecodePayloads(text.substr(eol), a));
  return a;
}

}  // namespace

bool IsSurvivor(absl::string_view decision, int rank) {
  auto agreement = ParseDecision(decision);
  return !agreement.ok() ||
         std::binary_search(agreement->survivors.begin(),
                            agreement->survivors.end(), rank);
}

absl::StatusOr<Agreement> AgreeOnSurvivors(FailureWatch& watch, int64_t epoch,
                                           const std::vector<int>& members,
                                           const std::string& payload,
                                           absl::Duration lease,
                                           absl::Duration timeout) {
  Store& store = watch.store();
  const int me = watch.rank();
  auto arrive_key = [&](int r) {
    return FailureWatch::EpochKey(epoch, absl::StrCat("arrive/", r));
  };
  const std::string decision_key = FailureWatch::EpochKey(epoch, "decision");
  auto store_error = [&](const absl::Status& s) {
    return absl::UnavailableError(absl::StrCat(
        "Shrink could not reach the job's store (", s.ToString(),
        "); recovery needs a store that no rank hosts (torchrun's agent "
        "store, //store:server, or //bootstrap:launch --host_store)"));
  };
  // Shrink follows a death: without the epoch's verdict there is nothing to
  // agree on (and the epoch's one decision is not spent on it).
  auto verdict = watch.ReadVerdict(epoch);
  if (!verdict.ok()) {
    if (absl::IsNotFound(verdict.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Shrink of epoch ", epoch, ": no rank has been found dead (no "
          "verdict in the store): nothing to shrink; call it after a "
          "collective failed because a rank died"));
    }
    return store_error(verdict.status());
  }
  // A rank the verdict names (stopped past its lease, say, and back) is
  // fenced: it takes no part (the watch has fenced it on learning the
  // verdict).
  if (verdict->rank == me) {
    return WithFenced(absl::FailedPreconditionError(absl::StrCat(
                          "global rank ", me,
                          " (this rank) is fenced out of the job: the "
                          "others declared it dead (",
                          verdict->text,
                          ") and went on without it "
                          "(exit, or start over as a new job)")),
                      me);
  }
  if (absl::Status s = store.Set(arrive_key(me), payload); !s.ok()) {
    return store_error(s);
  }

  std::set<int> dead;
  // The verdict's rank: the watch already saw it gone or its lease stop.
  if (const int r = verdict->rank; r >= 0 && r != me) dead.insert(r);
  std::set<int> arrived = {me};
  struct Lease {
    device_mesh_internal::LeaseReading reading;  // when last alive
    absl::Time since;
  };
  std::map<int, Lease> leases;
  const absl::Time start = absl::Now();
  const absl::Duration poll =
      std::max(absl::Milliseconds(5), watch.period() / 5);
  const absl::Duration first_park = std::min(poll, absl::Milliseconds(10));

  std::string decided;
  for (int round = 0;; ++round) {
    // (No read of the decision first: CompareSet returns one already made,
    // and the parked Get below returns at once when there is one.)
    // Every member not known dead arrived (the last one to arrive, the
    // common case): one Check instead of one per member.
    std::vector<std::string> unseen;
    for (int r : members) {
      if (!arrived.count(r) && !dead.count(r)) unseen.push_back(arrive_key(r));
    }
    if (!unseen.empty()) {
      auto all_here = store.Check(unseen);
      if (!all_here.ok()) return store_error(all_here.status());
      if (*all_here) {
        for (int r : members) {
          if (!dead.count(r)) arrived.insert(r);
        }
      }
    }
    std::vector<int> pending;
    for (int r : members) {
      if (arrived.count(r) || dead.count(r)) continue;
      if (round == 0) {
        // Not all here yet: the others are most likely on their way, and
        // the last to arrive decides. Park first (first_park), and look
        // at each missing member (its arrival, "left" mark, process and
        // lease) only if no decision came by then, rather than load the
        // store while the last member tries to decide.
        pending.push_back(r);
        continue;
      }
      auto here = store.Check({arrive_key(r)});
      if (!here.ok()) return store_error(here.status());
      if (*here) {
        arrived.insert(r);
        continue;
      }
      auto left = store.Check({FailureWatch::LeftKey(r)});
      if (!left.ok()) return store_error(left.status());
      if (*left || watch.ProcessGoneHere(r)) {
        dead.insert(r);
        continue;
      }
      // A process this kernel shows running is slow, not dead, however
      // long its lease stands still (a host overloaded for seconds): it is
      // waited for, up to `timeout`, as the watch's successor check and
      // Explain spare it. A stopped one, or one elsewhere, is judged by its
      // lease.
      if (watch.ProcessRunningHere(r)) {
        pending.push_back(r);
        continue;
      }
      // Its lease (rank_liveness.h): expired (etcd's word) is dead now;
      // no sign of life for `lease` (a counter that did not advance) too.
      auto reading = watch.liveness().Read(r);
      if (!reading.ok()) return store_error(reading.status());
      const absl::Time now = absl::Now();
      auto [it, first] = leases.try_emplace(r);
      Lease& l = it->second;
      if (reading->expired) {
        dead.insert(r);
        continue;
      }
      if (first || !watch.liveness().LapsedBetween(l.reading, *reading)) {
        l.reading = *reading;
        l.since = now;
      } else if (now - l.since >= lease) {
        dead.insert(r);
        continue;
      }
      pending.push_back(r);
    }
    std::string mine;
    if (pending.empty()) {
      std::vector<int> survivors;
      for (int r : members) {
        if (arrived.count(r) && !dead.count(r)) survivors.push_back(r);
      }
      // The survivors' payloads go in the decision, so every survivor reads
      // the same ones without another round trip.
      std::vector<std::string> keys;
      for (int r : survivors) keys.push_back(arrive_key(r));
      auto values = store.MultiGet(keys, absl::Seconds(10));
      if (!values.ok()) return store_error(values.status());
      mine = absl::StrCat("survivors=", Ranks(survivors), ";dead=",
                          Ranks(std::vector<int>(dead.begin(), dead.end())),
                          EncodePayloads(survivors, *values));
    } else if (round > 0 && absl::Now() - start >= timeout) {
      mine = absl::StrCat(
          "error=", static_cast<int>(absl::StatusCode::kDeadlineExceeded),
          ";Shrink of epoch ", epoch, ": global rank(s) [",
          absl::StrJoin(pending, ", "),
          "] neither called Shrink nor stopped renewing their lease within ",
          absl::FormatDuration(timeout),
          " (every live member of the mesh must call Shrink)");
    }
    if (!mine.empty()) {
      auto won = store.CompareSet(decision_key, "", mine);
      if (!won.ok()) return store_error(won.status());
      decided = *won;
      break;
    }
    // Parked on the decision: woken as soon as another member decides.
    if (auto d = store.Get(decision_key, round == 0 ? first_park : poll);
        d.ok()) {
      decided = *d;
      break;
    } else if (!absl::IsDeadlineExceeded(d.status())) {
      return store_error(d.status());
    }
  }

  DEVMESH_ASSIGN_OR_RETURN(auto agreement, ParseDecision(decided));
  if (!std::binary_search(agreement.survivors.begin(),
                          agreement.survivors.end(), me)) {
    const std::string why = absl::StrCat(
        "global rank ", me, " (this rank) is not a survivor of epoch ", epoch,
        ": the others found global rank(s) [",
        absl::StrJoin(agreement.dead, ", "),
        "] dead and went on without them; this rank is fenced out of the job "
        "(exit, or start over as a new job)");
    watch.Fence(why);
    return WithFenced(absl::FailedPreconditionError(why), me);
  }
  return agreement;
}

}  // namespace device_mesh_internal
}  // namespace devmesh
