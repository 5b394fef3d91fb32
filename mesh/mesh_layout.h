// devmesh/mesh/mesh_layout.h
// -----------------------------------------------------------------------------
// MeshLayout: the layout math of a DeviceMesh, an n-d array of global ranks.
// R-numbers (R2, R8, ...) name behaviours listed in docs/BEHAVIOURS.md.
//
// Model ("position space"). Every layout is a strided layout over the
// POSITIONS 0..N-1 of its root mesh, numbered ROW-MAJOR over the root shape:
//
//   position(c) = offset + sum over dims d, over d's modes m, of digit_m * t_m
//
// where a dim is one or more modes (size s_m, stride t_m), and its coordinate
// c_d is decomposed ROW-MAJOR over its modes (last mode fastest). Row-major
// everywhere (PyTorch's _mesh_layout convention; CuTe's is column-major).
// The root then maps a position to a rank: rank = position (a mesh from a
// shape), rank = affine function of the root coordinate (FromStrides), or
// rank = table[position] (a mesh from an explicit rank table). The root (its
// shape, names and rank map) is built once and shared by every layout derived
// from it, so every query and transform is O(ndim) mode algebra; only an
// explicit table is O(world), and it is never copied.
//
// This is PyTorch's _mesh_layout (layout + rank_map) and CuTe's shape:stride.
// Modes are kept canonical (no size-1 modes, contiguous neighbours merged);
// size-1 dims are kept as dims with no modes.
//
// Each layout also keeps, per dim, the root dims it came from (R10), and its
// own dim names (empty: unnamed mesh).
//
// Errors are absl::Status values; no input a caller can pass crashes:
//   InvalidArgument bad input, NotFound unknown name, OutOfRange index past
//   the end, FailedPrecondition unnamed mesh / rank not a member.
//
// Thread-safety: a MeshLayout is immutable; const methods may be called from
// any number of threads. Copies are cheap (O(ndim) plus a shared_ptr).
//
// LayoutString grammar (asserted literally by tests):
//   layout  := [ "[" name { "," name } "]" ] shape ":" strides "+" offset
//              [ " @table" | " @" affine ]
//   shape   := "(" dsize { "," dsize } ")"      dsize := int | "(" int {"," int} ")"
//   strides := "(" dstr { "," dstr } ")"        dstr  := int | "(" int {"," int} ")"
//   affine  := "(" ints "):(" ints ")+" int     (the root's rank map)
// A dim with one mode prints as "size" / "stride"; a multi-mode dim as a
// parenthesised list of its modes (outer first); a size-1 dim as 1 / 0.
// Sizes, strides and offset are in root positions; " @table" marks an
// explicit rank table root and " @(..):(..)+o" a FromStrides root with
// rank = o + sum coord * stride. Examples:
//   FromShape({2, 4}, {"dp", "tp"})             "[dp,tp](2,4):(4,1)+0"
//   the same, sliced to "tp" through (1, 0)     "[tp](4):(1)+4"
//   FromShape({2, 4, 2}) dims 0,2 flattened     "[a_c]((2,2)):((8,1))+0"
//   FromRankTable({{3, 1}, {0, 2}})             "(2,2):(2,1)+0 @table"
#ifndef DEVMESH_MESH_MESH_LAYOUT_H_
#define DEVMESH_MESH_MESH_LAYOUT_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mesh/rank_table.h"
#include "mesh/root_map.h"
#include "mesh/strided.h"

namespace devmesh {

// The arguments of a communicator split (ncclCommSplit / Gloo) that put every
// rank into its group along one mesh dim: ranks with the same color form one
// group, ordered by key. color == -1 is NCCL's NCCL_SPLIT_NOCOLOR.
struct ColorKey {
  int64_t color = -1;
  int64_t key = 0;
  friend bool operator==(const ColorKey& a, const ColorKey& b) {
    return a.color == b.color && a.key == b.key;
  }
};

class MeshLayout {
 public:
  // ---- Factories ------------------------------------------------------------

  // A strided root: rank = row-major position, e.g. shape (2, 4) holds
  // [[0,1,2,3],[4,5,6,7]]. `names`: empty (unnamed) or one unique non-empty
  // name per dim. InvalidArgument: empty shape, a size <= 0, more than 64
  // dims or 2^62 ranks, bad names (R1, R18). O(ndim).
  static absl::StatusOr<MeshLayout> FromShape(
      absl::Span<const int64_t> shape, std::vector<std::string> names = {});

  // An explicit root from a nested table (R1): a scalar is a 1-d mesh of one
  // rank. InvalidArgument, each naming the value: not rectangular, an empty
  // list (a 0-size dim), a negative rank, a repeated rank, names not unique
  // or not one per dim. O(numel); builds the rank -> position index once.
  static absl::StatusOr<MeshLayout> FromRankTable(
      const ::devmesh::RankTable& table, std::vector<std::string> names = {});

  // An explicit root from flat row-major ranks and a shape; same checks as
  // FromRankTable, plus InvalidArgument when ranks.size() != product(shape).
  static absl::StatusOr<MeshLayout> FromRanks(
      absl::Span<const int64_t> flat_ranks, absl::Span<const int64_t> shape,
      std::vector<std::string> names = {});

  // A strided root over ranks directly: rank = offset + sum c_i * strides[i].
  // InvalidArgument: sizes not positive, lengths differ, negative stride or
  // offset, ranks beyond 2^62, not injective. Separable strides (each larger
  // than the span of the smaller ones; any row-major or padded layout) stay
  // O(ndim); other injective strides are materialised as a table (at most
  // 2^24 ranks, else InvalidArgument).
  static absl::StatusOr<MeshLayout> FromStrides(
      absl::Span<const int64_t> sizes, absl::Span<const int64_t> strides,
      int64_t offset = 0, std::vector<std::string> names = {});

  // Rebuilds a layout from Serialize()'s bytes, including its root. A fresh
  // root object is made, which SameRoot() treats as the same root as the
  // original by value. InvalidArgument on corrupt, truncated or
  // wrong-version input (never a crash).
  static absl::StatusOr<MeshLayout> Deserialize(absl::string_view bytes);

  // ---- Queries (R2; all O(ndim) unless noted) -------------------------------

  int ndim() const { return static_cast<int>(dims_.size()); }
  // Per dim, the product of its modes' sizes.
  std::vector<int64_t> shape() const;
  int64_t numel() const;
  // OutOfRange when dim is not in [0, ndim).
  absl::StatusOr<int64_t> size(int dim) const;
  // NotFound for an unknown name (or any name on an unnamed mesh).
  absl::StatusOr<int64_t> size(absl::string_view name) const;
  // The dim names; empty when the mesh is unnamed.
  const std::vector<std::string>& dim_names() const { return names_; }
  bool is_named() const { return !names_.empty(); }
  // NotFound for an unknown name (or any name on an unnamed mesh).
  absl::StatusOr<int> DimIndex(absl::string_view name) const;

  // The rank at a coordinate. InvalidArgument: coord.size() != ndim;
  // OutOfRange: a coordinate outside [0, size(d)).
  absl::StatusOr<int64_t> RankAt(absl::Span<const int64_t> coord) const;
  // The coordinate of any rank; nullopt when it is not in this layout (R7).
  std::optional<std::vector<int64_t>> CoordinateOf(int64_t rank) const;
  bool ContainsRank(int64_t rank) const;
  // The ranks on the line through `rank` along `dim`, in mesh order (the
  // members of rank's group along dim). OutOfRange: bad dim;
  // FailedPrecondition: rank not in this layout. O(ndim + size(dim)).
  absl::StatusOr<std::vector<int64_t>> GroupOf(int64_t rank, int dim) const;
  // The ranks on the ROOT's line through `rank` along `dim`'s modes, in
  // group order: GroupOf's line for a rank of this layout, and the same
  // line shape for any other rank of the root (the group a Split by
  // SplitColorKey would give it). Every member of a line computes the same
  // list from the layout alone, with no exchange: device_mesh names and
  // creates each group from it. OutOfRange: bad dim; NotFound: rank not in
  // the root. O(ndim + size(dim)).
  absl::StatusOr<std::vector<int64_t>> RootLineOf(int64_t rank,
                                                  int dim) const;
  // numel / size(dim): the number of lines along dim. OutOfRange: bad dim.
  absl::StatusOr<int64_t> NumGroups(int dim) const;

  // (color, key) of ANY rank of the ROOT for a split of the world into the
  // groups along `dim` (all lines parallel to this dim, across the whole
  // root): with p the rank's root position and c_m = (p / t_m) % s_m over
  // the dim's modes, key = the c_m combined row-major (the index in the
  // group), color = p - sum c_m * t_m (the root position of the line's first
  // member: unique per line, so lines of different slices never collide).
  // A rank not in the root gets {-1, 0} (NCCL_SPLIT_NOCOLOR). OutOfRange:
  // bad dim. Ranks of this layout get the groups of GroupOf.
  absl::StatusOr<ColorKey> SplitColorKey(int64_t rank, int dim) const;
  // The dim's canonical modes, e.g. "(2:4,2:1)" ("(1:0)" for size 1). For
  // two layouts of the same root, equal strings <=> the dims define the same
  // groups with the same order (equal SplitColorKey for every rank): use it
  // as the cache key of a dim's communicator. "" for a dim out of range.
  std::string DimModesString(int dim) const;

  // The rank table, flat row-major. O(numel): only on request.
  std::vector<int64_t> RankTable() const;
  // The rank table nested like the reference DeviceMesh's `mesh` (R2). O(numel).
  ::devmesh::RankTable NestedRanks() const;

  // Per dim, the root dims it came from (R10): a root dim d gives {d}; a
  // flatten concatenates; an unflatten gives each piece the root dims its
  // modes touch (none for a size-1 piece).
  std::vector<std::vector<int>> root_dims() const;
  // The root mesh (R12): the layout of the whole root, with the root's names.
  MeshLayout RootLayout() const;
  std::vector<int64_t> root_shape() const { return root_->shape; }
  const std::vector<std::string>& root_dim_names() const {
    return root_->names;
  }
  // True when both layouts derive from the same root: the same object, or
  // equal shape, names and rank map (e.g. after Deserialize).
  bool SameRoot(const MeshLayout& other) const;
  // True when this layout is its root (RootLayout() == *this, same root).
  bool IsRoot() const;
  // True when the root holds an explicit rank table.
  bool is_explicit() const {
    return root_->kind == mesh_internal::RootMap::Kind::kTable;
  }

  // ---- Transforms (new immutable values; R8-R11) ----------------------------

  // The sub-mesh of the named dims, in the order asked, through
  // `through_coordinate` of THIS layout (default all zeros): the line or
  // plane on which the other dims keep that coordinate (R8). All names in
  // order gives this layout back. InvalidArgument: names empty, a repeated
  // name, coordinate of the wrong length; NotFound: unknown name;
  // OutOfRange: coordinate outside the mesh; FailedPrecondition: unnamed
  // mesh. (Names made by flatten elsewhere: SliceWithExtraDims.)
  [[nodiscard]] absl::StatusOr<MeshLayout> Slice(
      absl::Span<const std::string> names,
      absl::Span<const int64_t> through_coordinate = {}) const;
  // Slice through the coordinate of `rank`, or through coordinate 0 when
  // rank is not in this layout (R8, the reference's __getitem__).
  [[nodiscard]] absl::StatusOr<MeshLayout> SliceThroughRank(
      absl::Span<const std::string> names, int64_t rank) const;
  // Slice by dim indices; works on unnamed meshes (the result keeps the
  // names of the dims kept, if any). InvalidArgument: empty or repeated
  // dims, bad coordinate length; OutOfRange: dim or coordinate out of range.
  [[nodiscard]] absl::StatusOr<MeshLayout> SliceDims(
      absl::Span<const int> dims,
      absl::Span<const int64_t> through_coordinate = {}) const;

  // Slice by names that are dims of this layout or of `extra`: named 1-d
  // layouts of the same root (the flattened dims device_mesh keeps on the
  // root), mixed in any order, through the coordinate of `through_rank`
  // (the origin when it is not a member). R8 as PyTorch slices
  // mesh["dp_shard_cp", "tp"]; PyTorch resolves flattened names on the root
  // only, devmesh on every layout that holds the flattened dim's ranks.
  // Example: root (2,3,2) named (pp,dp,tp) with extra "pt" = flatten of
  // (pp,tp): names (dp, pt) give [[0,1,6,7],[2,3,8,9],[4,5,10,11]].
  // InvalidArgument: names empty or repeated; two names that overlap
  // (share a root dim, e.g. "pt" with "pp"), naming both; an extra dim of
  // another root, or one reaching ranks outside this layout. NotFound: a
  // name that is neither (listing the valid names). FailedPrecondition: no
  // names at all (unnamed mesh, no extras). O(ndim * names).
  [[nodiscard]] absl::StatusOr<MeshLayout> SliceWithExtraDims(
      absl::Span<const std::string> names, absl::Span<const MeshLayout> extra,
      int64_t through_rank) const;

  // A 1-d mesh of the same ranks in the same (row-major) order (R9), named
  // `name` or by default the dim names joined by "_". Its modes are the
  // dims' modes, so a flatten of non-adjacent root dims stays strided; its
  // root dims are the concatenation (R10). A 1-d mesh flattened to its own
  // name is itself. FailedPrecondition: unnamed mesh (as in the reference);
  // InvalidArgument: empty name. (The root-level map of flatten names is
  // kept by device_mesh.)
  [[nodiscard]] absl::StatusOr<MeshLayout> Flatten(
      std::optional<std::string> name = std::nullopt) const;

  // Splits `dim` into dims of `sizes` (row-major, outer first) named `names`
  // (one per size; must be empty iff the mesh is unnamed). OutOfRange: bad
  // dim; InvalidArgument: sizes empty or not positive, product != size(dim),
  // bad names (count, empty, clash with other dims), or sizes that cut the
  // dim's modes at a non-divisor (the result would not be strided).
  [[nodiscard]] absl::StatusOr<MeshLayout> Unflatten(
      int dim, absl::Span<const int64_t> sizes,
      std::vector<std::string> names = {}) const;

  // The dims of `parts`, in order, into one mesh (R11): the parts must come
  // from one root (FailedPrecondition otherwise), all be named
  // (InvalidArgument), with unique names (InvalidArgument) and
  // non-overlapping root dims (InvalidArgument). The result passes through
  // the first part's offset. InvalidArgument: no parts.
  [[nodiscard]] static absl::StatusOr<MeshLayout> Concatenate(
      absl::Span<const MeshLayout> parts);

  // Reorders dims: dim i of the result is dim perm[i] of this.
  // InvalidArgument: perm not a permutation of 0..ndim-1.
  [[nodiscard]] absl::StatusOr<MeshLayout> Transpose(
      absl::Span<const int> perm) const;

  // ---- Text, equality, bytes (R14-R16) ---------------------------------------

  // R14: "DeviceMesh(dp=2, tp=4, 'cuda')", unnamed "DeviceMesh((2, 4), 'cuda')"
  // and "DeviceMesh((8,), 'cuda')" (Python tuple text).
  std::string ToString(absl::string_view device_type) const;
  // The compact form documented at the top of this file.
  std::string LayoutString() const;

  // R15: equal rank table, shape and names, whatever path made them. O(ndim)
  // for strided layouts (canonical modes + offset); materialises the ranks
  // (O(numel)) when an explicit table is involved and the roots differ.
  friend bool operator==(const MeshLayout& a, const MeshLayout& b);
  friend bool operator!=(const MeshLayout& a, const MeshLayout& b) {
    return !(a == b);
  }
  // Hash consistent with ==: shape, names and the ranks at O(ndim) sample
  // coordinates (origin, each unit vector, the last coordinate).
  template <typename H>
  friend H AbslHashValue(H h, const MeshLayout& m) {
    return H::combine(std::move(h), m.shape(), m.names_, m.HashSample());
  }

  // R16: bytes that Deserialize turns back into an equal layout with the
  // same root info, root dims and LayoutString. Format: magic "DMLY",
  // version byte 1, then varints (see mesh_layout_serialize.cc).
  std::string Serialize() const;

  // ---- Internals exposed for tests and device_mesh ---------------------------
  int64_t offset() const { return offset_; }
  // The canonical modes of `dim` as (size, stride) pairs; empty for a bad
  // dim or a size-1 dim.
  std::vector<std::pair<int64_t, int64_t>> modes(int dim) const;

 private:
  struct Dim {
    mesh_internal::Modes modes;  // canonical, outer first
    absl::InlinedVector<int, 2> root_dims;
    int64_t size = 1;
  };

  MeshLayout(mesh_internal::RootPtr root, int64_t offset,
             absl::InlinedVector<Dim, 4> dims, std::vector<std::string> names)
      : root_(std::move(root)),
        offset_(offset),
        dims_(std::move(dims)),
        names_(std::move(names)) {}
  static MeshLayout OfRoot(mesh_internal::RootPtr root);
  static Dim MakeDim(mesh_internal::Modes modes,
                     absl::InlinedVector<int, 2> root_dims);
  // Position of a checked coordinate.
  int64_t PositionAt(absl::Span<const int64_t> coord) const;
  // The ranks on the line through root position p along dim's modes, in
  // group order (dim checked by the caller).
  std::vector<int64_t> LineThrough(int64_t p, int dim) const;
  // Coordinate of a root position p; false when p is not in this layout.
  bool CoordOfPosition(int64_t p, std::vector<int64_t>* coord) const;
  // True when root position p is in this layout.
  bool InLayout(int64_t p) const;
  absl::Status CheckDim(int dim) const;
  std::vector<int64_t> HashSample() const;
  // Offset and per-dim modes in RANK space, when the root is not a table and
  // the layout is strided over ranks; nullopt otherwise.
  bool RankSpaceForm(int64_t* offset,
                     std::vector<mesh_internal::Modes>* dims) const;
  // Checks a layout read from bytes against its root and sets dim sizes.
  absl::Status Validate();

  mesh_internal::RootPtr root_;
  int64_t offset_ = 0;
  absl::InlinedVector<Dim, 4> dims_;
  std::vector<std::string> names_;
};

}  // namespace devmesh

#endif  // DEVMESH_MESH_MESH_LAYOUT_H_
