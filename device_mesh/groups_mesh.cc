// devmesh/device_mesh/groups_mesh.cc: InferMeshFromGroups (see the header).
#include "device_mesh/groups_mesh.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "status/status_macros.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

// FNV-1a over the ranks: the same in every process (absl::Hash is seeded
// per process, so it cannot be compared across ranks).
int64_t TableHash(const std::vector<int64_t>& table) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t v : table) {
    for (int b = 0; b < 8; ++b) {
      h ^= (static_cast<uint64_t>(v) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return static_cast<int64_t>(h >> 1);
}

}  // namespace

absl::StatusOr<GroupsMesh> InferMeshFromGroups(
    const std::vector<std::shared_ptr<Communicator>>& groups) {
  const size_t n = groups.size();
  const int me = groups[0]->global_ranks()[groups[0]->rank()];
  GroupsMesh out;
  for (size_t d = 0; d < n; ++d) {
    out.shape.push_back(groups[d]->size());
    if (groups[d]->global_ranks()[groups[d]->rank()] != me) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group ", d, " places this process at global rank ",
          groups[d]->global_ranks()[groups[d]->rank()], " but group 0 at ",
          me, ": the groups are not of one process"));
    }
  }
  // 1. The shape, agreed along every group.
  for (size_t d = 0; d < n; ++d) {
    std::vector<int64_t> all(n * groups[d]->size());
    DEVMESH_RETURN_IF_ERROR(groups[d]->AllGather(out.shape.data(), all.data(),
                                                 n, DataType::kInt64));
    for (int r = 0; r < groups[d]->size(); ++r) {
      std::vector<int64_t> theirs(all.begin() + r * n,
                                  all.begin() + (r + 1) * n);
      if (theirs != out.shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the groups do not form a mesh: in group ", d,
            ", global rank ", groups[d]->global_ranks()[r],
            " has groups of sizes (", absl::StrJoin(theirs, ", "),
            ") but global rank ", me, " has (",
            absl::StrJoin(out.shape, ", "), ")"));
      }
    }
  }
  // 2. Stack sub-tables from the last dim outwards.
  const std::vector<int>& last = groups[n - 1]->global_ranks();
  std::vector<int64_t> table(last.begin(), last.end());
  for (size_t d = n - 1; d-- > 0;) {
    std::vector<int64_t> stacked(table.size() * groups[d]->size());
    DEVMESH_RETURN_IF_ERROR(groups[d]->AllGather(
        table.data(), stacked.data(), table.size(), DataType::kInt64));
    table = std::move(stacked);
  }
  // 3. Every rank holds the same table: agreed along every group, and the
  // groups connect the whole mesh.
  const int64_t hash = TableHash(table);
  for (size_t d = 0; d < n; ++d) {
    int64_t lo = hash;
    int64_t hi = hash;
    if (absl::Status s =
            groups[d]->AllReduce(&lo, &lo, 1, DataType::kInt64, ReduceOp::kMin);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            groups[d]->AllReduce(&hi, &hi, 1, DataType::kInt64, ReduceOp::kMax);
        !s.ok()) {
      return s;
    }
    if (lo != hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the groups do not form a mesh: the members of group ", d,
          " (global ranks [", absl::StrJoin(groups[d]->global_ranks(), ", "),
          "]) assemble different rank tables; this rank's is [",
          absl::StrJoin(table, ", "), "]"));
    }
  }
  out.ranks = std::move(table);
  return out;
}

}  // namespace device_mesh_internal
}  // namespace devmesh
