// devmesh/device_mesh/host_layout.cc
#include "device_mesh/host_layout.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device_mesh/mesh_runtime.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

std::string DimName(const MeshLayout& layout, int d) {
  return layout.is_named() ? layout.dim_names()[d] : absl::StrCat("dim_", d);
}

}  // namespace

std::string DimHostSpan::ToString() const {
  if (inside_host) return "inside one host";
  return absl::StrCat("line ", absl::StrJoin(line, ","), " crosses hosts '",
                      host_a, "' (rank ", rank_a, ") and '", host_b,
                      "' (rank ", rank_b, ")");
}

absl::StatusOr<std::vector<DimHostSpan>> DimHostSpans(
    const MeshLayout& layout, absl::Span<const std::string> host_of_rank) {
  const std::vector<int64_t> ranks = layout.RankTable();
  for (int64_t r : ranks) {
    if (r >= static_cast<int64_t>(host_of_rank.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " of the mesh has no host (hosts are known "
                       "for ", host_of_rank.size(), " ranks)"));
    }
    if (host_of_rank[r].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " has an empty host name"));
    }
  }
  std::vector<DimHostSpan> spans(layout.ndim());
  for (int d = 0; d < layout.ndim(); ++d) {
    DimHostSpan& span = spans[d];
    span.dim = DimName(layout, d);
    // color -> the first rank seen on that line (ranks are visited in mesh
    // order, so that is the line's first member).
    absl::flat_hash_map<int64_t, int64_t> first_of_line;
    for (int64_t r : ranks) {
      DEVMESH_ASSIGN_OR_RETURN(auto ck, layout.SplitColorKey(r, d));
      auto [it, inserted] = first_of_line.emplace(ck.color, r);
      if (inserted || host_of_rank[it->second] == host_of_rank[r]) continue;
      span.inside_host = false;
      span.rank_a = it->second;
      span.rank_b = r;
      span.host_a = host_of_rank[it->second];
      span.host_b = host_of_rank[r];
      DEVMESH_ASSIGN_OR_RETURN(span.line, layout.GroupOf(r, d));
      break;
    }
  }
  return spans;
}

absl::StatusOr<std::vector<DimHostSpan>> DimHostSpans(const DeviceMesh& mesh) {
  const std::shared_ptr<MeshRuntime>& runtime = mesh.runtime();
  if (runtime == nullptr || runtime->hostnames().empty()) {
    return absl::FailedPreconditionError(
        "the hosts of the ranks are unknown: this mesh's runtime was not made "
        "from a Bootstrap (InitDeviceMesh / MeshRuntimeFromBootstrap learn "
        "them at the rendezvous)");
  }
  return DimHostSpans(mesh.layout(), runtime->hostnames());
}

absl::Status CheckDimsInsideHost(const MeshLayout& layout,
                                 absl::Span<const std::string> host_of_rank,
                                 absl::Span<const std::string> dims) {
  std::vector<int> indices;
  for (const std::string& name : dims) {
    auto index = layout.DimIndex(name);
    if (!index.ok()) {
      return absl::NotFoundError(absl::StrCat(
          "MeshOptions.require_inside_host names '", name,
          "', which is not a dim of the mesh (dims: [",
          absl::StrJoin(layout.dim_names(), ", "), "])"));
    }
    indices.push_back(*index);
  }
  if (indices.empty()) return absl::OkStatus();
  DEVMESH_ASSIGN_OR_RETURN(auto spans, DimHostSpans(layout, host_of_rank));
  for (int d : indices) {
    const DimHostSpan& span = spans[d];
    if (span.inside_host) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "dim '", span.dim,
        "' must stay inside one host (MeshOptions.require_inside_host) but "
        "its ",
        span.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace devmesh
