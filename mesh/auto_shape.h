// devmesh/mesh/auto_shape.h
// -----------------------------------------------------------------------------
// Auto dims: a mesh shape with at most one -1, whose size is inferred from
// the world size (MPI_Dims_create's "0 = choose for me", restricted to one
// free dim; PyTorch's init_device_mesh has no such thing, its users ask for
// it: devmesh's own feature).
//
//   InferMeshShape({-1, 4}, 12)  ->  {3, 4}
//   InferMeshShape({-1, 5}, 12)  ->  InvalidArgument ("... 12 ... 5 ...")
//
// Thread-safety: a pure function.
#ifndef DEVMESH_MESH_AUTO_SHAPE_H_
#define DEVMESH_MESH_AUTO_SHAPE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace devmesh {

// The value that marks the dim whose size is inferred.
inline constexpr int64_t kAutoDim = -1;

// `shape` with its kAutoDim entry (if any) replaced by world_size divided by
// the product of the other sizes. A shape with no kAutoDim comes back as it
// is (its product is checked by the caller, as InitDeviceMesh does).
// InvalidArgument, each naming the shape: more than one kAutoDim; a size
// that is 0 or negative other than kAutoDim; world_size < 1; the product of
// the other sizes does not divide world_size (naming the world size and the
// product, e.g. "world size 12 is not divisible by 5, the product of the
// other sizes"). O(ndim).
absl::StatusOr<std::vector<int64_t>> InferMeshShape(
    absl::Span<const int64_t> shape, int64_t world_size);

}  // namespace devmesh

#endif  // DEVMESH_MESH_AUTO_SHAPE_H_
