// devmesh/mesh/cart_shift.h
// -----------------------------------------------------------------------------
// Neighbours along a mesh dim: MPI_Cart_shift for a MeshLayout, for
// pipeline-parallel send/recv. PyTorch's DeviceMesh has no such call (its
// pipelining code computes stage neighbours by hand); MPI's Cartesian
// communicators do: this is devmesh's own feature, with MPI's meaning.
//
// For a rank at coordinate c and displacement k along dim d:
//   destination = the rank at c with c_d + k, source = the rank at c_d - k
// (a Send to the destination and a Recv from the source move data k steps
// along the dim). Periodic: coordinates wrap modulo size(d). Not periodic:
// past an edge there is no neighbour (MPI_PROC_NULL in MPI; nullopt here).
//
//   (2, 4) named (dp, pp), i.e. [[0,1,2,3],[4,5,6,7]]:
//   rank 5, pp, +1        -> source 4, destination 6
//   rank 7, pp, +1        -> source 6, no destination
//   rank 7, pp, +1, periodic -> source 6, destination 4
//   rank 4, pp, -1, periodic -> source 5, destination 7
//
// Thread-safety: a pure function.
#ifndef DEVMESH_MESH_CART_SHIFT_H_
#define DEVMESH_MESH_CART_SHIFT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

struct Neighbours {
  // Global ranks; nullopt past the edge of a non-periodic dim.
  std::optional<int64_t> source;
  std::optional<int64_t> destination;
  // The same neighbours as ranks inside the dim's group (their coordinate
  // along the dim, i.e. the peer argument of Send/Recv on GetGroup(dim)).
  std::optional<int64_t> source_in_group;
  std::optional<int64_t> destination_in_group;
};

// Neighbours of `rank` along `dim` of `layout` at `displacement` steps (any
// integer; 0 gives the rank itself both ways; |displacement| >= size(dim)
// wraps when periodic, leaves none otherwise). OutOfRange: dim not in
// [0, ndim); FailedPrecondition: rank not in the layout. O(ndim).
absl::StatusOr<Neighbours> CartShift(const MeshLayout& layout, int64_t rank,
                                     int dim, int64_t displacement,
                                     bool periodic);

}  // namespace devmesh

#endif  // DEVMESH_MESH_CART_SHIFT_H_
