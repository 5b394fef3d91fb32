// devmesh/device_mesh/groups_mesh.h
// -----------------------------------------------------------------------------
// The rank table of a mesh given only its per-dim groups (internal to
// //device_mesh, used by DeviceMesh::FromGroups without a rank table).
// PyTorch's DeviceMesh.from_group needs the mesh for several groups; MPI
// keeps the topology in its Cartesian communicator. devmesh rebuilds it by
// exchanging members over the groups themselves, so no store is needed:
//
//   1. each group all-gathers every member's group sizes (n int64 values),
//      and they must agree (the shape of the mesh);
//   2. starting from this rank's line along the last dim, for d = n-2..0
//      each rank all-gathers over group d the sub-table of dims d+1..n-1
//      through its coordinate, which stacks into the sub-table of dims
//      d..n-1 (group rank = coordinate along d);
//   3. each group all-reduces (min and max) a hash of the final table, so
//      that every rank holds the same one.
// Every rank of every group calls this with the same number of groups in
// the same dim order (SPMD), as for any collective. O(world) memory and
// bytes per rank.
//
// Thread-safety: one call at a time per set of groups (they are
// Communicators).
#ifndef DEVMESH_DEVICE_MESH_GROUPS_MESH_H_
#define DEVMESH_DEVICE_MESH_GROUPS_MESH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace devmesh {
namespace device_mesh_internal {

struct GroupsMesh {
  std::vector<int64_t> shape;  // one size per group
  std::vector<int64_t> ranks;  // flat, row-major
};

// Builds the table. InvalidArgument naming the first inconsistency: a
// group whose members report other group sizes (naming the group, both
// shapes), ranks that disagree on the table (naming the group), a rank
// whose position in a group differs from groups[0]'s global rank. Errors
// of the collectives (DeadlineExceeded when another rank stopped early on
// an inconsistency it saw first) come back as they are.
absl::StatusOr<GroupsMesh> InferMeshFromGroups(
    const std::vector<std::shared_ptr<Communicator>>& groups);

}  // namespace device_mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_GROUPS_MESH_H_
