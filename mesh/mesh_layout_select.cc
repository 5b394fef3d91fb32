// devmesh/mesh/mesh_layout_select.cc: MeshLayout::SliceWithExtraDims, the
// slice by names that mixes this layout's dims with flattened dims kept on
// the root (R8 as PyTorch does it), with the overlap check naming both dims.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

using mesh_internal::Mode;
using mesh_internal::Modes;

namespace {

// Two mode lists overlap when some digit range [t, t*s) of one intersects
// one of the other (they would then address a root position twice).
bool Overlap(absl::Span<const Mode> a, absl::Span<const Mode> b) {
  for (const Mode& x : a) {
    for (const Mode& y : b) {
      if (std::max(x.stride, y.stride) <
          std::min(x.stride * x.size, y.stride * y.size)) {
        return true;
      }
    }
  }
  return false;
}

// True when every digit range of `inner` lies inside the union of the digit
// ranges of `outer` (disjoint, as every layout's): then the positions that
// `inner` moves through, from any position of the outer layout, stay in it.
bool Covered(absl::Span<const Mode> inner, absl::Span<const Mode> outer) {
  Modes sorted(outer.begin(), outer.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const Mode& a, const Mode& b) { return a.stride < b.stride; });
  // Merge contiguous digit ranges into [lo, hi).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const Mode& m : sorted) {
    if (!ranges.empty() && ranges.back().second == m.stride) {
      ranges.back().second = m.stride * m.size;
    } else {
      ranges.emplace_back(m.stride, m.stride * m.size);
    }
  }
  for (const Mode& m : inner) {
    const int64_t lo = m.stride;
    const int64_t hi = m.stride * m.size;
    bool inside = false;
    for (const auto& [a, b] : ranges) {
      inside = inside ||
               (a <= lo && hi <= b && lo % a == 0 && b % hi == 0);
    }
    if (!inside) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<MeshLayout> MeshLayout::SliceWithExtraDims(
    absl::Span<const std::string> names, absl::Span<const MeshLayout> extra,
    int64_t through_rank) const {
  if (names.empty()) {
    return absl::InvalidArgumentError(
        "at least one mesh dimension name must be selected for a slice");
  }
  // Resolve each name: a dim of this layout, else an extra dim.
  struct Chosen {
    Dim dim;
    bool own = false;
  };
  std::vector<Chosen> chosen;
  std::vector<std::string> valid = names_;
  for (const MeshLayout& e : extra) {
    if (e.ndim() == 1 && e.is_named()) valid.push_back(e.names_[0]);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[i] == names[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh dim name '", names[i], "' appears twice in (",
            absl::StrJoin(names, ", "), "): slice names must be unique"));
      }
    }
    auto own = std::find(names_.begin(), names_.end(), names[i]);
    if (own != names_.end()) {
      chosen.push_back({dims_[own - names_.begin()], true});
      continue;
    }
    const MeshLayout* found = nullptr;
    for (const MeshLayout& e : extra) {
      if (e.ndim() == 1 && e.is_named() && e.names_[0] == names[i]) found = &e;
    }
    if (found == nullptr) {
      if (names_.empty() && valid.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot slice the mesh by names (", absl::StrJoin(names, ", "),
            "): it has no dim names"));
      }
      return absl::NotFoundError(absl::StrCat(
          "mesh dim name '", names[i], "' not found: valid names are (",
          absl::StrJoin(valid, ", "), ")"));
    }
    if (!found->SameRoot(*this)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flattened mesh dim '", names[i], "' ", found->LayoutString(),
          " is not of the root of ", LayoutString()));
    }
    Modes mine;
    for (const Dim& d : dims_) mine.insert(mine.end(), d.modes.begin(), d.modes.end());
    if (!Covered(found->dims_[0].modes, mine)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flattened mesh dim '", names[i], "' ", found->LayoutString(),
          " reaches ranks outside the mesh ", LayoutString(),
          ": slice it from a mesh that holds all of its dims"));
    }
    chosen.push_back({found->dims_[0], false});
  }
  // No two selected dims may address the same root positions.
  for (size_t i = 0; i < chosen.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (Overlap(chosen[i].dim.modes, chosen[j].dim.modes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mesh dims '", names[j], "' and '", names[i],
            "' overlap (they share a root dim): each root dim may be "
            "selected once"));
      }
    }
  }
  // Through this rank's position (the origin when not a member), with the
  // digits of every selected mode cleared.
  std::optional<std::vector<int64_t>> coord = CoordinateOf(through_rank);
  int64_t offset = coord.has_value() ? PositionAt(*coord) : offset_;
  absl::InlinedVector<Dim, 4> dims;
  std::vector<std::string> out_names(names.begin(), names.end());
  for (const Chosen& c : chosen) {
    for (const Mode& m : c.dim.modes) {
      offset -= ((offset / m.stride) % m.size) * m.stride;
    }
    dims.push_back(c.dim);
  }
  return MeshLayout(root_, offset, std::move(dims), std::move(out_names));
}

}  // namespace devmesh
