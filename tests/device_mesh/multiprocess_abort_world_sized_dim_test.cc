// Real processes over Gloo (4 ranks): DeviceMesh::Abort on a root aborts
// the groups the root made (dp, tp) and leaves the runtime's world
// communicators working: a world-sized dim in world order is World(backend,
// its timeout), whatever the timeout, and is shared, not the root's. Exact
// values throughout.
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

TEST(MultiprocessAbort, MeshGroupsAreAbortedWorldCommunicatorsAreNot) {
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
    // World-sized, world order, its own timeout: the world communicator of
    // that timeout (one per (backend, timeout), named by them alone), shared
    // with the runtime like the first one.
    GroupOptions own;
    own.timeout = absl::Seconds(25);
    ASSIGN_OR_RETURN(all, mesh.Flatten("all", own));
    ASSIGN_OR_RETURN(g_all, all.GetGroup());
    RETURN_IF_ERROR(CheckAllDims(all));
    ASSIGN_OR_RETURN(world25, runtime->World("auto", absl::Seconds(25)));
    RETURN_IF_ERROR(Expect(
        g_all == world25 && g_all != world &&
            g_all->global_ranks() == std::vector<int>{0, 1, 2, 3},
        "'all' is not World(auto, 25 s) of ranks [0, 1, 2, 3]"));
    RETURN_IF_ERROR(Expect(runtime->IsWorldCommunicator(world.get()) &&
                               runtime->IsWorldCommunicator(g_all.get()),
                           "IsWorldCommunicator"));
    // dp and tp: groups of this root's own.
    ASSIGN_OR_RETURN(g_dp, mesh.GetGroup("dp"));
    ASSIGN_OR_RETURN(g_tp, mesh.GetGroup("tp"));
    RETURN_IF_ERROR(Expect(
        runtime->world_communicators() == 2 && runtime->group_creations() == 2,
        absl::StrCat("worlds ", runtime->world_communicators(), " groups ",
                     runtime->group_creations(),
                     ", want 2 (gloo 300 s, 25 s) and 2 (dp, tp)")));
    RETURN_IF_ERROR(mesh.Abort());
    RETURN_IF_ERROR(ExpectAborted(*g_dp, "dp"));
    RETURN_IF_ERROR(ExpectAborted(*g_tp, "tp"));
    // GetGroup returns the aborted group, not a new one.
    ASSIGN_OR_RETURN(again, mesh.GetGroup("dp"));
    RETURN_IF_ERROR(Expect(again == g_dp, "GetGroup('dp') after Abort"));
    // The world communicators still work, with exact results.
    RETURN_IF_ERROR(SumIsSix(*world, me, "world (300 s)"));
    RETURN_IF_ERROR(SumIsSix(*g_world_dim, me, "dp_tp (the world)"));
    RETURN_IF_ERROR(SumIsSix(*g_all, me, "'all' (the world of 25 s)"));
    return world->Barrier();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace devmesh
