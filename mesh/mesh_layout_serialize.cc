// devmesh/mesh/mesh_layout_serialize.cc: Serialize / Deserialize (R16).
//
// Format (all numbers non-negative varints; strings = varint length + bytes):
//   "DMLY" version(=1 byte)
//   root:   kind(0 identity, 1 affine, 2 table) ndim size*ndim names
//           affine: stride*ndim offset      table: count rank*count
//   layout: offset ndim { nmodes (size stride)*nmodes nroot rootdim*nroot }*
//           names
//   names:  count string*count          (count 0: unnamed)
// Deserialize rebuilds the root through the validating factories and checks
// the layout against it (canonical disjoint modes, offset, root dims, names).
#include "absl/strings/str_cat.h"
#include "mesh/byte_codec.h"
#include "mesh/mesh_layout.h"

namespace devmesh {

using mesh_internal::ByteReader;
using mesh_internal::ByteWriter;
using mesh_internal::kMaxDims;
using mesh_internal::Mode;
using mesh_internal::Modes;
using mesh_internal::RootMap;
using mesh_internal::RootPtr;

namespace {
constexpr absl::string_view kMagic = "DMLY";
constexpr char kVersion = 1;

void WriteNames(ByteWriter& w, const std::vector<std::string>& names) {
  w.Varint(static_cast<int64_t>(names.size()));
  for (const std::string& n : names) w.String(n);
}

bool ReadNames(ByteReader& r, std::vector<std::string>* names) {
  int64_t n = 0;
  if (!r.Count(kMaxDims, &n)) return false;
  names->resize(n);
  for (std::string& s : *names) {
    if (!r.String(&s)) return false;
  }
  return true;
}

bool ReadInts(ByteReader& r, int64_t n, std::vector<int64_t>* out) {
  out->resize(n);
  for (int64_t& v : *out) {
    if (!r.Varint(&v)) return false;
  }
  return true;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("serialized mesh layout is corrupt or truncated: ", what));
}
}  // namespace

std::string MeshLayout::Serialize() const {
  ByteWriter w;
  w.Raw(kMagic);
  w.Raw(absl::string_view(&kVersion, 1));
  const RootMap& root = *root_;
  w.Varint(static_cast<int64_t>(root.kind));
  w.Varint(static_cast<int64_t>(root.shape.size()));
  for (int64_t s : root.shape) w.Varint(s);
  WriteNames(w, root.names);
  if (root.kind == RootMap::Kind::kAffine) {
    for (int64_t s : root.rank_strides) w.Varint(s);
    w.Varint(root.rank_offset);
  } else if (root.kind == RootMap::Kind::kTable) {
    w.Varint(static_cast<int64_t>(root.table.size()));
    for (int64_t r : root.table) w.Varint(r);
  }
  w.Varint(offset_);
  w.Varint(ndim());
  for (const Dim& d : dims_) {
    w.Varint(static_cast<int64_t>(d.modes.size()));
    for (const Mode& m : d.modes) {
      w.Varint(m.size);
      w.Varint(m.stride);
    }
    w.Varint(static_cast<int64_t>(d.root_dims.size()));
    for (int r : d.root_dims) w.Varint(r);
  }
  WriteNames(w, names_);
  return w.Take();
}

absl::StatusOr<MeshLayout> MeshLayout::Deserialize(absl::string_view bytes) {
  ByteReader r(bytes);
  absl::string_view magic, version;
  if (!r.Raw(kMagic.size(), &magic) || magic != kMagic) {
    return Corrupt("missing magic \"DMLY\"");
  }
  if (!r.Raw(1, &version) || version[0] != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "serialized mesh layout has version ",
        version.empty() ? -1 : static_cast<int>(version[0]),
        "; this build reads version ", static_cast<int>(kVersion)));
  }
  int64_t kind = 0, root_ndim = 0;
  std::vector<int64_t> root_shape;
  std::vector<std::string> root_names;
  if (!r.Varint(&kind) || kind > 2 || !r.Count(kMaxDims, &root_ndim) ||
      !ReadInts(r, root_ndim, &root_shape) || !ReadNames(r, &root_names)) {
    return Corrupt("bad root header");
  }
  absl::StatusOr<RootPtr> root;
  if (kind == static_cast<int64_t>(RootMap::Kind::kIdentity)) {
    root = mesh_internal::MakeIdentityRoot(root_shape, std::move(root_names));
  } else if (kind == static_cast<int64_t>(RootMap::Kind::kAffine)) {
    std::vector<int64_t> strides;
    int64_t offset = 0;
    if (!ReadInts(r, root_ndim, &strides) || !r.Varint(&offset)) {
      return Corrupt("bad strided root");
    }
    root = mesh_internal::MakeAffineRoot(root_shape, strides, offset,
                                         std::move(root_names),
                                         /*allow_table=*/false);
  } else {
    int64_t count = 0;
    std::vector<int64_t> ranks;
    if (!r.Count(INT64_MAX, &count) || !ReadInts(r, count, &ranks)) {
      return Corrupt("bad rank table");
    }
    root = mesh_internal::MakeTableRoot(std::move(ranks), root_shape,
                                        std::move(root_names));
  }
  if (!root.ok()) return Corrupt(root.status().message());

  int64_t offset = 0, ndim = 0;
  if (!r.Varint(&offset) || !r.Count(kMaxDims, &ndim) || ndim == 0) {
    return Corrupt("bad layout header");
  }
  absl::InlinedVector<Dim, 4> dims(ndim);
  for (Dim& d : dims) {
    int64_t nmodes = 0, nroot = 0;
    if (!r.Count(64, &nmodes)) return Corrupt("bad mode count");
    for (int64_t i = 0; i < nmodes; ++i) {
      Mode m;
      if (!r.Varint(&m.size) || !r.Varint(&m.stride)) return Corrupt("bad mode");
      d.modes.push_back(m);
    }
    if (!r.Count(kMaxDims, &nroot)) return Corrupt("bad root dim count");
    for (int64_t i = 0; i < nroot; ++i) {
      int64_t rd = 0;
      if (!r.Varint(&rd) || rd >= root_ndim) return Corrupt("bad root dim");
      d.root_dims.push_back(static_cast<int>(rd));
    }
  }
  std::vector<std::string> names;
  if (!ReadNames(r, &names)) return Corrupt("bad dim names");
  if (r.remaining() != 0) return Corrupt("trailing bytes");
  MeshLayout layout(*std::move(root), offset, std::move(dims), std::move(names));
  if (absl::Status s = layout.Validate(); !s.ok()) return Corrupt(s.message());
  return layout;
}

absl::Status MeshLayout::Validate() {
  Modes all;
  for (const Dim& d : dims_) all.insert(all.end(), d.modes.begin(), d.modes.end());
  // First: every mode is a disjoint sub-mode of the root (bounds all sizes
  // and strides by numel, so the products below cannot overflow).
  if (absl::Status s =
          mesh_internal::CheckModesInRoot(all, offset_, root_->numel);
      !s.ok()) {
    return s;
  }
  for (Dim& d : dims_) {
    if (mesh_internal::Canonicalize(d.modes) != d.modes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "modes ", mesh_internal::ModesString(d.modes), " are not canonical"));
    }
    d.size = mesh_internal::ModesSize(d.modes);
  }
  return mesh_internal::CheckNames(names_, dims_.size());
}

}  // namespace devmesh
