#include "device_mesh/mesh_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/auto_group.h"
#include "comm/backend_options.h"
#include "comm/registry.h"
#include "comm/verified_communicator.h"
#include "config/settings.h"
#include "device_mesh/group_tag.h"
#include "device_mesh/guarded_communicator.h"
#include "device_mesh/rank_liveness.h"
#include "device_mesh/spare_registry.h"
#include "status/status_macros.h"
#include "store/cancellable_store.h"
#include "store/prefix_store.h"

namespace devmesh {

absl::StatusOr<std::shared_ptr<MeshRuntime>> MeshRuntime::Create(
    std::shared_ptr<Store> store, int rank, int world_size, int local_rank,
    std::shared_ptr<void> keepalive) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("MeshRuntime needs a store, got null");
  }
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size (", world_size, ") must be at least 1"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank (", rank, ") must be in [0, world size ", world_size, ")"));
  }
  if (local_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("local rank (", local_rank, ") must be non-negative"));
  }
  return std::shared_ptr<MeshRuntime>(new MeshRuntime(
      std::make_shared<CountingStore>(std::move(store)), rank, world_size,
      local_rank, std::move(keepalive)));
}

std::shared_ptr<MeshRuntime> MeshRuntime::Detached(int rank) {
  return std::shared_ptr<MeshRuntime>(
      new MeshRuntime(nullptr, rank, 0, 0, nullptr));
}

absl::Status MeshRuntime::CheckCanCreate(absl::string_view what,
                                         absl::Duration timeout) const {
  if (detached()) {
    return absl::FailedPreconditionError(
        "this mesh was made from existing groups (no bootstrap store): it "
        "cannot create new groups");
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " timeout (", absl::FormatDuration(timeout),
        ") must be positive"));
  }
  return absl::OkStatus();
}

bool MeshRuntime::OnOneHostName(const std::vector<int>& members) const {
  sync_internal::MutexLock lock(&host_mu_);
  if (hostnames_.empty()) return true;  // no host table: let the check decide
  for (int r : members) {
    if (r < 0 || static_cast<size_t>(r) >= hostnames_.size() ||
        hostnames_[r] != hostnames_[members[0]]) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::shared_ptr<Communicator>> MeshRuntime::CreateOn(
    absl::string_view backend, std::shared_ptr<Store> store, int index,
    int size, const CommOptions& options) {
  std::vector<int> members = options.global_ranks;
  if (members.empty()) {
    for (int r = 0; r < size; ++r) members.push_back(r);
  }
  // Every member holds the same host table, so every member decides alike.
  // A member outside the table gets an empty key: not on one host with the
  // others, and no two-level group.
  std::vector<std::string> hosts;
  {
    sync_internal::MutexLock lock(&host_mu_);  // not across the creation
    if (!hostnames_.empty()) {
      for (int r : members) {
        hosts.push_back(r >= 0 && static_cast<size_t>(r) < hostnames_.size()
                            ? hostnames_[r]
                            : std::string());
      }
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      CreateGroupCommunicator(backend, std::move(store), index, size, options,
                              hosts));
  return std::shared_ptr<Communicator>(std::move(comm));
}

absl::StatusOr<CommOptions> MeshRuntime::OptionsFor(
    absl::string_view transport, absl::Duration timeout,
    const CommOptions& typed) {
  CommOptions options = typed;
  options.timeout = timeout;
  options.creation_cancel = CreationCancel();
  LocalPlace place;
  place.local_rank = local_rank_;
  place.store_route_address = store_route_address();
  DEVMESH_RETURN_IF_ERROR(FillLocalOptionDefaults(transport, place, &options));
  FillProcessFields(place, &options);
  return options;
}

absl::StatusOr<std::shared_ptr<Communicator>> MeshRuntime::World(
    absl::string_view backend, absl::Duration timeout) {
  DEVMESH_RETURN_IF_ERROR(CheckCanCreate("world communicator", timeout));
  EnsureWatch();
  sync_internal::MutexLock lock(&mu_);
  DEVMESH_ASSIGN_OR_RETURN(auto raw, WorldLocked(backend, timeout));
  // One guarded handle per world communicator, so that World returns the
  // same pointer every time.
  auto it = guarded_worlds_.find(raw.get());
  if (it != guarded_worlds_.end()) return it->second;
  std::shared_ptr<Communicator> guarded = Guard(raw);
  guarded_worlds_.emplace(raw.get(), guarded);
  RememberWorld(guarded.get());
  return guarded;
}

void MeshRuntime::EnsureWatch(int64_t epoch, std::vector<int> members) {
  std::call_once(watch_once_, [&] {
    const Settings& settings = ProcessSettings();
    if (detached() || !settings.failure_watch.value_or(true)) return;
    // Defaults that bound the watch's load on the store whatever the world
    // size: each rank makes 3 requests a period, so a period of one
    // millisecond per rank (never under 250 ms) keeps the store at about
    // 3000 watch requests a second. At 1024 ranks on 2 cores a 250 ms
    // period (12k requests a second) starved the store, and new connections
    // timed out in its handshake (tools/scale_check.sh --hosts=8
    // --mesh=32x32). The silence stays 8 periods (2 s at 250 ms).
    const int64_t period_ms = absl::ToInt64Milliseconds(LeasePeriod());
    const int64_t silence_ms = settings.lease_silence_ms.value_or(
        std::max<int64_t>(2000, 8 * period_ms));
    // The beacon at the address this rank's groups advertise (the route
    // to the store), where other hosts reach it.
    watch_ = FailureWatch::Start(store_->base(), rank_, world_size_,
                                 absl::Milliseconds(period_ms),
                                 absl::Milliseconds(silence_ms), epoch,
                                 std::move(members), store_route_address());
    watch_started_.store(true, std::memory_order_release);
  });
}

std::shared_ptr<FailureWatch> MeshRuntime::watch() {
  EnsureWatch();
  return watch_;
}

absl::Duration MeshRuntime::LeasePeriod() const {
  return absl::Milliseconds(ProcessSettings().lease_period_ms.value_or(
      std::max<int64_t>(250, world_size_)));
}

std::shared_ptr<FailureWatch> MeshRuntime::started_watch() const {
  return watch_started_.load(std::memory_order_acquire) ? watch_ : nullptr;
}

std::shared_ptr<FailureWatch> MeshRuntime::WatchFrom(int64_t epoch,
                                                     std::vector<int> members) {
  EnsureWatch(epoch, std::move(members));
  return watch_;
}

std::shared_ptr<Communicator> MeshRuntime::Guard(
    std::shared_ptr<Communicator> raw) {
  if (raw == nullptr || watch_ == nullptr) return raw;
  return GuardedCommunicator::Make(std::move(raw), watch_);
}

std::shared_ptr<Communicator> MeshRuntime::Rewrap(
    std::shared_ptr<Communicator> raw) {
  EnsureWatch();
  return Guard(std::move(raw));
}

absl::StatusOr<std::shared_ptr<Communicator>> MeshRuntime::WorldLocked(
    absl::string_view backend, absl::Duration timeout) {
  const int64_t timeout_ns = absl::ToInt64Nanoseconds(timeout);
  auto key = std::make_pair(std::string(backend), timeout_ns);
  auto it = worlds_.find(key);
  if (it != worlds_.end()) return it->second;
  absl::StatusOr<std::shared_ptr<Communicator>> made;
  auto options = OptionsFor(backend, timeout);
  if (!options.ok()) {
    made = options.status();
  } else {
    // Named by backend and timeout alone, the same on every rank whatever
    // else each asked for before.
    auto ns = std::make_shared<PrefixStore>(
        CreationStore(),
        absl::StrCat("devmesh/world/", backend, "/", timeout_ns));
    worlds_made_.fetch_add(1);
    made = CreateOn(backend, std::move(ns), rank_, world_size_, *options);
  }
  // Kept, failure included: every rank's later call gets the same answer
  // rather than a retry that its peers would not make.
  worlds_.emplace(key, made);
  if (made.ok()) RememberWorld(made->get());
  return made;
}

absl::StatusOr<std::shared_ptr<Communicator>> MeshRuntime::Group(
    absl::string_view backend, absl::string_view identity,
    const std::vector<int>& members, absl::Duration timeout,
    std::optional<CommOptions> typed, std::optional<bool> verify_calls,
    absl::string_view label) {
  DEVMESH_RETURN_IF_ERROR(CheckCanCreate("group", timeout));
  // A backend that compares no calls across members itself (Gloo:
  // BackendTraits::verify_calls_by_default) has its groups verified unless
  // the caller said no. Known before the group is made (every member
  // decides alike, from the agreed settings and the host table), so that a
  // verified group is never the world communicator.
  const bool apart = !OnOneHostName(members);
  const bool verify_by_default =
      TraitsOf(BackendKnownBeforeCreation(backend, apart))
          .verify_calls_by_default;
  bool world_line = !typed.has_value() &&
                    !verify_calls.value_or(verify_by_default) &&
                    static_cast<int>(members.size()) == world_size_;
  for (int i = 0; world_line && i < world_size_; ++i) {
    world_line = members[i] == i;
  }
  if (world_line) {
    auto world = World(backend, timeout);
    // Without a host table "auto" can still end on a backend verified by
    // default (Gloo): made as a named group then, to be verified.
    if (!world.ok() || verify_calls.has_value() ||
        !TraitsOf((*world)->backend()).verify_calls_by_default) {
      return world;
    }
  }
  EnsureWatch();
  DEVMESH_ASSIGN_OR_RETURN(
      auto group, NamedGroup(backend, identity, members, timeout, typed, label));
  const BackendTraits made = TraitsOf(group->backend());
  const bool verify =
      verify_calls.value_or(verify_by_default || made.verify_calls_by_default);
  if (verify && !made.checks_calls_in_band) {  // shm checks itself
    // The checker: shared memory inside a host, UCX across hosts whatever
    // DEVMESH_CROSS_HOST_BACKEND says (a 48-byte all-gather on Gloo's
    // event loop cost about 150 us where UCX's costs a round trip).
    auto checker = NamedGroup(CallCheckerBackend(apart),
                              absl::StrCat(identity, "|verify"), members,
                              timeout, std::nullopt);
    if (!checker.ok()) {
      (void)group->Abort();
      return checker.status();
    }
    DEVMESH_ASSIGN_OR_RETURN(
        auto verified,
        VerifyCalls(std::move(group), *std::move(checker), std::string(label)));
    return Guard(std::shared_ptr<Communicator>(std::move(verified)));
  }
  return Guard(std::move(group));
}

std::function<absl::Status()> MeshRuntime::CreationCancel(
    std::vector<int> members) {
  std::shared_ptr<FailureWatch> w = watch();
  if (w == nullptr) return nullptr;
  // In a rebuild (a later epoch), the members are judged at most once a
  // rebuild slice (rank_liveness.h: a tenth of a period, at least 25 ms):
  // one whose process on this host is gone, or whose lease elsewhere
  // stopped, is dead within the bound rather than after its silence.
  if (w->epoch() == 0) members.clear();
  auto last_judged = std::make_shared<std::atomic<int64_t>>(0);
  const int64_t judge_ms = absl::ToInt64Milliseconds(
      w->liveness().rebuild_slice(w->period()));
  return [weak = std::weak_ptr<FailureWatch>(w), members = std::move(members),
          last_judged, judge_ms]() -> absl::Status {
    std::shared_ptr<FailureWatch> watch = weak.lock();
    if (watch == nullptr) return absl::OkStatus();
    if (std::string fenced = watch->fenced(); !fenced.empty()) {
      return WithFenced(absl::FailedPreconditionError(fenced), watch->rank());
    }
    if (!members.empty() && watch->verdict().empty()) {
      const int64_t now = absl::ToUnixMillis(absl::Now());
      int64_t last = last_judged->load();
      if (now - last >= judge_ms &&
          last_judged->compare_exchange_strong(last, now)) {
        (void)watch->JudgeGoneMembers(members);
      }
    }
    const std::string verdict = watch->verdict();
    if (verdict.empty()) return absl::OkStatus();
    absl::Status stop = absl::UnavailableError(absl::StrCat(
        "stopped waiting: this job's epoch has a verdict: ", verdict));
    const int dead = watch->verdict_rank();
    return dead >= 0 ? WithPeer(std::move(stop), dead) : stop;
  };
}

std::shared_ptr<Store> MeshRuntime::CreationStore(std::vector<int> members) {
  std::shared_ptr<FailureWatch> w = watch();
  if (w == nullptr) return store_;
  // Waits are cut into slices, the verdict asked between them. At the
  // job's start (epoch 0), slices of max(2 s, 2 periods): a death is known
  // only after the silence (2 s and up) anyway, a c10d store's cancelled
  // wait costs a few requests (CANCEL_WAIT, CHECKs), and every rank of a
  // large job makes groups at once. In a later epoch (the rebuild of a
  // Shrink or a Grow, few groups) rebuild slices (counter: a tenth of a
  // period, at least 25 ms; etcd: 100-250 ms; rank_liveness.h): a wait for
  // a member that died ends
  // within max(2 s, 2 periods) of the death, the lease's judgement and two
  // slices included.
  const absl::Duration slice =
      w->epoch() == 0 ? std::max(absl::Seconds(2), 2 * w->period())
                      : w->liveness().rebuild_slice(w->period());
  auto cancellable =
      std::make_shared<CancellableStore>(store_->base(), slice,
                                         CreationCancel(std::move(members)));
  // Counted once per call in the runtime's counters, however many slices.
  return std::make_shared<CountingStore>(std::move(cancellable), store_);
}

absl::StatusOr<std::shared_ptr<Communicator>> MeshRuntime::NamedGroup(
    absl::string_view backend, absl::string_view identity,
    const std::vector<int>& members, absl::Duration timeout,
    const std::optional<CommOptions>& typed, absl::string_view label) {
  if (members.empty()) {
    return absl::InvalidArgumentError("a group needs at least one member");
  }
  int index = -1;
  absl::flat_hash_set<int> seen;
  for (size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r < 0 || r >= world_size_ || !seen.insert(r).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group member ", r, " is repeated or outside [0, world size ",
          world_size_, ")"));
    }
    if (r == rank_) index = static_cast<int>(i);
  }
  if (index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, " is not a member of the group [",
        absl::StrJoin(members, ", "), "] it was asked to create"));
  }
  // Fixed length whatever the world size, so a rank's store bytes depend
  // on its groups' sizes alone.
  const std::string tag = device_mesh_internal::GroupTag(identity, members);
  const std::string name = device_mesh_internal::GroupKeyPrefix(tag);
  int64_t n = 0;
  {
    sync_internal::MutexLock lock(&names_mu_);
    n = group_counts_[name]++;
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto options, OptionsFor(backend, timeout, typed.value_or(CommOptions())));
  options.global_ranks = members;
  options.label = std::string(label);
  options.creation_cancel = CreationCancel(members);
  std::shared_ptr<Store> base = CreationStore(members);
  auto ns = std::make_shared<PrefixStore>(std::move(base),
                                          absl::StrCat(name, "/", n));
  groups_made_.fetch_add(1);
  {
    // Recorded before its keys are written, so that retirement finds them
    // (spare_registry.h).
    sync_internal::MutexLock lock(&records_mu_);
    making_groups_.insert(tag);
    std::shared_ptr<FailureWatch> w = started_watch();
    if (w != nullptr && w->epoch() > 0) {
      if (absl::Status s = RecordGroupsLocked(w->epoch()); !s.ok()) {
        making_groups_.erase(tag);
        return s;
      }
    }
  }
  auto comm = CreateOn(backend, std::move(ns), index,
                       static_cast<int>(members.size()), options);
  {
    sync_internal::MutexLock lock(&records_mu_);
    making_groups_.erase(tag);
    if (comm.ok()) made_groups_[tag] = *comm;
  }
  if (!comm.ok()) {
    // Name the group (NCCL's own errors do not name its members).
    return Reworded(comm.status(),
                    absl::StrCat(comm.status().message(), " (creating the ",
                                 backend, " group of global ranks [",
                                 absl::StrJoin(members, ", "), "])"));
  }
  return comm;
}

absl::Status MeshRuntime::RecordGroups(int64_t epoch) {
  sync_internal::MutexLock lock(&records_mu_);
  return RecordGroupsLocked(epoch);
}

absl::Status MeshRuntime::RecordGroupsLocked(int64_t epoch) {
  if (epoch <= 0 || detached()) return absl::OkStatus();
  std::set<std::string> held = making_groups_;
  for (auto it = made_groups_.begin(); it != made_groups_.end();) {
    if (it->second.expired()) {
      it = made_groups_.erase(it);
    } else {
      held.insert(it->first);
      ++it;
    }
  }
  return store_->base()->Set(
      device_mesh_internal::GroupRecordKey(epoch, rank_),
      absl::StrJoin(held, ","));
}

void MeshRuntime::RememberWorld(const Communicator* comm) {
  sync_internal::MutexLock lock(&ids_mu_);
  world_ids_.insert(comm);
}

bool MeshRuntime::IsWorldCommunicator(const Communicator* comm) const {
  if (comm == nullptr) return false;
  sync_internal::MutexLock lock(&ids_mu_);
  return world_ids_.count(comm) > 0;
}

}  // namespace devmesh
