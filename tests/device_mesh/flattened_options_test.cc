// DeviceMesh as one rank of a larger world (InMemoryStore runtime, no group
// made): flattened names wherever a dim name goes (Slice mixed with dims,
// size, GetLocalRank, Shift) on the root, slices, transposes and through
// Serialize/Deserialize with the issue's literal values, on meshes made by
// Unflatten and with size-1 dims; MeshOptions key validation at Create /
// InitDeviceMesh / Flatten; a repeat Flatten with other group options; the
// auto dim (-1).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

// One rank of a `world`-rank job whose other ranks never come: no mesh
// agreement (device_mesh/mesh_agreement.h), which would wait for them.
std::shared_ptr<MeshRuntime> Runtime(int rank, int world) {
  auto runtime = *MeshRuntime::Create(std::make_shared<InMemoryStore>(), rank,
                                      world, rank);
  runtime->SkipMeshAgreementForTesting();
  return runtime;
}

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(std::string(s.message()).find(needle), std::string::npos)
      << "message '" << s.message() << "' lacks '" << needle << "'";
}

template <typename T>
T Ok(absl::StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status();
  return *std::move(v);
}

const RankTable kDpPt = {{0, 1, 6, 7}, {2, 3, 8, 9}, {4, 5, 10, 11}};

// (2, 3, 2) named (pp, dp, tp) over 12 ranks; "pt" = flatten of (pp, tp).
DeviceMesh RootWithPt(int rank) {
  DeviceMesh root =
      Ok(InitDeviceMesh(Runtime(rank, 12), "cpu", {2, 3, 2}, {"pp", "dp", "tp"}));
  DeviceMesh pt = Ok(Ok(root.Slice({"pp", "tp"})).Flatten("pt"));
  EXPECT_EQ(pt.mesh_dim_names(), std::vector<std::string>{"pt"});
  return root;
}

TEST(FlattenedNames, IssueExampleOnEveryRank) {
  for (int rank = 0; rank < 12; ++rank) {
    DeviceMesh root = RootWithPt(rank);
    DeviceMesh dp_pt = Ok(root.Slice({"dp", "pt"}));
    EXPECT_EQ(dp_pt.mesh(), kDpPt) << "rank " << rank;
    EXPECT_EQ(dp_pt.ToString(), "DeviceMesh(dp=3, pt=4, 'cpu')");
    EXPECT_EQ(Ok(root.size("pt")), 4);
    // Through Serialize / Deserialize: the same table and names.
    DeviceMesh back =
        Ok(DeviceMesh::Deserialize(dp_pt.Serialize(), root.runtime()));
    EXPECT_EQ(back.mesh(), kDpPt);
    EXPECT_EQ(back, dp_pt);
    // Transposed order.
    EXPECT_EQ(Ok(root.Slice({"pt", "dp"})), Ok(dp_pt.Transpose({1, 0})));
  }
  DeviceMesh root = RootWithPt(7);
  EXPECT_EQ(Ok(root.GetLocalRank("pt")), 3);
  EXPECT_EQ(Ok(root.GetLocalRank("dp")), 0);
  EXPECT_EQ(Ok(root.Slice({"pt"})).mesh(), RankTable({0, 1, 6, 7}));
  EXPECT_EQ(Ok(root.Slice({"pt"})).layout().GroupOf(7, 0).value(),
            (std::vector<int64_t>{0, 1, 6, 7}));
  DeviceMesh root9 = RootWithPt(9);  // pt line of rank 9: [2, 3, 8, 9]
  EXPECT_EQ(Ok(root9.GetLocalRank("pt")), 3);
  EXPECT_EQ(Ok(root9.Slice({"pt"})).mesh(), RankTable({2, 3, 8, 9}));
  EXPECT_EQ(Ok(root9.Shift("pt", 1, true)).destination, 2);
  // pp with pt overlaps (pt holds pp): both named.
  ExpectError(root.Slice({"pt", "pp"}).status(),
              absl::StatusCode::kInvalidArgument, "'pt' and 'pp' overlap");
  ExpectError(root.Slice({"dp", "tp", "pt"}).status(),
              absl::StatusCode::kInvalidArgument, "'tp' and 'pt' overlap");
  ExpectError(root.size("qq").status(), absl::StatusCode::kNotFound, "'qq'");
}

TEST(FlattenedNames, OnSlicesAndTransposes) {
  DeviceMesh root = RootWithPt(7);
  // A transpose of the root, and a slice holding pp and tp, resolve pt.
  DeviceMesh t = Ok(root.Transpose({2, 0, 1}));  // (tp, pp, dp)
  EXPECT_EQ(Ok(t.Slice({"dp", "pt"})).mesh(), kDpPt);
  EXPECT_EQ(Ok(t.size("pt")), 4);
  EXPECT_EQ(Ok(t.GetLocalRank("pt")), 3);
  DeviceMesh tp_pp = Ok(root.Slice({"tp", "pp"}));
  EXPECT_EQ(Ok(tp_pp.Slice({"pt"})).mesh(), RankTable({0, 1, 6, 7}));
  EXPECT_EQ(Ok(tp_pp.GetLocalRank("pt")), 3);
  // A slice without tp does not hold pt's ranks.
  DeviceMesh dp = Ok(root.Slice({"dp"}));
  ExpectError(dp.size("pt").status(), absl::StatusCode::kInvalidArgument,
              "outside the mesh");
  // Size-1 dims next to a flattened name (PyTorch's
  // mesh["dp_shard_cp", "tp"]).
  DeviceMesh m = Ok(InitDeviceMesh(Runtime(5, 8), "cpu", {1, 2, 1, 4},
                                   {"pp", "dp_shard", "cp", "tp"}));
  Ok(Ok(m.Slice({"dp_shard", "cp"})).Flatten("dp_shard_cp"));
  DeviceMesh sel = Ok(m.Slice({"dp_shard_cp", "tp"}));
  EXPECT_EQ(sel.mesh(), RankTable({{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(Ok(m.GetLocalRank("dp_shard_cp")), 1);
}

// (4, 3) named (dp, tp) over 12; dp unflattened into (a, b); "atp" is the
// flatten of (a, tp): through rank 0 it is [0, 1, 2, 6, 7, 8].
TEST(FlattenedNames, OfAnUnflattenedMesh) {
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
    ExpectError(root.Slice({"dp", "atp"}).status(),
                absl::StatusCode::kInvalidArgument, "'dp' and 'atp'");
  }
}

// Size-1 dims: (2, 1, 2) named (pp, dp, tp), "pt" = flatten of (pp, tp).
TEST(FlattenedNames, WithSizeOneDims) {
  DeviceMesh root = Ok(
      InitDeviceMesh(Runtime(3, 4), "cpu", {2, 1, 2}, {"pp", "dp", "tp"}));
  ASSERT_TRUE(Ok(root.Slice({"pp", "tp"})).Flatten("pt").ok());
  EXPECT_EQ(Ok(root.Slice({"dp", "pt"})).mesh(), RankTable({{0, 1, 2, 3}}));
  EXPECT_EQ(Ok(root.Slice({"pt", "dp"})).mesh(),
            RankTable({{0}, {1}, {2}, {3}}));
  EXPECT_EQ(Ok(root.GetLocalRank("pt")), 3);
  ExpectError(root.Slice({"pt", "tp"}).status(),
              absl::StatusCode::kInvalidArgument, "'pt' and 'tp' overlap");
}

TEST(Neighbours, IssueExamples) {
  auto shift = [](int rank, int64_t k, bool periodic) {
    DeviceMesh m =
        Ok(InitDeviceMesh(Runtime(rank, 8), "cpu", {2, 4}, {"dp", "pp"}));
    return Ok(m.Shift("pp", k, periodic));
  };
  Neighbours n = shift(5, 1, false);
  EXPECT_EQ(n.source, 4);
  EXPECT_EQ(n.destination, 6);
  EXPECT_EQ(n.source_in_group, 0);
  EXPECT_EQ(n.destination_in_group, 2);
  n = shift(7, 1, false);
  EXPECT_EQ(n.source, 6);
  EXPECT_EQ(n.destination, std::nullopt);
  n = shift(7, 1, true);
  EXPECT_EQ(n.destination, 4);
  EXPECT_EQ(n.destination_in_group, 0);
  n = shift(4, -1, true);
  EXPECT_EQ(n.source, 5);
  EXPECT_EQ(n.destination, 7);
  // On a transpose and a slice.
  DeviceMesh m = Ok(InitDeviceMesh(Runtime(7, 8), "cpu", {2, 4}, {"dp", "pp"}));
  EXPECT_EQ(Ok(Ok(m.Transpose({1, 0})).Shift("pp", 1, true)).destination, 4);
  EXPECT_EQ(Ok(Ok(m.Slice({"pp"})).Shift(0, -1)).destination, 6);
  DeviceMesh back = Ok(DeviceMesh::Deserialize(m.Serialize(), m.runtime()));
  EXPECT_EQ(Ok(back.Shift("dp", 1, true)).destination, 3);
  ExpectError(m.Shift("xx", 1).status(), absl::StatusCode::kNotFound, "'xx'");
  DeviceMesh other = Ok(DeviceMesh::Create(m.runtime(), "cpu", {0, 1}));
  ExpectError(other.Shift(0, 1).status(),
              absl::StatusCode::kFailedPrecondition, "not part of");
}

TEST(AutoDim, InitDeviceMesh) {
  auto rt = Runtime(0, 12);
  EXPECT_EQ(Ok(InitDeviceMesh(rt, "cpu", {-1, 4})).shape(),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(Ok(InitDeviceMesh(rt, "cpu", {2, -1, 2}, {"pp", "dp", "tp"}))
                .ToString(),
            "DeviceMesh(pp=2, dp=3, tp=2, 'cpu')");
  absl::Status s = InitDeviceMesh(rt, "cpu", {-1, 5}).status();
  ExpectError(s, absl::StatusCode::kInvalidArgument, "world size 12");
  ExpectError(s, absl::StatusCode::kInvalidArgument, "divisible by 5");
  ExpectError(InitDeviceMesh(rt, "cpu", {-1, -1}).status(),
              absl::StatusCode::kInvalidArgument, "more than one -1");
  EXPECT_EQ(Ok(InitDeviceMesh(rt, "cpu", {2, -1, 3}, {"a", "b", "c"})).shape(),
            (std::vector<int64_t>{2, 2, 3}));
}

TEST(MeshOptionsKeys, CheckedWhereTheMeshIsMade) {
  auto rt = Runtime(0, 8);
  MeshOptions typo;
  typo.per_dim["tpp"].backend = "gloo";
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, typo).status(),
              absl::StatusCode::kInvalidArgument,
              "MeshOptions.per_dim['tpp']: 'tpp' is not a dim of the mesh "
              "(dp, tp)");
  ExpectError(DeviceMesh::Create(rt, "cpu", {{0, 1}, {2, 3}}, {"dp", "tp"},
                                 typo)
                  .status(),
              absl::StatusCode::kInvalidArgument, "'tpp'");
  MeshOptions twice;
  twice.per_dim["dp"].timeout = absl::Seconds(5);
  twice.per_dim["dim_0"].timeout = absl::Seconds(6);
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, twice).status(),
              absl::StatusCode::kInvalidArgument,
              "MeshOptions.per_dim['dp']: dim 'dp' already has options under "
              "key 'dim_0'");
  MeshOptions far;
  far.per_dim["dim_2"].backend = "gloo";
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {}, far).status(),
              absl::StatusCode::kInvalidArgument,
              "MeshOptions.per_dim['dim_2']: dim index 2 is out of range for "
              "a 2-d mesh (dim_0, dim_1)");
  MeshOptions negative;
  negative.per_dim["tp"].timeout = absl::Seconds(-1);
  ExpectError(
      InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, negative).status(),
      absl::StatusCode::kInvalidArgument, "per_dim['tp'] timeout (-1s)");
  MeshOptions leading_zero;
  leading_zero.per_dim["dim_01"].backend = "gloo";
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {}, leading_zero).status(),
              absl::StatusCode::kInvalidArgument, "'dim_01'");
  // "dim_<i>" on a named mesh is kept under the dim's name, and applies.
  MeshOptions by_index;
  by_index.per_dim["dim_1"].timeout = absl::Seconds(9);
  DeviceMesh m = Ok(InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, by_index));
  ASSERT_EQ(m.options().per_dim.size(), 1u);
  EXPECT_EQ(m.options().per_dim.at("tp").timeout, absl::Seconds(9));
  // Flatten's group options are checked when flattening.
  GroupOptions bad;
  bad.timeout = absl::ZeroDuration();
  ExpectError(m.Flatten("all", bad).status(),
              absl::StatusCode::kInvalidArgument,
              "Flatten('all') group_options timeout (0) must be positive");
}

// R9 with options: a repeat Flatten with the same name and layout gives the
// earlier mesh back with the same options or none, and is InvalidArgument
// naming the name and both options when they differ.
TEST(FlattenOptions, RepeatWithOtherOptionsIsInvalidArgument) {
  DeviceMesh root =
      Ok(InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"}));
  GroupOptions a;
  a.timeout = absl::Seconds(25);
  GroupOptions b;
  b.timeout = absl::Seconds(30);
  DeviceMesh first = Ok(root.Flatten("pt", a));
  ExpectError(root.Flatten("pt", b).status(),
              absl::StatusCode::kInvalidArgument,
              "flattened mesh dim 'pt' already exists with group options "
              "{backend=unset, timeout=25s, nccl=unset}, not {backend=unset, "
              "timeout=30s, nccl=unset}: give the same options, or none, to "
              "get that mesh back, or another name for a group with other "
              "options");
  for (const std::optional<GroupOptions>& again :
       {std::optional<GroupOptions>(a), std::optional<GroupOptions>()}) {
    DeviceMesh m = Ok(root.Flatten("pt", again));
    EXPECT_EQ(m, first);
    EXPECT_EQ(m.options().per_dim.at("pt").timeout, absl::Seconds(25));
    EXPECT_EQ(Ok(root.Slice({"pt"})).options().per_dim.at("pt").timeout,
              absl::Seconds(25));
  }
  // A first Flatten without options counts as all unset.
  Ok(root.Flatten());
  Ok(root.Flatten(std::nullopt, GroupOptions()));
  GroupOptions gloo;
  gloo.backend = "gloo";
  ExpectError(root.Flatten(std::nullopt, gloo).status(),
              absl::StatusCode::kInvalidArgument,
              "flattened mesh dim 'dp_tp' already exists with group options "
              "{backend=unset, timeout=unset, nccl=unset}, not {backend=gloo, "
              "timeout=unset, nccl=unset}");
  // NCCL configs differ in one field.
  GroupOptions nccl;
  nccl.nccl = NcclOptions();
  Ok(Ok(root.Slice({"tp"})).Flatten("t", nccl));
  GroupOptions ctas = nccl;
  ctas.nccl->min_ctas = 4;
  ctas.nccl->net_name = "IB";
  ExpectError(Ok(root.Slice({"tp"})).Flatten("t", ctas).status(),
              absl::StatusCode::kInvalidArgument,
              "with group options {backend=unset, timeout=unset, "
              "nccl={blocking=1, split_share=0, cga_cluster_size=-1, "
              "min_ctas=-1, max_ctas=-1, net_name=''}}, not {backend=unset, "
              "timeout=unset, nccl={blocking=1, split_share=0, "
              "cga_cluster_size=-1, min_ctas=4, max_ctas=-1, net_name='IB'}}");
  // Another layout under the name is still refused as before.
  ExpectError(Ok(root.Slice({"dp"})).Flatten("t").status(),
              absl::StatusCode::kInvalidArgument,
              "flattened mesh dim 't' already has another layout");
}

}  // namespace
}  // namespace devmesh
