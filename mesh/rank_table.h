// devmesh/mesh/rank_table.h
// -----------------------------------------------------------------------------
// RankTable: a nested list of global ranks, the C++ form of the `mesh`
// argument of the reference Python DeviceMesh (R1 in docs/BEHAVIOURS.md):
// either one int (a scalar, which the reference reads as a 1-d mesh of one
// rank) or a list of RankTables.
//
//   RankTable t = {{0, 1, 2, 3}, {4, 5, 6, 7}};   // a 2 x 4 table
//   RankTable s = 5;                              // scalar
//   RankTable one = {5};                          // a list holding one rank
//
// It holds values only; validation (rectangular, positive dims, unique
// non-negative ranks, at most 64 levels deep) happens in
// MeshLayout::FromRankTable. ToString and the destructor recurse as deep as
// the nesting. Note that brace-initialisation always builds a list:
// RankTable{t} is the list [t], not a copy of t. A plain value type:
// copyable, movable, thread-compatible.
#ifndef DEVMESH_MESH_RANK_TABLE_H_
#define DEVMESH_MESH_RANK_TABLE_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace devmesh {

class RankTable {
 public:
  // A scalar rank.
  RankTable(int64_t rank) : is_scalar_(true), rank_(rank) {}  // NOLINT
  RankTable(int rank) : RankTable(static_cast<int64_t>(rank)) {}  // NOLINT
  // A list (possibly empty, which validation rejects as a 0-size dim).
  RankTable(std::initializer_list<RankTable> items)
      : is_scalar_(false), items_(items) {}
  explicit RankTable(std::vector<RankTable> items)
      : is_scalar_(false), items_(std::move(items)) {}
  // A flat list of ranks.
  static RankTable List(const std::vector<int64_t>& ranks);

  bool is_scalar() const { return is_scalar_; }
  // The rank of a scalar; 0 for a list.
  int64_t rank() const { return rank_; }
  // The items of a list; empty for a scalar.
  const std::vector<RankTable>& items() const { return items_; }

  // Python-like text: "5", "[0, 1]", "[[0, 1], [2, 3]]".
  std::string ToString() const;

  friend bool operator==(const RankTable& a, const RankTable& b) {
    return a.is_scalar_ == b.is_scalar_ && a.rank_ == b.rank_ &&
           a.items_ == b.items_;
  }
  friend bool operator!=(const RankTable& a, const RankTable& b) {
    return !(a == b);
  }

 private:
  bool is_scalar_;
  int64_t rank_ = 0;
  std::vector<RankTable> items_;
};

}  // namespace devmesh

#endif  // DEVMESH_MESH_RANK_TABLE_H_
