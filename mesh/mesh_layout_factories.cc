// devmesh/mesh/mesh_layout_factories.cc: the factories of MeshLayout
// (FromShape, FromStrides, FromRanks, FromRankTable with R1 validation).
#include "absl/strings/str_cat.h"
#include "mesh/mesh_layout.h"
#include "status/status_macros.h"

namespace devmesh {

using mesh_internal::kMaxDims;
using mesh_internal::Mode;
using mesh_internal::Modes;
using mesh_internal::RootPtr;

namespace {

std::string PathText(absl::Span<const int64_t> path) {
  std::string out = "mesh";
  for (int64_t i : path) absl::StrAppend(&out, "[", i, "]");
  return out;
}

// Checks that `node` (at `path`) has the shape shape[depth..] and appends its
// ranks row-major. Recursion depth is at most shape.size() <= kMaxDims.
absl::Status CollectRanks(const ::devmesh::RankTable& node,
                          absl::Span<const int64_t> shape, size_t depth,
                          std::vector<int64_t>* path,
                          std::vector<int64_t>* ranks) {
  if (depth == shape.size()) {
    if (!node.is_scalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank table is not rectangular: ", PathText(*path),
          " is a list but ", PathText(std::vector<int64_t>(depth, 0)),
          " is a rank"));
    }
    ranks->push_back(node.rank());
    return absl::OkStatus();
  }
  if (node.is_scalar()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank table is not rectangular: ", PathText(*path), " is the rank ",
        node.rank(), " but ", PathText(std::vector<int64_t>(depth, 0)),
        " is a list"));
  }
  const int64_t n = static_cast<int64_t>(node.items().size());
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank table has an empty list at ", PathText(*path),
        ": dimension sizes must be positive"));
  }
  if (n != shape[depth]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank table is not rectangular: ", PathText(*path), " has ", n,
        " items but ", PathText(std::vector<int64_t>(depth, 0)), " has ",
        shape[depth]));
  }
  for (int64_t i = 0; i < n; ++i) {
    path->push_back(i);
    absl::Status s =
        CollectRanks(node.items()[i], shape, depth + 1, path, ranks);
    path->pop_back();
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

MeshLayout::Dim MeshLayout::MakeDim(Modes modes,
                                    absl::InlinedVector<int, 2> root_dims) {
  Dim dim;
  dim.modes = mesh_internal::Canonicalize(modes);
  dim.size = mesh_internal::ModesSize(dim.modes);
  dim.root_dims = std::move(root_dims);
  return dim;
}

MeshLayout MeshLayout::OfRoot(RootPtr root) {
  absl::InlinedVector<Dim, 4> dims;
  for (size_t d = 0; d < root->shape.size(); ++d) {
    dims.push_back(MakeDim(Modes{Mode{root->shape[d], root->pos_strides[d]}},
                           {static_cast<int>(d)}));
  }
  std::vector<std::string> names = root->names;
  return MeshLayout(std::move(root), 0, std::move(dims), std::move(names));
}

absl::StatusOr<MeshLayout> MeshLayout::FromShape(
    absl::Span<const int64_t> shape, std::vector<std::string> names) {
  DEVMESH_ASSIGN_OR_RETURN(
      RootPtr root, mesh_internal::MakeIdentityRoot(shape, std::move(names)));
  return OfRoot(std::move(root));
}

absl::StatusOr<MeshLayout> MeshLayout::FromStrides(
    absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides,
    int64_t offset, std::vector<std::string> names) {
  DEVMESH_ASSIGN_OR_RETURN(
      RootPtr root,
      mesh_internal::MakeAffineRoot(sizes, strides, offset, std::move(names)));
  return OfRoot(std::move(root));
}

absl::StatusOr<MeshLayout> MeshLayout::FromRanks(
    absl::Span<const int64_t> flat_ranks, absl::Span<const int64_t> shape,
    std::vector<std::string> names) {
  DEVMESH_ASSIGN_OR_RETURN(
      RootPtr root,
      mesh_internal::MakeTableRoot(
          std::vector<int64_t>(flat_ranks.begin(), flat_ranks.end()), shape,
          std::move(names)));
  return OfRoot(std::move(root));
}

absl::StatusOr<MeshLayout> MeshLayout::FromRankTable(
    const ::devmesh::RankTable& table, std::vector<std::string> names) {
  // The seed reads a single int as a 1-d mesh of one rank.
  if (table.is_scalar()) {
    return FromRanks({table.rank()}, {1}, std::move(names));
  }
  // The shape is read along the first items; CollectRanks checks the rest.
  std::vector<int64_t> shape;
  std::vector<int64_t> path;
  const ::devmesh::RankTable* node = &table;
  while (!node->is_scalar()) {
    if (node->items().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank table has an empty list at ", PathText(path),
          ": dimension sizes must be positive"));
    }
    if (shape.size() == static_cast<size_t>(kMaxDims)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank table is nested more than ", kMaxDims, " deep"));
    }
    shape.push_back(static_cast<int64_t>(node->items().size()));
    path.push_back(0);
    node = &node->items()[0];
  }
  path.clear();
  std::vector<int64_t> ranks;
  DEVMESH_RETURN_IF_ERROR(CollectRanks(table, shape, 0, &path, &ranks));
  return FromRanks(ranks, shape, std::move(names));
}

}  // namespace devmesh
