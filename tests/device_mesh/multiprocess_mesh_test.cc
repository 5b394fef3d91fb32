// DeviceMesh groups over Gloo in real processes: every dim of 2x2 and 2x2x2
// meshes, and the same through every transform, against //mesh's groups.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

namespace devmesh {
namespace {

using ::devmesh::testing::CheckAllDims;
using ::devmesh::testing::Expect;
using ::devmesh::testing::RunRanks;
using ::devmesh::testing::RuntimeOf;

TEST(MultiprocessMesh, TwoByTwoEveryDimAndTransform) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    // dp and tp are made from the layout: no world communicator, no Split.
    RETURN_IF_ERROR(Expect(
        runtime->world_communicators() == 0 &&
            runtime->group_creations() == 2,
        absl::StrCat("after dp, tp: worlds ", runtime->world_communicators(),
                     " groups ", runtime->group_creations(), ", want 0 2")));
    ASSIGN_OR_RETURN(tp, mesh.Slice({"tp"}));
    RETURN_IF_ERROR(CheckAllDims(tp));
    ASSIGN_OR_RETURN(flat, mesh.Flatten());
    RETURN_IF_ERROR(CheckAllDims(flat));
    ASSIGN_OR_RETURN(t, mesh.Transpose({1, 0}));
    RETURN_IF_ERROR(CheckAllDims(t));
    ASSIGN_OR_RETURN(dp, mesh.Slice({"dp"}));
    ASSIGN_OR_RETURN(cat, DeviceMesh::Concatenate({tp, dp}));
    RETURN_IF_ERROR(CheckAllDims(cat));
    // Reuse: slices, transposes and concatenations share the root's groups.
    ASSIGN_OR_RETURN(g_tp, mesh.GetGroup("tp"));
    ASSIGN_OR_RETURN(g_tp2, tp.GetGroup());
    ASSIGN_OR_RETURN(g_cat, cat.GetGroup(0));
    RETURN_IF_ERROR(Expect(g_tp == g_tp2 && g_tp == g_cat,
                           "tp group not reused by slice / concatenation"));
    // dp_tp is the world in world order, so it is the world communicator
    // itself (made for it: the only world communicator).
    ASSIGN_OR_RETURN(g_flat, flat.GetGroup());
    ASSIGN_OR_RETURN(world, runtime->World("auto", absl::Seconds(300)));
    RETURN_IF_ERROR(Expect(g_flat == world, "dp_tp is not the world"));
    return Expect(runtime->world_communicators() == 1 &&
                      runtime->group_creations() == 2,
                  absl::StrCat("worlds ", runtime->world_communicators(),
                               " groups ", runtime->group_creations(),
                               ", want 1 2"));
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, TwoByTwoByTwoFlattenUnflattenConcatenate) {
  absl::Status s = RunRanks(8, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2, 2},
                                          {"pp", "dp", "tp"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    // Adjacent flatten (dp, tp) and non-adjacent flatten (pp, tp).
    ASSIGN_OR_RETURN(dp_tp, mesh.Slice({"dp", "tp"}));
    ASSIGN_OR_RETURN(flat_adj, dp_tp.Flatten());
    RETURN_IF_ERROR(CheckAllDims(flat_adj));
    ASSIGN_OR_RETURN(pp_tp, mesh.Slice({"pp", "tp"}));
    ASSIGN_OR_RETURN(flat_far, pp_tp.Flatten("pp_tp"));
    RETURN_IF_ERROR(CheckAllDims(flat_far));
    // The root resolves a flattened name (R8).
    ASSIGN_OR_RETURN(again, mesh.Slice({"pp_tp"}));
    RETURN_IF_ERROR(Expect(again == flat_far, "root did not resolve pp_tp"));
    // Unflatten of the flattened dim gives the mesh back, groups included.
    ASSIGN_OR_RETURN(unflat, flat_adj.Unflatten(0, {2, 2}, {"dp", "tp"}));
    RETURN_IF_ERROR(Expect(unflat == dp_tp, "unflatten did not invert flatten"));
    RETURN_IF_ERROR(CheckAllDims(unflat));
    // Concatenation in another order than the root's, and a slice out of
    // order.
    ASSIGN_OR_RETURN(tp, mesh.Slice({"tp"}));
    ASSIGN_OR_RETURN(pp, mesh.Slice({"pp"}));
    ASSIGN_OR_RETURN(cat, DeviceMesh::Concatenate({tp, pp}));
    RETURN_IF_ERROR(CheckAllDims(cat));
    ASSIGN_OR_RETURN(tp_pp, mesh.Slice({"tp", "pp"}));
    RETURN_IF_ERROR(Expect(tp_pp == cat, "slice {tp, pp} != concat(tp, pp)"));
    ASSIGN_OR_RETURN(t, mesh.Transpose({2, 0, 1}));
    return CheckAllDims(t);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, CustomRankTableKeepsItsOrder) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, DeviceMesh::Create(runtime, "cpu", {{3, 1}, {0, 2}},
                                              {"a", "b"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));  // all-gather in mesh order
    ASSIGN_OR_RETURN(g, mesh.GetGroup("b"));
    const std::vector<int> want =
        (b.rank() == 3 || b.rank() == 1) ? std::vector<int>{3, 1}
                                         : std::vector<int>{0, 2};
    return Expect(g->global_ranks() == want, "group b not in table order");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, SizeOneDimsAndRanksOutsideTheMesh) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {1, 4, 1},
                                          {"x", "y", "z"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    // A mesh of ranks {0, 1} only: ranks 2 and 3 are outside its root, take
    // no part, and get FailedPrecondition.
    ASSIGN_OR_RETURN(pair, DeviceMesh::Create(runtime, "cpu", {0, 1}, {"p"}));
    auto g = pair.GetGroup("p");
    if (b.rank() < 2) {
      if (!g.ok()) return g.status();
      return testing::CheckAllDims(pair);
    }
    RETURN_IF_ERROR(Expect(!pair.GetCoordinate().has_value(),
                           "non-member has a coordinate"));
    return Expect(absl::IsFailedPrecondition(g.status()),
                  absl::StrCat("non-member got ", g.status().ToString()));
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, FromGroupsAndBackendOverride) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.backend = "gloo";
    options.all.timeout = absl::Seconds(20);
    // "tpu" has no default backend: the override makes it usable (R19).
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "tpu", {2, 2}, {"dp", "tp"},
                                          options));
    ASSIGN_OR_RETURN(groups, mesh.GetAllGroups());
    RETURN_IF_ERROR(CheckAllDims(mesh));
    ASSIGN_OR_RETURN(flat, mesh.Flatten());
    RETURN_IF_ERROR(CheckAllDims(flat));  // the override reaches flattens
    // R17: rebuild the 2-d mesh from its groups, no store needed.
    ASSIGN_OR_RETURN(rebuilt,
                     DeviceMesh::FromGroups(nullptr, "tpu", groups,
                                            RankTable{{0, 1}, {2, 3}},
                                            {"dp", "tp"}));
    ASSIGN_OR_RETURN(g_dp, rebuilt.GetGroup("dp"));
    RETURN_IF_ERROR(Expect(g_dp == groups[0], "FromGroups did not keep dp"));
    RETURN_IF_ERROR(Expect(rebuilt == mesh, "FromGroups mesh differs"));
    // One group: a 1-d mesh of its ranks.
    ASSIGN_OR_RETURN(one, DeviceMesh::FromGroups(nullptr, "tpu", {groups[1]}));
    return Expect(one.shape() == std::vector<int64_t>{2},
                  "FromGroups 1-d shape");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, BootstrapOverloadTwiceSharesOneRuntime) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    // The harness owns `b`; an aliasing shared_ptr that never deletes it.
    std::shared_ptr<Bootstrap> boot(std::shared_ptr<Bootstrap>(), &b);
    ASSIGN_OR_RETURN(first, InitDeviceMesh(boot, "cpu", {2, 2}, {"dp", "tp"}));
    ASSIGN_OR_RETURN(second, InitDeviceMesh(boot, "cpu", {4}, {"all"}));
    RETURN_IF_ERROR(Expect(first.runtime() == second.runtime(),
                           "two runtimes for one bootstrap"));
    RETURN_IF_ERROR(CheckAllDims(first));
    return CheckAllDims(second);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, DeserializedMeshRebuildsItsGroups) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, DeviceMesh::Create(runtime, "cpu", {{2, 0}, {3, 1}},
                                              {"dp", "tp"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    ASSIGN_OR_RETURN(copy, DeviceMesh::Deserialize(mesh.Serialize(), runtime));
    RETURN_IF_ERROR(Expect(copy == mesh, "round trip changed the mesh"));
    RETURN_IF_ERROR(CheckAllDims(copy));  // made again, lazily (R16)
    ASSIGN_OR_RETURN(g0, mesh.GetGroup("tp"));
    ASSIGN_OR_RETURN(g1, copy.GetGroup("tp"));
    return Expect(g0 != g1, "a deserialized mesh shared live groups");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, ConcurrentGetGroupOfOneDimCreatesOnce) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    std::vector<absl::StatusOr<std::shared_ptr<Communicator>>> got(
        4, absl::UnknownError("unset"));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] { got[t] = mesh.GetGroup("tp"); });
    }
    for (auto& t : threads) t.join();
    for (const auto& g : got) {
      if (!g.ok()) return g.status();
      RETURN_IF_ERROR(Expect(*g == *got[0], "threads got different groups"));
    }
    RETURN_IF_ERROR(Expect(runtime->group_creations() == 1,
                           absl::StrCat("group creations ",
                                        runtime->group_creations(),
                                        ", want 1")));
    return CheckAllDims(mesh);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, NonMemberMeshDoesNotPoisonTheRoot) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(root, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    // Rank 0's tp line on every rank: ranks 2 and 3 are not in it.
    ASSIGN_OR_RETURN(line, root.layout().Slice({"tp"}, {0, 0}));
    ASSIGN_OR_RETURN(mesh, DeviceMesh::FromLayout(runtime, "cpu", line));
    auto g = mesh.GetGroup();
    if (b.rank() >= 2) {
      RETURN_IF_ERROR(Expect(absl::IsFailedPrecondition(g.status()),
                             absl::StrCat("non-member got ",
                                          g.status().ToString())));
    } else if (!g.ok()) {
      return g.status();
    }
    // The root's tp group is still there for every rank.
    return CheckAllDims(mesh.RootMesh());
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessMesh, AbortStopsTheGroups) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    ASSIGN_OR_RETURN(groups, mesh.GetAllGroups());
    // No barrier needed: group creation ends with one (issue 11).
    RETURN_IF_ERROR(mesh.Abort());
    int64_t v = 1;
    absl::Status after =
        groups[0]->AllReduce(&v, &v, 1, DataType::kInt64, ReduceOp::kSum);
    return Expect(absl::IsFailedPrecondition(after),
                  absl::StrCat("after Abort: ", after.ToString()));
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
