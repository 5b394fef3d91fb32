// devmesh/mesh/mesh_layout.cc: queries of MeshLayout (factories are in
// mesh_layout_factories.cc, transforms in mesh_layout_transforms.cc).
#include "mesh/mesh_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "status/status_macros.h"

namespace devmesh {

using mesh_internal::ComposeCoord;
using mesh_internal::DecomposePosition;
using mesh_internal::Mode;
using mesh_internal::Modes;
using mesh_internal::RootMap;

// ---- Queries ------------------------------------------------------------------

std::vector<int64_t> MeshLayout::shape() const {
  std::vector<int64_t> out;
  out.reserve(dims_.size());
  for (const Dim& d : dims_) out.push_back(d.size);
  return out;
}

int64_t MeshLayout::numel() const {
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.size;
  return n;
}

absl::Status MeshLayout::CheckDim(int dim) const {
  if (dim < 0 || dim >= ndim()) {
    return absl::OutOfRangeError(absl::StrCat(
        "mesh dimension ", dim, " is out of range for a ", ndim(),
        "-d mesh (valid: 0..", ndim() - 1, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> MeshLayout::size(int dim) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  return dims_[dim].size;
}

absl::StatusOr<int64_t> MeshLayout::size(absl::string_view name) const {
  DEVMESH_ASSIGN_OR_RETURN(int dim, DimIndex(name));
  return dims_[dim].size;
}

absl::StatusOr<int> MeshLayout::DimIndex(absl::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  if (names_.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "mesh dim name '", name, "' not found: the mesh has no dim names"));
  }
  return absl::NotFoundError(
      absl::StrCat("mesh dim name '", name, "' not found in (",
                   absl::StrJoin(names_, ", "), ")"));
}

int64_t MeshLayout::PositionAt(absl::Span<const int64_t> coord) const {
  int64_t p = offset_;
  for (size_t d = 0; d < dims_.size(); ++d) {
    p += ComposeCoord(dims_[d].modes, coord[d]);
  }
  return p;
}

bool MeshLayout::CoordOfPosition(int64_t p,
                                 std::vector<int64_t>* coord) const {
  coord->resize(dims_.size());
  int64_t base = p;
  for (size_t d = 0; d < dims_.size(); ++d) {
    int64_t contrib = 0;
    (*coord)[d] = DecomposePosition(dims_[d].modes, p, &contrib);
    base -= contrib;
  }
  return base == offset_;
}

bool MeshLayout::InLayout(int64_t p) const {
  if (p < 0) return false;
  int64_t base = p;
  for (const Dim& dim : dims_) {
    for (const Mode& m : dim.modes) base -= ((p / m.stride) % m.size) * m.stride;
  }
  return base == offset_;
}

absl::StatusOr<int64_t> MeshLayout::RankAt(
    absl::Span<const int64_t> coord) const {
  if (coord.size() != dims_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinate (", absl::StrJoin(coord, ", "), ") has ", coord.size(),
        " entries for a ", ndim(), "-d mesh"));
  }
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (coord[d] < 0 || coord[d] >= dims_[d].size) {
      return absl::OutOfRangeError(absl::StrCat(
          "coordinate (", absl::StrJoin(coord, ", "), ") is out of range at dim ",
          d, ": ", coord[d], " not in [0, ", dims_[d].size, ")"));
    }
  }
  return root_->RankOfPosition(PositionAt(coord));
}

std::optional<std::vector<int64_t>> MeshLayout::CoordinateOf(
    int64_t rank) const {
  const int64_t p = root_->PositionOfRank(rank);
  if (p < 0) return std::nullopt;
  std::vector<int64_t> coord;
  if (!CoordOfPosition(p, &coord)) return std::nullopt;
  return coord;
}

bool MeshLayout::ContainsRank(int64_t rank) const {
  return InLayout(root_->PositionOfRank(rank));
}

std::vector<int64_t> MeshLayout::LineThrough(int64_t p, int dim) const {
  const Dim& d = dims_[dim];
  int64_t contrib = 0;
  DecomposePosition(d.modes, p, &contrib);
  const int64_t base = p - contrib;
  std::vector<int64_t> ranks(d.size);
  for (int64_t k = 0; k < d.size; ++k) {
    ranks[k] = root_->RankOfPosition(base + ComposeCoord(d.modes, k));
  }
  return ranks;
}

absl::StatusOr<std::vector<int64_t>> MeshLayout::GroupOf(int64_t rank,
                                                         int dim) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  const int64_t p = root_->PositionOfRank(rank);
  if (!InLayout(p)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " is not part of the mesh ", LayoutString()));
  }
  return LineThrough(p, dim);
}

absl::StatusOr<std::vector<int64_t>> MeshLayout::RootLineOf(int64_t rank,
                                                            int dim) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  const int64_t p = root_->PositionOfRank(rank);
  if (p < 0) {
    return absl::NotFoundError(absl::StrCat(
        "rank ", rank, " is not part of the root mesh of ", LayoutString()));
  }
  return LineThrough(p, dim);
}

absl::StatusOr<int64_t> MeshLayout::NumGroups(int dim) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  return numel() / dims_[dim].size;
}

absl::StatusOr<ColorKey> MeshLayout::SplitColorKey(int64_t rank,
                                                   int dim) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  const int64_t p = root_->PositionOfRank(rank);
  if (p < 0) return ColorKey{-1, 0};
  int64_t contrib = 0;
  const int64_t key = DecomposePosition(dims_[dim].modes, p, &contrib);
  return ColorKey{p - contrib, key};
}

std::string MeshLayout::DimModesString(int dim) const {
  if (dim < 0 || dim >= ndim()) return "";
  return mesh_internal::ModesString(dims_[dim].modes);
}

std::vector<int64_t> MeshLayout::RankTable() const {
  // Row-major over the dims = row-major over all modes in order.
  Modes all;
  for (const Dim& d : dims_) all.insert(all.end(), d.modes.begin(), d.modes.end());
  const int64_t n = numel();
  std::vector<int64_t> out(n);
  std::vector<int64_t> digit(all.size(), 0);
  int64_t p = offset_;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = root_->RankOfPosition(p);
    for (size_t m = all.size(); m-- > 0;) {
      p += all[m].stride;
      if (++digit[m] < all[m].size) break;
      p -= all[m].stride * all[m].size;
      digit[m] = 0;
    }
  }
  return out;
}

namespace {
::devmesh::RankTable Nest(absl::Span<const int64_t> flat,
                          absl::Span<const int64_t> shape) {
  if (shape.size() == 1) {
    return ::devmesh::RankTable::List(
        std::vector<int64_t>(flat.begin(), flat.end()));
  }
  const int64_t width = static_cast<int64_t>(flat.size()) / shape[0];
  std::vector<::devmesh::RankTable> items;
  for (int64_t i = 0; i < shape[0]; ++i) {
    items.push_back(Nest(flat.subspan(i * width, width), shape.subspan(1)));
  }
  return ::devmesh::RankTable(std::move(items));
}
}  // namespace

::devmesh::RankTable MeshLayout::NestedRanks() const {
  const std::vector<int64_t> flat = RankTable();
  const std::vector<int64_t> dims = shape();
  return Nest(flat, dims);
}

std::vector<std::vector<int>> MeshLayout::root_dims() const {
  std::vector<std::vector<int>> out;
  for (const Dim& d : dims_) out.emplace_back(d.root_dims.begin(), d.root_dims.end());
  return out;
}

std::vector<std::pair<int64_t, int64_t>> MeshLayout::modes(int dim) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (dim < 0 || dim >= ndim()) return out;
  for (const Mode& m : dims_[dim].modes) out.emplace_back(m.size, m.stride);
  return out;
}

MeshLayout MeshLayout::RootLayout() const { return OfRoot(root_); }

bool MeshLayout::SameRoot(const MeshLayout& other) const {
  return root_ == other.root_ || root_->SameAs(*other.root_);
}

bool MeshLayout::IsRoot() const {
  const MeshLayout root = RootLayout();
  if (offset_ != 0 || names_ != root.names_ || ndim() != root.ndim()) {
    return false;
  }
  for (int d = 0; d < ndim(); ++d) {
    if (dims_[d].modes != root.dims_[d].modes) return false;
  }
  return true;
}

std::vector<int64_t> MeshLayout::HashSample() const {
  std::vector<int64_t> out;
  out.push_back(root_->RankOfPosition(offset_));
  int64_t last = offset_;
  for (const Dim& d : dims_) {
    if (d.size > 1) {
      out.push_back(root_->RankOfPosition(offset_ + ComposeCoord(d.modes, 1)));
    }
    last += ComposeCoord(d.modes, d.size - 1);
  }
  out.push_back(root_->RankOfPosition(last));
  return out;
}

}  // namespace devmesh
