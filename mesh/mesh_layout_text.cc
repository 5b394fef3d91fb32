// devmesh/mesh/mesh_layout_text.cc: R14 text, LayoutString and equality (R15)
// of MeshLayout.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

using mesh_internal::Mode;
using mesh_internal::Modes;
using mesh_internal::RootMap;

std::string MeshLayout::ToString(absl::string_view device_type) const {
  std::string dims;
  if (!names_.empty()) {
    for (size_t d = 0; d < dims_.size(); ++d) {
      if (d > 0) dims += ", ";
      absl::StrAppend(&dims, names_[d], "=", dims_[d].size);
    }
  } else {
    // Python's str(tuple): "(8,)" for one element, "(2, 4)" otherwise.
    dims = absl::StrCat("(", absl::StrJoin(shape(), ", "),
                        dims_.size() == 1 ? ",)" : ")");
  }
  return absl::StrCat("DeviceMesh(", dims, ", '", device_type, "')");
}

namespace {
// One dim's sizes or strides: "4", "(2,2)", or "1"/"0" for a size-1 dim.
std::string DimText(const Modes& modes, bool strides) {
  auto value = [strides](const Mode& m) {
    return strides ? m.stride : m.size;
  };
  if (modes.empty()) return strides ? "0" : "1";
  if (modes.size() == 1) return absl::StrCat(value(modes[0]));
  std::string out = "(";
  for (size_t i = 0; i < modes.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? "," : "", value(modes[i]));
  }
  return out + ")";
}
}  // namespace

std::string MeshLayout::LayoutString() const {
  std::string out;
  if (!names_.empty()) absl::StrAppend(&out, "[", absl::StrJoin(names_, ","), "]");
  std::string sizes, strides;
  for (size_t d = 0; d < dims_.size(); ++d) {
    const char* sep = d > 0 ? "," : "";
    absl::StrAppend(&sizes, sep, DimText(dims_[d].modes, false));
    absl::StrAppend(&strides, sep, DimText(dims_[d].modes, true));
  }
  absl::StrAppend(&out, "(", sizes, "):(", strides, ")+", offset_);
  if (root_->kind == RootMap::Kind::kTable) {
    out += " @table";
  } else if (root_->kind == RootMap::Kind::kAffine) {
    absl::StrAppend(&out, " @(", absl::StrJoin(root_->shape, ","), "):(",
                    absl::StrJoin(root_->rank_strides, ","), ")+",
                    root_->rank_offset);
  }
  return out;
}

bool MeshLayout::RankSpaceForm(int64_t* offset,
                               std::vector<Modes>* dims) const {
  if (root_->kind == RootMap::Kind::kTable) return false;
  dims->clear();
  *offset = root_->RankOfPosition(offset_);
  for (const Dim& dim : dims_) {
    if (root_->kind == RootMap::Kind::kIdentity) {
      dims->push_back(dim.modes);
      continue;
    }
    // Split each mode at the root dims' digit ranges, outer root dims first.
    Modes ranked;
    for (const Mode& m : dim.modes) {
      for (size_t r = 0; r < root_->shape.size(); ++r) {
        const int64_t ps = root_->pos_strides[r];
        const int64_t top = ps * root_->shape[r];
        const int64_t lo = std::max(m.stride, ps);
        const int64_t hi = std::min(m.stride * m.size, top);
        if (lo >= hi) continue;
        if (lo % ps != 0 || hi % lo != 0 || top % hi != 0 ||
            (m.stride * m.size) % hi != 0) {
          return false;  // the mode mixes root coordinates: not strided
        }
        ranked.push_back(Mode{hi / lo, (lo / ps) * root_->rank_strides[r]});
      }
    }
    dims->push_back(mesh_internal::Canonicalize(ranked));
  }
  return true;
}

bool operator==(const MeshLayout& a, const MeshLayout& b) {
  if (&a == &b) return true;
  if (a.names_ != b.names_ || a.dims_.size() != b.dims_.size()) return false;
  for (size_t d = 0; d < a.dims_.size(); ++d) {
    if (a.dims_[d].size != b.dims_[d].size) return false;
  }
  const bool identity = a.root_->kind == RootMap::Kind::kIdentity &&
                        b.root_->kind == RootMap::Kind::kIdentity;
  if (identity || a.SameRoot(b)) {
    // Positions determine ranks injectively; canonical modes are unique.
    if (a.offset_ != b.offset_) return false;
    for (size_t d = 0; d < a.dims_.size(); ++d) {
      if (a.dims_[d].modes != b.dims_[d].modes) return false;
    }
    return true;
  }
  int64_t oa = 0, ob = 0;
  std::vector<Modes> ma, mb;
  if (a.RankSpaceForm(&oa, &ma) && b.RankSpaceForm(&ob, &mb)) {
    return oa == ob && ma == mb;
  }
  return a.RankTable() == b.RankTable();
}

}  // namespace devmesh
