// Real processes over Gloo: flattened names' groups (12 ranks, the issue's
// (2, 3, 2) example), world-sized dims that are the world communicator (no
// Split), a per-dim timeout that costs one Split and no second world
// communicator, Send/Recv along pipeline neighbours, and FromGroups that
// infers the rank table over the groups. Each group's global ranks and an
// all-reduce / all-gather of rank ids are checked by CheckAllDims.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

template <typename T>
std::string Text(const std::vector<T>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

TEST(MultiprocessIssue, FlattenedNameGroupsOnTwelveRanks) {
  absl::Status s = RunRanks(12, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    const int me = b.rank();
    ASSIGN_OR_RETURN(root, InitDeviceMesh(runtime, "cpu", {2, -1, 2},
                                          {"pp", "dp", "tp"}));
    ASSIGN_OR_RETURN(pp_tp, root.Slice({"pp", "tp"}));
    ASSIGN_OR_RETURN(pt, pp_tp.Flatten("pt"));
    ASSIGN_OR_RETURN(dp_pt, root.Slice({"dp", "pt"}));
    RETURN_IF_ERROR(Expect(
        dp_pt.mesh() == RankTable{{0, 1, 6, 7}, {2, 3, 8, 9}, {4, 5, 10, 11}},
        absl::StrCat("dp_pt is ", dp_pt.mesh().ToString())));
    // This rank's pt line: dp fixed, (pp, tp) in row-major order.
    const int dp = (me / 2) % 3;
    const std::vector<int> want = {2 * dp, 2 * dp + 1, 6 + 2 * dp,
                                   7 + 2 * dp};
    ASSIGN_OR_RETURN(g_pt, root.GetGroup("pt"));
    RETURN_IF_ERROR(Expect(g_pt->global_ranks() == want,
                           absl::StrCat("pt group ", Text(g_pt->global_ranks()),
                                        ", want ", Text(want))));
    if (me == 7) {
      RETURN_IF_ERROR(Expect(want == std::vector<int>{0, 1, 6, 7}, "rank 7"));
    }
    ASSIGN_OR_RETURN(size, root.size("pt"));
    ASSIGN_OR_RETURN(local, root.GetLocalRank("pt"));
    RETURN_IF_ERROR(Expect(size == 4 && local == g_pt->rank(),
                           absl::StrCat("size ", size, " local ", local)));
    if (me == 7) RETURN_IF_ERROR(Expect(local == 3, "rank 7's pt rank"));
    // The same group from the flattened mesh, the slice and a transpose.
    ASSIGN_OR_RETURN(g_flat, pt.GetGroup());
    ASSIGN_OR_RETURN(g_slice, dp_pt.GetGroup("pt"));
    ASSIGN_OR_RETURN(t, root.Transpose({2, 1, 0}));
    ASSIGN_OR_RETURN(g_t, t.GetGroup("pt"));
    RETURN_IF_ERROR(Expect(g_flat == g_pt && g_slice == g_pt && g_t == g_pt,
                           "pt group not shared"));
    // All-reduce and all-gather of rank ids along each dim.
    RETURN_IF_ERROR(CheckAllDims(dp_pt));
    RETURN_IF_ERROR(CheckAllDims(root));
    ASSIGN_OR_RETURN(back, DeviceMesh::Deserialize(dp_pt.Serialize(), runtime));
    RETURN_IF_ERROR(Expect(back == dp_pt, "Deserialize differs"));
    RETURN_IF_ERROR(CheckAllDims(back));
    return Expect(root.Slice({"pt", "pp"}).status().code() ==
                      absl::StatusCode::kInvalidArgument,
                  "pt with pp must be InvalidArgument");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessIssue, WorldSizedDimsAreTheWorldCommunicator) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(line, InitDeviceMesh(runtime, "cpu", {-1}, {"w"}));
    ASSIGN_OR_RETURN(g_line, line.GetGroup());
    ASSIGN_OR_RETURN(world, runtime->World("auto", absl::Seconds(300)));
    RETURN_IF_ERROR(Expect(g_line == world, "1-d world mesh is not the world"));
    RETURN_IF_ERROR(CheckAllDims(line));
    RETURN_IF_ERROR(Expect(runtime->world_communicators() == 1,
                           absl::StrCat("worlds ", runtime->world_communicators())));
    // A flatten of all dims of a 2x2 mesh is the world too; dp and tp are
    // groups of their own, made from the layout.
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    ASSIGN_OR_RETURN(flat, mesh.Flatten());
    ASSIGN_OR_RETURN(g_flat, flat.GetGroup());
    RETURN_IF_ERROR(Expect(g_flat == world, "dp_tp is not the world"));
    RETURN_IF_ERROR(Expect(runtime->world_communicators() == 1,
                           absl::StrCat("worlds ", runtime->world_communicators())));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    RETURN_IF_ERROR(CheckAllDims(flat));
    // Not in world order ([0, 2, 1, 3]): a group of its own, not the world.
    ASSIGN_OR_RETURN(t, mesh.Transpose({1, 0}));
    ASSIGN_OR_RETURN(tflat, t.Flatten("tp_dp"));
    ASSIGN_OR_RETURN(g_t, tflat.GetGroup());
    RETURN_IF_ERROR(Expect(g_t != world && g_t->global_ranks() ==
                                              std::vector<int>{0, 2, 1, 3},
                           "tp_dp order"));
    RETURN_IF_ERROR(CheckAllDims(tflat));
    // Aborting the mesh leaves the world communicator working.
    RETURN_IF_ERROR(world->Barrier());
    RETURN_IF_ERROR(mesh.Abort());
    RETURN_IF_ERROR(world->Barrier());
    return Expect(runtime->world_communicators() == 1 &&
                      runtime->group_creations() == 3,
                  absl::StrCat("worlds ", runtime->world_communicators(),
                               " groups ", runtime->group_creations(),
                               ", want 1 3 (dp, tp, tp_dp)"));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// The world ranks 0..3 summed over `world`: 6.
absl::Status SumOfRanksIsSix(Communicator& world) {
  int64_t mine = world.rank(), sum = -1;
  RETURN_IF_ERROR(world.AllReduce(&mine, &sum, 1, DataType::kInt64,
                                  ReduceOp::kSum));
  return Expect(sum == 6, absl::StrCat("world sum ", sum, ", want 6"));
}

TEST(MultiprocessIssue, PerDimTimeoutsMakeNoWorldAWorldSizedDimIsWorldOfItsTimeout) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    MeshOptions options;
    options.all.timeout = absl::Seconds(30);
    options.per_dim["tp"].timeout = absl::Seconds(20);
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"},
                                          options));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    RETURN_IF_ERROR(Expect(runtime->world_communicators() == 0 &&
                               runtime->group_creations() == 2,
                           absl::StrCat("worlds ", runtime->world_communicators(),
                                        " groups ", runtime->group_creations(),
                                        ", want 0 and 2")));
    // A world-sized dim with yet another timeout is World(auto, 25 s); World
    // with the mesh's 30 s is another world communicator (one per timeout).
    GroupOptions own;
    own.timeout = absl::Seconds(25);
    ASSIGN_OR_RETURN(flat, mesh.Flatten("all", own));
    RETURN_IF_ERROR(CheckAllDims(flat));
    ASSIGN_OR_RETURN(g_flat, flat.GetGroup());
    ASSIGN_OR_RETURN(world, runtime->World("gloo", absl::Seconds(30)));
    ASSIGN_OR_RETURN(world25, runtime->World("auto", absl::Seconds(25)));
    RETURN_IF_ERROR(SumOfRanksIsSix(*world));
    return Expect(g_flat != world && world25 == g_flat &&
                      runtime->world_communicators() == 2 &&
                      runtime->group_creations() == 2 &&
                      g_flat->global_ranks() == std::vector<int>{0, 1, 2, 3},
                  absl::StrCat("worlds ", runtime->world_communicators(),
                               " groups ", runtime->group_creations(),
                               ", want 2 and 2"));
  });
  EXPECT_TRUE(s.ok()) << s;
}

// Each rank's id moves one pipeline stage on along pp of a (2, 4) mesh.
absl::Status PipelineStep(const DeviceMesh& mesh, bool periodic) {
  ASSIGN_OR_RETURN(pp, mesh.GetGroup("pp"));
  ASSIGN_OR_RETURN(n, mesh.Shift("pp", 1, periodic));
  ASSIGN_OR_RETURN(stage, mesh.GetLocalRank("pp"));
  const int64_t mine = mesh.GetRank();
  int64_t got = -1;
  auto send = [&]() -> absl::Status {
    if (!n.destination_in_group.has_value()) return absl::OkStatus();
    return pp->Send(&mine, 1, DataType::kInt64,
                    static_cast<int>(*n.destination_in_group));
  };
  auto recv = [&]() -> absl::Status {
    if (!n.source_in_group.has_value()) return absl::OkStatus();
    return pp->Recv(&got, 1, DataType::kInt64,
                    static_cast<int>(*n.source_in_group));
  };
  // Even stages send first, odd stages receive first: no cycle of waits.
  if (stage % 2 == 0) {
    RETURN_IF_ERROR(send());
    RETURN_IF_ERROR(recv());
  } else {
    RETURN_IF_ERROR(recv());
    RETURN_IF_ERROR(send());
  }
  const int64_t want = n.source.value_or(-1);
  const int64_t dp = mine / 4;
  const int64_t want_literal =
      stage == 0 ? (periodic ? dp * 4 + 3 : -1) : mine - 1;
  return Expect(got == want && want == want_literal,
                absl::StrCat("rank ", mine, " periodic ", periodic, " got ",
                             got, ", want ", want_literal));
}

TEST(MultiprocessIssue, SendRecvAlongPipelineNeighbours) {
  absl::Status s = RunRanks(8, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 4}, {"dp", "pp"}));
    RETURN_IF_ERROR(PipelineStep(mesh, false));
    RETURN_IF_ERROR(PipelineStep(mesh, true));
    ASSIGN_OR_RETURN(t, mesh.Transpose({1, 0}));  // same pp group
    return PipelineStep(t, true);
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(MultiprocessIssue, FromGroupsInfersTheTable) {
  absl::Status s = RunRanks(8, [](Bootstrap& b) -> absl::Status {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    // A custom order, so that the inferred table is not just row-major.
    const RankTable table = {{{7, 6}, {5, 4}}, {{3, 2}, {1, 0}}};
    ASSIGN_OR_RETURN(mesh, DeviceMesh::Create(runtime, "cpu", table,
                                              {"pp", "dp", "tp"}));
    ASSIGN_OR_RETURN(groups, mesh.GetAllGroups());
    const int64_t made = runtime->group_creations();
    ASSIGN_OR_RETURN(rebuilt, DeviceMesh::FromGroups(nullptr, "cpu", groups,
                                                     std::nullopt,
                                                     {"pp", "dp", "tp"}));
    RETURN_IF_ERROR(Expect(rebuilt.mesh() == table,
                           absl::StrCat("inferred ", rebuilt.mesh().ToString())));
    for (int d = 0; d < 3; ++d) {
      ASSIGN_OR_RETURN(g, rebuilt.GetGroup(d));
      RETURN_IF_ERROR(Expect(g == groups[d], "FromGroups did not reuse"));
    }
    RETURN_IF_ERROR(CheckAllDims(rebuilt));
    RETURN_IF_ERROR(Expect(runtime->group_creations() == made, "new groups"));
    // Groups that are not a mesh: dp given for every dim repeats ranks.
    absl::Status bad = DeviceMesh::FromGroups(nullptr, "cpu",
                                              {groups[1], groups[1]},
                                              std::nullopt, {"a", "b"})
                           .status();
    return Expect(bad.code() == absl::StatusCode::kInvalidArgument &&
                      absl::StrContains(bad.message(),
                                        "the groups do not form a mesh: rank") &&
                      absl::StrContains(bad.message(), "appears twice"),
                  absl::StrCat("bad groups gave ", bad.ToString()));
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
