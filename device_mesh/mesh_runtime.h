// devmesh/device_mesh/mesh_runtime.h
// -----------------------------------------------------------------------------
// MeshRuntime: what every DeviceMesh of one process shares: this process's
// world rank and size, the bootstrap store, the world communicators (one
// per (backend, timeout), made only when used), and the counters of what
// group creation cost. A runtime is the "default process group" of PyTorch's
// DeviceMesh.
//
// Mesh groups are made from the layout (Group): each rank creates only the
// groups it belongs to, talking only to their members, under store keys
// named by the group itself (its root's index, dim's modes, options and
// member list), so every member derives the same keys with no exchange, and
// ranks may create their groups in any order: a group is right, or its
// creation fails with DeadlineExceeded naming the members that did not
// come. Nothing in it is O(world) except a group that is the world. A world
// communicator is made only when a world-sized dim or a caller (World)
// needs it; its creation is collective over the world (SPMD, as PyTorch's
// init_process_group). Backend "auto" makes a shared-memory group over the
// store alone where the members share memory (no Gloo device, socket or
// event-loop thread), else a group of the cross-host backend, UCX or Gloo:
// comm/auto_group.h's CreateGroupCommunicator chooses (CreateOn calls it
// with the members' host names).
//
// One runtime per store namespace: two runtimes over the same store would
// read each other's keys. InitDeviceMesh reuses one runtime per Bootstrap;
// give any other runtime its own PrefixStore.
//
// Thread-safety: every method may be called from any thread. World
// creations are serialized among themselves; named groups never wait for
// them, and creations of different groups may run concurrently (each blocks
// for up to its timeout). The same group (equal identity and members)
// created more than once pairs by count: the n-th on one member with the
// n-th on the others.
#ifndef DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
#define DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "sync/annotated_mutex.h"
#include "store/store.h"
#include "comm/auto_group.h"  // kTwoLevelByDefault, for users of this header
#include "comm/communicator.h"
#include "device_mesh/counting_store.h"
#include "device_mesh/failure_watch.h"

namespace devmesh {

class MeshRuntime {
 public:
  // A runtime over `store` for world rank `rank` of `world_size`.
  // `local_rank` is the rank on this host (selects the CUDA device for
  // "nccl"); `keepalive` is held for the runtime's lifetime (the Bootstrap
  // that owns the store server, say). Errors: InvalidArgument for a null
  // store, world_size < 1, rank outside [0, world_size), or a negative
  // local_rank.
  static absl::StatusOr<std::shared_ptr<MeshRuntime>> Create(
      std::shared_ptr<Store> store, int rank, int world_size, int local_rank,
      std::shared_ptr<void> keepalive = nullptr);

  // A runtime with no store and no world: meshes over it can use only the
  // groups given to DeviceMesh::FromGroups (R17). `rank` is this process's
  // world rank (from the groups).
  static std::shared_ptr<MeshRuntime> Detached(int rank);

  int rank() const { return rank_; }
  // 0 for a detached runtime.
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  bool detached() const { return store_ == nullptr; }

  // The world communicator of `backend` with `timeout`, made on first use
  // (collective over the world) under the store namespace
  // "devmesh/world/<backend>/<timeout in ns>" and kept (a failure too: later
  // calls return it, as they would on every rank). One per (backend,
  // timeout): named by those alone, so ranks agree on it whatever else each
  // asked for before; two world communicators of one backend and different
  // timeouts are two sets of connections ("auto" and "shm" make their own
  // world, a shared-memory group where the world shares memory). Errors:
  // FailedPrecondition on a detached runtime; InvalidArgument for a timeout that is not positive; otherwise
  // CreateCommunicator's (NotFound for an unknown backend, Unavailable for
  // "nccl" without NCCL, DeadlineExceeded naming the ranks that did not
  // come).
  absl::StatusOr<std::shared_ptr<Communicator>> World(absl::string_view backend,
                                                      absl::Duration timeout);

  // The group of `members` (world ranks in group order; this rank must be
  // one of them) on `backend`, for a mesh dim's line through this rank.
  // Every member passes the same `identity` (device_mesh: its root mesh's
  // index, the dim's modes, backend, timeout and NCCL config,
  // DeviceMesh::GroupIdentity) and `members`; the group is created over the
  // store under
  //   "devmesh/group/<64-bit hash of identity and members, 16 hex digits>/<n>"
  // with n = how many times this rank created that same group before (the
  // n-th creation of one (identity, members) meets the n-th on every
  // member; device_mesh makes each at most once per rank), so only the
  // members take part: O(1) store round trips and O(size) bytes per
  // rank (2 round trips for a UCX group, comm/ucx/ucx_communicator.h; 4
  // for a Gloo group of size > 1, comm/gloo/gloo_full_mesh.h; 5 for a
  // shared-memory one of "auto"/"shm", and for "auto" members that cannot
  // share memory, those 5 and then the cross-host group's). The child gets
  // `timeout` and, when set, the typed backend options in `typed` (a
  // CommOptions whose typed members hold them, as
  // device_mesh_internal::TypedCommOptions writes GroupOptions' typed
  // members: the NCCL config, its stream and synchronize included; its other
  // fields are not read). Not cached: a new communicator per call, owned by
  // the caller.
  //
  // The whole world in world order with no typed options is
  // World(backend, timeout) (made now, collective over the world, when it
  // does not exist); otherwise a named group as above, world-sized dims
  // with typed options included.
  //
  // Errors: FailedPrecondition on a detached runtime; InvalidArgument for a
  // timeout that is not positive, or `members` empty, repeated, outside
  // [0, world size) or without this rank; otherwise CreateCommunicator's
  // (NotFound for an unknown backend, Unavailable for "nccl" without NCCL
  // or a refused connection naming the peer, DeadlineExceeded naming the
  // members that did not arrive within `timeout`; each message ends with
  // the group's global ranks) or, for "shm", FailedPrecondition naming a
  // member that cannot map the segment; Unavailable whose message contains
  // "stopped waiting: this job's epoch has a verdict: <verdict>" when the
  // failure watch has, or learns while the creation waits in the store, a
  // verdict of the current epoch (the verdict may name any rank of the job),
  // or FailedPrecondition with the fence when this rank is fenced: the
  // creation's store waits are cut into slices of max(2 s, 2 lease periods)
  // (in a Shrink's or Grow's rebuild: a tenth of a period, at least 25 ms;
  // over etcd the period, 100-250 ms)
  // and end at the first slice after this rank learns it
  // (store/cancellable_store.h). The waits that are not store calls
  // ask the same check (CommOptions::creation_cancel): Gloo's pair connects
  // every 100 ms (a peer that died after publishing its address; the pairs
  // are closed), NCCL's non-blocking init and split every 50 ms (the
  // communicator is aborted). Without the watch (DEVMESH_FAILURE_WATCH=0)
  // creations wait as before. World creations alike.
  //
  // With `verify_calls` (GroupOptions::verify_calls; unset: true for a
  // group that is, or across hosts will be, Gloo's) the group is always a
  // named group of its own (never the world communicator) whose collectives
  // are checked across its members before they run (VerifyCalls,
  // comm/verified_communicator.h) over a second group of the same members
  // made with the CPU backend "auto" inside a host (shared memory) and
  // "ucx" across hosts (whatever DEVMESH_CROSS_HOST_BACKEND says), under
  // the identity `identity` + "|verify"; its creation errors
  // are those above. `label` names the group in its per-call check's
  // errors (CommOptions::label; device_mesh: "mesh dim 'tp'").
  absl::StatusOr<std::shared_ptr<Communicator>> Group(
      absl::string_view backend, absl::string_view identity,
      const std::vector<int>& members, absl::Duration timeout,
      std::optional<CommOptions> typed = std::nullopt,
      std::optional<bool> verify_calls = std::nullopt,
      absl::string_view label = "");

  // Whether `comm` is one of the runtime's world communicators: a base
  // world communicator or one World returned (identity, not size). Never
  // waits for a creation in progress. False for nullptr.
  bool IsWorldCommunicator(const Communicator* comm) const;

  // World communicators this runtime set out to create so far (one per
  // (backend, timeout) asked for).
  int64_t world_communicators() const { return worlds_made_.load(); }
  // Named groups Group set out to create so far (attempts, failed ones
  // included; not the world communicators it returned).
  int64_t group_creations() const { return groups_made_.load(); }
  // A new index for a root mesh made over this runtime (0, 1, ...): part of
  // its groups' identity, so that two roots with equal layouts never share
  // a group. Every rank makes its root meshes in the same order (SPMD, as it
  // makes process groups in PyTorch); a rank that makes an extra root sees
  // its later roots' groups end in DeadlineExceeded, never a wrong group.
  int64_t NextRootIndex() { return roots_made_.fetch_add(1); }
  // A new index for an agreement of a mesh over this runtime
  // (device_mesh/mesh_agreement.h: InitDeviceMesh's), 0, 1, ...: the keys
  // of its exchange. Every rank calls InitDeviceMesh in the same order.
  int64_t NextAgreementIndex() { return agreements_.fetch_add(1); }
  // Whether InitDeviceMesh agrees on its mesh with the other ranks (true
  // unless SkipMeshAgreementForTesting was called; a world of one rank has
  // nothing to agree with either way).
  bool agrees_on_meshes() const { return agrees_.load(); }
  // For unit tests whose runtime stands for one rank of a larger world over
  // an in-memory store, where no other rank will ever come: InitDeviceMesh
  // then makes its mesh without the agreement.
  void SkipMeshAgreementForTesting() { agrees_.store(false); }
  // The store a communicator or an agreement is made over: the runtime's,
  // with its waits ended by the failure watch's verdict or fence
  // (CancellableStore, in slices of max(2 s, 2 lease periods) in epoch 0,
  // of a tenth of a lease period, at least 25 ms, over etcd the period,
  // 100-250 ms, in later epochs) and
  // counted
  // once per call in the runtime's counters; the runtime's store itself
  // without a watch (starts the watch, as watch() does). Not on a detached
  // runtime (null store). `members` (global ranks; may be empty): the
  // ranks the waits are for, judged as CreationCancel says.
  std::shared_ptr<Store> CreationStore(std::vector<int> members = {});
  // Calls made on the store through this runtime so far (each one round trip
  // on a TCP store), and the payload bytes they moved (CountingStore).
  int64_t store_round_trips() const {
    return store_ ? store_->round_trips() : 0;
  }
  int64_t store_bytes() const { return store_ ? store_->bytes() : 0; }

  // The failure watch (started now if not yet; device_mesh/failure_watch.h);
  // nullptr on a detached runtime or with DEVMESH_FAILURE_WATCH=0. Its lease
  // period is DEVMESH_LEASE_PERIOD_MS (default: 250 ms, or 1 ms per rank of
  // the world above 250 ranks, so that the store serves about 3000 watch
  // requests a second at most, whatever the world size) and its silence (a
  // lease that stops for that long, with no error as evidence, is a death)
  // DEVMESH_LEASE_SILENCE_MS (default max(2000 ms, 8 periods): 2000 ms up to
  // 250 ranks; a period set by hand changes the default silence only when
  // over 250 ms); every rank of a job must set the same.
  std::shared_ptr<FailureWatch> watch();
  // The store this runtime was made over, as given (not counted, its waits
  // not ended by a verdict); nullptr on a detached runtime.
  std::shared_ptr<Store> base_store() const {
    return store_ ? store_->base() : nullptr;
  }
  // The lease period the failure watch renews leases with (see watch()),
  // whether or not it was started.
  absl::Duration LeasePeriod() const;
  // The failure watch when it was started already, else nullptr; starts
  // nothing (a spare asks this before it is admitted).
  std::shared_ptr<FailureWatch> started_watch() const;
  // The failure watch, started now in `epoch` with `members` (sorted global
  // ranks, this rank among them) when it was not started yet: a spare that
  // DeviceMesh::Grow admitted joins the job in that epoch
  // (FailureWatch::Start). A watch started already is returned as it is;
  // nullptr where watch() gives nullptr.
  std::shared_ptr<FailureWatch> WatchFrom(int64_t epoch,
                                          std::vector<int> members);
  // `raw` (a backend communicator DeviceMesh::Shrink keeps for the next
  // epoch) in a new guard registered with the watch's current epoch.
  std::shared_ptr<Communicator> Rewrap(std::shared_ptr<Communicator> raw);
  // Writes devmesh/epoch/<epoch>/groups/<rank> (spare_registry.h): the
  // store tags of the groups this rank made that are still held here (or
  // being made). Shrink and Grow call it as they move into `epoch`; a group
  // made later in an epoch > 0 calls it before its creation's keys. No-op
  // for epoch 0 (the job's start costs no request). Errors: the store's.
  absl::Status RecordGroups(int64_t epoch);

  // What the rendezvous learnt about the ranks' hosts (Bootstrap::peers()):
  // hostnames()[r] is world rank r's host name (gethostname); empty when
  // unknown (a runtime not made by MeshRuntimeFromBootstrap). Used by
  // device_mesh/host_layout.h. A copy: a Grow may set a new table
  // (SetHostInfo) while another thread reads it.
  std::vector<std::string> hostnames() const {
    sync_internal::MutexLock lock(&host_mu_);
    return hostnames_;
  }
  // The address this rank's peers reach it at (an IP literal; empty when
  // unknown): PeerFacingAddress of Bootstrap::self() (the route toward the
  // store, or toward a peer on another host when that route is loopback;
  // device_mesh/peer_address.h). Gloo devices of this runtime advertise it
  // when neither GLOO_SOCKET_IFNAME nor GlooOptions::hostname is set (see
  // GlooOptions::store_route_address).
  std::string store_route_address() const {
    sync_internal::MutexLock lock(&host_mu_);
    return store_route_address_;
  }
  // Sets both (MeshRuntimeFromBootstrap, right after Create; a Grow, with
  // the grown job's table). Thread-safe: a group made on another thread
  // meanwhile reads the table before or after, never a torn one.
  void SetHostInfo(std::vector<std::string> hostnames,
                   std::string store_route_address) {
    sync_internal::MutexLock lock(&host_mu_);
    hostnames_ = std::move(hostnames);
    store_route_address_ = std::move(store_route_address);
  }

 private:
  MeshRuntime(std::shared_ptr<CountingStore> store, int rank, int world_size,
              int local_rank, std::shared_ptr<void> keepalive)
      : store_(std::move(store)),
        rank_(rank),
        world_size_(world_size),
        local_rank_(local_rank),
        keepalive_(std::move(keepalive)) {}

  std::shared_ptr<CountingStore> store_;
  int rank_;
  int world_size_;
  int local_rank_;
  std::shared_ptr<void> keepalive_;
  std::atomic<int64_t> worlds_made_{0};
  std::atomic<int64_t> groups_made_{0};
  std::atomic<int64_t> roots_made_{0};
  std::atomic<int64_t> agreements_{0};
  std::atomic<bool> agrees_{true};

  // Adds `comm` to world_ids_.
  void RememberWorld(const Communicator* comm);
  // Starts the failure watch once (not on a detached runtime, nor with
  // DEVMESH_FAILURE_WATCH=0; see watch()).
  // (Started in `epoch` with `members`; 0 and every world rank by default.)
  void EnsureWatch(int64_t epoch = 0, std::vector<int> members = {});
  // `raw` registered with the watch and wrapped in a GuardedCommunicator
  // (`raw` itself without a watch).
  std::shared_ptr<Communicator> Guard(std::shared_ptr<Communicator> raw);
  // FailedPrecondition when detached (no store to create groups with);
  // InvalidArgument naming `what` when `timeout` is not positive.
  absl::Status CheckCanCreate(absl::string_view what,
                              absl::Duration timeout) const;
  // CommOptions for a communicator of `transport`: `typed`'s typed backend
  // options, `timeout`, the defaults `transport`'s codec takes from
  // local_rank() (comm/backend_options.h: NCCL's CUDA device when `typed`
  // leaves it unset), every backend's process fields (FillProcessFields:
  // the store route) and CreationCancel() as its creation_cancel.
  absl::StatusOr<CommOptions> OptionsFor(
      absl::string_view transport, absl::Duration timeout,
      const CommOptions& typed = CommOptions());
  // The check that ends a creation's waits: FailedPrecondition with the
  // fence once this rank is fenced, Unavailable "stopped waiting: this
  // job's epoch has a verdict: ..." once the failure watch has a verdict,
  // OK otherwise; empty without a watch. It holds the watch weakly. In an
  // epoch after the first (a Shrink's or a Grow's rebuild), at most once a
  // rebuild slice (a tenth of a period, at least 25 ms; over etcd the
  // period, 100-250 ms) it also asks the
  // watch to judge `members` (JudgeGoneMembers): a member whose process on
  // this host is gone is dead at once, one elsewhere once its lease shows
  // no renewal for its confirm wait, so a wait for it ends within
  // max(2 s, 2 periods) of the death rather than after its silence. Thread-safe, as the check may be asked from any
  // thread.
  std::function<absl::Status()> CreationCancel(std::vector<int> members = {});
  // The named group of Group (members checked).
  absl::StatusOr<std::shared_ptr<Communicator>> NamedGroup(
      absl::string_view backend, absl::string_view identity,
      const std::vector<int>& members, absl::Duration timeout,
      const std::optional<CommOptions>& typed, absl::string_view label = "");
  // Whether every rank of `members` has the same host name in the host
  // table (true without one).
  bool OnOneHostName(const std::vector<int>& members) const;
  // A group of `backend` over `store` (collective over the members):
  // comm/auto_group.h's CreateGroupCommunicator with the members' host
  // names from the host table (none without one; an empty name for a
  // member outside it), which chooses the
  // transport of "auto" and "shm" (shared memory, two-level or the
  // cross-host backend; "auto"'s fallback after the shared-memory set-up
  // gets the whole timeout again, so such a creation is bounded by twice
  // the timeout) and asks the registry for any other name.
  absl::StatusOr<std::shared_ptr<Communicator>> CreateOn(
      absl::string_view backend, std::shared_ptr<Store> store, int index,
      int size, const CommOptions& options);
  // World for `backend` with `timeout`.
  absl::StatusOr<std::shared_ptr<Communicator>> WorldLocked(
      absl::string_view backend, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The host table and this rank's address (SetHostInfo).
  mutable sync_internal::Mutex host_mu_;
  std::vector<std::string> hostnames_ ABSL_GUARDED_BY(host_mu_);
  std::string store_route_address_ ABSL_GUARDED_BY(host_mu_);

  // mu_ guards worlds_ and serializes world creations (collectives over the
  // world); names_mu_ guards group_counts_ alone, so a named group never
  // waits behind a world creation.
  sync_internal::Mutex mu_;
  // (backend, timeout in ns) -> that world communicator, or the error its
  // creation ended with.
  std::map<std::pair<std::string, int64_t>,
           absl::StatusOr<std::shared_ptr<Communicator>>>
      worlds_ ABSL_GUARDED_BY(mu_);
  // Raw world communicator -> the guarded handle World returns for it.
  std::map<const Communicator*, std::shared_ptr<Communicator>> guarded_worlds_
      ABSL_GUARDED_BY(mu_);
  std::once_flag watch_once_;
  std::shared_ptr<FailureWatch> watch_;  // set once by EnsureWatch
  std::atomic<bool> watch_started_{false};  // set after watch_ is
  sync_internal::Mutex names_mu_;
  // Group namespace (without its /<n>) -> creations so far on this rank.
  std::map<std::string, int64_t> group_counts_ ABSL_GUARDED_BY(names_mu_);
  // RecordGroups' state: group tag -> the communicator made under it (empty
  // while being made); held by records_mu_ across the record's write, so
  // that an older list never overwrites a newer one.
  sync_internal::Mutex records_mu_;
  std::map<std::string, std::weak_ptr<Communicator>> made_groups_
      ABSL_GUARDED_BY(records_mu_);
  std::set<std::string> making_groups_ ABSL_GUARDED_BY(records_mu_);
  absl::Status RecordGroupsLocked(int64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(records_mu_);
  // The communicators in worlds_ (held there for the runtime's
  // lifetime, so an address is never reused), under a mutex of its own so
  // that IsWorldCommunicator never waits behind mu_.
  mutable sync_internal::Mutex ids_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::set<const Communicator*> world_ids_ ABSL_GUARDED_BY(ids_mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
