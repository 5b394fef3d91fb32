// Real processes over Gloo (4 ranks): DeviceMesh::Abort on a root aborts a
// world-sized dim in world order that has its own timeout (a Split the root
// owns), its other dims' groups too, and leaves the runtime's world
// communicators working: the one a world-sized dim with the world's timeout
// is, and one World() gave for another timeout. Exact values throughout.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

// All-reduce (sum) of the world ranks of `comm`'s members: 0+1+2+3 = 6 on
// the world; the status of the call otherwise.
absl::Status SumIsSix(Communicator& comm, int me, const std::string& what) {
  int64_t mine = me, sum = -1;
  RETURN_IF_ERROR(
      comm.AllReduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum));
  return Expect(sum == 6, absl::StrCat(what, ": sum ", sum, ", want 6"));
}

// What a collective on an aborted group must return.
absl::Status ExpectAborted(Communicator& comm, const std::string& what) {
  int64_t mine = 1, sum = -1;
  absl::Status s =
      comm.AllReduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum);
  return Expect(s.code() == absl::StatusCode::kFailedPrecondition && sum == -1,
                absl::StrCat(what, " after root Abort: ", s.ToString(),
                             ", want FailedPrecondition"));
}

TEST(MultiprocessAbort, WorldSizedDimWithOwnTimeoutIsAbortedWorldIsNot) {
  absl::Status s = RunRanks(4, [](Bootstrap& b) -> absl::Status {
    const int me = b.rank();
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {2, 2}, {"dp", "tp"}));
    RETURN_IF_ERROR(CheckAllDims(mesh));
    // World-sized, world order, the world's timeout (300 s): the world
    // communicator itself.
    ASSIGN_OR_RETURN(dp_tp, mesh.Flatten());
    ASSIGN_OR_RETURN(g_world_dim, dp_tp.GetGroup());
    ASSIGN_OR_RETURN(world, runtime->World("auto", absl::Seconds(300)));
    RETURN_IF_ERROR(Expect(g_world_dim == world, "dp_tp is not the world"));
    // World-sized, world order, its own timeout: a group this root owns.
    GroupOptions own;
    own.timeout = absl::Seconds(25);
    ASSIGN_OR_RETURN(all, mesh.Flatten("all", own));
    ASSIGN_OR_RETURN(g_all, all.GetGroup());
    RETURN_IF_ERROR(CheckAllDims(all));
    RETURN_IF_ERROR(Expect(
        g_all != world && g_all->global_ranks() == std::vector<int>{0, 1, 2, 3},
        "'all' is not its own group of ranks [0, 1, 2, 3]"));
    RETURN_IF_ERROR(Expect(runtime->IsWorldCommunicator(world.get()) &&
                               !runtime->IsWorldCommunicator(g_all.get()),
                           "IsWorldCommunicator"));
    // A world communicator World() gives for 25 s: the runtime's, not the
    // root's (a Split of its own, not 'all's group).
    ASSIGN_OR_RETURN(world25, runtime->World("gloo", absl::Seconds(25)));
    RETURN_IF_ERROR(Expect(world25 != g_all, "World(25 s) is 'all's group"));
    ASSIGN_OR_RETURN(g_dp, mesh.GetGroup("dp"));
    ASSIGN_OR_RETURN(g_tp, mesh.GetGroup("tp"));
    RETURN_IF_ERROR(Expect(
        runtime->world_communicators() == 1 && runtime->split_calls() == 1 &&
            runtime->group_creations() == 3,
        absl::StrCat("worlds ", runtime->world_communicators(), " splits ",
                     runtime->split_calls(), " groups ",
                     runtime->group_creations(),
                     ", want 1, 1 (World 25 s) and 3 (dp, tp, all)")));
    RETURN_IF_ERROR(mesh.Abort());
    RETURN_IF_ERROR(ExpectAborted(*g_all, "'all' (world-sized, own timeout)"));
    RETURN_IF_ERROR(ExpectAborted(*g_dp, "dp"));
    RETURN_IF_ERROR(ExpectAborted(*g_tp, "tp"));
    // GetGroup returns the aborted group, not a new one.
    ASSIGN_OR_RETURN(again, all.GetGroup());
    RETURN_IF_ERROR(Expect(again == g_all, "GetGroup('all') after Abort"));
    // The world communicators still work, with exact results.
    RETURN_IF_ERROR(SumIsSix(*world, me, "world (300 s)"));
    RETURN_IF_ERROR(SumIsSix(*g_world_dim, me, "dp_tp (the world)"));
    RETURN_IF_ERROR(SumIsSix(*world25, me, "World(25 s)"));
    return world->Barrier();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
