// A death anywhere ends every survivor's wait (issue 20, first step): 4
// processes (started by the test, no launcher that stops the others) run
// world all-reduces of 1 MiB in a loop over a mesh's group; one of them,
// each rank position in turn, SIGKILLs itself mid-loop. Every survivor's
// failing call must return within 2 s of the kill, as Unavailable naming
// the dead rank with the same verdict text on every survivor
// (device_mesh/failure_watch.h). --death_runs sets the launches per victim
// (CI: 2; the closing note's long mode: 30).
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/multiprocess.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "tests/device_mesh/mesh_checks.h"

ABSL_FLAG(int, death_runs, 2, "launches per victim rank");
ABSL_FLAG(std::string, backend, "gloo",
          "every group's backend (gloo or ucx: the CPU backends across "
          "hosts)");

namespace devmesh {
namespace {

using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;
using ::devmesh::testing::RuntimeOf;

constexpr int kRanks = 4;

absl::Status Body(Bootstrap& b, int victim, const std::string& run) {
  ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
  MeshOptions options;
  options.all.backend = absl::GetFlag(FLAGS_backend);
  options.all.timeout = absl::Seconds(30);  // a hang shows as > 2 s
  ASSIGN_OR_RETURN(mesh, InitDeviceMesh(runtime, "cpu", {kRanks}, {"w"},
                                        options));
  ASSIGN_OR_RETURN(world, mesh.GetGroup("w"));
  std::vector<float> data(1 << 18, 1.0f);
  Store& store = *b.store();
  for (int i = 0;; ++i) {
    if (b.rank() == victim && i == 20) {
      RETURN_IF_ERROR(store.Set(absl::StrCat(run, "/killed_ns"),
                                absl::StrCat(absl::GetCurrentTimeNanos())));
      raise(SIGKILL);
    }
    absl::Status s = world->AllReduce(data.data(), data.data(), data.size(),
                                      DataType::kFloat32, ReduceOp::kMax);
    if (s.ok()) continue;
    const int64_t failed_ns = absl::GetCurrentTimeNanos();
    ASSIGN_OR_RETURN(killed, store.Get(absl::StrCat(run, "/killed_ns"),
                                       absl::Seconds(10)));
    int64_t killed_ns = 0;
    RETURN_IF_ERROR(Expect(absl::SimpleAtoi(killed, &killed_ns), "killed_ns"));
    const absl::Duration took = absl::Nanoseconds(failed_ns - killed_ns);
    RETURN_IF_ERROR(Expect(
        took < absl::Seconds(2),
        absl::StrCat("rank ", b.rank(), " failed ", absl::FormatDuration(took),
                     " after the kill: ", s.ToString())));
    const std::string want = absl::StrCat("global rank ", victim, " died (");
    RETURN_IF_ERROR(Expect(
        absl::IsUnavailable(s) && absl::StartsWith(s.message(), want),
        absl::StrCat("rank ", b.rank(), ": ", s.ToString(), ", want '", want,
                     "...'")));
    // The same verdict on every survivor, whether its call failed (" --
    // this call: <the backend's error>") or was refused, the verdict known
    // before it started (" -- this call was refused: ...").
    const std::string verdict(
        s.message().substr(0, s.message().find(" -- this call")));
    RETURN_IF_ERROR(
        store.Set(absl::StrCat(run, "/verdict/", b.rank()), verdict));
    for (int r = 0; r < kRanks; ++r) {
      if (r == victim) continue;
      ASSIGN_OR_RETURN(other, store.Get(absl::StrCat(run, "/verdict/", r),
                                        absl::Seconds(10)));
      RETURN_IF_ERROR(Expect(other == verdict,
                             absl::StrCat("rank ", r, " says '", other,
                                          "', rank ", b.rank(), " '", verdict,
                                          "'")));
    }
    std::printf("death propagation: victim %d, rank %d failed %.0f ms after "
                "the kill\n",
                victim, b.rank(), absl::ToDoubleMilliseconds(took));
    std::fflush(stdout);
    return absl::OkStatus();
  }
}

TEST(DeathPropagation, EverySurvivorFailsWithinTwoSecondsNamingTheDead) {
  const int runs = absl::GetFlag(FLAGS_death_runs);
  int launches = 0, failures = 0;
  for (int victim = 0; victim < kRanks; ++victim) {
    for (int n = 0; n < runs; ++n) {
      ++launches;
      const std::string run = absl::StrCat("death/", victim, "/", n);
      RunRanksOptions options;
      options.timeout = absl::Seconds(60);
      std::vector<RankOutcome> out = RunRanksDetailed(
          kRanks, [&](Bootstrap& b) { return Body(b, victim, run); }, options);
      bool ok = true;
      for (const RankOutcome& o : out) {
        if (o.rank == victim) {
          ok = ok && !o.reported;  // it was SIGKILLed
        } else if (!o.reported || !o.status.ok()) {
          ok = false;
          ADD_FAILURE() << "victim " << victim << " run " << n << ": rank "
                        << o.rank << ": " << o.status << " (exit "
                        << o.exit_code << ")";
        }
      }
      if (!ok) ++failures;
    }
  }
  std::printf("death propagation: %d launches, %d failed\n", launches,
              failures);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
