// devmesh/comm/gloo/gloo_connect.cc
// Creation of Gloo groups: the world group and Split's children.
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/gloo/gloo_device.h"
#include "comm/gloo/gloo_full_mesh.h"
#include "comm/gloo/gloo_status.h"
#include "comm/gloo/gloo_sync_allreduce.h"
#include "comm/group_args.h"
#include "comm/store_exchange.h"
#include "config/settings.h"
#include "status/status_macros.h"

namespace devmesh {

using gloo_internal::GlooCall;

namespace {

// Whether a group with the synchronous route leaves its other pairs for
// first use (gloo_communicator.h): DEVMESH_GLOO_LAZY_MESH unset or on
// (config/settings.h).
bool LazyMesh() { return ProcessSettings().gloo_lazy_mesh.value_or(true); }

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options) {
  if (store == nullptr) {
    return absl::InvalidArgumentError("gloo: store is null");
  }
  DEVMESH_ASSIGN_OR_RETURN(std::vector<int> global_ranks,
                           ResolveGroupRanks("gloo", rank, size, options));
  absl::flat_hash_set<int> seen;
  for (int g : global_ranks) {
    if (g < 0 || !seen.insert(g).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gloo: global rank ", g, " in global_ranks is negative or repeated"));
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(std::shared_ptr<::gloo::transport::Device> device,
                           gloo_internal::MakeGlooDevice(options.gloo));
  const absl::Time deadline = absl::Now() + options.timeout;
  DEVMESH_ASSIGN_OR_RETURN(
      std::unique_ptr<GlooCommunicator> comm,
      GlooCommunicator::Connect(std::move(store), "gloo/", rank, size,
                                std::move(global_ranks), options,
                                std::move(device), deadline));
  return std::unique_ptr<Communicator>(std::move(comm));
}

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Connect(
    std::shared_ptr<Store> store, std::string prefix, int rank, int size,
    std::vector<int> global_ranks, const CommOptions& options,
    std::shared_ptr<::gloo::transport::Device> device, absl::Time deadline) {
  std::unique_ptr<GlooCommunicator> comm(new GlooCommunicator());
  comm->store_ = std::move(store);
  comm->prefix_ = std::move(prefix);
  comm->rank_ = rank;
  comm->size_ = size;
  comm->global_ranks_ = std::move(global_ranks);
  comm->options_ = options;
  comm->options_.global_ranks.clear();  // Held in global_ranks_.
  comm->device_ = std::move(device);
  // The synchronous route's partners (gloo_sync_allreduce.h) join the same
  // exchange and barrier as a sub-mesh, kept where GlooSyncRouteWanted
  // (every member decides alike: in a group across hosts each member has a
  // peer on another host).
  gloo_internal::SyncSubMesh route;
  const bool route_fits = gloo_internal::SyncAllreduce::SizeFits(size);
  if (route_fits) {
    route.peers = gloo_internal::SyncAllreduce::Partners(rank, size);
    route.keep = [size](bool crosses_hosts) {
      return gloo_internal::GlooSyncRouteWanted(size, crosses_hosts);
    };
    route.defer_mesh = LazyMesh();
  }
  DEVMESH_ASSIGN_OR_RETURN(
      gloo_internal::FullMesh mesh,
      gloo_internal::ConnectFullMesh(
          *comm->store_, comm->prefix_, rank, size, comm->global_ranks_,
          comm->device_, options.timeout, deadline, options.creation_cancel,
          /*only_peers=*/nullptr, route_fits ? &route : nullptr));
  comm->store_round_trips_ = mesh.store_round_trips;
  comm->barrier_round_trips_ = mesh.barrier_round_trips;
  comm->peer_endpoints_ = std::move(mesh.peer_endpoints);
  {
    // No other thread has `comm` yet: the lock is for the analysis.
    sync_internal::MutexLock lock(&comm->mesh_mu_);
    comm->connections_ = std::move(mesh.connections);
    comm->pending_ = std::move(mesh.pending);
  }
  comm->abortable_ = std::move(mesh.abortable);
  comm->context_ = std::move(mesh.context);
  if (mesh.sync_sub != nullptr) {
    for (const auto& [endpoint, global] : mesh.sync_sub->peer_endpoints) {
      comm->peer_endpoints_[endpoint] = global;
    }
    comm->sync_ = gloo_internal::SyncAllreduce::FromMesh(
        rank, size, std::move(*mesh.sync_sub));
  }
  return comm;
}

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::DoSplit(
    int color, int key, const SplitOptions& split_options) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("split"));
  // (color, key) of every rank through the store (comm/store_exchange.h):
  // a rank that never calls Split is then named on every peer, and every
  // peer gets the same DeadlineExceeded (a Gloo all-gather would close the
  // pair of whichever peer timed out first, and a slower peer would see
  // "connection closed" instead). One deadline for the whole Split (the
  // child's timeout, SplitOptions' contract): the exchange and the child's
  // connection and barrier.
  DEVMESH_ASSIGN_OR_RETURN(
      comm_internal::StoreSplit split,
      comm_internal::BeginStoreSplit("gloo", *store_, prefix_, split_count_++,
                                     rank_, global_ranks_, options_,
                                     split_options.timeout, color, key));
  if (split.child_rank < 0) return std::unique_ptr<Communicator>();
  std::vector<int> child_globals = split.child_options.global_ranks;
  const int child_size = static_cast<int>(child_globals.size());
  DEVMESH_ASSIGN_OR_RETURN(
      std::unique_ptr<GlooCommunicator> child,
      Connect(store_, absl::StrCat(split.base, color, "/"), split.child_rank,
              child_size, std::move(child_globals), split.child_options,
              device_, split.deadline));
  child->store_round_trips_ += split.round_trips;
  return std::unique_ptr<Communicator>(std::move(child));
}

}  // namespace devmesh
