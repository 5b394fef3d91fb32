// devmesh/device_mesh/spare_runtime.h
// -----------------------------------------------------------------------------
// For a process started to replace a rank of a running job (//bootstrap:launch
// --spare_restarts, or by hand with the job's variables): whether it was
// started so, and a MeshRuntime over the job's store made without the
// bootstrap's start barrier (the job's other ranks passed it long ago), to
// hand to DeviceMesh::JoinAsSpare.
//
//   if (devmesh::StartedAsSpare()) {
//     DEVMESH_ASSIGN_OR_RETURN(auto runtime, devmesh::SpareRuntimeFromEnv());
//     DEVMESH_ASSIGN_OR_RETURN(auto joined,
//                              devmesh::DeviceMesh::JoinAsSpare(runtime));
//     ...
//   }
//
// Thread-safety: both read the environment; call them before starting
// threads that change it.
#ifndef DEVMESH_DEVICE_MESH_SPARE_RUNTIME_H_
#define DEVMESH_DEVICE_MESH_SPARE_RUNTIME_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "device_mesh/mesh_runtime.h"

namespace devmesh {

// The variable //bootstrap:launch sets to "1" in a rank it restarts as a
// spare.
inline constexpr char kSpareVar[] = "DEVMESH_SPARE";

// Whether DEVMESH_SPARE is "1".
bool StartedAsSpare();

// The runtime of this process's rank (RANK, WORLD_SIZE, LOCAL_RANK and the
// store, read as Bootstrap::FromEnv reads them: bootstrap/rendezvous.h) over
// a client of the job's store: an external devmesh store (DEVMESH_STORE_ADDR
// "host:port", token DEVMESH_STORE_TOKEN), an etcd cluster
// (DEVMESH_STORE_ADDR "etcd://host:port[,...][/prefix]", the job's leases
// then etcd's) or torchrun's agent store. No
// start barrier. Its host table (hostnames()) is the one the job's
// rendezvous agreed (ReadPeerTable) but for this rank's entry, which is this
// process's host (LocalHostName), where it may differ from its
// predecessor's: the spare answers a Grow's call with it and the Grow's
// decision carries it to every member, so that all choose each new group's
// transport from one table (shm inside a host); its Gloo devices advertise this
// process's own route toward the store (peer_address.h). Empty when the
// store holds no completed rendezvous. `connect_timeout` bounds the
// connection's retries.
// Errors:
//   FailedPrecondition  the job's store is hosted by rank 0 (a spare needs a
//                       store that no rank hosts)
//   InvalidArgument     the store's rendezvous table does not decode
//   others              RendezvousInfoFromEnv's (InvalidArgument for a
//                       missing or bad variable); the store client's
//                       (Unavailable when the store does not answer
//                       within `connect_timeout`, PermissionDenied for a
//                       wrong token)
absl::StatusOr<std::shared_ptr<MeshRuntime>> SpareRuntimeFromEnv(
    absl::Duration connect_timeout = absl::Seconds(60));

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_SPARE_RUNTIME_H_
