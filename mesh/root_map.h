// devmesh/mesh/root_map.h
// -----------------------------------------------------------------------------
// RootMap (internal to //mesh): what a root mesh knows, shared (through
// std::shared_ptr<const RootMap>) by every layout derived from it.
//
// A root has a shape (positions 0..numel-1, row-major), optional dim names,
// and a map from position to global rank of one of three kinds:
//   kIdentity  rank = position                       (FromShape)    O(ndim)
//   kAffine    rank = offset + sum coord_d * stride_d (FromStrides)  O(ndim)
//   kTable     rank = table[position]                 (FromRankTable) O(numel)
// The inverse (rank -> position) is O(ndim) for the first two and O(1) for a
// table, through an index built once: a dense vector when the ranks are
// dense enough, else an absl::flat_hash_map.
//
// An affine root keeps its dims sorted by stride, and requires each stride to
// exceed the span of the smaller ones ("separable" strides), which makes the
// greedy inverse exact; other injective strides are materialised as a table.
//
// Immutable after construction; safe to share between threads.
#ifndef DEVMESH_MESH_ROOT_MAP_H_
#define DEVMESH_MESH_ROOT_MAP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace devmesh {
namespace mesh_internal {

// Largest table FromStrides materialises for non-separable strides.
inline constexpr int64_t kMaxMaterialize = int64_t{1} << 24;

struct RootMap {
  enum class Kind { kIdentity, kAffine, kTable };
  Kind kind = Kind::kIdentity;
  std::vector<int64_t> shape;
  std::vector<int64_t> pos_strides;  // row-major strides of `shape`
  int64_t numel = 1;
  std::vector<std::string> names;  // empty: unnamed

  // kAffine
  std::vector<int64_t> rank_strides;
  int64_t rank_offset = 0;
  std::vector<int> order;  // dims of size > 1, rank stride descending

  // kTable
  std::vector<int64_t> table;
  std::vector<int64_t> dense_index;  // rank -> position, -1 if absent
  absl::flat_hash_map<int64_t, int64_t> sparse_index;  // when not dense

  // Requires 0 <= p < numel.
  int64_t RankOfPosition(int64_t p) const;
  // -1 when `rank` is not in the root.
  int64_t PositionOfRank(int64_t rank) const;
  // Same shape, names and rank map (kind and data).
  bool SameAs(const RootMap& other) const;
};

using RootPtr = std::shared_ptr<const RootMap>;

// Checks dims positive, 1..kMaxDims of them, product <= kMaxNumel.
// InvalidArgument naming the shape.
absl::Status CheckShape(absl::Span<const int64_t> shape);
// Checks names: empty (unnamed) or one non-empty unique name per dim.
absl::Status CheckNames(absl::Span<const std::string> names, size_t ndim);

absl::StatusOr<RootPtr> MakeIdentityRoot(absl::Span<const int64_t> shape,
                                         std::vector<std::string> names);
// `allow_table`: whether non-separable strides may be materialised as a
// table (false when reading bytes, which only ever hold separable strides).
absl::StatusOr<RootPtr> MakeAffineRoot(absl::Span<const int64_t> sizes,
                                       absl::Span<const int64_t> strides,
                                       int64_t offset,
                                       std::vector<std::string> names,
                                       bool allow_table = true);
// Checks the shape, ranks.size() == numel, ranks non-negative and unique;
// errors name the offending rank and its coordinate.
absl::StatusOr<RootPtr> MakeTableRoot(std::vector<int64_t> ranks,
                                      absl::Span<const int64_t> shape,
                                      std::vector<std::string> names);

}  // namespace mesh_internal
}  // namespace devmesh

#endif  // DEVMESH_MESH_ROOT_MAP_H_
