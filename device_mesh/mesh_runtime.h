// devmesh/device_mesh/mesh_runtime.h
// -----------------------------------------------------------------------------
// MeshRuntime: what every DeviceMesh of one process shares: this process's
// world rank and size, the bootstrap store, at most ONE world communicator
// per transport (made only when used), and the counters of what group
// creation cost. A runtime is the "default process group" of PyTorch's
// DeviceMesh.
//
// Mesh groups are made from the layout (Group): each rank creates only the
// groups it belongs to, talking only to their members, under store keys
// named by the group itself (its dim's modes, options and member list), so
// every member derives the same keys with no exchange, and ranks may create
// their groups in any order: a group is right, or its creation fails with
// DeadlineExceeded naming the members that did not come. Nothing in it is
// O(world) except a group that is the world. The world communicator of a
// backend is made only when a world-sized dim or a caller (World) needs it;
// its creation is collective over the world (SPMD, as PyTorch's
// init_process_group). Backends "auto" and "shm" ride on "gloo": their
// groups are Gloo groups given shared memory where the members share it
// (Upgrade, the one place a group's transport is chosen).
//
// One runtime per store namespace: two runtimes over the same store would
// read each other's keys. InitDeviceMesh reuses one runtime per Bootstrap;
// give any other runtime its own PrefixStore.
//
// Thread-safety: every method may be called from any thread. World
// creation is serialized; Group creations of different groups may run
// concurrently (each blocks for up to its timeout). The same group (equal
// identity and members) must be created by its members in the same order
// relative to other creations of that same group.
#ifndef DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
#define DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "store/store.h"
#include "comm/communicator.h"
#include "device_mesh/counting_store.h"

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
  // (collective over the world). Only ONE world communicator per backend is
  // ever created (the first call's timeout); asking for another timeout
  // gives a Split of it with that timeout (color 0, key rank: the world in
  // world order), counted in split_calls(), cached. Errors:
  // FailedPrecondition on a detached runtime; InvalidArgument for a timeout
  // that is not positive; otherwise CreateCommunicator's (NotFound for an
  // unknown backend, Unavailable for "nccl" without NCCL,
  // DeadlineExceeded) or Split's.
  absl::StatusOr<std::shared_ptr<Communicator>> World(absl::string_view backend,
                                                      absl::Duration timeout);

  // The group of `members` (world ranks in group order; this rank must be
  // one of them) on `backend`, for a mesh dim's line through this rank.
  // Every member passes the same `identity` (device_mesh: the dim's modes,
  // backend, timeout and NCCL config, DeviceMesh::GroupKey) and `members`;
  // the group is created over the store under
  //   "devmesh/group/<64-bit hash of identity and members, 16 hex digits>/<n>"
  // with n = how many times this rank created that same group before, so
  // only the members take part: O(1) store round trips and O(size) bytes per
  // rank (4 round trips for a Gloo group of size > 1, plus the shared-memory
  // check's for "auto"/"shm"; comm/gloo/gloo_full_mesh.h). The child gets
  // `timeout` and, when set, the NCCL config `nccl` (its stream and
  // synchronize included). Not cached: a new communicator per call, owned by
  // the caller.
  //
  // The whole world in world order with no NCCL config is the world
  // communicator of `backend` (World: made now, collective over the world,
  // when it does not exist) when the world's timeout is `timeout` or no
  // world exists yet; otherwise a named group as above.
  //
  // Errors: FailedPrecondition on a detached runtime; InvalidArgument for a
  // timeout that is not positive, or `members` empty, repeated, outside
  // [0, world size) or without this rank; otherwise CreateCommunicator's
  // (NotFound for an unknown backend, Unavailable for "nccl" without NCCL
  // or a refused connection naming the peer, DeadlineExceeded naming the
  // members that did not arrive within `timeout`) or, for "shm",
  // FailedPrecondition naming a member that cannot map the segment.
  absl::StatusOr<std::shared_ptr<Communicator>> Group(
      absl::string_view backend, absl::string_view identity,
      const std::vector<int>& members, absl::Duration timeout,
      std::optional<NcclOptions> nccl = std::nullopt);

  // Whether `comm` is one of the runtime's world communicators: a base
  // world communicator or one World returned (identity, not size). Never
  // waits for a creation or Split in progress. False for nullptr.
  bool IsWorldCommunicator(const Communicator* comm) const;

  // Split calls made through this runtime so far (World for a second
  // timeout; mesh groups are never Splits).
  int64_t split_calls() const { return splits_.load(); }
  // World communicators created so far (at most one per backend).
  int64_t world_communicators() const { return worlds_made_.load(); }
  // Named groups created so far by Group (not counting world communicators
  // it returned).
  int64_t group_creations() const { return groups_made_.load(); }
  // Calls made on the store through this runtime so far (each one round trip
  // on a TCP store), and the payload bytes they moved (CountingStore).
  int64_t store_round_trips() const {
    return store_ ? store_->round_trips() : 0;
  }
  int64_t store_bytes() const { return store_ ? store_->bytes() : 0; }

  // What the rendezvous learnt about the ranks' hosts (Bootstrap::peers()):
  // hostnames()[r] is world rank r's host name (gethostname); empty when
  // unknown (a runtime not made by MeshRuntimeFromBootstrap). Used by
  // device_mesh/host_layout.h.
  const std::vector<std::string>& hostnames() const { return hostnames_; }
  // The address this rank's peers reach it at (an IP literal; empty when
  // unknown): PeerFacingAddress of Bootstrap::self() (the route toward the
  // store, or toward a peer on another host when that route is loopback;
  // device_mesh/peer_address.h). Gloo devices of this runtime advertise it
  // when neither GLOO_SOCKET_IFNAME nor GlooOptions::hostname is set (see
  // GlooOptions::store_route_address).
  const std::string& store_route_address() const {
    return store_route_address_;
  }
  // Sets both; call before the runtime is shared with other threads
  // (MeshRuntimeFromBootstrap does, right after Create). Not thread-safe.
  void SetHostInfo(std::vector<std::string> hostnames,
                   std::string store_route_address) {
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
  std::atomic<int64_t> splits_{0};
  std::atomic<int64_t> worlds_made_{0};
  std::atomic<int64_t> groups_made_{0};

  // The world communicator of a backend and the timeout it was made with.
  struct BaseWorld {
    std::shared_ptr<Communicator> comm;
    absl::Duration timeout;
  };
  // Adds `comm` to world_ids_.
  void RememberWorld(const Communicator* comm);
  // FailedPrecondition when detached (no store to create groups with);
  // InvalidArgument naming `what` when `timeout` is not positive.
  absl::Status CheckCanCreate(absl::string_view what,
                              absl::Duration timeout) const;
  // One Split of `base` (counted in split_calls()) with `timeout`; the
  // child is not cached.
  absl::StatusOr<std::shared_ptr<Communicator>> SplitOf(
      const BaseWorld& base, int color, int key, absl::Duration timeout);
  // CommOptions for a communicator of `transport` with `timeout` and
  // `nccl` (the CUDA device from local_rank() when `nccl` leaves it unset).
  absl::StatusOr<CommOptions> OptionsFor(absl::string_view transport,
                                         absl::Duration timeout,
                                         const NcclOptions& nccl) const;
  // The named group of Group (members checked).
  absl::StatusOr<std::shared_ptr<Communicator>> NamedGroup(
      absl::string_view backend, absl::string_view identity,
      const std::vector<int>& members, absl::Duration timeout,
      const std::optional<NcclOptions>& nccl);
  // The backend whose communicators carry `backend`'s groups: "gloo" for
  // "auto" and "shm" (a shared-memory group sits on a Gloo group of the same
  // members), else `backend` itself.
  static absl::string_view TransportOf(absl::string_view backend);
  // The one place a group's transport is chosen: `group` itself for a
  // backend that is its own transport; for "auto", shared memory when every
  // member shares it (members on hosts of different names are not even
  // tried), else `group`; for "shm", shared memory or FailedPrecondition
  // naming a member (ShareMemory, comm/shm/shm_communicator.h). Collective
  // over `group`; nullptr stays nullptr.
  absl::StatusOr<std::shared_ptr<Communicator>> Upgrade(
      std::shared_ptr<Communicator> group, absl::string_view backend,
      absl::Duration timeout);
  // World for `backend` with `timeout`; requires mu_ held.
  absl::StatusOr<std::shared_ptr<Communicator>> WorldLocked(
      absl::string_view backend, absl::Duration timeout);
  // The base world of TransportOf(backend). Requires mu_ held.
  absl::StatusOr<BaseWorld> BaseWorldLocked(absl::string_view backend,
                                            absl::Duration timeout);
  std::vector<std::string> hostnames_;  // per world rank; set once
  std::string store_route_address_;     // set once

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with
  // TSan, and a mutex TSan cannot see makes every test under
  // --config=tsan report races that are not there. mu_ guards the maps
  // below and serializes every collective on the world communicators
  // (creation and Splits: they are not safe for concurrent calls).
  std::mutex mu_;
  // backend -> its one world communicator, made under the store namespace
  // "devmesh/world/<backend>".
  std::map<std::string, BaseWorld> bases_;
  // Group namespace (without its /<n>) -> creations so far on this rank.
  std::map<std::string, int64_t> group_counts_;
  // (backend, timeout in ns) -> the world communicator with that timeout:
  // the base itself, or a Split of it.
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Communicator>>
      worlds_;
  // The communicators in bases_ and worlds_ (held there for the runtime's
  // lifetime, so an address is never reused), under a mutex of its own so
  // that IsWorldCommunicator never waits behind mu_.
  mutable std::mutex ids_mu_;
  std::set<const Communicator*> world_ids_;
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
