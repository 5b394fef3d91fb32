// devmesh/tests/device_mesh/shrink_agreement_test.cc
// DeviceMesh::Shrink agrees on what it shrinks, in real processes: after a
// SIGKILL, survivors that ask for different dims (odd ranks "tp", even
// ranks "dp", the repro) all fail with the same InvalidArgument
// naming the first survivor whose ask differs from the lowest survivor's,
// instead of splitting the job into meshes of different shapes.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "comm/error_info.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

namespace devmesh {
namespace {

using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;
using ::devmesh::testing::RuntimeOf;

constexpr int kVictim = 5;

TEST(ShrinkAgreement, SurvivorsThatAskForDifferentDimsAllFailAlike) {
  const std::string want =
      "Shrink of epoch 0: the survivors disagree on what to shrink: global "
      "rank 1 asked for mesh dim 'tp' (min_replicas 1), global rank 0 for "
      "mesh dim 'dp' (min_replicas 1); every survivor fails with this error";
  RunRanksOptions run;
  run.timeout = absl::Seconds(90);
  std::vector<RankOutcome> outcomes = RunRanksDetailed(
      6,
      [&](Bootstrap& b) -> absl::Status {
        ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
        MeshOptions options;
        options.all.timeout = absl::Seconds(30);
        ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {3, 2},
                                              {"dp", "tp"}, options));
        for (const char* dim : {"dp", "tp"}) {
          ASSIGN_OR_RETURN(group, mesh.GetGroup(dim));
          float x = 1;
          RETURN_IF_ERROR(
              group->AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum));
          RETURN_IF_ERROR(group->Barrier());
        }
        if (b.rank() == kVictim) raise(SIGKILL);
        // The job's verdict on the victim (the failure watch sees its
        // process gone), then each survivor's Shrink.
        const absl::Time until = absl::Now() + absl::Seconds(30);
        while (runtime->watch()->verdict().empty() && absl::Now() < until) {
          absl::SleepFor(absl::Milliseconds(10));
        }
        RETURN_IF_ERROR(Expect(!runtime->watch()->verdict().empty(),
                               "no verdict on the victim"));
        auto shrunk = mesh.Shrink(b.rank() % 2 == 1 ? "tp" : "dp");
        RETURN_IF_ERROR(Expect(
            absl::IsInvalidArgument(shrunk.status()) &&
                shrunk.status().message() == want,
            absl::StrCat("got ", shrunk.status().ToString(), "\nwant ", want)));
        return Expect(GetErrorInfo(shrunk.status()).disagreeing == 1,
                      "no kDisagreementPayload naming rank 1");
      },
      run);
  ASSERT_EQ(outcomes.size(), 6u);
  for (const RankOutcome& o : outcomes) {
    if (o.rank == kVictim) {
      EXPECT_FALSE(o.reported) << "the victim reported " << o.status;
      continue;
    }
    EXPECT_TRUE(o.reported && o.status.ok())
        << "rank " << o.rank << ": " << o.status;
  }
}

}  // namespace
}  // namespace devmesh
