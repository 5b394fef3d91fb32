// devmesh/device_mesh/state_broadcast.h
// -----------------------------------------------------------------------------
// BroadcastState: after DeviceMesh::Grow (or JoinAsSpare), copies an engine's
// state (parameters, optimizer state, the step number: any list of
// buffers) from one surviving replica to every other replica along the
// replica dim, so that admitted ranks start from the survivors' state.
//
//   DEVMESH_ASSIGN_OR_RETURN(auto grown, mesh.Grow("dp"));
//   std::vector<devmesh::StateBuffer> state = {
//       devmesh::StateBuffer::Of(absl::MakeSpan(params)),
//       devmesh::StateBuffer::Of(absl::MakeSpan(&step, 1))};
//   DEVMESH_RETURN_IF_ERROR(devmesh::BroadcastState(grown.mesh, "dp", state));
//
// Every rank of the mesh calls it with buffers of the same sizes, in the
// same order (an admitted rank's are overwritten; a surviving replica's are
// read on the source and overwritten, with identical bytes, elsewhere). It
// moves the bytes along this rank's line of the replica dim
// (GetGroup(replica_dim)), in chunks of at most `chunk_bytes`: one
// Broadcast of the sizes, one all-reduce that makes every rank fail alike
// when a size differs, then one Broadcast per chunk.
//
// Thread-safety: a collective on the replica dim's group: one call per rank
// at a time, no other collective of that group in flight.
#ifndef DEVMESH_DEVICE_MESH_STATE_BROADCAST_H_
#define DEVMESH_DEVICE_MESH_STATE_BROADCAST_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "device_mesh/device_mesh.h"

namespace devmesh {

// One buffer of state: `bytes` bytes at `data` (not owned; valid, and not
// touched by anything else, during the call).
struct StateBuffer {
  void* data = nullptr;
  size_t bytes = 0;
  // The bytes of a span of trivially copyable values.
  template <typename T>
  static StateBuffer Of(absl::Span<T> values) {
    static_assert(std::is_trivially_copyable_v<T>,
                  "state buffers are copied as bytes");
    return StateBuffer{values.data(), values.size() * sizeof(T)};
  }
};

// Copies `buffers` from the ranks at coordinate `source_replica` along
// `replica_dim` (0: a replica every Grow keeps) to the other replicas of
// `mesh`, in chunks of at most `chunk_bytes` bytes.
// Errors:
//   InvalidArgument     chunk_bytes 0; a null buffer with bytes > 0;
//                       source_replica outside [0, size of the dim); on every
//                       rank of a line alike, buffers whose count or sizes
//                       differ from the source's (naming the first buffer)
//   OutOfRange, NotFound, FailedPrecondition  the dim, as for GetGroup
//   others              the group's creation or collective errors
absl::Status BroadcastState(const DeviceMesh& mesh, MeshDim replica_dim,
                            absl::Span<const StateBuffer> buffers,
                            int64_t source_replica = 0,
                            size_t chunk_bytes = size_t{4} << 20);

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_STATE_BROADCAST_H_
