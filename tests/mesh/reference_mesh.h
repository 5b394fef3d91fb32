// devmesh/tests/mesh/reference_mesh.h
// -----------------------------------------------------------------------------
// A naive reference model of a mesh for the //mesh tests: a shape and its
// flat row-major ranks, with the seed's transforms written as plain loops
// (O(numel)), plus helpers to unwrap StatusOr in tests. Test-only.
#ifndef DEVMESH_TESTS_MESH_REFERENCE_MESH_H_
#define DEVMESH_TESTS_MESH_REFERENCE_MESH_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"

namespace devmesh {
namespace testing {

// The value of a StatusOr that the test expects to be OK (fails the test,
// then stops it through StatusOr's own check, when it is not).
template <typename T>
T Ok(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status();
  return *std::move(v);
}

struct RefMesh {
  std::vector<int64_t> shape;
  std::vector<int64_t> ranks;  // row-major

  static RefMesh Of(const MeshLayout& m) { return {m.shape(), m.RankTable()}; }
  int64_t numel() const { return static_cast<int64_t>(ranks.size()); }
  // Row-major index <-> coordinate.
  std::vector<int64_t> CoordOf(int64_t index) const;
  int64_t IndexOf(const std::vector<int64_t>& coord) const;
  // The seed's __getitem__: kept dims in the order given, through `coord`.
  RefMesh Slice(const std::vector<int>& dims,
                const std::vector<int64_t>& coord) const;
  RefMesh Transpose(const std::vector<int>& perm) const;
  RefMesh Reshape(std::vector<int64_t> new_shape) const {
    return {std::move(new_shape), ranks};
  }
  // Ranks on the line through coordinate `coord` along `dim`.
  std::vector<int64_t> Line(const std::vector<int64_t>& coord, int dim) const;
};

// A second naive model, for flattened names mixed with dims: a root made by
// FromShape whose sizes are 1, 2 or 3 (so every transform cuts at whole root
// dims), and a mesh given as, per dim, the root dims it walks (outer first;
// size-1 root dims are walked by none) plus the root coordinate it passes
// through. Every query is a plain loop over root coordinates.
struct AtomMesh {
  std::vector<int64_t> root_shape;
  std::vector<std::vector<int>> dims;  // root dims per dim, outer first
  std::vector<int64_t> base;           // root coordinate passed through
  std::vector<std::string> names;

  // A whole root.
  static AtomMesh Root(std::vector<int64_t> root_shape,
                       std::vector<std::string> names);
  std::vector<int64_t> Shape() const;
  // Flat row-major ranks (rank = row-major root position).
  std::vector<int64_t> Ranks() const;
  // The root coordinate of a rank.
  std::vector<int64_t> RootCoord(int64_t rank) const;
  // Root dims walked by any dim.
  std::vector<int> Walked() const;
  // The dims `dims` (indices into `pool`, a list of (dim atoms, name)) in
  // order, through the root coordinate of `rank`.
  static AtomMesh Select(
      const std::vector<int64_t>& root_shape,
      const std::vector<std::pair<std::vector<int>, std::string>>& chosen,
      int64_t rank);
};

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_MESH_REFERENCE_MESH_H_
