// devmesh/device_mesh/device_mesh_grow.cc
// DeviceMesh::Grow and DeviceMesh::JoinAsSpare (device_mesh.h): spares wait
// under the job's epoch; every member's Grow reads one decision that admits
// whole replicas of them, under a new epoch, as Shrink's agreement does
// (the store protocol: spare_registry.h).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/error_info.h"
#include "config/settings.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/group_tag.h"
#include "device_mesh/guarded_communicator.h"
#include "device_mesh/mesh_serialization.h"
#include "device_mesh/root_state.h"
#include "device_mesh/spare_registry.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

using device_mesh_internal::DecodeGrowDecision;
using device_mesh_internal::EncodeGrowDecision;
using device_mesh_internal::GrowDecision;
using device_mesh_internal::GrowKey;
using device_mesh_internal::GroupTag;
using device_mesh_internal::LocalFields;

namespace {

using Groups =
    std::vector<std::pair<std::string, std::shared_ptr<GuardedCommunicator>>>;

absl::Status StoreError(const absl::Status& s) {
  return absl::UnavailableError(absl::StrCat(
      "Grow could not reach the job's store (", s.ToString(), ")"));
}

// "<n>:<ask>" then "tag=completed/clean;" per group.
std::string Ask(absl::string_view dim, int64_t target) {
  return absl::StrCat("mesh dim '", dim, "' (target_replicas ", target, ")");
}
std::string AskOf(absl::string_view payload) {
  const size_t colon = payload.find(':');
  size_t n = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(payload.substr(0, colon), &n) ||
      n > payload.size() - colon - 1) {
    return std::string(payload);
  }
  return std::string(payload.substr(colon + 1, n));
}
// tag -> "completed/clean" of a member's payload.
std::map<std::string, std::string> StatesOf(absl::string_view payload) {
  std::map<std::string, std::string> out;
  const size_t colon = payload.find(':');
  size_t n = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(payload.substr(0, colon), &n) ||
      n > payload.size() - colon - 1) {
    return out;
  }
  for (absl::string_view e :
       absl::StrSplit(payload.substr(colon + 1 + n), ';', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(e, '=');
    if (kv.size() == 2) out[std::string(kv[0])] = std::string(kv[1]);
  }
  return out;
}

Groups GuardedGroups(device_mesh_internal::RootState& root) {
  Groups groups;
  sync_internal::MutexLock lock(&root.mu);
  for (auto& [key, group] : root.groups) {
    if (!group.ok() || *group == nullptr) continue;
    if (auto g = std::dynamic_pointer_cast<GuardedCommunicator>(*group)) {
      groups.emplace_back(key, std::move(g));
    }
  }
  return groups;
}

// A host name a Grow decision can carry (its table is joined by ','); a
// spare that knows no host of its own answers "1".
bool IsHostName(absl::string_view h) {
  return !h.empty() && h != "1" && h.find(',') == absl::string_view::npos;
}

std::string Describe(const std::string& dim, const std::vector<int>& ranks) {
  return absl::StrCat(dim, " [", absl::StrJoin(ranks, ", "), "]");
}

// The n-th Grow of `epoch` among `members` (sorted): this rank's arrival,
// then the decision, made by the first member to see every member arrived
// (`decide`), the epoch's verdict, or the timeout. Returns its text.
absl::StatusOr<std::string> AgreeOnGrowth(
    FailureWatch& watch, int64_t epoch, int64_t attempt,
    const std::vector<int>& members, const std::string& payload,
    absl::Duration timeout,
    const std::function<absl::StatusOr<GrowDecision>(
        const std::map<int, std::string>&)>& decide) {
  Store& store = watch.store();
  const int me = watch.rank();
  auto arrive_key = [&](int r) {
    return GrowKey(epoch, attempt, absl::StrCat("arrive/", r));
  };
  const std::string decision_key = GrowKey(epoch, attempt, "decision");
  // The call to the spares (they answer "ready/<rank>"), then the arrival.
  if (absl::Status s = store.Set(GrowKey(epoch, attempt, "open"), "1");
      !s.ok()) {
    return StoreError(s);
  }
  if (absl::Status s = store.Set(arrive_key(me), payload); !s.ok()) {
    return StoreError(s);
  }
  const absl::Time start = absl::Now();
  const absl::Duration poll =
      std::max(absl::Milliseconds(5), watch.period() / 5);
  std::set<int> arrived = {me};
  for (;;) {
    std::optional<GrowDecision> mine;
    auto verdict = watch.ReadVerdict(epoch);
    if (verdict.ok()) {
      if (verdict->rank == me) {
        return WithFenced(
            absl::FailedPreconditionError(absl::StrCat(
                "global rank ", me, " (this rank) is fenced out of the job: ",
                verdict->text)),
            me);
      }
      mine = GrowDecision{GrowDecision::Kind::kError,
                          absl::FailedPreconditionError(absl::StrCat(
                              "Grow of epoch ", epoch, ": ", verdict->text,
                              "; call Shrink first, then Grow"))};
    } else if (!absl::IsNotFound(verdict.status())) {
      return StoreError(verdict.status());
    } else {
      std::vector<int> missing;
      std::vector<std::string> unseen;
      for (int r : members) {
        if (!arrived.count(r)) unseen.push_back(arrive_key(r));
      }
      auto all_here = unseen.empty() ? absl::StatusOr<bool>(true)
                                     : store.Check(unseen);
      if (!all_here.ok()) return StoreError(all_here.status());
      if (!*all_here) {
        // A member that has not arrived and whose process this kernel shows
        // gone is dead now (its verdict published), not after its lease's
        // silence: the next round reads it.
        std::vector<int> late;
        for (int r : members) {
          if (!arrived.count(r)) late.push_back(r);
        }
        if (watch.JudgeGoneMembers(late)) continue;
      }
      if (*all_here) {
        std::vector<std::string> keys;
        for (int r : members) keys.push_back(arrive_key(r));
        auto values = store.MultiGet(keys, absl::Seconds(10));
        if (!values.ok()) return StoreError(values.status());
        std::map<int, std::string> asks;
        for (size_t i = 0; i < members.size(); ++i) {
          asks[members[i]] = (*values)[i];
        }
        DEVMESH_ASSIGN_OR_RETURN(mine, decide(asks));
      } else if (absl::Now() - start >= timeout) {
        for (int r : members) {
          if (arrived.count(r)) continue;
          auto here = store.Check({arrive_key(r)});
          if (!here.ok()) return StoreError(here.status());
          if (*here) {
            arrived.insert(r);
          } else {
            missing.push_back(r);
          }
        }
        if (!missing.empty()) {
          mine = GrowDecision{
              GrowDecision::Kind::kError,
              absl::DeadlineExceededError(absl::StrCat(
                  "Grow of epoch ", epoch, ": global rank(s) [",
                  absl::StrJoin(missing, ", "), "] did not call Grow within ",
                  absl::FormatDuration(timeout),
                  " (every member of the mesh must call it)"))};
        }
      }
    }
    if (mine.has_value()) {
      auto won = store.CompareSet(decision_key, "", EncodeGrowDecision(*mine));
      if (!won.ok()) return StoreError(won.status());
      return *won;
    }
    if (auto d = store.Get(decision_key, poll); d.ok()) {
      return *d;
    } else if (!absl::IsDeadlineExceeded(d.status())) {
      return StoreError(d.status());
    }
  }
}

}  // namespace

std::string GrowReport::ToString() const {
  if (!grown) {
    return absl::StrCat("epoch ", epoch,
                        ": unchanged (no whole replica of spares ready); "
                        "waiting [",
                        absl::StrJoin(waiting, ", "), "]");
  }
  return absl::StrCat(
      "epoch ", epoch, ": admitted [", absl::StrJoin(admitted, ", "),
      "] as replicas [", absl::StrJoin(new_replicas, ", "), "]; waiting [",
      absl::StrJoin(waiting, ", "), "]; kept ",
      kept.empty() ? "none" : absl::StrJoin(kept, ", "), "; rebuilt ",
      rebuilt.empty() ? "none" : absl::StrJoin(rebuilt, ", "),
      shrunk_after.empty() ? "" : absl::StrCat("; then shrunk: ", shrunk_after),
      "; agree ", absl::FormatDuration(agree), ", rebuild ",
      absl::FormatDuration(rebuild));
}

absl::StatusOr<GrowResult> DeviceMesh::Grow(MeshDim replica_dim,
                                            const GrowOptions& options) const {
  if (layout_ != root_->root_layout) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Grow needs the root mesh, got the sub-mesh ", ToString(),
        "; call RootMesh().Grow(...)"));
  }
  if (runtime_->detached()) {
    return absl::FailedPreconditionError(
        "Grow needs a runtime with a store; this mesh was made from groups "
        "alone");
  }
  if (options.target_replicas < 0 || options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Grow needs target_replicas >= 0 and a positive timeout, got ",
        options.target_replicas, " and ",
        absl::FormatDuration(options.timeout)));
  }
  DEVMESH_ASSIGN_OR_RETURN(const int rd, ResolveDim(replica_dim));
  std::shared_ptr<FailureWatch> watch = runtime_->watch();
  if (watch == nullptr) {
    return absl::FailedPreconditionError(
        "Grow needs the failure watch (unset DEVMESH_FAILURE_WATCH=0)");
  }
  const absl::Duration lease = options.lease.value_or(watch->period() * 2);
  if (lease < watch->period() * 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Grow's lease (", absl::FormatDuration(lease),
        ") must be at least two lease periods (",
        absl::FormatDuration(watch->period() * 2), ")"));
  }
  const int64_t e = root_->epoch;
  const int me = runtime_->rank();
  if (std::string f = watch->fenced(); !f.empty()) {
    return WithFenced(absl::FailedPreconditionError(f), me);
  }
  if (watch->epoch() != e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this mesh is of epoch ", e, " but the job is at epoch ",
        watch->epoch(), ": grow the mesh the last Shrink or Grow returned"));
  }
  if (!layout_.ContainsRank(me)) {
    return absl::FailedPreconditionError(
        absl::StrCat("global rank ", me, " is not part of ", ToString()));
  }
  const int64_t replicas = layout_.shape()[rd];
  const int64_t replica_size = layout_.numel() / replicas;
  const int64_t target = options.target_replicas > 0
                             ? options.target_replicas
                             : runtime_->world_size() / replica_size;
  const int64_t attempt = root_->grow_attempts.load();
  const std::string dim_name = dim_group_names()[rd];

  Groups groups = GuardedGroups(*root_);
  const std::string ask = Ask(dim_name, target);
  std::string payload = absl::StrCat(ask.size(), ":", ask);
  for (const auto& [key, g] : groups) {
    g->WaitForAsync();
    const GuardedCommunicator::State st = g->state();
    absl::StrAppend(&payload, GroupTag(key, g->global_ranks()), "=",
                    st.completed, "/", st.clean ? 1 : 0, ";");
  }
  std::vector<int> members;
  for (int64_t r : layout_.RankTable()) members.push_back(static_cast<int>(r));
  std::sort(members.begin(), members.end());

  // The decider's view: the asks agree, then the ready spares by whole
  // replicas.
  auto decide = [&](const std::map<int, std::string>& asks)
      -> absl::StatusOr<GrowDecision> {
    const auto& [first_rank, first] = *asks.begin();
    for (const auto& [r, p] : asks) {
      if (AskOf(p) == AskOf(first)) continue;
      return GrowDecision{
          GrowDecision::Kind::kError,
          WithDisagreement(
              absl::InvalidArgumentError(absl::StrCat(
                  "Grow of epoch ", e,
                  ": the members disagree on what to grow: global rank ", r,
                  " asked for ", AskOf(p), ", global rank ", first_rank,
                  " for ", AskOf(first), "; every member fails with this "
                  "error")),
              r)};
    }
    Store& store = watch->store();
    auto registered = device_mesh_internal::RegisteredSpares(store, e);
    if (!registered.ok()) return StoreError(registered.status());
    std::vector<int> spares;
    for (int r : *registered) {
      if (r < runtime_->world_size() && !layout_.ContainsRank(r)) {
        spares.push_back(r);
      }
    }
    // Ready: it answered this Grow's call (the "open" key every member set
    // on arrival) within `lease`; a live spare answers within a store round
    // trip, so only a dead one costs the whole window.
    std::vector<int> ready;
    if (!spares.empty() && target > replicas) {
      std::vector<std::string> answers;
      for (int r : spares) {
        answers.push_back(GrowKey(e, attempt, absl::StrCat("ready/", r)));
      }
      absl::Status all = store.Wait(answers, lease);
      if (!all.ok() && !absl::IsDeadlineExceeded(all)) return StoreError(all);
      for (size_t i = 0; i < spares.size(); ++i) {
        bool here = all.ok();
        if (!here) {
          auto c = store.Check({answers[i]});
          if (!c.ok()) return StoreError(c.status());
          here = *c;
        }
        if (here) ready.push_back(spares[i]);
      }
    }
    const int64_t k = std::min<int64_t>(
        std::max<int64_t>(target - replicas, 0),
        static_cast<int64_t>(ready.size()) / replica_size);
    GrowDecision d;
    if (k == 0) {
      d.kind = GrowDecision::Kind::kUnchanged;
      d.waiting = ready;
      return d;
    }
    d.kind = GrowDecision::Kind::kGrown;
    d.admitted.assign(ready.begin(), ready.begin() + k * replica_size);
    d.waiting.assign(ready.begin() + k * replica_size, ready.end());
    d.root_index = root_->root_index;
    d.replica_dim = rd;
    d.asks = asks;
    // The grown job's host table: this member's, with each admitted
    // spare's own host (its answer to the call, one round trip); none when
    // this member has no table or a name cannot be carried.
    const std::vector<std::string>& table = runtime_->hostnames();
    if (static_cast<int>(table.size()) == runtime_->world_size()) {
      std::vector<std::string> answers;
      for (int r : d.admitted) {
        answers.push_back(GrowKey(e, attempt, absl::StrCat("ready/", r)));
      }
      auto values = store.MultiGet(answers, lease);
      if (!values.ok()) return StoreError(values.status());
      d.hosts = table;
      for (size_t i = 0; i < d.admitted.size(); ++i) {
        if (IsHostName((*values)[i])) d.hosts[d.admitted[i]] = (*values)[i];
      }
      for (const std::string& h : d.hosts) {
        if (!IsHostName(h)) d.hosts.clear();
      }
    }
    // The new rank table, row-major: replica c[rd] < replicas as it is, the
    // next ones from the admitted ranks in row-major order of the other dims.
    std::vector<int64_t> shape = layout_.shape();
    shape[rd] = replicas + k;
    std::vector<int64_t> flat;
    std::vector<int64_t> c(shape.size(), 0);
    std::vector<int64_t> fill(static_cast<size_t>(k), 0);
    for (bool more = true; more;) {
      if (c[rd] < replicas) {
        flat.push_back(*layout_.RankAt(c));
      } else {
        int64_t& next = fill[c[rd] - replicas];
        flat.push_back(d.admitted[(c[rd] - replicas) * replica_size + next++]);
      }
      more = false;
      for (int i = static_cast<int>(c.size()) - 1; i >= 0; --i) {
        if (++c[i] < shape[i]) {
          more = true;
          break;
        }
        c[i] = 0;
      }
    }
    DEVMESH_ASSIGN_OR_RETURN(
        auto grown, MeshLayout::FromRanks(flat, shape, layout_.dim_names()));
    d.mesh = SerializeMesh(device_type_, grown, options_);
    return d;
  };

  const absl::Time start = absl::Now();
  DEVMESH_ASSIGN_OR_RETURN(
      std::string text, AgreeOnGrowth(*watch, e, attempt, members, payload,
                                      options.timeout, decide));
  DEVMESH_ASSIGN_OR_RETURN(GrowDecision d, DecodeGrowDecision(text));
  switch (d.kind) {
    case GrowDecision::Kind::kError:
      // The attempt is spent: a later Grow of this mesh is the next one.
      root_->grow_attempts.fetch_add(1);
      return d.error;
    case GrowDecision::Kind::kUnchanged: {
      root_->grow_attempts.fetch_add(1);
      GrowReport report;
      report.epoch = e;
      report.waiting = d.waiting;
      report.agree = absl::Now() - start;
      return GrowResult{*this, std::move(report)};
    }
    case GrowDecision::Kind::kGrown:
      break;
  }
  return FinishGrow(runtime_, text, e, this, absl::Now() - start);
}

absl::StatusOr<GrowResult> DeviceMesh::FinishGrow(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view text, int64_t e,
    const DeviceMesh* old, absl::Duration agree) {
  DEVMESH_ASSIGN_OR_RETURN(GrowDecision d, DecodeGrowDecision(text));
  DEVMESH_ASSIGN_OR_RETURN(MeshParts parts, DeserializeMesh(d.mesh));
  const int me = runtime->rank();
  const absl::Time agreed = absl::Now();
  std::vector<int> members;
  for (int64_t r : parts.layout.RankTable()) {
    members.push_back(static_cast<int>(r));
  }
  std::sort(members.begin(), members.end());
  if (!std::binary_search(members.begin(), members.end(), me)) {
    return absl::InternalError(absl::StrCat(
        "Grow of epoch ", e, " decided a mesh without global rank ", me));
  }
  auto root = std::make_shared<device_mesh_internal::RootState>(
      parts.layout.RootLayout(), parts.options);
  root->root_index = d.root_index;
  root->epoch = e + 1;
  DeviceMesh next(runtime, root, parts.layout, parts.device_type,
                  parts.options);
  if (old == nullptr) {
    // A new process under a rank that may have left before (a removed rank
    // that exited, restarted): it is a member again, to be judged by its
    // lease, not counted as gone by a "left" mark of its predecessor.
    if (auto s = runtime->base_store()->DeleteKey(FailureWatch::LeftKey(me));
        !s.ok()) {
      return StoreError(s.status());
    }
  }
  std::shared_ptr<FailureWatch> watch = runtime->started_watch();
  if (watch != nullptr) {
    if (old == nullptr) {
      // A spare whose watch runs (a removed rank that stayed): that watch
      // may still be at an epoch whose members include ranks admitted now,
      // under new processes. Step it through epoch e with the members that
      // stay first, so that AdvanceEpoch forgets what it knew of the
      // admitted ranks' processes (their predecessors', gone).
      std::vector<int> staying;
      for (int r : members) {
        if (!std::binary_search(d.admitted.begin(), d.admitted.end(), r)) {
          staying.push_back(r);
        }
      }
      watch->AdvanceEpoch(e, staying);
    }
    watch->AdvanceEpoch(e + 1, members);
  } else {
    watch = runtime->WatchFrom(e + 1, members);
  }
  if (watch == nullptr) {
    return absl::FailedPreconditionError(
        "Grow needs the failure watch (unset DEVMESH_FAILURE_WATCH=0)");
  }
  // The grown job's host table (an admitted spare's own host, where it
  // runs now), so that every member chooses each new group's transport
  // from the same table, shm inside a host included.
  if (static_cast<int>(d.hosts.size()) == runtime->world_size() &&
      d.hosts != runtime->hostnames()) {
    runtime->SetHostInfo(d.hosts, runtime->store_route_address());
  }
  // The groups this rank holds, kept ones included, recorded in the new
  // epoch (spare_registry.h); best effort, as in Shrink.
  (void)runtime->RecordGroups(e + 1);
  GrowReport report;
  report.epoch = e + 1;
  report.grown = true;
  report.admitted = d.admitted;
  report.waiting = d.waiting;
  report.agree = agree;
  std::set<int64_t> new_replicas;
  for (int r : d.admitted) {
    new_replicas.insert((*parts.layout.CoordinateOf(r))[d.replica_dim]);
  }
  report.new_replicas.assign(new_replicas.begin(), new_replicas.end());

  // Groups kept: a member's old group whose members are unchanged, and idle
  // and whole on every one of them (their asks say so alike).
  Groups groups = old != nullptr ? GuardedGroups(*old->root_) : Groups{};
  std::set<std::string> kept_keys;
  std::vector<int> rebuild;
  for (int dim = 0; dim < next.ndim(); ++dim) {
    const std::string name = next.dim_group_names()[dim];
    GroupOptions go = parts.options.For(name);
    if (go.backend.empty()) {
      go.backend = std::string(DefaultBackendFor(parts.device_type));
    }
    DEVMESH_ASSIGN_OR_RETURN(auto line, next.layout().RootLineOf(me, dim));
    const std::vector<int> line_ranks(line.begin(), line.end());
    std::shared_ptr<GuardedCommunicator> kept;
    std::string old_key;
    if (old != nullptr) {
      old_key = old->GroupKey(old->layout_, dim, go);
      for (const auto& [key, g] : groups) {
        if (key == old_key && g->global_ranks() == line_ranks) kept = g;
      }
    }
    if (kept != nullptr) {
      const std::string tag = GroupTag(old_key, line_ranks);
      const auto my_states = StatesOf(d.asks[me]);
      auto mine = my_states.find(tag);
      bool keep = mine != my_states.end();
      for (int m : line_ranks) {
        const auto states = StatesOf(d.asks[m]);
        auto it = states.find(tag);
        keep = keep && it != states.end() && it->second == mine->second &&
               absl::EndsWith(it->second, "/1");
      }
      if (!keep) kept = nullptr;
    }
    if (kept == nullptr) {
      rebuild.push_back(dim);
      continue;
    }
    kept_keys.insert(old_key);
    const std::string new_key = next.GroupKey(next.layout(), dim, go);
    sync_internal::MutexLock lock(&root->mu);
    root->groups.emplace(new_key, runtime->Rewrap(kept->inner_shared()));
    root->group_locals.emplace(new_key, LocalFields(go));
    report.kept.push_back(Describe(name, line_ranks));
  }
  // A death while the new groups are made or checked (an admitted rank, or
  // a member): the new epoch's verdict; the new mesh is shrunk along the
  // grown dim, here, on every member.
  auto release_old = [&]() {
    // The old groups not carried over (every one of their members leaves
    // them too: they refuse since the epoch moved on).
    for (const auto& [key, g] : groups) {
      if (!kept_keys.count(key)) (void)g->Abort();
    }
  };
  auto shrink_after = [&](const absl::Status& error)
      -> absl::StatusOr<GrowResult> {
    absl::Status why = absl::UnavailableError(error.message());
    if (const int gone = ProcessGoneRank(error); gone >= 0) {
      why = WithProcessGone(why, gone);
    }
    (void)watch->Explain(why, members);
    if (watch->verdict().empty()) return error;
    release_old();
    auto shrunk = next.Shrink(d.replica_dim);
    if (!shrunk.ok()) return shrunk.status();
    report.grown = false;
    report.shrunk_after = shrunk->report.ToString();
    report.epoch = shrunk->report.epoch;
    report.rebuild = absl::Now() - agreed;
    return GrowResult{shrunk->mesh, std::move(report)};
  };
  // The others made anew, in dim order on every member (each creation waits
  // for its own members only, and every member goes in the same order).
  for (int dim : rebuild) {
    auto g = next.GetGroup(dim);
    if (!g.ok()) return shrink_after(g.status());
    report.rebuilt.push_back(
        Describe(next.dim_group_names()[dim], (*g)->global_ranks()));
  }
  // Then a barrier on each group, in dim order, so that a death that one
  // member found while making its groups reaches every member here (its
  // groups are told of the verdict and fail), not at its next step.
  for (int dim = 0; dim < next.ndim(); ++dim) {
    auto g = next.GetGroup(dim);
    absl::Status s = g.ok() ? (*g)->Barrier() : g.status();
    if (!s.ok()) return shrink_after(s);
  }
  release_old();
  report.rebuild = absl::Now() - agreed;
  if (members.front() == me) {
    // Every member of epoch e arrived in its agreement: the keys of epoch
    // e - 1 and before are no one's now (spare_registry.h).
    device_mesh_internal::RetireEpochs(runtime->base_store(), e + 1,
                                       runtime->world_size());
  }
  return GrowResult{std::move(next), std::move(report)};
}

absl::StatusOr<GrowResult> DeviceMesh::JoinAsSpare(
    std::shared_ptr<MeshRuntime> runtime, const SpareOptions& options) {
  if (runtime == nullptr || runtime->detached()) {
    return absl::FailedPreconditionError(
        "JoinAsSpare needs a runtime over the job's store");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("JoinAsSpare needs a positive timeout, got ",
                     absl::FormatDuration(options.timeout)));
  }
  if (!ProcessSettings().failure_watch.value_or(true)) {
    return absl::FailedPreconditionError(
        "JoinAsSpare needs the failure watch (unset DEVMESH_FAILURE_WATCH=0)");
  }
  const int me = runtime->rank();
  if (auto w = runtime->started_watch(); w != nullptr && !w->fenced().empty()) {
    return WithFenced(
        absl::FailedPreconditionError(absl::StrCat(
            "global rank ", me, " (this process) cannot come back as a spare: "
            "the job declared it dead and fenced it (", w->fenced(),
            "); start a new process for global rank ", me, " instead")),
        me);
  }
  std::shared_ptr<Store> store = runtime->base_store();
  if (runtime->started_watch() == nullptr) {
    // A new process under a rank that ran before (killed, restarted): its
    // predecessor's identity (FailureWatch::ProcKey) names a process that
    // is gone, and a member that admits this one and read it would declare
    // it dead at once. This process's own identity replaces it now, before
    // its watch starts (FinishGrow, after the decision): a member waiting
    // for it in the Grow's rebuild then finds it gone at once when it dies
    // there, on the member's host or by its liveness beacon on another
    // (FailureWatch::JudgeGoneMembers), not after its lease's silence.
    if (auto s = store->Set(
            FailureWatch::ProcKey(me),
            FailureWatch::ProcessIdentity(runtime->store_route_address()));
        !s.ok()) {
      return StoreError(s);
    }
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  const absl::Duration period = runtime->LeasePeriod();
  const std::string my_host =
      static_cast<int>(runtime->hostnames().size()) == runtime->world_size() &&
              IsHostName(runtime->hostnames()[me])
          ? runtime->hostnames()[me]
          : std::string("1");
  auto position = device_mesh_internal::FindJobPosition(*store);
  if (!position.ok()) return StoreError(position.status());
  device_mesh_internal::JobPosition at = *position;
  int64_t registered = -1;
  // The Grow whose call this spare answered last.
  device_mesh_internal::JobPosition answered{-1, -1};
  for (;;) {
    if (registered != at.epoch) {
      if (absl::Status s =
              device_mesh_internal::RegisterSpare(*store, at.epoch, me);
          !s.ok()) {
        return StoreError(s);
      }
      registered = at.epoch;
    }
    const absl::Duration wait = std::min(period, deadline - absl::Now());
    if (wait <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "global rank ", me, " waited ", absl::FormatDuration(options.timeout),
          " as a spare of the job (now at epoch ", at.epoch,
          ") and no Grow admitted it"));
    }
    if (answered != at) {
      // Parked on the next Grow's call; answered at once.
      auto open = store->Get(GrowKey(at.epoch, at.attempt, "open"), wait);
      if (open.ok()) {
        // The answer is this spare's host (its own entry of its host
        // table), which the decision carries to every member.
        if (absl::Status s = store->Set(
                GrowKey(at.epoch, at.attempt, absl::StrCat("ready/", me)),
                my_host);
            !s.ok()) {
          return StoreError(s);
        }
        answered = at;
        continue;
      }
      if (!absl::IsDeadlineExceeded(open.status())) {
        return StoreError(open.status());
      }
    }
    auto text = answered == at
                    ? store->Get(GrowKey(at.epoch, at.attempt, "decision"), wait)
                    : absl::StatusOr<std::string>(
                          absl::DeadlineExceededError("not called yet"));
    if (text.ok()) {
      if (!absl::StartsWith(*text, "grown;")) {
        ++at.attempt;  // no one admitted: the epoch stays
        continue;
      }
      DEVMESH_ASSIGN_OR_RETURN(GrowDecision d, DecodeGrowDecision(*text));
      if (!std::binary_search(d.admitted.begin(), d.admitted.end(), me)) {
        at = device_mesh_internal::JobPosition{at.epoch + 1, 0};
        continue;
      }
      auto joined = FinishGrow(runtime, *text, at.epoch, nullptr,
                               absl::ZeroDuration());
      if (joined.ok() || GetErrorInfo(joined.status()).removed_in_epoch < 0) {
        return joined;
      }
      // Removed again by the Shrink that followed a death while the groups
      // were made: wait again, in the job's epoch now.
      position = device_mesh_internal::FindJobPosition(*store);
      if (!position.ok()) return StoreError(position.status());
      at = *position;
      continue;
    }
    if (!absl::IsDeadlineExceeded(text.status())) {
      return StoreError(text.status());
    }
    // A Shrink moved the job on: follow it.
    auto shrink = store->GetIfSet(FailureWatch::EpochKey(at.epoch, "decision"));
    if (!shrink.ok()) return StoreError(shrink.status());
    if (shrink->has_value() &&
        device_mesh_internal::IsShrinkSuccess(**shrink)) {
      at = device_mesh_internal::JobPosition{at.epoch + 1, 0};
      continue;
    }
    // The job moved on past this epoch by a Grow whose keys are deleted
    // already (RetireEpochs): find it again.
    auto job_epoch = device_mesh_internal::ReadJobEpoch(*store);
    if (!job_epoch.ok()) return StoreError(job_epoch.status());
    if (*job_epoch > at.epoch) {
      position = device_mesh_internal::FindJobPosition(*store);
      if (!position.ok()) return StoreError(position.status());
      at = *position;
    }
  }
}

}  // namespace devmesh
