// devmesh/mesh/strided.h
// -----------------------------------------------------------------------------
// Mode algebra of strided layouts (internal to //mesh).
//
// A mode is a (size, stride) pair written "size:stride". A list of modes,
// outer first, maps a coordinate c in [0, product of sizes) to a position:
// c is decomposed ROW-MAJOR over the modes (the last mode varies fastest) and
// each digit is multiplied by its mode's stride. This is CuTe's shape:stride
// with the row-major convention of PyTorch's _mesh_layout (CuTe itself is
// column-major; devmesh never mixes the two).
//
// Positions live in the compact row-major space [0, N) of a root mesh. A set
// of modes is valid in that space when its modes, sorted by stride, are
// disjoint "digit ranges": t_{i+1} is a multiple of t_i * s_i and N is a
// multiple of the last t * s. Then the digit of a mode in a position p is
// (p / t) % s, and p = base + sum of digit * t with no carries.
//
// Canonical form (so that equal functions have equal mode lists): no size-1
// modes, and no two neighbours (s1:t1, s2:t2) with t1 == s2 * t2 (merged into
// (s1*s2 : t2)). An empty list is a size-1 dim.
//
// Everything here is O(number of modes). Thread-safety: pure functions.
#ifndef DEVMESH_MESH_STRIDED_H_
#define DEVMESH_MESH_STRIDED_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace devmesh {
namespace mesh_internal {

// Largest number of positions a root mesh may have (keeps every product and
// sum of positions inside int64_t).
inline constexpr int64_t kMaxNumel = int64_t{1} << 62;
// Largest number of dims of a mesh (bounds recursion and text sizes).
inline constexpr int kMaxDims = 64;

struct Mode {
  int64_t size = 1;
  int64_t stride = 0;
  friend bool operator==(const Mode& a, const Mode& b) {
    return a.size == b.size && a.stride == b.stride;
  }
  friend bool operator!=(const Mode& a, const Mode& b) { return !(a == b); }
};

using Modes = absl::InlinedVector<Mode, 2>;

// Returns `a * b` in *out; false when it overflows int64_t or exceeds kMaxNumel.
bool CheckedMul(int64_t a, int64_t b, int64_t* out);

// Drops size-1 modes and merges contiguous neighbours (see the top of this file).
Modes Canonicalize(absl::Span<const Mode> modes);

// Product of the sizes (1 for an empty list).
int64_t ModesSize(absl::Span<const Mode> modes);

// Position offset of coordinate `c` (0 <= c < ModesSize) along the modes.
int64_t ComposeCoord(absl::Span<const Mode> modes, int64_t c);

// The digits of position `p` in the modes, combined row-major into the
// coordinate along them; *contribution receives sum of digit * stride.
int64_t DecomposePosition(absl::Span<const Mode> modes, int64_t p,
                          int64_t* contribution);

// "(2:4,2:1)"; "(1:0)" for the empty list (a size-1 dim).
std::string ModesString(absl::Span<const Mode> modes);

// Splits `modes` row-major into consecutive pieces of the given sizes (outer
// first), each canonical. InvalidArgument when a size cuts a mode at a point
// that is not a divisor, so that the piece would not be strided (e.g. modes
// (2:12,3:1) into sizes (3,2)); the caller checks the product beforehand.
absl::StatusOr<std::vector<Modes>> SplitModes(absl::Span<const Mode> modes,
                                              absl::Span<const int64_t> sizes);

// OK when `all_modes` (any order) are disjoint digit ranges of [0, numel),
// every mode has size >= 2 and stride >= 1, and `offset` is in [0, numel)
// with zero digits in every mode. InvalidArgument naming the mode otherwise.
absl::Status CheckModesInRoot(absl::Span<const Mode> all_modes, int64_t offset,
                              int64_t numel);

}  // namespace mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_MESH_STRIDED_H_
