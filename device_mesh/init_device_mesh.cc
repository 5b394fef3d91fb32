#include "device_mesh/init_device_mesh.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/auto_group.h"
#include "comm/backend_options.h"
#include "comm/registry.h"
#include "config/settings.h"
#include "device_mesh/host_layout.h"
#include "device_mesh/mesh_agreement.h"
#include "device_mesh/peer_address.h"
#include "device_mesh/root_state.h"
#include "mesh/auto_shape.h"
#include "mesh/mesh_layout.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

absl::Status CheckTimeouts(const MeshOptions& options) {
  DEVMESH_RETURN_IF_ERROR(CheckGroupTimeout(options.all, "MeshOptions.all"));
  for (const auto& [name, g] : options.per_dim) {
    DEVMESH_RETURN_IF_ERROR(CheckGroupTimeout(
        g, absl::StrCat("MeshOptions.per_dim['", name, "']")));
  }
  return absl::OkStatus();
}

// Every backend the mesh's groups may be made with is linked into this
// program (CheckGroupBackendLinked, comm/auto_group.h: "auto" and "shm"
// need the cross-host backend, for groups and pairs that cannot share
// memory), so that a missing one (an opt-in "gloo" without
// @devmesh//comm:gloo) fails the mesh on every rank at once, not its first
// group. NotFound (comm/registry.h's CheckBackendLinked).
// `backend` may be empty (a device type with no default, whose dims name
// their own backends in per_dim).
absl::Status CheckBackendsLinked(absl::string_view backend,
                                 const MeshOptions& options) {
  std::vector<std::string> names;
  if (!backend.empty()) names.emplace_back(backend);
  for (const auto& [dim, g] : options.per_dim) {
    if (!g.backend.empty()) names.push_back(g.backend);
  }
  for (const std::string& name : names) {
    DEVMESH_RETURN_IF_ERROR(CheckGroupBackendLinked(name));
  }
  return absl::OkStatus();
}

// InitDeviceMesh on this rank alone: every check, then the mesh.
absl::StatusOr<DeviceMesh> MakeMesh(std::shared_ptr<MeshRuntime> runtime,
                                    absl::string_view device_type,
                                    absl::Span<const int64_t> mesh_shape,
                                    std::vector<std::string> mesh_dim_names,
                                    MeshOptions options) {
  // A DEVMESH_* variable that is unknown or malformed (config/settings.h).
  DEVMESH_RETURN_IF_ERROR(ProcessSettingsStatus());
  if (!mesh_dim_names.empty()) {
    absl::flat_hash_set<std::string> seen;
    for (const std::string& name : mesh_dim_names) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "each mesh_dim_name must be unique; '", name,
            "' is repeated in mesh_dim_names [",
            absl::StrJoin(mesh_dim_names, ", "), "]"));
      }
    }
    if (mesh_dim_names.size() != mesh_shape.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh_shape and mesh_dim_names must have the same length: ",
          mesh_shape.size(), " sizes [", absl::StrJoin(mesh_shape, ", "),
          "] but ", mesh_dim_names.size(), " names [",
          absl::StrJoin(mesh_dim_names, ", "), "]"));
    }
  }
  DEVMESH_RETURN_IF_ERROR(
      CheckDeviceTypeHasBackend(device_type, options, mesh_dim_names,
                                static_cast<int>(mesh_shape.size())));
  if (runtime == nullptr || runtime->detached()) {
    return absl::FailedPreconditionError(
        "InitDeviceMesh needs an initialised bootstrap (rendezvous) first");
  }
  if (mesh_shape.empty()) {
    return absl::InvalidArgumentError("mesh_shape must not be empty");
  }
  // Auto dim: one -1 is inferred from the world size (devmesh's own).
  std::vector<int64_t> inferred(mesh_shape.begin(), mesh_shape.end());
  if (std::count(inferred.begin(), inferred.end(), kAutoDim) > 0) {
    DEVMESH_ASSIGN_OR_RETURN(inferred,
                             InferMeshShape(mesh_shape, runtime->world_size()));
  }
  mesh_shape = inferred;
  int64_t product = 1;
  for (int64_t size : mesh_shape) {
    if (size <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh_shape must hold positive sizes, got [",
                       absl::StrJoin(mesh_shape, ", "), "]"));
    }
  }
  bool overflow = false;
  for (int64_t size : mesh_shape) {
    if (size > INT64_MAX / product) {
      overflow = true;
      break;
    }
    product *= size;
  }
  if (overflow || product != runtime->world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh_shape product (",
        overflow ? absl::StrJoin(mesh_shape, " x ") : absl::StrCat(product),
        ") must equal world size (", runtime->world_size(), ")"));
  }
  DEVMESH_RETURN_IF_ERROR(CheckTimeouts(options));
  // The backend sets this thread up (NCCL: this rank's GPU is its local
  // rank's, R18's "cuda"; comm/backend_options.h).
  std::string backend = options.all.backend;
  if (backend.empty()) backend = std::string(DefaultBackendFor(device_type));
  DEVMESH_RETURN_IF_ERROR(CheckBackendsLinked(backend, options));
  LocalPlace place;
  place.local_rank = runtime->local_rank();
  DEVMESH_RETURN_IF_ERROR(PrepareThreadFor(backend, place));
  DEVMESH_ASSIGN_OR_RETURN(
      auto layout,
      MeshLayout::FromShape(mesh_shape, std::move(mesh_dim_names)));
  if (!options.require_inside_host.empty()) {
    if (runtime->hostnames().empty()) {
      return absl::FailedPreconditionError(
          "MeshOptions.require_inside_host needs the ranks' hosts, which "
          "this runtime does not know (make it with MeshRuntimeFromBootstrap "
          "or InitDeviceMesh over a Bootstrap)");
    }
    DEVMESH_RETURN_IF_ERROR(CheckDimsInsideHost(layout, runtime->hostnames(),
                                                options.require_inside_host));
  }
  return device_mesh_internal::FromLayoutForInit(
      std::move(runtime), device_type, std::move(layout), std::move(options));
}

}  // namespace

absl::StatusOr<DeviceMesh> InitDeviceMesh(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names, MeshOptions options) {
  if (runtime == nullptr || runtime->detached()) {
    return MakeMesh(std::move(runtime), device_type, mesh_shape,
                    std::move(mesh_dim_names), std::move(options));
  }
  // Every rank takes the next agreement, whether its own checks pass or not
  // (a rank whose checks fail tells the others at once).
  const int64_t index = runtime->NextAgreementIndex();
  const absl::Duration timeout =
      options.all.timeout.value_or(device_mesh_internal::kDefaultGroupTimeout);
  auto mesh = MakeMesh(runtime, device_type, mesh_shape,
                       std::move(mesh_dim_names), std::move(options));
  if (!mesh.ok()) {
    // The others made their roots (and took a root index each) before they
    // heard of this: take one too, so that later roots' groups keep the
    // same names on every rank.
    (void)runtime->NextRootIndex();
    return device_mesh_internal::AbandonMesh(*runtime, index, mesh.status());
  }
  const device_mesh_internal::MeshSpec spec =
      device_mesh_internal::InitDeviceMeshSpec(
          device_type, mesh->shape(), mesh->mesh_dim_names(), mesh->options());
  if (absl::Status s =
          device_mesh_internal::AgreeOnMesh(*runtime, index, spec, timeout);
      !s.ok()) {
    return s;
  }
  return mesh;
}

absl::StatusOr<std::shared_ptr<MeshRuntime>> MeshRuntimeFromBootstrap(
    std::shared_ptr<Bootstrap> bootstrap) {
  if (bootstrap == nullptr) {
    return absl::InvalidArgumentError("bootstrap is null");
  }
  // One runtime per bootstrap (see mesh_runtime.h): a second would reuse the
  // first one's rendezvous keys.
  static std::mutex mu;
  static auto* runtimes =
      new std::map<const Bootstrap*, std::weak_ptr<MeshRuntime>>();
  std::lock_guard<std::mutex> lock(mu);
  std::weak_ptr<MeshRuntime>& slot = (*runtimes)[bootstrap.get()];
  if (std::shared_ptr<MeshRuntime> live = slot.lock()) return live;
  std::shared_ptr<Store> store = bootstrap->store();
  const int rank = bootstrap->rank();
  const int world_size = bootstrap->world_size();
  const int local_rank = bootstrap->local_rank();
  // What the rendezvous learnt: every rank's host (host_layout.h) and the
  // address this rank's Gloo devices advertise (peer_address.h).
  std::vector<std::string> hosts;
  for (const PeerInfo& peer : bootstrap->peers()) {
    hosts.push_back(peer.hostname);
  }
  std::string address =
      bootstrap->peers().empty()
          ? std::string()
          : PeerFacingAddress(bootstrap->self(), bootstrap->peers());
  auto runtime = MeshRuntime::Create(std::move(store), rank, world_size,
                                     local_rank, std::move(bootstrap));
  if (runtime.ok()) {
    (*runtime)->SetHostInfo(std::move(hosts), std::move(address));
    slot = *runtime;
  }
  return runtime;
}

absl::StatusOr<DeviceMesh> InitDeviceMesh(
    std::shared_ptr<Bootstrap> bootstrap, absl::string_view device_type,
    absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names, MeshOptions options) {
  DEVMESH_ASSIGN_OR_RETURN(auto runtime,
                           MeshRuntimeFromBootstrap(std::move(bootstrap)));
  return InitDeviceMesh(std::move(runtime), device_type, mesh_shape,
                        std::move(mesh_dim_names), std::move(options));
}

absl::StatusOr<DeviceMesh> InitDeviceMesh(
    absl::string_view device_type, absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names, MeshOptions options) {
  DEVMESH_RETURN_IF_ERROR(CheckTimeouts(options));
  // The process's rendezvous happens once; later calls reuse it (PyTorch's
  // default process group).
  static std::mutex mu;
  static auto* process_bootstrap = new std::shared_ptr<Bootstrap>();
  std::shared_ptr<Bootstrap> bootstrap;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (*process_bootstrap == nullptr) {
      BootstrapOptions bootstrap_options;
      if (options.all.timeout.has_value()) {
        bootstrap_options.timeout = *options.all.timeout;
      }
      DEVMESH_ASSIGN_OR_RETURN(*process_bootstrap,
                               Bootstrap::FromEnv(bootstrap_options));
      // Leave the job on a normal exit (return from main, exit()), even
      // while meshes still hold the Bootstrap: rank 0 then keeps the store
      // up until every other rank has left (else a rank 0 returning right
      // after GetGroup would close the store under a peer still in the
      // group's barrier).
      std::atexit([] {
        if (*process_bootstrap != nullptr) (*process_bootstrap)->Leave();
      });
    }
    bootstrap = *process_bootstrap;
  }
  return InitDeviceMesh(std::move(bootstrap), device_type, mesh_shape,
                        std::move(mesh_dim_names), std::move(options));
}

}  // namespace devmesh
