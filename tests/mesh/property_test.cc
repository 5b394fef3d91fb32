// Property tests over seeded random meshes (std::mt19937, fixed seeds): random
// roots (shape, explicit permuted table, padded strides; size-1 dims
// included) go through random sequences of Slice / Transpose / Flatten /
// Unflatten / Concatenate, applied identically to a strided form, an explicit
// form of the same ranks and a naive reference model. At every step every
// query is checked against the reference, the two forms must agree exactly
// (including SplitColorKey and equality/hash), groups partition the mesh,
// (color, key) agree with group membership and order for every root rank,
// flatten-then-unflatten and serialization give the mesh back.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Ok;
using ::devmesh::testing::RefMesh;

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

std::vector<int> RandomPerm(std::mt19937& rng, int n) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

std::vector<int64_t> RandomCoord(std::mt19937& rng, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c;
  for (int64_t s : shape) c.push_back(Uniform(rng, 0, s - 1));
  return c;
}

// Checks every query of `m` against `ref`; `root_ranks` are all ranks of the
// root.
void CheckAgainstReference(const MeshLayout& m, const RefMesh& ref,
                           const std::vector<int64_t>& root_ranks) {
  ASSERT_EQ(m.shape(), ref.shape) << m.LayoutString();
  ASSERT_EQ(m.RankTable(), ref.ranks) << m.LayoutString();
  std::map<int64_t, int64_t> index_of;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const std::vector<int64_t> coord = ref.CoordOf(i);
    index_of[ref.ranks[i]] = i;
    EXPECT_EQ(Ok(m.RankAt(coord)), ref.ranks[i]);
    std::optional<std::vector<int64_t>> got = m.CoordinateOf(ref.ranks[i]);
    ASSERT_TRUE(got.has_value()) << ref.ranks[i] << " in " << m.LayoutString();
    EXPECT_EQ(*got, coord);
  }
  const int64_t max_rank = *std::max_element(root_ranks.begin(), root_ranks.end());
  std::vector<int64_t> probes = root_ranks;
  probes.push_back(-1);
  probes.push_back(max_rank + 1);
  for (int64_t r : probes) {
    const bool member = index_of.count(r) > 0;
    EXPECT_EQ(m.ContainsRank(r), member) << r << " in " << m.LayoutString();
    if (!member) {
      EXPECT_EQ(m.CoordinateOf(r), std::nullopt) << r;
    }
  }
  for (int d = 0; d < m.ndim(); ++d) {
    const int64_t size = ref.shape[d];
    EXPECT_EQ(Ok(m.NumGroups(d)), ref.numel() / size);
    // Members: GroupOf is the reference line.
    std::map<std::vector<int64_t>, int> groups;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      std::vector<int64_t> line = ref.Line(ref.CoordOf(i), d);
      EXPECT_EQ(Ok(m.GroupOf(ref.ranks[i], d)), line);
      groups[line]++;
    }
    // The groups partition the mesh: each line is found size times.
    EXPECT_EQ(static_cast<int64_t>(groups.size()), ref.numel() / size);
    for (const auto& [line, count] : groups) EXPECT_EQ(count, size);
    // (color, key) over every root rank: lines of exactly `size` ranks with
    // keys 0..size-1; a member's line is its group, in group order.
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_color;
    for (int64_t r : probes) {
      ColorKey ck = Ok(m.SplitColorKey(r, d));
      if (r < 0 || r > max_rank) {
        EXPECT_EQ(ck, (ColorKey{-1, 0}));
        continue;
      }
      by_color[ck.color].push_back({ck.key, r});
    }
    for (auto& [color, members] : by_color) {
      std::sort(members.begin(), members.end());
      ASSERT_EQ(static_cast<int64_t>(members.size()), size) << color;
      std::vector<int64_t> ranks;
      for (int64_t k = 0; k < size; ++k) {
        EXPECT_EQ(members[k].first, k);
        ranks.push_back(members[k].second);
      }
      if (index_of.count(ranks[0]) > 0) {
        EXPECT_EQ(Ok(m.GroupOf(ranks[0], d)), ranks);
      }
    }
  }
}

// The same query answers from the strided and the explicit form.
void CheckSameAnswers(const MeshLayout& s, const MeshLayout& e,
                      const std::vector<int64_t>& root_ranks) {
  EXPECT_EQ(s, e) << s.LayoutString() << " vs " << e.LayoutString();
  EXPECT_EQ(absl::Hash<MeshLayout>()(s), absl::Hash<MeshLayout>()(e));
  EXPECT_EQ(s.root_dims(), e.root_dims());
  EXPECT_EQ(s.dim_names(), e.dim_names());
  EXPECT_EQ(s.ToString("cpu"), e.ToString("cpu"));
  for (int d = 0; d < s.ndim(); ++d) {
    EXPECT_EQ(s.DimModesString(d), e.DimModesString(d));
    for (int64_t r : root_ranks) {
      EXPECT_EQ(Ok(s.SplitColorKey(r, d)), Ok(e.SplitColorKey(r, d)));
    }
  }
}

void CheckRoundTrips(const MeshLayout& m) {
  MeshLayout back = Ok(MeshLayout::Deserialize(m.Serialize()));
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.LayoutString(), m.LayoutString());
  EXPECT_EQ(back.root_dims(), m.root_dims());
  EXPECT_TRUE(back.SameRoot(m));
  EXPECT_EQ(back.Serialize(), m.Serialize());
  // Flatten then unflatten gives the mesh back.
  MeshLayout flat = Ok(m.Flatten("roundtrip"));
  EXPECT_EQ(flat.RankTable(), m.RankTable());
  MeshLayout unflat = Ok(flat.Unflatten(0, m.shape(), m.dim_names()));
  EXPECT_EQ(unflat, m) << m.LayoutString() << " -> " << flat.LayoutString();
  EXPECT_EQ(unflat.LayoutString(), m.LayoutString());
}

struct Case {
  MeshLayout strided;
  MeshLayout table;
  RefMesh ref;
};

// A random strided root (shape or padded strides) and its explicit copy.
Case RandomRoot(std::mt19937& rng, int* next_name) {
  const int nd = static_cast<int>(Uniform(rng, 1, 4));
  std::vector<int64_t> shape;
  std::vector<std::string> names;
  for (int i = 0; i < nd; ++i) {
    shape.push_back(Uniform(rng, 1, 4));
    names.push_back(absl::StrCat("n", (*next_name)++));
  }
  std::optional<MeshLayout> strided;
  if (Uniform(rng, 0, 1) == 0) {
    strided = Ok(MeshLayout::FromShape(shape, names));
  } else {
    // Separable padded strides, in a random dim order.
    std::vector<int64_t> strides(nd);
    int64_t next = Uniform(rng, 1, 2);
    for (int d : RandomPerm(rng, nd)) {
      strides[d] = next;
      next = next * shape[d] + Uniform(rng, 0, 2);
    }
    strided = Ok(MeshLayout::FromStrides(shape, strides, Uniform(rng, 0, 5), names));
  }
  MeshLayout table = Ok(MeshLayout::FromRanks(strided->RankTable(), shape, names));
  RefMesh ref = RefMesh::Of(*strided);
  return {*strided, table, ref};
}

// Applies one random transform to all three; false when it was skipped.
bool RandomStep(std::mt19937& rng, Case& c, int* next_name) {
  const std::vector<int64_t> shape = c.ref.shape;
  const int nd = static_cast<int>(shape.size());
  const std::vector<std::string> names = c.strided.dim_names();
  switch (Uniform(rng, 0, 4)) {
    case 0: {  // slice
      std::vector<int> dims = RandomPerm(rng, nd);
      dims.resize(Uniform(rng, 1, nd));
      std::vector<std::string> sel;
      for (int d : dims) sel.push_back(names[d]);
      const std::vector<int64_t> coord = RandomCoord(rng, shape);
      c.strided = Ok(c.strided.Slice(sel, coord));
      c.table = Ok(c.table.Slice(sel, coord));
      c.ref = c.ref.Slice(dims, coord);
      return true;
    }
    case 1: {  // transpose
      const std::vector<int> perm = RandomPerm(rng, nd);
      c.strided = Ok(c.strided.Transpose(perm));
      c.table = Ok(c.table.Transpose(perm));
      c.ref = c.ref.Transpose(perm);
      return true;
    }
    case 2: {  // flatten
      const std::string name = absl::StrCat("n", (*next_name)++);
      c.strided = Ok(c.strided.Flatten(name));
      c.table = Ok(c.table.Flatten(name));
      c.ref = c.ref.Reshape({c.ref.numel()});
      return true;
    }
    case 3: {  // unflatten into a random factorisation (1s included)
      if (nd >= 6) return false;
      const int d = static_cast<int>(Uniform(rng, 0, nd - 1));
      int64_t rest = shape[d];
      std::vector<int64_t> sizes;
      while (sizes.size() < 2 && rest > 1) {
        std::vector<int64_t> divisors;
        for (int64_t f = 1; f <= rest; ++f) if (rest % f == 0) divisors.push_back(f);
        const int64_t f = divisors[Uniform(rng, 0, divisors.size() - 1)];
        sizes.push_back(f);
        rest /= f;
      }
      sizes.push_back(rest);
      std::shuffle(sizes.begin(), sizes.end(), rng);
      std::vector<std::string> new_names;
      for (size_t i = 0; i < sizes.size(); ++i) {
        new_names.push_back(absl::StrCat("n", (*next_name)++));
      }
      absl::StatusOr<MeshLayout> s = c.strided.Unflatten(d, sizes, new_names);
      absl::StatusOr<MeshLayout> t = c.table.Unflatten(d, sizes, new_names);
      EXPECT_EQ(s.ok(), t.ok());
      if (!s.ok()) {
        // Only a cut through a mode at a non-divisor may fail.
        EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_NE(s.status().message().find("cannot split modes"),
                  absl::string_view::npos) << s.status();
        return false;
      }
      c.strided = *std::move(s);
      c.table = *std::move(t);
      std::vector<int64_t> new_shape(shape.begin(), shape.begin() + d);
      new_shape.insert(new_shape.end(), sizes.begin(), sizes.end());
      new_shape.insert(new_shape.end(), shape.begin() + d + 1, shape.end());
      c.ref = c.ref.Reshape(new_shape);
      return true;
    }
    default: {  // split the dims into two slices and concatenate them
      if (nd < 2) return false;
      std::vector<int> perm = RandomPerm(rng, nd);
      const int cut = static_cast<int>(Uniform(rng, 1, nd - 1));
      std::vector<std::string> a, b;
      for (int i = 0; i < nd; ++i) (i < cut ? a : b).push_back(names[perm[i]]);
      const std::vector<int64_t> ca = RandomCoord(rng, shape);
      const std::vector<int64_t> cb = RandomCoord(rng, shape);
      absl::StatusOr<MeshLayout> s = MeshLayout::Concatenate(
          {Ok(c.strided.Slice(a, ca)), Ok(c.strided.Slice(b, cb))});
      absl::StatusOr<MeshLayout> t = MeshLayout::Concatenate(
          {Ok(c.table.Slice(a, ca)), Ok(c.table.Slice(b, cb))});
      EXPECT_EQ(s.ok(), t.ok());
      if (!s.ok()) {
        // Pieces of one root dim (after an unflatten) overlap by root dim.
        EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
        return false;
      }
      c.strided = *std::move(s);
      c.table = *std::move(t);
      c.ref = c.ref.Transpose(perm);
      return true;
    }
  }
}

TEST(MeshLayoutProperties, RandomTransformSequences) {
  int steps_done = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    int next_name = 0;
    Case c = RandomRoot(rng, &next_name);
    const std::vector<int64_t> root_ranks = c.strided.RankTable();
    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE(absl::StrCat("step ", step, ": ", c.strided.LayoutString()));
      CheckAgainstReference(c.strided, c.ref, root_ranks);
      CheckAgainstReference(c.table, c.ref, root_ranks);
      CheckSameAnswers(c.strided, c.table, root_ranks);
      CheckRoundTrips(c.strided);
      CheckRoundTrips(c.table);
      if (::testing::Test::HasFailure()) return;
      steps_done += RandomStep(rng, c, &next_name) ? 1 : 0;
    }
  }
  EXPECT_GT(steps_done, 600);  // the sequences really transform
}

TEST(MeshLayoutProperties, RandomExplicitTables) {
  for (uint32_t seed = 1000; seed < 1100; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    std::vector<int64_t> shape;
    const int nd = static_cast<int>(Uniform(rng, 1, 4));
    int64_t n = 1;
    for (int i = 0; i < nd; ++i) {
      shape.push_back(Uniform(rng, 1, 4));
      n *= shape.back();
    }
    // Distinct random ranks in [0, 3n), in random order.
    std::vector<int64_t> pool(3 * n);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    pool.resize(n);
    MeshLayout m = Ok(MeshLayout::FromRanks(pool, shape));
    RefMesh ref{shape, pool};
    CheckAgainstReference(m, ref, pool);
    MeshLayout back = Ok(MeshLayout::Deserialize(m.Serialize()));
    EXPECT_EQ(back, m);
    EXPECT_EQ(back.LayoutString(), m.LayoutString());
    // Unnamed slices by index through a random coordinate.
    std::vector<int> dims = RandomPerm(rng, nd);
    dims.resize(Uniform(rng, 1, nd));
    const std::vector<int64_t> coord = RandomCoord(rng, shape);
    CheckAgainstReference(Ok(m.SliceDims(dims, coord)), ref.Slice(dims, coord),
                          pool);
  }
}

}  // namespace
}  // namespace devmesh
