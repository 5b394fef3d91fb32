// devmesh/device_mesh/init_device_mesh.h
// -----------------------------------------------------------------------------
// InitDeviceMesh: the entry point (R18 in docs/BEHAVIOURS.md: the reference
// Python DeviceMesh's init_device_mesh and PyTorch's
// torch.distributed.device_mesh.init_device_mesh). Ranks are laid out
// row-major over `mesh_shape`: rank = sum of coord_i * stride_i, so the
// last dim holds neighbouring ranks (put "tp" last to keep it on one host).
//
//   // Every rank, started by torchrun, Slurm, mpirun or //bootstrap:launch:
//   auto mesh = devmesh::InitDeviceMesh("cpu", {2, 4}, {"dp", "tp"});
//
// "cpu" uses shared memory inside a host and UCX across hosts, and "cuda"
// NCCL, unless MeshOptions names a backend; for NCCL each rank's CUDA device
// is its local rank. Groups are made lazily.
//
// InitDeviceMesh is a collective over the world: every rank calls it, in the
// same order as its other InitDeviceMesh calls, and the ranks agree on what
// they asked for (devmesh's version, the device type, the shape, the dim
// names, each dim's options, require_inside_host, and the DEVMESH_* settings
// that must be equal everywhere) before any rank gets its mesh
// (device_mesh/mesh_agreement.h: 2 store round trips on rank 0, 3 on the
// others). A rank that asked for something else, or whose own checks
// failed, makes every rank fail at once with the same error.
//
// Thread-safety: call once per process and mesh, from any thread.
#ifndef DEVMESH_DEVICE_MESH_INIT_DEVICE_MESH_H_
#define DEVMESH_DEVICE_MESH_INIT_DEVICE_MESH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bootstrap/bootstrap.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/group_options.h"
#include "device_mesh/mesh_runtime.h"

namespace devmesh {

// Over an existing runtime. A -1 in mesh_shape is inferred from the world
// size (devmesh's own, as MPI_Dims_create: world 12 with (-1, 4) gives
// (3, 4)). When the mesh's backend is NCCL ("cuda" without an override),
// sets this thread's CUDA device to local rank % visible devices first.
// Errors:
//   InvalidArgument     a failed check of these, made in the reference's
//                       order (R18), each naming the value: names unique;
//                       one name per dim; device type a plain word ("cuda",
//                       not "cuda:0") and one devmesh knows ("cpu", "cuda";
//                       "gpu", "CPU" or "" fail here, listing them) unless
//                       every dim has a backend override (R19); mesh_shape
//                       non-empty with positive sizes, except at most one
//                       -1 ((-1, 5) in world 12 fails naming 12 and 5; two
//                       -1 fail); product of mesh_shape == world size
//                       ("mesh_shape product (6) must equal world size
//                       (8)"); a timeout in `options` that is not positive;
//                       a per_dim key of `options` that names no dim, an
//                       index out of range, or a second key for one dim
//                       (DeviceMesh::Create's check, naming the key); a
//                       DEVMESH_* variable that devmesh does not know or
//                       whose value does not parse, first of all
//                       (config/settings.h: "malformed setting
//                       DEVMESH_SHM_SLOT_BYTES='64x': want a positive byte
//                       count ...")
//   FailedPrecondition  a null or detached runtime (no bootstrap); with
//                       options.require_inside_host
//                       (device_mesh/host_layout.h): the runtime does not
//                       know the ranks' hosts, or a line of a named dim
//                       crosses hosts ("dim 'tp' must stay inside one host
//                       (MeshOptions.require_inside_host) but its line 0,2
//                       crosses hosts 'h0' (rank 0) and 'h1' (rank 2)")
//   NotFound            with options.require_inside_host, a name that is
//                       not a dim; a backend the mesh names (a dim's or
//                       the mesh's, or for "auto"/"shm" the cross-host one,
//                       DEVMESH_CROSS_HOST_BACKEND) that is not linked into
//                       this program ("backend \"gloo\" is not linked into
//                       this program: add \"@devmesh//comm:gloo\" to its
//                       deps ..."; comm/registry.h)
//   Unavailable         the backend is NCCL and no CUDA device is visible
//   the agreement's, on every rank alike (after this rank's own checks):
//   InvalidArgument     another rank asked for another mesh: "InitDeviceMesh:
//                       the ranks disagree on the mesh: global rank 3 asked
//                       for mesh shape (4, 1), global rank 0 for (2, 2);
//                       every rank fails with this error", with
//                       kDisagreementPayload naming that rank
//                       (comm/communicator.h); or another rank's own check
//                       failed: "InitDeviceMesh: global rank R could not
//                       make its mesh: <its error>" (its error's code)
//   DeadlineExceeded    not every rank called it within options.all.timeout
//                       (300 s when unset): "InitDeviceMesh: N of M ranks
//                       reached the mesh agreement within T (global rank 0
//                       had|had not); ..."
//   Unavailable         the failure watch found a rank dead meanwhile
absl::StatusOr<DeviceMesh> InitDeviceMesh(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names = {}, MeshOptions options = {});

// The runtime of a bootstrap (which it keeps alive): the same runtime for
// every call with the same live bootstrap, since two runtimes over one store
// would collide.
// Errors:
//   InvalidArgument  a null bootstrap
absl::StatusOr<std::shared_ptr<MeshRuntime>> MeshRuntimeFromBootstrap(
    std::shared_ptr<Bootstrap> bootstrap);

// Over an existing bootstrap; errors as above.
absl::StatusOr<DeviceMesh> InitDeviceMesh(
    std::shared_ptr<Bootstrap> bootstrap, absl::string_view device_type,
    absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names = {}, MeshOptions options = {});

// Rendezvous from the environment first (Bootstrap::FromEnv: torchrun,
// Slurm or Open MPI variables; rank 0 hosts the store), then as above. The
// rendezvous happens on the first call only (its timeout is
// options.all.timeout when set, else 300 s); later calls in the process
// reuse it, like PyTorch's default process group. On a normal exit
// (return from main, exit()) the process leaves the job: rank 0, which hosts
// the store, keeps it up until every other rank has left or the bootstrap's
// shutdown timeout (30 s) passes, so a rank 0 that returns first never
// closes the store under a peer still finishing a group. The timeout is
// checked first, then come Bootstrap::FromEnv's errors, then as above.
// Errors:
//   InvalidArgument   a timeout that is not positive; a missing or
//                     contradictory variable, naming it (FromEnv's)
//   NotFound          no launcher variables are set at all (FromEnv's)
//   Unavailable       the store is not reached within the timeout
//                     (FromEnv's)
//   DeadlineExceeded  the store is not reached within the timeout
//                     (FromEnv's)
//   others            any other of Bootstrap::FromEnv's; then as above
absl::StatusOr<DeviceMesh> InitDeviceMesh(
    absl::string_view device_type, absl::Span<const int64_t> mesh_shape,
    std::vector<std::string> mesh_dim_names = {}, MeshOptions options = {});

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_INIT_DEVICE_MESH_H_
