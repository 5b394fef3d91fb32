// Property test of flattened names (seeded std::mt19937): random roots of
// sizes 1, 2, 3 go through random sequences of Slice / Flatten / Unflatten /
// Concatenate / Transpose in which slices mix the mesh's dims with names
// flattened earlier (SliceWithExtraDims), applied to MeshLayout and to the
// naive AtomMesh model of tests/mesh/reference_mesh.h. Every step compares
// shape, names and rank table, and whether an operation fails (overlapping
// dims, a flattened dim outside the mesh, a cut inside a root dim).
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "mesh/mesh_layout.h"
#include "tests/mesh/reference_mesh.h"

namespace devmesh {
namespace {

using ::devmesh::testing::AtomMesh;
using ::devmesh::testing::Ok;
using Chosen = std::vector<std::pair<std::vector<int>, std::string>>;

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

struct Flat {
  MeshLayout layout;
  std::vector<int> atoms;
};

struct State {
  MeshLayout mesh;
  AtomMesh ref;
  std::map<std::string, Flat> flats;
  int next_name = 0;

  std::string Fresh() { return absl::StrCat("n", next_name++); }
  int64_t RandomRank(std::mt19937& rng) const {
    std::vector<int64_t> ranks = ref.Ranks();
    return ranks[Uniform(rng, 0, ranks.size() - 1)];
  }
  std::vector<MeshLayout> Extras() const {
    std::vector<MeshLayout> out;
    for (const auto& [name, f] : flats) out.push_back(f.layout);
    return out;
  }
};

void ExpectSame(const MeshLayout& m, const AtomMesh& ref) {
  ASSERT_EQ(m.shape(), ref.Shape()) << m.LayoutString();
  ASSERT_EQ(m.dim_names(), ref.names) << m.LayoutString();
  ASSERT_EQ(m.RankTable(), ref.Ranks()) << m.LayoutString();
  // Every root rank's RootLineOf is its group of a Split by SplitColorKey
  // (members of its color, by key), and GroupOf for a rank of the mesh:
  // device_mesh creates groups from RootLineOf where it used to split.
  int64_t world = 1;
  for (int64_t s : m.root_shape()) world *= s;
  for (int d = 0; d < m.ndim(); ++d) {
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> by_color;
    for (int64_t r = 0; r < world; ++r) {
      ColorKey ck = Ok(m.SplitColorKey(r, d));
      by_color[ck.color].push_back({ck.key, r});
    }
    for (int64_t r = 0; r < world; ++r) {
      auto members = by_color[Ok(m.SplitColorKey(r, d)).color];
      std::sort(members.begin(), members.end());
      std::vector<int64_t> split;
      for (const auto& kr : members) split.push_back(kr.second);
      const std::vector<int64_t> line = Ok(m.RootLineOf(r, d));
      ASSERT_EQ(line, split) << m.LayoutString() << " rank " << r << " dim "
                             << d;
      if (m.ContainsRank(r)) {
        ASSERT_EQ(line, Ok(m.GroupOf(r, d)));
      }
    }
  }
}

// A random selection of the mesh's dims and flattened names, through a
// random rank of the mesh; the model decides whether it must fail.
// Returns true (and the result) when it succeeded.
bool RandomSelect(std::mt19937& rng, const State& s, MeshLayout* out_mesh,
                  AtomMesh* out_ref) {
  std::vector<std::string> pool = s.ref.names;
  for (const auto& [name, f] : s.flats) {
    if (std::find(pool.begin(), pool.end(), name) == pool.end()) {
      pool.push_back(name);
    }
  }
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(Uniform(rng, 1, std::min<int64_t>(pool.size(), 4)));
  const int64_t rank = s.RandomRank(rng);
  // The model: atoms of each name, overlap and containment.
  std::vector<int> walked = s.ref.Walked();
  Chosen chosen;
  bool valid = true;
  std::set<int> used;
  for (const std::string& name : pool) {
    auto own = std::find(s.ref.names.begin(), s.ref.names.end(), name);
    std::vector<int> atoms =
        own != s.ref.names.end() ? s.ref.dims[own - s.ref.names.begin()]
                                 : s.flats.at(name).atoms;
    for (int a : atoms) {
      if (std::find(walked.begin(), walked.end(), a) == walked.end()) {
        valid = false;  // a flattened dim reaching outside the mesh
      }
      if (!used.insert(a).second) valid = false;  // overlap
    }
    chosen.push_back({atoms, name});
  }
  absl::StatusOr<MeshLayout> got =
      s.mesh.SliceWithExtraDims(pool, s.Extras(), rank);
  EXPECT_EQ(got.ok(), valid) << got.status() << " selecting "
                             << absl::StrJoin(pool, ",") << " from "
                             << s.mesh.LayoutString();
  if (!got.ok()) {
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return false;
  }
  if (!valid) return false;
  *out_mesh = *std::move(got);
  *out_ref = AtomMesh::Select(s.ref.root_shape, chosen, rank);
  ExpectSame(*out_mesh, *out_ref);
  return true;
}

// One random step; false when it was skipped or (correctly) failed.
bool RandomStep(std::mt19937& rng, State& s) {
  const int nd = s.mesh.ndim();
  switch (Uniform(rng, 0, 4)) {
    case 0: {  // flatten a random selection; remember the name on the "root"
      MeshLayout sel = s.mesh;
      AtomMesh ref = s.ref;
      if (!RandomSelect(rng, s, &sel, &ref)) return false;
      const std::string name = s.Fresh();
      MeshLayout flat = Ok(sel.Flatten(name));
      s.flats.emplace(name, Flat{flat, ref.Walked()});
      if (Uniform(rng, 0, 1) == 0) {
        s.mesh = flat;
        s.ref = ref;
        s.ref.dims = {ref.Walked()};
        s.ref.names = {name};
      }
      return true;
    }
    case 1: {  // select, and continue from the result
      MeshLayout sel = s.mesh;
      AtomMesh ref = s.ref;
      if (!RandomSelect(rng, s, &sel, &ref)) return false;
      s.mesh = sel;
      s.ref = ref;
      return true;
    }
    case 2: {  // unflatten a dim into two pieces
      const int d = static_cast<int>(Uniform(rng, 0, nd - 1));
      const std::vector<int> atoms = s.ref.dims[d];
      const size_t cut = Uniform(rng, 0, atoms.size());
      std::vector<int> outer(atoms.begin(), atoms.begin() + cut);
      std::vector<int> inner(atoms.begin() + cut, atoms.end());
      int64_t a = 1;
      for (int r : outer) a *= s.ref.root_shape[r];
      const int64_t size = s.ref.Shape()[d];
      const std::vector<std::string> names = {s.Fresh(), s.Fresh()};
      s.mesh = Ok(s.mesh.Unflatten(d, {a, size / a}, names));
      s.ref.dims.erase(s.ref.dims.begin() + d);
      s.ref.dims.insert(s.ref.dims.begin() + d, {outer, inner});
      s.ref.names.erase(s.ref.names.begin() + d);
      s.ref.names.insert(s.ref.names.begin() + d, names.begin(), names.end());
      return true;
    }
    case 3: {  // concatenate two selections through different ranks
      MeshLayout a = s.mesh, b = s.mesh;
      AtomMesh ra = s.ref, rb = s.ref;
      if (!RandomSelect(rng, s, &a, &ra) || !RandomSelect(rng, s, &b, &rb)) {
        return false;
      }
      std::set<int> atoms_a;
      for (int r : ra.Walked()) atoms_a.insert(r);
      bool disjoint = true;
      for (int r : rb.Walked()) disjoint = disjoint && !atoms_a.count(r);
      std::set<std::string> names(ra.names.begin(), ra.names.end());
      for (const std::string& n : rb.names) disjoint = disjoint && !names.count(n);
      // Concatenate (R11) also refuses parts that share a size-1 root dim
      // (by their root dims, R10), which selections allow (no position is
      // addressed twice).
      std::set<int> size1_a;
      for (const auto& rd : a.root_dims()) {
        for (int r : rd) {
          if (s.ref.root_shape[r] == 1) size1_a.insert(r);
        }
      }
      for (const auto& rd : b.root_dims()) {
        for (int r : rd) disjoint = disjoint && !size1_a.count(r);
      }
      absl::StatusOr<MeshLayout> cat = MeshLayout::Concatenate({a, b});
      EXPECT_EQ(cat.ok(), disjoint) << cat.status();
      if (!cat.ok() || !disjoint) return false;
      AtomMesh ref = ra;
      ref.dims.insert(ref.dims.end(), rb.dims.begin(), rb.dims.end());
      ref.names.insert(ref.names.end(), rb.names.begin(), rb.names.end());
      s.mesh = *std::move(cat);
      s.ref = ref;
      return true;
    }
    default: {  // transpose
      std::vector<int> perm(nd);
      for (int i = 0; i < nd; ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      s.mesh = Ok(s.mesh.Transpose(perm));
      AtomMesh ref = s.ref;
      for (int i = 0; i < nd; ++i) {
        ref.dims[i] = s.ref.dims[perm[i]];
        ref.names[i] = s.ref.names[perm[i]];
      }
      s.ref = ref;
      return true;
    }
  }
}

TEST(FlattenedNamesProperties, RandomSequencesAgainstTheAtomModel) {
  int steps_done = 0;
  int selects_failed = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937 rng(seed);
    const int nd = static_cast<int>(Uniform(rng, 1, 4));
    std::vector<int64_t> shape;
    std::vector<std::string> names;
    int next = 0;
    for (int i = 0; i < nd; ++i) {
      shape.push_back(Uniform(rng, 1, 3));
      names.push_back(absl::StrCat("r", next++));
    }
    State s{Ok(MeshLayout::FromShape(shape, names)),
            AtomMesh::Root(shape, names), {}, 0};
    for (int step = 0; step < 8; ++step) {
      SCOPED_TRACE(absl::StrCat("step ", step, ": ", s.mesh.LayoutString()));
      ExpectSame(s.mesh, s.ref);
      if (::testing::Test::HasFailure()) return;
      if (RandomStep(rng, s)) {
        ++steps_done;
      } else {
        ++selects_failed;
      }
    }
  }
  std::printf("200 seeds x 8 steps: %d steps applied, %d refused\n",
              steps_done, selects_failed);
  // The sequences really transform, and both outcomes occur.
  EXPECT_GT(steps_done, 800);
  EXPECT_GT(selects_failed, 50);
}

}  // namespace
}  // namespace devmesh
