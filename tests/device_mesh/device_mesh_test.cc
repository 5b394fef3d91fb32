// DeviceMesh without collectives: construction errors (R1, R18), dims (R4,
// R6), slicing and flatten rules (R8, R9), text (R14), equality and hash
// (R15), serialization (R16), the mesh stack (R13) and the root (R12). Runs
// as one rank of a larger world over an InMemoryStore; no group is made.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "store/memory_store.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "device_mesh/mesh_stack.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/members_only_comm.h"

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

TEST(InitDeviceMesh, R18Errors) {
  auto rt = Runtime(0, 8);
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "dp"}).status(),
              absl::StatusCode::kInvalidArgument, "'dp' is repeated");
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 4}, {"dp"}).status(),
              absl::StatusCode::kInvalidArgument, "same length");
  ExpectError(InitDeviceMesh(rt, "cuda:0", {2, 4}).status(),
              absl::StatusCode::kInvalidArgument, "'cuda:0'");
  ExpectError(InitDeviceMesh(rt, "", {2, 4}).status(),
              absl::StatusCode::kInvalidArgument, "device type");
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 0, 4}).status(),
              absl::StatusCode::kInvalidArgument, "[2, 0, 4]");
  ExpectError(InitDeviceMesh(rt, "cpu", {}).status(),
              absl::StatusCode::kInvalidArgument, "empty");
  ExpectError(InitDeviceMesh(rt, "cpu", {2, 3}).status(),
              absl::StatusCode::kInvalidArgument,
              "mesh_shape product (6) must equal world size (8)");
  ExpectError(InitDeviceMesh(MeshRuntime::Detached(0), "cpu", {8}).status(),
              absl::StatusCode::kFailedPrecondition, "bootstrap");
  ExpectError(InitDeviceMesh(rt, "cpu", {int64_t{1} << 40, int64_t{1} << 40})
                  .status(),
              absl::StatusCode::kInvalidArgument, "must equal world size (8)");
}

TEST(DeviceMesh, R1ConstructionErrors) {
  auto rt = Runtime(0, 8);
  ExpectError(DeviceMesh::Create(rt, "cpu", {{0, 1}, {2}}).status(),
              absl::StatusCode::kInvalidArgument, "rectangular");
  ExpectError(DeviceMesh::Create(rt, "cpu", {0, 0}).status(),
              absl::StatusCode::kInvalidArgument, "0");
  ExpectError(DeviceMesh::Create(rt, "cpu", {0, -1}).status(),
              absl::StatusCode::kInvalidArgument, "-1");
  ExpectError(DeviceMesh::Create(rt, "cpu", {0, 9}).status(),
              absl::StatusCode::kInvalidArgument, "world size is 8");
  ExpectError(DeviceMesh::Create(rt, "cpu", {0, 1}, {"a", "b"}).status(),
              absl::StatusCode::kInvalidArgument, "(a, b) give 2 names");
  ExpectError(DeviceMesh::Create(nullptr, "cpu", {0, 1}).status(),
              absl::StatusCode::kInvalidArgument, "runtime");
  // A scalar is a 1-d mesh of one rank (R1).
  auto one = DeviceMesh::Create(rt, "cpu", 5);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->shape(), std::vector<int64_t>{1});
  EXPECT_EQ(one->mesh(), RankTable({5}));
}

TEST(DeviceMesh, R2R5R6R7Queries) {
  auto mesh = InitDeviceMesh(Runtime(6, 8), "cpu", {2, 4}, {"dp", "tp"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->ndim(), 2);
  EXPECT_EQ(mesh->shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(mesh->size(), 8);
  EXPECT_EQ(*mesh->size("tp"), 4);
  EXPECT_EQ(*mesh->size(0), 2);
  EXPECT_EQ(mesh->mesh(), RankTable({{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(mesh->GetRank(), 6);
  EXPECT_EQ(*mesh->GetCoordinate(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*mesh->GetLocalRank("dp"), 1);
  EXPECT_EQ(*mesh->GetLocalRank(1), 2);
  EXPECT_EQ(mesh->mesh_dim_names(), (std::vector<std::string>{"dp", "tp"}));
  EXPECT_EQ(mesh->dim_group_names(), (std::vector<std::string>{"dp", "tp"}));
  auto unnamed = InitDeviceMesh(Runtime(0, 8), "cpu", {2, 4});
  EXPECT_EQ(unnamed->dim_group_names(),
            (std::vector<std::string>{"dim_0", "dim_1"}));  // R3
}

TEST(DeviceMesh, R4DimErrors) {
  auto mesh = InitDeviceMesh(Runtime(0, 8), "cpu", {2, 4}, {"dp", "tp"});
  ASSERT_TRUE(mesh.ok());
  ExpectError(mesh->GetGroup().status(), absl::StatusCode::kInvalidArgument,
              "a mesh dim is required for a 2-d mesh");
  ExpectError(mesh->GetGroup("pp").status(), absl::StatusCode::kNotFound,
              "pp");
  ExpectError(mesh->GetGroup(2).status(), absl::StatusCode::kOutOfRange,
              "mesh dim 2");
  ExpectError(mesh->GetGroup(-1).status(), absl::StatusCode::kOutOfRange,
              "mesh dim -1");
  ExpectError(mesh->GetLocalRank().status(),
              absl::StatusCode::kInvalidArgument, "2-d mesh");
  ExpectError(mesh->size(5).status(), absl::StatusCode::kOutOfRange, "5");
  auto unnamed = InitDeviceMesh(Runtime(0, 8), "cpu", {8});
  ExpectError(unnamed->GetGroup("dp").status(), absl::StatusCode::kNotFound,
              "no dim names");
  // A device type devmesh does not know fails at InitDeviceMesh, listing
  // the ones it knows, unless every dim has a backend (R19).
  ExpectError(InitDeviceMesh(Runtime(0, 8), "tpu", {8}).status(),
              absl::StatusCode::kInvalidArgument,
              "device type 'tpu' is not one devmesh knows: the device types "
              "are \"cpu\"");
  ExpectError(InitDeviceMesh(Runtime(0, 8), "gpu", {8}).status(),
              absl::StatusCode::kInvalidArgument,
              "device type 'gpu' is not one devmesh knows (did you mean "
              "\"cuda\"?)");
  ExpectError(InitDeviceMesh(Runtime(0, 8), "CPU", {8}).status(),
              absl::StatusCode::kInvalidArgument,
              "device type 'CPU' is not one devmesh knows (did you mean "
              "\"cpu\"?)");
  ExpectError(InitDeviceMesh(Runtime(0, 8), "", {8}).status(),
              absl::StatusCode::kInvalidArgument,
              "devmesh knows \"cpu\" and \"cuda\"");
  MeshOptions dp_only;
  dp_only.per_dim["dp"].backend = "gloo";
  ExpectError(
      InitDeviceMesh(Runtime(0, 8), "tpu", {2, 4}, {"dp", "tp"}, dp_only)
          .status(),
      absl::StatusCode::kInvalidArgument, "needs a backend for every dim");
  MeshOptions both = dp_only;
  both.per_dim["tp"].backend = "gloo";
  EXPECT_TRUE(
      InitDeviceMesh(Runtime(0, 8), "tpu", {2, 4}, {"dp", "tp"}, both).ok());
  // Keys "dim_<i>" count, on named and unnamed meshes alike.
  MeshOptions by_index;
  by_index.per_dim["dim_0"].backend = "gloo";
  by_index.per_dim["dim_1"].backend = "gloo";
  EXPECT_TRUE(InitDeviceMesh(Runtime(0, 8), "tpu", {2, 4}, {}, by_index).ok());
  EXPECT_TRUE(InitDeviceMesh(Runtime(0, 8), "tpu", {2, 4}, {"dp", "tp"},
                             by_index)
                  .ok());
  // A mesh made another way keeps the late error at GetGroup.
  auto tpu = DeviceMesh::FromLayout(
      Runtime(0, 8), "tpu", *MeshLayout::FromShape({8}, {}));
  ASSERT_TRUE(tpu.ok()) << tpu.status();
  ExpectError(tpu->GetGroup().status(), absl::StatusCode::kInvalidArgument,
              "no default backend");
}

TEST(DeviceMesh, RankOutsideTheMesh) {
  auto rt = Runtime(7, 8);
  auto mesh = DeviceMesh::Create(rt, "cpu", {{0, 1}, {2, 3}}, {"a", "b"});
  ASSERT_TRUE(mesh.ok());
  EXPECT_FALSE(mesh->GetCoordinate().has_value());  // R7
  ExpectError(mesh->GetLocalRank("a").status(),
              absl::StatusCode::kFailedPrecondition, "rank 7");
  // R8: a non-member slices through coordinate 0.
  auto b = mesh->Slice({"b"});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->mesh(), RankTable({0, 1}));
}

TEST(DeviceMesh, R8Slicing) {
  auto mesh = InitDeviceMesh(Runtime(6, 8), "cpu", {2, 2, 2},
                             {"pp", "dp", "tp"});
  ASSERT_TRUE(mesh.ok());
  EXPECT_EQ(mesh->Slice({"tp"})->mesh(), RankTable({6, 7}));
  EXPECT_EQ(mesh->Slice({"pp"})->mesh(), RankTable({2, 6}));
  EXPECT_EQ(mesh->Slice({"tp", "pp"})->mesh(), RankTable({{2, 6}, {3, 7}}));
  EXPECT_EQ(*mesh->Slice({"pp", "dp", "tp"}), *mesh);
  auto slice_of_slice = mesh->Slice({"dp", "tp"})->Slice({"dp"});
  EXPECT_EQ(slice_of_slice->mesh(), RankTable({4, 6}));
  ExpectError(mesh->Slice(std::vector<std::string>{}).status(),
              absl::StatusCode::kInvalidArgument, "at least one");
  ExpectError(mesh->Slice({"tp", "tp"}).status(),
              absl::StatusCode::kInvalidArgument, "tp");
  ExpectError(mesh->Slice({"ep"}).status(), absl::StatusCode::kNotFound,
              "ep");
  auto unnamed = InitDeviceMesh(Runtime(0, 8), "cpu", {8});
  ExpectError(unnamed->Slice({"x"}).status(),
              absl::StatusCode::kFailedPrecondition, "no dim names");
  // R12: the root of any slice.
  EXPECT_EQ(mesh->Slice({"dp"})->RootMesh(), *mesh);
}

TEST(DeviceMesh, R9FlattenRules) {
  auto mesh = InitDeviceMesh(Runtime(5, 8), "cpu", {2, 2, 2},
                             {"pp", "dp", "tp"});
  ASSERT_TRUE(mesh.ok());
  auto flat = mesh->Slice({"dp", "tp"})->Flatten();
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->mesh_dim_names(), std::vector<std::string>{"dp_tp"});
  EXPECT_EQ(flat->mesh(), RankTable({4, 5, 6, 7}));
  EXPECT_EQ(*mesh->Slice({"dp_tp"}), *flat);  // remembered on the root
  // Same name and layout: the same mesh back.
  EXPECT_EQ(*mesh->Slice({"dp", "tp"})->Flatten("dp_tp"), *flat);
  // Same name, another layout.
  ExpectError(mesh->Slice({"pp", "tp"})->Flatten("dp_tp").status(),
              absl::StatusCode::kInvalidArgument, "another layout");
  // A root dim name.
  ExpectError(mesh->Slice({"dp", "tp"})->Flatten("pp").status(),
              absl::StatusCode::kInvalidArgument, "'pp'");
  // Non-adjacent flatten keeps order.
  auto far = mesh->Slice({"pp", "tp"})->Flatten();
  EXPECT_EQ(far->mesh(), RankTable({0, 1, 4, 5}));
  // 1-d to its own name: itself.
  auto tp = mesh->Slice({"tp"});
  EXPECT_EQ(*tp->Flatten("tp"), *tp);
  ExpectError(mesh->Flatten("").status(), absl::StatusCode::kInvalidArgument,
              "empty");
}

TEST(DeviceMesh, R14TextR15EqualityAndHash) {
  auto rt = Runtime(0, 8);
  // "cuda" meshes from layouts: InitDeviceMesh("cuda") needs a GPU.
  auto cuda = [&](std::vector<int64_t> shape, std::vector<std::string> names) {
    return DeviceMesh::FromLayout(rt, "cuda",
                                  *MeshLayout::FromShape(shape, names));
  };
  auto a = cuda({2, 4}, {"dp", "tp"});
  EXPECT_EQ(a->ToString(), "DeviceMesh(dp=2, tp=4, 'cuda')");
  EXPECT_EQ(InitDeviceMesh(rt, "cpu", {2, 4})->ToString(),
            "DeviceMesh((2, 4), 'cpu')");
  EXPECT_EQ(InitDeviceMesh(rt, "cpu", {8})->ToString(),
            "DeviceMesh((8,), 'cpu')");
  auto b = DeviceMesh::Create(rt, "cuda", {{0, 1, 2, 3}, {4, 5, 6, 7}},
                              {"dp", "tp"});
  EXPECT_EQ(*a, *b);  // explicit vs strided, same table
  auto c = InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"});
  EXPECT_NE(*a, *c);  // device type
  auto d = cuda({2, 4}, {"x", "tp"});
  EXPECT_NE(*a, *d);  // names
  auto e = cuda({4, 2}, {"dp", "tp"});
  EXPECT_NE(*a, *e);  // shape
  absl::flat_hash_set<DeviceMesh> set = {*a, *b, *c, *d, *e};
  EXPECT_EQ(set.size(), 4u);
}

TEST(DeviceMesh, R16SerializationRoundTrip) {
  auto rt = Runtime(3, 8);
  MeshOptions options;
  options.all.timeout = absl::Seconds(42);
  options.per_dim["tp"].backend = "gloo";
  auto mesh = DeviceMesh::Create(rt, "cpu", {{7, 3, 1, 0}, {2, 4, 6, 5}},
                                 {"dp", "tp"}, options);
  ASSERT_TRUE(mesh.ok());
  for (const DeviceMesh& m : {*mesh, *mesh->Slice({"tp"}),
                              *mesh->Flatten("all")}) {
    const std::string bytes = m.Serialize();
    auto back = DeviceMesh::Deserialize(bytes, rt);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
    EXPECT_EQ(back->Serialize(), bytes);
    EXPECT_EQ(back->options().all.timeout, absl::Seconds(42));
    EXPECT_EQ(back->options().per_dim.at("tp").backend, "gloo");
    for (size_t cut = 0; cut < bytes.size(); cut += 7) {
      EXPECT_FALSE(DeviceMesh::Deserialize(bytes.substr(0, cut), rt).ok());
    }
  }
  ExpectError(DeviceMesh::Deserialize("nonsense", rt).status(),
              absl::StatusCode::kInvalidArgument, "DMESH");
}

// verify_calls travels (unset, false, true per dim): version 3 bytes when
// some dim sets it, version 2 bytes (as before it) when none does.
TEST(DeviceMesh, SerializationKeepsVerifyCalls) {
  auto rt = Runtime(0, 8);
  MeshOptions plain;
  plain.all.backend = "gloo";
  auto unset = InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, plain);
  ASSERT_TRUE(unset.ok()) << unset.status();
  const std::string unset_bytes = unset->Serialize();
  ASSERT_GT(unset_bytes.size(), 5u);
  EXPECT_EQ(unset_bytes[5], 2);
  MeshOptions options = plain;
  options.all.verify_calls = false;
  options.per_dim["tp"].verify_calls = true;
  options.per_dim["dp"].backend = "ucx";
  auto mesh = InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"}, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::string bytes = mesh->Serialize();
  EXPECT_EQ(bytes[5], 3);
  auto back = DeviceMesh::Deserialize(bytes, rt);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->options().all.verify_calls, std::optional<bool>(false));
  EXPECT_EQ(back->options().per_dim.at("tp").verify_calls,
            std::optional<bool>(true));
  EXPECT_EQ(back->options().per_dim.at("dp").verify_calls, std::nullopt);
  EXPECT_EQ(back->Serialize(), bytes);
  auto back_unset = DeviceMesh::Deserialize(unset_bytes, rt);
  ASSERT_TRUE(back_unset.ok()) << back_unset.status();
  EXPECT_EQ(back_unset->options().all.verify_calls, std::nullopt);
  // A verify byte other than 0, 1 or 2 is corrupt.
  std::string bad = bytes;
  const size_t at = bad.find("gloo") + 4 + 9;  // after backend and timeout
  ASSERT_EQ(bad[at], 1);
  bad[at] = 3;
  EXPECT_FALSE(DeviceMesh::Deserialize(bad, rt).ok());
}

TEST(DeviceMesh, R13MeshStack) {
  auto rt = Runtime(0, 8);
  auto a = InitDeviceMesh(rt, "cpu", {8}, {"x"});
  auto b = InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"});
  EXPECT_FALSE(CurrentMesh().has_value());
  {
    ScopedMesh outer(*a);
    EXPECT_EQ(*CurrentMesh(), *a);
    {
      ScopedMesh inner(*b);
      EXPECT_EQ(*CurrentMesh(), *b);
      EXPECT_EQ(MeshStackDepth(), 2);
    }
    EXPECT_EQ(*CurrentMesh(), *a);
  }
  EXPECT_EQ(MeshStackDepth(), 0);
}

TEST(DeviceMesh, ConcatenateErrors) {
  auto rt = Runtime(0, 8);
  auto mesh = InitDeviceMesh(rt, "cpu", {2, 2, 2}, {"pp", "dp", "tp"});
  auto other = InitDeviceMesh(rt, "cpu", {2, 2, 2}, {"pp", "dp", "tp"});
  ExpectError(DeviceMesh::Concatenate({}).status(),
              absl::StatusCode::kInvalidArgument, "at least one");
  ExpectError(DeviceMesh::Concatenate({*mesh->Slice({"dp"}),
                                       *other->Slice({"tp"})})
                  .status(),
              absl::StatusCode::kFailedPrecondition, "different roots");
  ExpectError(DeviceMesh::Concatenate({*mesh->Slice({"dp", "tp"}),
                                       *mesh->Slice({"tp"})})
                  .status(),
              absl::StatusCode::kInvalidArgument, "overlapping");
  auto cat = DeviceMesh::Concatenate({*mesh->Slice({"tp"}),
                                      *mesh->Slice({"pp"})});
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->mesh(), RankTable({{0, 4}, {1, 5}}));
}

TEST(DeviceMesh, FromGroupsErrors) {
  auto rt = Runtime(0, 8);
  ExpectError(DeviceMesh::FromGroups(rt, "cpu", {}).status(),
              absl::StatusCode::kInvalidArgument, "at least one group");
  ExpectError(DeviceMesh::FromGroups(rt, "cpu", {nullptr}).status(),
              absl::StatusCode::kInvalidArgument, "group 0 is null");
}

TEST(DeviceMesh, MoreRErrors) {
  auto rt = Runtime(0, 8);
  // R1: duplicate names.
  ExpectError(DeviceMesh::Create(rt, "cpu", {{0, 1}, {2, 3}}, {"a", "a"})
                  .status(),
              absl::StatusCode::kInvalidArgument, "'a' appears twice");
  // R9: flatten of an unnamed mesh.
  auto unnamed = InitDeviceMesh(rt, "cpu", {2, 4});
  ExpectError(unnamed->Flatten().status(),
              absl::StatusCode::kFailedPrecondition, "no dim names");
  // R11: different device types; unnamed parts.
  auto cpu = InitDeviceMesh(rt, "cpu", {2, 4}, {"dp", "tp"});
  auto tpu = DeviceMesh::FromLayout(rt, "tpu", cpu->layout());
  ExpectError(DeviceMesh::Concatenate({*cpu->Slice({"dp"}),
                                       *tpu->Slice({"tp"})})
                  .status(),
              absl::StatusCode::kFailedPrecondition, "different roots");
  auto u0 = unnamed->Transpose({1, 0});
  ExpectError(DeviceMesh::Concatenate({*unnamed, *u0}).status(),
              absl::StatusCode::kInvalidArgument, "must have dim names");
}

// A group that only knows its members: enough for FromGroups' checks.
class FakeGroup : public testing::MembersOnlyComm {
 public:
  FakeGroup(std::vector<int> ranks, int rank)
      : MembersOnlyComm("gloo", rank, std::move(ranks)) {}
};

// Issue 11: Abort on a sub-mesh is refused (PyTorch's rule) and aborts
// nothing; on the root it aborts every group once.
TEST(DeviceMesh, AbortIsRefusedOnASubMeshAndAbortsAllOnTheRoot) {
  auto dp = std::make_shared<FakeGroup>(std::vector<int>{1, 3}, 0);
  auto tp = std::make_shared<FakeGroup>(std::vector<int>{0, 1}, 1);
  auto mesh = DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp},
                                     RankTable{{0, 1}, {2, 3}}, {"dp", "tp"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto slice = mesh->Slice({"tp"});
  ASSERT_TRUE(slice.ok()) << slice.status();
  ExpectError(slice->Abort(), absl::StatusCode::kFailedPrecondition,
              "Abort is not supported on a sub-mesh (DeviceMesh(tp=2, 'cpu'))"
              ": its groups are shared with the root mesh "
              "DeviceMesh(dp=2, tp=2, 'cpu'); call RootMesh().Abort()");
  auto flat = mesh->Flatten();
  ASSERT_TRUE(flat.ok()) << flat.status();
  ExpectError(flat->Abort(), absl::StatusCode::kFailedPrecondition,
              "sub-mesh");
  auto transposed = mesh->Transpose({1, 0});
  ASSERT_TRUE(transposed.ok()) << transposed.status();
  ExpectError(transposed->Abort(), absl::StatusCode::kFailedPrecondition,
              "sub-mesh");
  EXPECT_EQ(dp->aborts, 0);
  EXPECT_EQ(tp->aborts, 0);
  // All names in order is the mesh itself: a root.
  auto all = mesh->Slice({"dp", "tp"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->Abort().ok());
  EXPECT_EQ(dp->aborts, 1);
  EXPECT_EQ(tp->aborts, 1);
  EXPECT_TRUE(slice->RootMesh().Abort().ok());
  EXPECT_EQ(dp->aborts, 2);
  EXPECT_EQ(tp->aborts, 2);
}

TEST(DeviceMesh, R17FromGroups) {
  // Rank 1 of a 2x2 mesh [[0, 1], [2, 3]]: dp line [1, 3], tp line [0, 1].
  auto dp = std::make_shared<FakeGroup>(std::vector<int>{1, 3}, 0);
  auto tp = std::make_shared<FakeGroup>(std::vector<int>{0, 1}, 1);
  auto mesh = DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp},
                                     RankTable{{0, 1}, {2, 3}}, {"dp", "tp"});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->GetRank(), 1);
  EXPECT_EQ(*mesh->GetGroup("dp"), dp);
  EXPECT_EQ(*mesh->GetGroup("tp"), tp);
  // No runtime: a new dim's group cannot be made.
  ExpectError(mesh->Flatten()->GetGroup().status(),
              absl::StatusCode::kFailedPrecondition, "existing groups");
  // One group: a 1-d mesh of its ranks; an explicit mesh must list them.
  auto one = DeviceMesh::FromGroups(nullptr, "cpu", {tp});
  EXPECT_EQ(one->mesh(), RankTable({0, 1}));
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {tp}, RankTable{1, 0})
                  .status(),
              absl::StatusCode::kInvalidArgument, "in order: [0, 1]");
  // No table: inferred over the groups themselves (their AllGather fails
  // here, and the error comes back as it is).
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp}, std::nullopt,
                                     {"dp", "tp"})
                  .status(),
              absl::StatusCode::kInternal, "gloo test backend runs no collective");
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp}).status(),
              absl::StatusCode::kInvalidArgument, "mesh_dim_names are required");
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp},
                                     RankTable{{0, 1}, {2, 3}})
                  .status(),
              absl::StatusCode::kInvalidArgument, "mesh_dim_names are required");
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {dp, tp},
                                     RankTable{{0, 1}, {2, 3}}, {"dp"})
                  .status(),
              absl::StatusCode::kInvalidArgument, "one name per group");
  // Groups swapped: dim 0's group is not this rank's dp line.
  ExpectError(DeviceMesh::FromGroups(nullptr, "cpu", {tp, dp},
                                     RankTable{{0, 1}, {2, 3}}, {"dp", "tp"})
                  .status(),
              absl::StatusCode::kInvalidArgument,
              "group 0 holds ranks [0, 1] but this rank's line along mesh "
              "dim 0 is [1, 3]");
}

}  // namespace
}  // namespace devmesh
