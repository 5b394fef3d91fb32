// devmesh/device_mesh/device_mesh_from_groups.cc: DeviceMesh::FromGroups
// (R17), with the rank table given or inferred from the groups.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/groups_mesh.h"
#include "device_mesh/root_state.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

absl::StatusOr<DeviceMesh> DeviceMesh::FromGroups(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    std::vector<std::shared_ptr<Communicator>> groups,
    std::optional<RankTable> mesh, std::vector<std::string> names) {
  if (groups.empty()) {
    return absl::InvalidArgumentError("FromGroups needs at least one group");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("group ", i, " is null"));
    }
  }
  if (!names.empty() && names.size() != groups.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mesh_dim_names has ", names.size(), " names for ", groups.size(),
        " groups: give one name per group"));
  }
  const std::vector<int>& first_ranks = groups[0]->global_ranks();
  std::vector<int64_t> ranks(first_ranks.begin(), first_ranks.end());
  absl::StatusOr<MeshLayout> layout = absl::UnknownError("unset");
  if (groups.size() == 1) {
    layout = MeshLayout::FromRanks(ranks, {static_cast<int64_t>(ranks.size())},
                                   names);
    if (layout.ok() && mesh.has_value()) {
      DEVMESH_ASSIGN_OR_RETURN(auto given, MeshLayout::FromRankTable(*mesh));
      if (given.RankTable() != ranks) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh ", mesh->ToString(),
            " must list the group's ranks in order: [",
            absl::StrJoin(ranks, ", "), "]"));
      }
    }
  } else {
    if (names.empty()) {
      return absl::InvalidArgumentError(
          "mesh_dim_names are required when several groups are given");
    }
    if (mesh.has_value()) {
      layout = MeshLayout::FromRankTable(*mesh, names);
    } else {
      // No table: rebuilt from the groups' members (devmesh's own).
      DEVMESH_ASSIGN_OR_RETURN(
          auto inferred, device_mesh_internal::InferMeshFromGroups(groups));
      layout = MeshLayout::FromRanks(inferred.ranks, inferred.shape, names);
      if (absl::IsInvalidArgument(layout.status())) {
        return absl::InvalidArgumentError(
            absl::StrCat("the groups do not form a mesh: ",
                         layout.status().message()));
      }
    }
  }
  if (!layout.ok()) return layout.status();
  if (layout->ndim() != static_cast<int>(groups.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh ", layout->ToString(device_type), " has ",
                     layout->ndim(), " dims for ", groups.size(), " groups"));
  }
  const int me = groups[0]->global_ranks()[groups[0]->rank()];
  if (runtime == nullptr) runtime = MeshRuntime::Detached(me);
  // Each dim's options name its group's backend, so that GetGroup finds the
  // group under the key it is stored with.
  MeshOptions options;
  for (size_t d = 0; d < groups.size(); ++d) {
    std::string dim_name = layout->is_named() ? layout->dim_names()[d]
                                              : absl::StrCat("dim_", d);
    options.per_dim[dim_name].backend = std::string(groups[d]->backend());
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto made, MakeRoot(runtime, device_type, *layout, std::move(options)));
  for (size_t d = 0; d < groups.size(); ++d) {
    DEVMESH_ASSIGN_OR_RETURN(auto line,
                             made.layout_.GroupOf(me, static_cast<int>(d)));
    const std::vector<int>& g = groups[d]->global_ranks();
    if (std::vector<int64_t>(g.begin(), g.end()) != line) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", d, " holds ranks [", absl::StrJoin(g, ", "),
                       "] but this rank's line along mesh dim ", d, " is [",
                       absl::StrJoin(line, ", "), "]"));
    }
    const int dim = static_cast<int>(d);
    GroupOptions dim_options = made.options_.For(made.dim_group_names()[d]);
    const std::string key = made.GroupKey(made.layout_, dim, dim_options);
    // Not shared yet; held for the analysis.
    sync_internal::MutexLock lock(&made.root_->mu);
    made.root_->groups[key] = groups[d];
  }
  return made;
}

}  // namespace devmesh
