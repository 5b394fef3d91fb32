// devmesh/mesh/auto_shape.cc: InferMeshShape (one -1 dim from the world size).
#include "mesh/auto_shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace devmesh {

absl::StatusOr<std::vector<int64_t>> InferMeshShape(
    absl::Span<const int64_t> shape, int64_t world_size) {
  const std::string text = absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot infer mesh_shape ", text, ": world size ", world_size,
        " must be at least 1"));
  }
  int auto_dim = -1;
  int64_t product = 1;
  bool overflow = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == kAutoDim) {
      if (auto_dim >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh_shape ", text, " has more than one -1 (dims ", auto_dim,
            " and ", d, "): at most one size can be inferred"));
      }
      auto_dim = static_cast<int>(d);
      continue;
    }
    if (shape[d] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh_shape ", text, " holds ", shape[d], " at dim ", d,
          ": sizes must be positive, or -1 for one inferred size"));
    }
    // Past world_size the division below fails anyway; a product that
    // would overflow int64 (4 * 2^62 wraps to 0, then % 0 traps) stops
    // growing and the message says so.
    if (!overflow && __builtin_mul_overflow(product, shape[d], &product)) {
      overflow = true;
    }
  }
  std::vector<int64_t> out(shape.begin(), shape.end());
  if (auto_dim < 0) return out;
  if (overflow || product > world_size || world_size % product != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot infer the -1 in mesh_shape ", text, ": world size ",
        world_size, " is not divisible by ",
        overflow ? "the product of the other sizes (over 2^63)"
                 : absl::StrCat(product, ", the product of the other sizes")));
  }
  out[auto_dim] = world_size / product;
  return out;
}

}  // namespace devmesh
