// devmesh/mesh/cart_shift.cc: CartShift (MPI_Cart_shift on a MeshLayout).
#include "mesh/cart_shift.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

// The coordinate c + step along a dim of `size`: wrapped when periodic,
// nullopt when it leaves [0, size). `step` is within (-size, size) or any
// value when periodic (reduced first, so no overflow).
std::optional<int64_t> Move(int64_t c, int64_t step, int64_t size,
                            bool periodic) {
  if (periodic) {
    int64_t r = ((c + step % size) % size + size) % size;
    return r;
  }
  if (step >= size || step <= -size) return std::nullopt;
  const int64_t to = c + step;
  if (to < 0 || to >= size) return std::nullopt;
  return to;
}

}  // namespace

absl::StatusOr<Neighbours> CartShift(const MeshLayout& layout, int64_t rank,
                                     int dim, int64_t displacement,
                                     bool periodic) {
  DEVMESH_ASSIGN_OR_RETURN(int64_t size, layout.size(dim));
  std::optional<std::vector<int64_t>> coord = layout.CoordinateOf(rank);
  if (!coord.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " is not in the mesh ",
                     layout.LayoutString(), ": it has no neighbours"));
  }
  const int64_t c = (*coord)[dim];
  // Reduced first when periodic, so that negating it cannot overflow; a
  // non-periodic INT64_MIN leaves the dim both ways.
  const int64_t step = periodic ? displacement % size : displacement;
  Neighbours out;
  out.destination_in_group = Move(c, step, size, periodic);
  if (step != INT64_MIN) out.source_in_group = Move(c, -step, size, periodic);
  std::vector<int64_t> at = *coord;
  if (out.destination_in_group.has_value()) {
    at[dim] = *out.destination_in_group;
    out.destination = *layout.RankAt(at);
  }
  if (out.source_in_group.has_value()) {
    at[dim] = *out.source_in_group;
    out.source = *layout.RankAt(at);
  }
  return out;
}

}  // namespace devmesh
