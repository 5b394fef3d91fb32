// Review probes (issues 10/12) on flattened names of meshes made by
// Unflatten, size-1 dims, repeated Flatten with other options, and MeshOptions
// keys; each expected value worked out by hand from the rank table.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bootstrap/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

std::shared_ptr<MeshRuntime> Runtime(int rank, int world) {
  return *MeshRuntime::Create(std::make_shared<InMemoryStore>(), rank, world,
                              rank);
}

template <typename T>
T Ok(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status();
  return *std::move(v);
}

// (4, 3) named (dp, tp) over 12; dp unflattened into (a, b); "atp" is the
// flatten of (a, tp): through rank 0 it is [0, 1, 2, 6, 7, 8].
TEST(ReviewProbe, FlattenedNameOfAnUnflattenedMesh) {
  for (int rank : {0, 4, 11}) {
    DeviceMesh root =
        Ok(InitDeviceMesh(Runtime(rank, 12), "cpu", {4, 3}, {"dp", "tp"}));
    DeviceMesh u = Ok(root.Unflatten("dp", {2, 2}, {"a", "b"}));
    DeviceMesh atp = Ok(Ok(u.Slice({"a", "tp"})).Flatten("atp"));
    const int64_t b = (rank / 3) % 2;
    std::vector<RankTable> line;
    for (int64_t a : {0, 1}) {
      for (int64_t t : {0, 1, 2}) line.push_back(RankTable(a * 6 + b * 3 + t));
    }
    EXPECT_EQ(atp.mesh(), RankTable(line)) << rank;
    EXPECT_EQ(Ok(root.size("atp")), 6);
    EXPECT_EQ(Ok(u.size("atp")), 6);
    const int64_t local = (rank / 6) * 3 + rank % 3;
    EXPECT_EQ(Ok(root.GetLocalRank("atp")), local) << rank;
    EXPECT_EQ(Ok(u.GetLocalRank("atp")), local) << rank;
    EXPECT_EQ(Ok(u.Slice({"b", "atp"})).mesh(),
              RankTable({{0, 1, 2, 6, 7, 8}, {3, 4, 5, 9, 10, 11}}));
    EXPECT_EQ(Ok(u.Slice({"atp", "b"})).mesh(),
              RankTable({{0, 3}, {1, 4}, {2, 5}, {6, 9}, {7, 10}, {8, 11}}));
    // dp holds a: overlap, both named.
    absl::Status s = root.Slice({"dp", "atp"}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(std::string(s.message()).find("'dp' and 'atp'"),
              std::string::npos)
        << s;
  }
}

// Size-1 dims: (2, 1, 2) named (pp, dp, tp), "pt" = flatten of (pp, tp).
TEST(ReviewProbe, FlattenedNameWithSizeOneDims) {
  DeviceMesh root = Ok(
      InitDeviceMesh(Runtime(3, 4), "cpu", {2, 1, 2}, {"pp", "dp", "tp"}));
  ASSERT_TRUE(Ok(root.Slice({"pp", "tp"})).Flatten("pt").ok());
  EXPECT_EQ(Ok(root.Slice({"dp", "pt"})).mesh(), RankTable({{0, 1, 2, 3}}));
  EXPECT_EQ(Ok(root.Slice({"pt", "dp"})).mesh(),
            RankTable({{0}, {1}, {2}, {3}}));
  EXPECT_EQ(Ok(root.GetLocalRank("pt")), 3);
  EXPECT_EQ(root.Slice({"pt", "tp"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// MeshOptions keys: a typo and two keys for one dim are refused up front.
TEST(ReviewProbe, OptionKeysAreCheckedAtInit) {
  MeshOptions typo;
  typo.per_dim["tpp"].backend = "gloo";
  absl::Status s = InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"},
                                  typo)
                       .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("'tpp'"), std::string::npos) << s;
  MeshOptions twice;
  twice.per_dim["tp"].backend = "gloo";
  twice.per_dim["dim_1"].backend = "gloo";
  s = InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"}, twice)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  MeshOptions leading_zero;
  leading_zero.per_dim["dim_01"].backend = "gloo";
  s = InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {}, leading_zero).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // -1 with a world that the other sizes do not divide.
  s = InitDeviceMesh(Runtime(0, 12), "cpu", {-1, 5}, {"dp", "tp"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Ok(InitDeviceMesh(Runtime(0, 12), "cpu", {2, -1, 3},
                              {"a", "b", "c"}))
                .shape(),
            (std::vector<int64_t>{2, 2, 3}));
}

}  // namespace
}  // namespace devmesh
