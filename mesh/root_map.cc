// devmesh/mesh/root_map.cc: the three kinds of root rank map (see root_map.h).
#include "mesh/root_map.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mesh/strided.h"
#include "status/status_macros.h"

namespace devmesh {
namespace mesh_internal {
namespace {

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

// "[1][0]": the coordinate of position p in `shape`.
std::string CoordText(int64_t p, absl::Span<const int64_t> shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = p % shape[i];
    p /= shape[i];
  }
  std::string out;
  for (int64_t x : c) absl::StrAppend(&out, "[", x, "]");
  return out;
}

std::shared_ptr<RootMap> NewRoot(absl::Span<const int64_t> shape,
                                 std::vector<std::string> names) {
  auto root = std::make_shared<RootMap>();
  root->shape.assign(shape.begin(), shape.end());
  root->pos_strides.resize(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    root->pos_strides[i] = acc;
    acc *= shape[i];
  }
  root->numel = acc;
  root->names = std::move(names);
  return root;
}

}  // namespace

absl::Status CheckShape(absl::Span<const int64_t> shape) {
  if (shape.empty()) {
    return absl::InvalidArgumentError(
        "mesh shape () is empty: a mesh needs at least one dimension");
  }
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh shape has ", shape.size(),
                     " dimensions; at most ", kMaxDims, " are supported"));
  }
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape ", ShapeText(shape), " has size ", shape[i],
                       " at dim ", i, ": dimension sizes must be positive"));
    }
    if (!CheckedMul(n, shape[i], &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh shape ", ShapeText(shape),
                       " has more than 2^62 elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNames(absl::Span<const std::string> names, size_t ndim) {
  if (names.empty()) return absl::OkStatus();
  const std::string text = absl::StrCat("(", absl::StrJoin(names, ", "), ")");
  if (names.size() != ndim) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh dim names ", text, " give ", names.size(),
                     " names for a ", ndim, "-d mesh: need one per dim"));
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& name : names) {
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh dim names ", text, " contain an empty name"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh dim name '", name, "' appears twice in ", text,
          ": each mesh dim name must be unique"));
    }
  }
  return absl::OkStatus();
}

int64_t RootMap::RankOfPosition(int64_t p) const {
  switch (kind) {
    case Kind::kIdentity:
      return p;
    case Kind::kAffine: {
      int64_t r = rank_offset;
      for (size_t i = shape.size(); i-- > 0;) {
        r += (p % shape[i]) * rank_strides[i];
        p /= shape[i];
      }
      return r;
    }
    case Kind::kTable:
      return table[p];
  }
  return -1;
}

int64_t RootMap::PositionOfRank(int64_t rank) const {
  switch (kind) {
    case Kind::kIdentity:
      return rank >= 0 && rank < numel ? rank : -1;
    case Kind::kAffine: {
      if (rank < rank_offset) return -1;
      int64_t rest = rank - rank_offset;
      int64_t p = 0;
      for (int d : order) {
        const int64_t c = rest / rank_strides[d];
        if (c >= shape[d]) return -1;
        rest -= c * rank_strides[d];
        p += c * pos_strides[d];
      }
      return rest == 0 ? p : -1;
    }
    case Kind::kTable: {
      if (!dense_index.empty() || sparse_index.empty()) {
        return rank >= 0 && rank < static_cast<int64_t>(dense_index.size())
                   ? dense_index[rank]
                   : -1;
      }
      auto it = sparse_index.find(rank);
      return it == sparse_index.end() ? -1 : it->second;
    }
  }
  return -1;
}

bool RootMap::SameAs(const RootMap& o) const {
  return kind == o.kind && shape == o.shape && names == o.names &&
         rank_strides == o.rank_strides && rank_offset == o.rank_offset &&
         table == o.table;
}

absl::StatusOr<RootPtr> MakeIdentityRoot(absl::Span<const int64_t> shape,
                                         std::vector<std::string> names) {
  DEVMESH_RETURN_IF_ERROR(CheckShape(shape));
  DEVMESH_RETURN_IF_ERROR(CheckNames(names, shape.size()));
  return RootPtr(NewRoot(shape, std::move(names)));
}

absl::StatusOr<RootPtr> MakeAffineRoot(absl::Span<const int64_t> sizes,
                                       absl::Span<const int64_t> strides,
                                       int64_t offset,
                                       std::vector<std::string> names,
                                       bool allow_table) {
  DEVMESH_RETURN_IF_ERROR(CheckShape(sizes));
  const std::string text = absl::StrCat(
      "(", absl::StrJoin(sizes, ","), "):(", absl::StrJoin(strides, ","),
      ")+", offset);
  if (strides.size() != sizes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("strided mesh ", text, " has ", strides.size(),
                     " strides for ", sizes.size(), " sizes"));
  }
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strided mesh ", text, " has negative offset ", offset));
  }
  int64_t max_rank = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t span = 0;
    if (strides[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("strided mesh ", text, " has negative stride ",
                       strides[i], " at dim ", i));
    }
    if (!CheckedMul(sizes[i] - 1, strides[i], &span) ||
        max_rank > kMaxNumel - span) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strided mesh ", text, " has ranks beyond 2^62"));
    }
    max_rank += span;
  }
  DEVMESH_RETURN_IF_ERROR(CheckNames(names, sizes.size()));
  std::shared_ptr<RootMap> root = NewRoot(sizes, std::move(names));
  if (offset == 0 && std::equal(strides.begin(), strides.end(),
                                root->pos_strides.begin())) {
    return RootPtr(root);  // row-major compact: rank = position
  }
  std::vector<int> order;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] > 1) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return strides[a] > strides[b];
  });
  // Separable: each stride exceeds the span of all smaller ones.
  bool separable = true;
  int64_t span_below = 0;
  for (size_t k = order.size(); k-- > 0;) {
    const int d = order[k];
    if (strides[d] <= span_below) separable = false;
    span_below += (sizes[d] - 1) * strides[d];
  }
  if (separable) {
    root->kind = RootMap::Kind::kAffine;
    root->rank_strides.assign(strides.begin(), strides.end());
    root->rank_offset = offset;
    root->order = std::move(order);
    return RootPtr(root);
  }
  if (!allow_table || root->numel > kMaxMaterialize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strided mesh ", text,
        " has strides that are not separable (each stride larger than the "
        "span of the smaller ones)",
        allow_table ? " and more than 2^24 ranks; use FromRanks" : ""));
  }
  std::vector<int64_t> ranks(root->numel);
  for (int64_t p = 0; p < root->numel; ++p) {
    int64_t r = offset;
    int64_t rest = p;
    for (size_t i = sizes.size(); i-- > 0;) {
      r += (rest % sizes[i]) * strides[i];
      rest /= sizes[i];
    }
    ranks[p] = r;
  }
  absl::StatusOr<RootPtr> table =
      MakeTableRoot(std::move(ranks), sizes, root->names);
  if (!table.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("strided mesh ", text, " is not injective: ",
                     table.status().message()));
  }
  return table;
}

absl::StatusOr<RootPtr> MakeTableRoot(std::vector<int64_t> ranks,
                                      absl::Span<const int64_t> shape,
                                      std::vector<std::string> names) {
  DEVMESH_RETURN_IF_ERROR(CheckShape(shape));
  std::shared_ptr<RootMap> root = NewRoot(shape, std::move(names));
  if (static_cast<int64_t>(ranks.size()) != root->numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank table has ", ranks.size(), " ranks but shape ",
        ShapeText(shape), " needs ", root->numel));
  }
  DEVMESH_RETURN_IF_ERROR(CheckNames(root->names, shape.size()));
  int64_t max_rank = 0;
  for (int64_t p = 0; p < root->numel; ++p) {
    if (ranks[p] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", ranks[p], " at ", CoordText(p, shape),
                       " is negative: mesh ranks must be non-negative"));
    }
    max_rank = std::max(max_rank, ranks[p]);
  }
  const bool dense = max_rank / 4 <= root->numel + 256;
  if (dense) {
    root->dense_index.assign(max_rank + 1, -1);
  } else {
    root->sparse_index.reserve(root->numel);
  }
  for (int64_t p = 0; p < root->numel; ++p) {
    int64_t first = -1;
    if (dense) {
      int64_t& slot = root->dense_index[ranks[p]];
      if (slot >= 0) first = slot; else slot = p;
    } else {
      auto [it, inserted] = root->sparse_index.emplace(ranks[p], p);
      if (!inserted) first = it->second;
    }
    if (first >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", ranks[p], " appears twice, at ", CoordText(first, shape),
          " and ", CoordText(p, shape), ": mesh ranks must be unique"));
    }
  }
  root->kind = RootMap::Kind::kTable;
  root->table = std::move(ranks);
  return RootPtr(root);
}

}  // namespace mesh_internal
}  // namespace devmesh
