// devmesh/device_mesh/mesh_runtime.h
// -----------------------------------------------------------------------------
// MeshRuntime: what every DeviceMesh of one process shares: this process's
// world rank and size, the bootstrap store, and one world communicator per
// (backend, timeout), created on first use. Per-dim groups are Splits of a
// world communicator (as ncclCommSplit does), so a runtime is the "default
// process group" of PyTorch's DeviceMesh.
//
// The world communicator of a backend is created collectively: every rank of
// the world asks for it in the same order (SPMD, as PyTorch's
// init_process_group). So are the Splits that make mesh groups: every rank
// must create groups in the same order, and a rank must not create groups
// from several threads at once (the ranks' orders would then differ and
// the split would pair up the wrong dims). Counters for
// //bench:group_creation: Split calls and store round trips made through
// this runtime.
//
// One runtime per store namespace: two runtimes over the same store would
// read each other's rendezvous keys. InitDeviceMesh reuses one runtime per
// Bootstrap; give any other runtime its own PrefixStore.
//
// Thread-safety: every method may be called from any thread; world creation
// and splits are serialized (each blocks for up to its timeout).
#ifndef DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
#define DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bootstrap/store.h"
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

  // The world communicator of `backend` with `timeout`, created on first use
  // (collective over the world). Errors: FailedPrecondition on a detached
  // runtime; otherwise CreateCommunicator's (NotFound for an unknown
  // backend, Unavailable for "nccl" without NCCL, DeadlineExceeded).
  absl::StatusOr<std::shared_ptr<Communicator>> World(absl::string_view backend,
                                                      absl::Duration timeout);

  // Splits the world communicator of (backend, timeout): collective over the
  // world; see Communicator::Split. Counts one Split call.
  absl::StatusOr<std::shared_ptr<Communicator>> SplitWorld(
      absl::string_view backend, absl::Duration timeout, int color, int key);

  // Split calls made through SplitWorld so far.
  int64_t split_calls() const { return splits_.load(); }
  // Calls made on the store through this runtime so far (each one round trip
  // on a TCP store).
  int64_t store_round_trips() const {
    return store_ ? store_->round_trips() : 0;
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

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built with
  // TSan, and a mutex TSan cannot see makes every test under
  // --config=tsan report races that are not there.
  std::mutex mu_;        // guards worlds_
  std::mutex split_mu_;  // serializes SplitWorld
  // (backend, timeout in ns) -> world communicator. Ordered map: the world
  // communicator's store namespace is its creation index, the same on every
  // rank.
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Communicator>>
      worlds_;
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_MESH_RUNTIME_H_
