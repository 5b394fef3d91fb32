// devmesh/tests/device_mesh/mesh_chaos_test.cc
// -----------------------------------------------------------------------------
// Chaos scenarios of issue 11 on a DeviceMesh: 8 real processes build a (4, 2)
// mesh named (dp, tp), make the "tp" group, and then at once exit, Abort,
// destroy the mesh, or run one all-reduce and exit. Nothing is wrong with the
// job, so every launch must end with every rank OK. Each scenario runs
// --chaos_runs launches (default 3, CI) and prints launches, failures and the
// slowest launch; run by hand with more, e.g.
//   bazel test //tests/device_mesh:mesh_chaos_test --test_arg=--chaos_runs=30
// The Abort-scope test checks that a sub-mesh refuses Abort and leaves the
// root's groups working.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

ABSL_FLAG(int, chaos_runs, 3, "launches per chaos scenario");

namespace devmesh {
namespace {

using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;
using ::devmesh::testing::RuntimeOf;

constexpr int kRanks = 8;

// Runs `body` on 8 ranks --chaos_runs times; prints and returns the number
// of failed launches (any rank not OK), with the first failures' messages
// added to `failures_text`.
int RunScenario(const std::string& name,
                const std::function<absl::Status(Bootstrap&)>& body,
                std::string* failures_text) {
  const int runs = absl::GetFlag(FLAGS_chaos_runs);
  int failed = 0;
  absl::Duration slowest;
  RunRanksOptions options;
  options.timeout = absl::Seconds(90);
  options.bootstrap_timeout = absl::Seconds(60);
  for (int run = 0; run < runs; ++run) {
    const absl::Time start = absl::Now();
    std::vector<RankOutcome> outcomes = RunRanksDetailed(kRanks, body, options);
    slowest = std::max(slowest, absl::Now() - start);
    bool ok = true;
    for (const RankOutcome& o : outcomes) {
      if (o.status.ok()) continue;
      ok = false;
      if (failures_text->size() < 4000) {
        absl::StrAppend(failures_text, "launch ", run, " rank ", o.rank, ": ",
                        o.status.ToString(), "\n");
      }
    }
    if (!ok) ++failed;
  }
  std::printf("chaos %-34s launches %3d failures %3d slowest %s\n",
              name.c_str(), runs, failed,
              absl::FormatDuration(slowest).c_str());
  std::fflush(stdout);
  return failed;
}

// The (4, 2) mesh (dp, tp) with a 20 s group timeout, and its "tp" group.
struct MeshAndGroup {
  DeviceMesh mesh;
  std::shared_ptr<Communicator> tp;
};

absl::StatusOr<MeshAndGroup> MakeMeshAndTpGroup(Bootstrap& b) {
  auto runtime = RuntimeOf(b);
  if (!runtime.ok()) return runtime.status();
  MeshOptions options;
  options.all.timeout = absl::Seconds(20);
  auto mesh = InitDeviceMesh(*runtime, "cpu", {4, 2}, {"dp", "tp"}, options);
  if (!mesh.ok()) return mesh.status();
  auto tp = mesh->GetGroup("tp");
  if (!tp.ok()) return tp.status();
  return MeshAndGroup{*std::move(mesh), *std::move(tp)};
}

TEST(MeshChaos, ExitAfterGetGroup) {
  std::string text;
  int failed = RunScenario("exit_after_get_group", [](Bootstrap& b) {
    return MakeMeshAndTpGroup(b).status();
  }, &text);
  EXPECT_EQ(failed, 0) << text;
}

TEST(MeshChaos, AbortAfterGetGroup) {
  std::string text;
  int failed = RunScenario("abort_after_get_group", [](Bootstrap& b) {
    auto made = MakeMeshAndTpGroup(b);
    if (!made.ok()) return made.status();
    return made->mesh.Abort();
  }, &text);
  EXPECT_EQ(failed, 0) << text;
}

TEST(MeshChaos, DestroyMeshAfterGetGroup) {
  std::string text;
  int failed = RunScenario("destroy_mesh_after_get_group", [](Bootstrap& b) {
    absl::Status status;
    {
      auto made = MakeMeshAndTpGroup(b);
      status = made.status();
    }  // Mesh, group and runtime (with its world communicator) destroyed.
    return status;
  }, &text);
  EXPECT_EQ(failed, 0) << text;
}

TEST(MeshChaos, ExitAfterFirstCollective) {
  std::string text;
  int failed = RunScenario("exit_after_first_collective", [](Bootstrap& b) {
    auto made = MakeMeshAndTpGroup(b);
    if (!made.ok()) return made.status();
    // tp lines of the (4, 2) mesh are {2i, 2i+1}: the sum is 4i + 1.
    int64_t value = b.rank();
    absl::Status s = made->tp->AllReduce(&value, &value, 1, DataType::kInt64,
                                         ReduceOp::kSum);
    if (!s.ok()) return s;
    const int64_t want = 4 * (b.rank() / 2) + 1;
    if (value != want) {
      return absl::InternalError(
          absl::StrCat("tp all-reduce gave ", value, ", want ", want));
    }
    return absl::OkStatus();
  }, &text);
  EXPECT_EQ(failed, 0) << text;
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
