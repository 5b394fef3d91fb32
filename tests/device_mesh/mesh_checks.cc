#include "tests/device_mesh/mesh_checks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace devmesh {
namespace testing {

absl::StatusOr<std::shared_ptr<MeshRuntime>> RuntimeOf(Bootstrap& b) {
  // The bootstrap is owned by the test harness and outlives the body.
  return MeshRuntime::Create(b.store(), b.rank(), b.world_size(),
                             b.local_rank());
}

absl::Status CheckDimGroup(const DeviceMesh& mesh, int dim) {
  const int me = mesh.GetRank();
  auto group = mesh.GetGroup(dim);
  if (!group.ok()) return group.status();
  auto line = mesh.layout().GroupOf(me, dim);
  if (!line.ok()) return line.status();
  const std::vector<int>& got = (*group)->global_ranks();
  const std::string where =
      absl::StrCat(mesh.ToString(), " dim ", dim, " on rank ", me);
  if (std::vector<int64_t>(got.begin(), got.end()) != *line) {
    return absl::InternalError(absl::StrCat(
        where, ": group ranks [", absl::StrJoin(got, ","), "], want [",
        absl::StrJoin(*line, ","), "]"));
  }
  int64_t mine = me, sum = -1, want = 0;
  for (int64_t r : *line) want += r;
  absl::Status s =
      (*group)->AllReduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum);
  if (!s.ok()) return s;
  if (sum != want) {
    return absl::InternalError(
        absl::StrCat(where, ": all-reduce sum ", sum, ", want ", want));
  }
  std::vector<int64_t> gathered(line->size(), -1);
  s = (*group)->AllGather(&mine, gathered.data(), 1, DataType::kInt64);
  if (!s.ok()) return s;
  if (gathered != *line) {
    return absl::InternalError(absl::StrCat(
        where, ": all-gather [", absl::StrJoin(gathered, ","), "], want [",
        absl::StrJoin(*line, ","), "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckAllDims(const DeviceMesh& mesh) {
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (absl::Status s = CheckDimGroup(mesh, d); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace devmesh
