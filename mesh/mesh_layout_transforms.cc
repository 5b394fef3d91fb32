// devmesh/mesh/mesh_layout_transforms.cc: Slice, Flatten, Unflatten,
// Concatenate and Transpose of MeshLayout (R8-R11). All O(ndim).
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/mesh_layout.h"
#include "status/status_macros.h"

namespace devmesh {

using mesh_internal::ComposeCoord;
using mesh_internal::Mode;
using mesh_internal::Modes;

namespace {
std::string NamesText(absl::Span<const std::string> names) {
  return absl::StrCat("(", absl::StrJoin(names, ", "), ")");
}
}  // namespace

absl::StatusOr<MeshLayout> MeshLayout::SliceDims(
    absl::Span<const int> dims,
    absl::Span<const int64_t> through_coordinate) const {
  if (dims.empty()) {
    return absl::InvalidArgumentError(
        "at least one mesh dimension must be selected for a slice");
  }
  absl::InlinedVector<bool, 8> chosen(dims_.size(), false);
  for (int d : dims) {
    DEVMESH_RETURN_IF_ERROR(CheckDim(d));
    if (chosen[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dimension ", d, " appears twice in (",
                       absl::StrJoin(dims, ", "), "): dims must be unique"));
    }
    chosen[d] = true;
  }
  int64_t offset = offset_;
  if (!through_coordinate.empty()) {
    if (through_coordinate.size() != dims_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slice coordinate (", absl::StrJoin(through_coordinate, ", "),
          ") has ", through_coordinate.size(), " entries for a ", ndim(),
          "-d mesh"));
    }
    for (size_t d = 0; d < dims_.size(); ++d) {
      const int64_t c = through_coordinate[d];
      if (c < 0 || c >= dims_[d].size) {
        return absl::OutOfRangeError(absl::StrCat(
            "slice coordinate (", absl::StrJoin(through_coordinate, ", "),
            ") is out of range at dim ", d, ": ", c, " not in [0, ",
            dims_[d].size, ")"));
      }
      if (!chosen[d]) offset += ComposeCoord(dims_[d].modes, c);
    }
  }
  absl::InlinedVector<Dim, 4> out;
  std::vector<std::string> names;
  for (int d : dims) {
    out.push_back(dims_[d]);
    if (!names_.empty()) names.push_back(names_[d]);
  }
  return MeshLayout(root_, offset, std::move(out), std::move(names));
}

absl::StatusOr<MeshLayout> MeshLayout::Slice(
    absl::Span<const std::string> names,
    absl::Span<const int64_t> through_coordinate) const {
  if (names_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot slice the mesh by names ", NamesText(names),
        ": it has no dim names"));
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(
        "at least one mesh dimension name must be selected for a slice");
  }
  absl::InlinedVector<int, 8> dims;
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[i] == names[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh dim name '", names[i], "' appears twice in ",
            NamesText(names), ": slice names must be unique"));
      }
    }
  }
  for (const std::string& name : names) {
    DEVMESH_ASSIGN_OR_RETURN(int d, DimIndex(name));
    dims.push_back(d);
  }
  return SliceDims(dims, through_coordinate);
}

absl::StatusOr<MeshLayout> MeshLayout::SliceThroughRank(
    absl::Span<const std::string> names, int64_t rank) const {
  std::optional<std::vector<int64_t>> coord = CoordinateOf(rank);
  std::vector<int64_t> through =
      coord.has_value() ? *std::move(coord) : std::vector<int64_t>(ndim(), 0);
  return Slice(names, through);
}

absl::StatusOr<MeshLayout> MeshLayout::Flatten(
    std::optional<std::string> name) const {
  if (names_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot flatten a mesh without dimension names (shape (",
        absl::StrJoin(shape(), ", "), "))"));
  }
  std::string flat_name =
      name.has_value() ? *std::move(name) : absl::StrJoin(names_, "_");
  if (flat_name.empty()) {
    return absl::InvalidArgumentError(
        "flattened mesh dimension name must be non-empty");
  }
  if (dims_.size() == 1 && flat_name == names_[0]) return *this;
  Modes modes;
  absl::InlinedVector<int, 2> root_dims;
  for (const Dim& d : dims_) {
    modes.insert(modes.end(), d.modes.begin(), d.modes.end());
    root_dims.insert(root_dims.end(), d.root_dims.begin(), d.root_dims.end());
  }
  absl::InlinedVector<Dim, 4> out;
  out.push_back(MakeDim(std::move(modes), std::move(root_dims)));
  return MeshLayout(root_, offset_, std::move(out), {std::move(flat_name)});
}

absl::StatusOr<MeshLayout> MeshLayout::Unflatten(
    int dim, absl::Span<const int64_t> sizes,
    std::vector<std::string> names) const {
  DEVMESH_RETURN_IF_ERROR(CheckDim(dim));
  const std::string sizes_text =
      absl::StrCat("(", absl::StrJoin(sizes, ", "), ")");
  if (sizes.empty() || sizes.size() > static_cast<size_t>(mesh_internal::kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unflatten sizes ", sizes_text, " must have 1 to ",
        mesh_internal::kMaxDims, " entries"));
  }
  int64_t product = 1;
  for (int64_t s : sizes) {
    if (s <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unflatten sizes ", sizes_text, " contain ", s,
          ": sizes must be positive"));
    }
    if (!mesh_internal::CheckedMul(product, s, &product)) product = -1;
    if (product < 0) break;
  }
  if (product != dims_[dim].size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unflatten sizes ", sizes_text, " do not multiply to the size ",
        dims_[dim].size, " of dim ", dim));
  }
  if (names_.empty() && !names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unflatten names ", NamesText(names),
        " given for an unnamed mesh: give none"));
  }
  if (!names_.empty() && names.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unflatten names ", NamesText(names), " must give one name per size ",
        sizes_text));
  }
  std::vector<std::string> out_names;
  if (!names_.empty()) {
    out_names.insert(out_names.end(), names_.begin(), names_.begin() + dim);
    out_names.insert(out_names.end(), names.begin(), names.end());
    out_names.insert(out_names.end(), names_.begin() + dim + 1, names_.end());
  }
  DEVMESH_RETURN_IF_ERROR(
      mesh_internal::CheckNames(out_names, out_names.size()));
  DEVMESH_ASSIGN_OR_RETURN(std::vector<Modes> pieces,
                           mesh_internal::SplitModes(dims_[dim].modes, sizes));
  absl::InlinedVector<Dim, 4> out(dims_.begin(), dims_.begin() + dim);
  for (Modes& piece : pieces) {
    // R10: the original root dims whose digit range the piece touches.
    absl::InlinedVector<int, 2> touched;
    for (int r : dims_[dim].root_dims) {
      const int64_t lo = root_->pos_strides[r];
      const int64_t hi = lo * root_->shape[r];
      for (const Mode& m : piece) {
        if (m.stride < hi && m.stride * m.size > lo) {
          touched.push_back(r);
          break;
        }
      }
    }
    out.push_back(MakeDim(std::move(piece), std::move(touched)));
  }
  out.insert(out.end(), dims_.begin() + dim + 1, dims_.end());
  return MeshLayout(root_, offset_, std::move(out), std::move(out_names));
}

absl::StatusOr<MeshLayout> MeshLayout::Concatenate(
    absl::Span<const MeshLayout> parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError(
        "at least one mesh is required to concatenate");
  }
  const MeshLayout& first = parts[0];
  absl::InlinedVector<Dim, 4> dims;
  std::vector<std::string> names;
  absl::flat_hash_set<int> used;
  Modes all;
  for (size_t i = 0; i < parts.size(); ++i) {
    const MeshLayout& part = parts[i];
    if (!part.SameRoot(first)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot concatenate meshes derived from different roots: part ", i,
          " ", part.LayoutString(), " vs part 0 ", first.LayoutString()));
    }
    if (part.names_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot concatenate part ", i, " ", part.LayoutString(),
          ": all meshes must have dim names"));
    }
    for (int d = 0; d < part.ndim(); ++d) {
      for (int r : part.dims_[d].root_dims) {
        if (!used.insert(r).second) {
          return absl::InvalidArgumentError(absl::StrCat(
              "cannot concatenate overlapping meshes: root dim ", r,
              " (of dim '", part.names_[d], "' in part ", i,
              ") is used twice"));
        }
      }
      all.insert(all.end(), part.dims_[d].modes.begin(),
                 part.dims_[d].modes.end());
      dims.push_back(part.dims_[d]);
      names.push_back(part.names_[d]);
    }
  }
  if (dims.size() > static_cast<size_t>(mesh_internal::kMaxDims)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "concatenation has ", dims.size(), " dims; at most ",
        mesh_internal::kMaxDims, " are supported"));
  }
  DEVMESH_RETURN_IF_ERROR(mesh_internal::CheckNames(names, names.size()));
  // Through the first part's offset: clear its digits in every mode.
  int64_t offset = first.offset_;
  for (const Mode& m : all) offset -= ((offset / m.stride) % m.size) * m.stride;
  if (absl::Status s =
          mesh_internal::CheckModesInRoot(all, offset, first.root_->numel);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot concatenate overlapping meshes: ", s.message()));
  }
  return MeshLayout(first.root_, offset, std::move(dims), std::move(names));
}

absl::StatusOr<MeshLayout> MeshLayout::Transpose(
    absl::Span<const int> perm) const {
  absl::InlinedVector<bool, 8> seen(dims_.size(), false);
  bool ok = perm.size() == dims_.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < ndim() && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transpose permutation (", absl::StrJoin(perm, ", "),
        ") is not a permutation of 0..", ndim() - 1));
  }
  absl::InlinedVector<Dim, 4> out;
  std::vector<std::string> names;
  for (int d : perm) {
    out.push_back(dims_[d]);
    if (!names_.empty()) names.push_back(names_[d]);
  }
  return MeshLayout(root_, offset_, std::move(out), std::move(names));
}

}  // namespace devmesh
