// devmesh/device_mesh/device_mesh_shrink.cc
// DeviceMesh::Shrink (device_mesh.h): agree on the dead, drop their
// replicas, keep the idle whole groups, shrink the NCCL groups that lose
// members (ncclCommShrink), make the rest anew under a new epoch.
#include <algorithm>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/error_info.h"
#include "comm/group_args.h"
#include "comm/registry.h"
#include "comm/shrinkable_communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/epoch_agreement.h"
#include "device_mesh/rank_liveness.h"
#include "device_mesh/group_tag.h"
#include "device_mesh/guarded_communicator.h"
#include "device_mesh/root_state.h"
#include "device_mesh/spare_registry.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

using device_mesh_internal::AgreeOnSurvivors;
using device_mesh_internal::Agreement;
using device_mesh_internal::GroupTag;
using device_mesh_internal::LocalFields;

namespace {

struct GroupState {
  int64_t completed = 0;
  bool clean = false;
  // Its backend communicator could be shrunk (ShrinkableCommunicator::
  // CanShrink): an NCCL group, built with ncclCommShrink, not aborted.
  bool shrinkable = false;
};

// A member's arrival payload: what it asks the Shrink to do (its dim and
// min_replicas, which every survivor must ask alike), then what it knows
// of its groups: "<n>:<what>" followed by GroupsPayload's entries.
std::string ShrinkAsk(absl::string_view dim_name, int64_t min_replicas) {
  return absl::StrCat("mesh dim '", dim_name, "' (min_replicas ", min_replicas,
                      ")");
}

// The "<what>" and the rest of a payload; "" and the whole payload when it
// has no prefix (then the asks differ from every member's that has one).
std::pair<std::string, absl::string_view> SplitPayload(
    absl::string_view payload) {
  const size_t colon = payload.find(':');
  size_t n = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(payload.substr(0, colon), &n) ||
      n > payload.size() - colon - 1) {
    return {std::string(), payload};
  }
  return {std::string(payload.substr(colon + 1, n)),
          payload.substr(colon + 1 + n)};
}

// "tag=completed/clean/shrinkable;..." -> tag -> state. Unparsable entries
// are left out (their groups are made anew).
std::map<std::string, GroupState> ParsePayload(absl::string_view payload) {
  std::map<std::string, GroupState> out;
  for (absl::string_view entry : absl::StrSplit(payload, ';', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(entry, '=');
    if (kv.size() != 2) continue;
    std::vector<absl::string_view> st = absl::StrSplit(kv[1], '/');
    GroupState g;
    int clean = 0;
    int shrinkable = 0;
    if (st.size() != 3 || !absl::SimpleAtoi(st[0], &g.completed) ||
        !absl::SimpleAtoi(st[1], &clean) ||
        !absl::SimpleAtoi(st[2], &shrinkable)) {
      continue;
    }
    g.clean = clean == 1;
    g.shrinkable = shrinkable == 1;
    out[std::string(kv[0])] = g;
  }
  return out;
}

// `g`'s backend communicator as a ShrinkableCommunicator that can shrink
// now; nullptr otherwise (not NCCL, NCCL < 2.27, aborted).
ShrinkableCommunicator* Shrinkable(const GuardedCommunicator& g) {
  auto* s = dynamic_cast<ShrinkableCommunicator*>(g.inner());
  return s != nullptr && s->CanShrink() ? s : nullptr;
}

// Aborts, when it goes out of scope, the old groups whose abort was put off
// for a shrink (a shrunk one is aborted already: Abort again is a no-op).
struct AbortAtExit {
  std::vector<std::shared_ptr<GuardedCommunicator>> groups;
  ~AbortAtExit() {
    for (const auto& g : groups) (void)g->Abort();
  }
};

std::string Describe(const std::string& dim, const std::vector<int>& ranks) {
  return absl::StrCat(dim, " [", absl::StrJoin(ranks, ", "), "]");
}

}  // namespace

std::string ShrinkReport::ToString() const {
  return absl::StrCat(
      "epoch ", epoch, ": dead [", absl::StrJoin(dead, ", "),
      "]; removed replicas [", absl::StrJoin(removed_replicas, ", "),
      "] (live [", absl::StrJoin(removed_live, ", "), "]); kept ",
      kept.empty() ? "none" : absl::StrJoin(kept, ", "), "; rebuilt ",
      rebuilt.empty() ? "none" : absl::StrJoin(rebuilt, ", "), "; rounds ",
      rounds, "; agree ", absl::FormatDuration(agree), ", rebuild ",
      absl::FormatDuration(rebuild));
}

int64_t DeviceMesh::epoch() const { return root_->epoch; }

absl::StatusOr<ShrinkResult> DeviceMesh::Shrink(
    MeshDim replica_dim, const ShrinkOptions& options) const {
  if (layout_ != root_->root_layout) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Shrink needs the root mesh, got the sub-mesh ", ToString(),
        "; call RootMesh().Shrink(...)"));
  }
  if (runtime_->detached()) {
    return absl::FailedPreconditionError(
        "Shrink needs a runtime with a store; this mesh was made from groups "
        "alone");
  }
  if (options.min_replicas < 1 || options.max_rounds < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Shrink needs min_replicas >= 1 and max_rounds >= 1, got ",
        options.min_replicas, " and ", options.max_rounds));
  }
  DEVMESH_ASSIGN_OR_RETURN(auto rd, ResolveDim(replica_dim));
  std::shared_ptr<FailureWatch> watch = runtime_->watch();
  if (watch == nullptr) {
    return absl::FailedPreconditionError(
        "Shrink needs the failure watch (unset DEVMESH_FAILURE_WATCH=0)");
  }
  // Default: the lease's own confirm wait (counter: 3 periods, cut to fit
  // max(2 s, 2 periods) from a period of about 430 ms; rank_liveness.h), so
  // that a member that dies before it arrives is not waited for past that
  // bound. A lease given is at least two periods.
  const absl::Duration lease =
      options.lease.value_or(watch->liveness().confirm_wait());
  if (options.lease.has_value() && lease < watch->period() * 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Shrink's lease (", absl::FormatDuration(lease),
        ") must be at least two lease periods (",
        absl::FormatDuration(watch->period() * 2), ")"));
  }
  const absl::Time verdict_time = watch->verdict_time();
  DeviceMesh current = *this;
  ShrinkReport total;
  std::set<int> dead;
  for (int round = 1;; ++round) {
    bool again = false;
    DEVMESH_ASSIGN_OR_RETURN(auto step,
                             current.ShrinkOnce(rd, options, lease, &again));
    const ShrinkReport& r = step.report;
    dead.insert(r.dead.begin(), r.dead.end());
    total.agree += r.agree;
    total.rebuild += r.rebuild;
    total.kept = r.kept;
    total.rebuilt = r.rebuilt;
    total.epoch = r.epoch;
    total.rounds = round;
    current = step.mesh;
    if (!again) break;
    if (round >= options.max_rounds) {
      return absl::UnavailableError(absl::StrCat(
          "Shrink gave up after ", round, " rounds: ranks kept dying (dead so "
          "far: [", absl::StrJoin(dead, ", "), "]; last: ",
          watch->verdict(), ")"));
    }
  }
  total.dead.assign(dead.begin(), dead.end());
  total.verdict_time = verdict_time;
  // Replicas of this mesh with no rank in the new one, and their live ranks.
  std::vector<int64_t> coord = *layout_.CoordinateOf(runtime_->rank());
  for (int64_t i = 0; i < layout_.shape()[rd]; ++i) {
    coord[rd] = i;
    if (!current.layout().ContainsRank(*layout_.RankAt(coord))) {
      total.removed_replicas.push_back(i);
    }
  }
  for (int64_t r : layout_.RankTable()) {
    if (!current.layout().ContainsRank(r) && !dead.count(static_cast<int>(r))) {
      total.removed_live.push_back(static_cast<int>(r));
    }
  }
  if (const std::vector<int64_t> ranks = current.layout().RankTable();
      *std::min_element(ranks.begin(), ranks.end()) == runtime_->rank()) {
    // Every member of the epoch before arrived in its agreement: the keys
    // of the ones before that are no one's now (spare_registry.h).
    device_mesh_internal::RetireEpochs(runtime_->base_store(), current.epoch(),
                                       runtime_->world_size());
  }
  return ShrinkResult{std::move(current), std::move(total)};
}

absl::StatusOr<ShrinkResult> DeviceMesh::ShrinkOnce(int rd,
                                                    const ShrinkOptions& options,
                                                    absl::Duration lease,
                                                    bool* again) const {
  std::shared_ptr<FailureWatch> watch = runtime_->watch();
  const int64_t e = root_->epoch;
  const int me = runtime_->rank();
  if (std::string f = watch->fenced(); !f.empty()) {
    return WithFenced(absl::FailedPreconditionError(f), me);
  }
  if (watch->epoch() != e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this mesh is of epoch ", e, " but the job is at epoch ",
        watch->epoch(), ": shrink the mesh the last Shrink returned"));
  }
  if (!layout_.ContainsRank(me)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "global rank ", me, " is not part of ", ToString()));
  }

  // What this rank knows of its groups, for the others to compare.
  std::vector<std::pair<std::string, std::shared_ptr<GuardedCommunicator>>>
      groups;
  {
    sync_internal::MutexLock lock(&root_->mu);
    for (auto& [key, group] : root_->groups) {
      if (!group.ok() || *group == nullptr) continue;
      if (auto g = std::dynamic_pointer_cast<GuardedCommunicator>(*group)) {
        groups.emplace_back(key, std::move(g));
      }
    }
  }
  const std::string ask =
      ShrinkAsk(dim_group_names()[rd], options.min_replicas);
  std::string payload = absl::StrCat(ask.size(), ":", ask);
  std::set<std::string> shrinkable;  // keys of groups this rank can shrink
  for (const auto& [key, g] : groups) {
    // I* calls still queued or running count: wait for them (after the
    // verdict the guard refuses them at once, and aborts or revokes a
    // running one). NCCL's, enqueued on a stream, are the guard's own to
    // wait for; one still running at the deadline leaves the group unclean.
    g->WaitForAsync();
    (void)g->WaitForStarted(absl::Now() + options.timeout);
    const GuardedCommunicator::State st = g->state();
    const bool can_shrink = Shrinkable(*g) != nullptr;
    if (can_shrink) shrinkable.insert(key);
    absl::StrAppend(&payload, GroupTag(key, g->global_ranks()), "=",
                    st.completed, "/", st.clean ? 1 : 0, "/",
                    can_shrink ? 1 : 0, ";");
  }
  std::vector<int> members;
  for (int64_t r : layout_.RankTable()) members.push_back(static_cast<int>(r));
  std::sort(members.begin(), members.end());

  const absl::Time start = absl::Now();
  DEVMESH_ASSIGN_OR_RETURN(
      auto agreement,
      AgreeOnSurvivors(*watch, e, members, payload, lease, options.timeout));
  const absl::Time agreed = absl::Now();
  // Every survivor asked for the same Shrink, or every survivor fails alike
  // (they all read the same payloads): the lowest survivor's ask against the
  // first that differs.
  if (!agreement.payloads.empty()) {
    const auto& [first_rank, first] = *agreement.payloads.begin();
    const std::string first_ask = SplitPayload(first).first;
    for (const auto& [r, p] : agreement.payloads) {
      const std::string their_ask = SplitPayload(p).first;
      if (their_ask == first_ask) continue;
      return WithDisagreement(
          absl::InvalidArgumentError(absl::StrCat(
              "Shrink of epoch ", e,
              ": the survivors disagree on what to shrink: global rank ", r,
              " asked for ", their_ask, ", global rank ", first_rank, " for ",
              first_ask, "; every survivor fails with this error")),
          r);
    }
  }

  // The old groups that hold a rank found dead are aborted (the verdict
  // aborted those of its own rank; the agreement may have found more), so a
  // dead rank that comes back fails at once on them, and is fenced. Those
  // this rank can shrink (NCCL: the verdict revoked them) are aborted on
  // the way out instead, after the shrink below, which needs them whole.
  AbortAtExit deferred;
  for (const auto& [key, g] : groups) {
    for (int r : g->global_ranks()) {
      if (std::binary_search(agreement.dead.begin(), agreement.dead.end(), r)) {
        if (shrinkable.count(key)) {
          deferred.groups.push_back(g);
        } else {
          (void)g->Abort();
        }
        break;
      }
    }
  }
  // Everything below is computed from the agreement alone, so it is the
  // same on every survivor.
  ShrinkReport report;
  report.epoch = e + 1;
  report.dead = agreement.dead;
  report.agree = agreed - start;
  std::set<int64_t> removed;
  for (int r : agreement.dead) {
    if (auto c = layout_.CoordinateOf(r)) removed.insert((*c)[rd]);
  }
  const int64_t replicas = layout_.shape()[rd];
  const std::string dim_name = dim_group_names()[rd];
  if (agreement.survivors.size() * 2 <= members.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Shrink of epoch ", e, ": only ", agreement.survivors.size(), " of ",
        members.size(), " ranks are alive (dead: [",
        absl::StrJoin(agreement.dead, ", "),
        "]); going on needs more than half (no split brain)"));
  }
  if (replicas - static_cast<int64_t>(removed.size()) < options.min_replicas) {
    return absl::FailedPreconditionError(
        absl::StrCat("Shrink of epoch ", e, " would leave ",
                     replicas - static_cast<int64_t>(removed.size()), " of ",
                     replicas, " replicas along mesh dim ", dim_name,
                     " (dead: [", absl::StrJoin(agreement.dead, ", "),
                     "]), below min_replicas ", options.min_replicas));
  }
  std::vector<int64_t> my_coord = *layout_.CoordinateOf(me);
  if (removed.count(my_coord[rd])) {
    // The survivors shrink this rank's NCCL groups away with
    // NCCL_SHRINK_ABORT and abort them: every rank, this one too, releases
    // them with ncclCommAbort (pytorch/pytorch#194679).
    for (const auto& [key, g] : groups) {
      if (shrinkable.count(key)) deferred.groups.push_back(g);
    }
    // Its groups recorded in the new epoch too, so that those whose other
    // members died (its replica's) are deleted with that epoch
    // (spare_registry.h); best effort.
    (void)runtime_->RecordGroups(e + 1);
    return WithRemoved(
        absl::FailedPreconditionError(absl::StrCat(
            "global rank ", me, " was removed in epoch ", e + 1,
            ": its replica ", my_coord[rd], " along mesh dim ", dim_name,
            " lost global rank(s) [", absl::StrJoin(agreement.dead, ", "),
            "]; this rank is alive and may exit or stay as a spare")),
        e + 1);
  }

  // The new root: the old rank table without the removed replicas.
  std::vector<int64_t> kept_replicas;
  for (int64_t i = 0; i < replicas; ++i) {
    if (!removed.count(i)) kept_replicas.push_back(i);
  }
  std::vector<int64_t> shape = layout_.shape();
  shape[rd] = static_cast<int64_t>(kept_replicas.size());
  std::vector<int64_t> flat;
  std::vector<int64_t> c(shape.size(), 0);
  for (bool more = true; more;) {
    std::vector<int64_t> old = c;
    old[rd] = kept_replicas[c[rd]];
    flat.push_back(*layout_.RankAt(old));
    more = false;
    for (int d = static_cast<int>(c.size()) - 1; d >= 0; --d) {
      if (++c[d] < shape[d]) {
        more = true;
        break;
      }
      c[d] = 0;
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto new_layout, MeshLayout::FromRanks(flat, shape, layout_.dim_names()));
  auto root = std::make_shared<device_mesh_internal::RootState>(
      new_layout.RootLayout(), root_->root_options);
  root->root_index = root_->root_index;
  root->epoch = e + 1;
  DeviceMesh next(runtime_, root, new_layout, device_type_, options_);
  // The new epoch's members are the new mesh's ranks (not the live ranks
  // of removed replicas, which may exit or idle as spares).
  std::vector<int> next_members(flat.begin(), flat.end());
  std::sort(next_members.begin(), next_members.end());
  watch->AdvanceEpoch(e + 1, next_members);
  // The groups this rank holds, kept ones included, recorded in the new
  // epoch: their keys stay while any member holds them (spare_registry.h).
  // Best effort: the other members of a group record it too, and a store
  // that fails this fails the rebuild's creations as well.
  (void)runtime_->RecordGroups(e + 1);

  std::map<int, std::map<std::string, GroupState>> states;
  for (const auto& [r, p] : agreement.payloads) {
    states[r] = ParsePayload(SplitPayload(p).second);
  }
  std::vector<int> rebuild;
  bool nccl = false;  // a group to rebuild is NCCL
  // NCCL groups that lose members and that every surviving member can
  // shrink (their payloads say so, so all of them decide alike): dim, old
  // group, group ranks to exclude.
  struct ToShrink {
    int d;
    std::shared_ptr<GuardedCommunicator> old;
    std::vector<int> exclude;
  };
  std::vector<ToShrink> shrinks;
  for (int d = 0; d < ndim(); ++d) {
    const std::string name = dim_group_names()[d];
    GroupOptions go = options_.For(name);
    if (go.backend.empty()) go.backend = std::string(DefaultBackendFor(device_type_));
    DEVMESH_ASSIGN_OR_RETURN(auto line, next.layout().RootLineOf(me, d));
    const std::vector<int> line_ranks(line.begin(), line.end());
    const std::string old_key = GroupKey(layout_, d, go);
    std::shared_ptr<GuardedCommunicator> old;
    for (const auto& [key, g] : groups) {
      if (key == old_key) old = g;
    }
    bool keep = old != nullptr && old->global_ranks() == line_ranks;
    if (keep) {
      const std::string tag = GroupTag(old_key, line_ranks);
      const GroupState mine = states[me][tag];
      for (int m : line_ranks) {
        auto it = states[m].find(tag);
        keep = keep && it != states[m].end() && it->second.clean &&
               it->second.completed == mine.completed;
      }
    }
    if (!keep && old != nullptr && TraitsOf(go.backend).shrinks_in_place) {
      std::optional<std::vector<int>> exclude =
          ShrinkExclusions(old->global_ranks(), line_ranks);
      const std::string tag = GroupTag(old_key, old->global_ranks());
      bool all = exclude.has_value();
      for (int m : line_ranks) {
        auto it = states[m].find(tag);
        all = all && it != states[m].end() && it->second.shrinkable;
      }
      if (all) {
        shrinks.push_back(ToShrink{d, old, *std::move(exclude)});
        continue;
      }
    }
    if (!keep) {
      rebuild.push_back(d);
      nccl = nccl || NeedsPreparedThread(go.backend);
      continue;
    }
    const std::string new_key = next.GroupKey(next.layout(), d, go);
    sync_internal::MutexLock lock(&root->mu);
    root->groups.emplace(new_key, runtime_->Rewrap(old->inner_shared()));
    root->group_locals.emplace(new_key, LocalFields(go));
    report.kept.push_back(Describe(name, line_ranks));
  }
  // Shrunk first, on this thread, in dim order on every survivor (at most
  // one per rank in practice: only the replica dim's lines lose members).
  // A shrink that fails here falls back to making the group anew; its
  // peers whose shrink went on wait in ncclCommShrink until its timeout,
  // and the group's creation may then fail too (a further round, or this
  // Shrink's error).
  std::map<int, std::string> how;  // dim -> how it was rebuilt
  for (const ToShrink& t : shrinks) {
    GroupOptions go = options_.For(dim_group_names()[t.d]);
    if (go.backend.empty()) {
      go.backend = std::string(DefaultBackendFor(device_type_));
    }
    auto* parent = dynamic_cast<ShrinkableCommunicator*>(t.old->inner());
    absl::StatusOr<std::unique_ptr<Communicator>> child =
        parent->Shrink(t.exclude, /*abort_in_flight=*/true);
    if (!child.ok()) {
      (void)t.old->Abort();
      how[t.d] = absl::StrCat("recreated after nccl_shrink failed: ",
                              child.status().message());
      rebuild.push_back(t.d);
      nccl = true;
      continue;
    }
    const std::string new_key = next.GroupKey(next.layout(), t.d, go);
    report.rebuilt.push_back(
        absl::StrCat(Describe(dim_group_names()[t.d], (*child)->global_ranks()),
                     " (nccl_shrink)"));
    sync_internal::MutexLock lock(&root->mu);
    root->groups.emplace(
        new_key,
        runtime_->Rewrap(std::shared_ptr<Communicator>(*std::move(child))));
    root->group_locals.emplace(new_key, LocalFields(go));
  }
  std::sort(rebuild.begin(), rebuild.end());
  // Made anew on every survivor, all at once (a thread per group beyond the
  // first): named groups, each creation waits only for its own members, so
  // a member late to one group does not hold up the others.
  // NCCL groups stay on this thread (a new thread's current CUDA device is
  // 0, not this one's).
  std::vector<absl::StatusOr<std::shared_ptr<Communicator>>> made(
      rebuild.size(), absl::UnknownError("not made"));
  {
    auto make = [&](size_t i) {
      try {
        made[i] = next.GetGroup(rebuild[i]);
      } catch (const std::exception& e) {
        made[i] = absl::InternalError(absl::StrCat(
            "making the group of mesh dim ", dim_group_names()[rebuild[i]],
            " threw: ", e.what()));
      }
    };
    std::vector<std::thread> threads;
    struct JoinAll {
      std::vector<std::thread>& threads;
      ~JoinAll() {
        for (auto& t : threads) {
          if (t.joinable()) t.join();
        }
      }
    } join_all{threads};
    std::vector<bool> on_thread(rebuild.size(), false);
    for (size_t i = 1; i < rebuild.size() && !nccl; ++i) {
      try {
        threads.emplace_back(make, i);
        on_thread[i] = true;
      } catch (const std::system_error&) {
        // No thread (a limit): made on this one below.
      }
    }
    for (size_t i = 0; i < rebuild.size(); ++i) {
      if (!on_thread[i]) make(i);
    }
  }
  for (size_t i = 0; i < rebuild.size(); ++i) {
    const int d = rebuild[i];
    auto& g = made[i];
    if (!g.ok()) {
      // A death during the rebuild: the new epoch's verdict starts another
      // round; anything else is this Shrink's error.
      absl::Status why = absl::UnavailableError(g.status().message());
      if (const int gone = ProcessGoneRank(g.status()); gone >= 0) {
        why = WithProcessGone(why, gone);
      }
      (void)watch->Explain(why, next_members);
      if (!watch->verdict().empty()) {
        *again = true;
        report.rebuild = absl::Now() - agreed;
        return ShrinkResult{std::move(next), std::move(report)};
      }
      return g.status();
    }
    report.rebuilt.push_back(absl::StrCat(
        Describe(dim_group_names()[d], (*g)->global_ranks()), " (",
        how.count(d) ? how[d] : "recreated", ")"));
  }
  report.rebuild = absl::Now() - agreed;
  return ShrinkResult{std::move(next), std::move(report)};
}

}  // namespace devmesh
