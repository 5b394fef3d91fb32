// Exits are bounded: 4 real processes whose rank 0 hosts the store (as in a
// job without an external store) run a (2, 2) mesh; then
//   - StoreHostDiesAfterTheWork: rank 0 is SIGKILLed once every rank is done,
//     taking the store with it. Each survivor's teardown (the mesh, its
//     groups, the runtime and its failure watch) and its Bootstrap::Leave
//     must each end within 2 s, and say nothing wrong: there is nobody left
//     to tell.
//   - Rank0LeavesOnceTheDeadAreKnown: rank 3 is SIGKILLed mid-loop; the
//     survivors' calls fail naming it, and rank 0's Leave must end within
//     2 s of the last survivor's Leave, not at the shutdown timeout (30 s):
//     the job's verdict counts the dead rank as gone.
// --exit_runs sets the launches of each case (CI: 3).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <optional>
#include <cstdio>
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

ABSL_FLAG(int, exit_runs, 3, "launches of each case");

namespace devmesh {
namespace {

using ::devmesh::testing::Expect;
using ::devmesh::testing::RankOutcome;
using ::devmesh::testing::RunRanksDetailed;
using ::devmesh::testing::RunRanksOptions;
using ::devmesh::testing::RuntimeOf;

constexpr int kRanks = 4;
const absl::Duration kBound = absl::Seconds(2);

// The mesh every case trains on: (2, 2) on the CPU, a 60 s group timeout
// (a hang shows as more than the bound, never as a pass).
absl::StatusOr<DeviceMesh> Mesh(std::shared_ptr<MeshRuntime> runtime) {
  MeshOptions options;
  options.all.timeout = absl::Seconds(60);
  return InitDeviceMesh(std::move(runtime), "cpu", {2, 2}, {"dp", "tp"},
                        options);
}

absl::Status AllReduceBoth(const DeviceMesh& mesh) {
  for (const char* dim : {"dp", "tp"}) {
    ASSIGN_OR_RETURN(group, mesh.GetGroup(dim));
    std::vector<float> data(1024, 1.0f);
    RETURN_IF_ERROR(group->AllReduce(data.data(), data.data(), data.size(),
                                     DataType::kFloat32, ReduceOp::kSum));
    RETURN_IF_ERROR(Expect(data[0] == 2.0f && data[1023] == 2.0f,
                           absl::StrCat(dim, " sum ", data[0])));
  }
  return absl::OkStatus();
}

// Waits (at most 10 s) until process `pid` is gone (the test's parent reaps
// its children at once).
absl::Status AwaitGone(int pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (kill(pid, 0) == 0 || errno != ESRCH) {
    if (absl::Now() > deadline) {
      return absl::InternalError(absl::StrCat("pid ", pid, " still runs"));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::OkStatus();
}

absl::Status Within(absl::Duration took, const std::string& what, int rank) {
  std::printf("bounded exit: rank %d %s took %.0f ms\n", rank, what.c_str(),
              absl::ToDoubleMilliseconds(took));
  std::fflush(stdout);
  return Expect(took < kBound,
                absl::StrCat("rank ", rank, ": ", what, " took ",
                             absl::FormatDuration(took), ", over ",
                             absl::FormatDuration(kBound)));
}

absl::Status StoreHostDies(Bootstrap& b) {
  const int rank0_pid = b.peers()[0].pid;
  {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(made, Mesh(runtime));
    std::optional<DeviceMesh> mesh(std::move(made));
    RETURN_IF_ERROR(AllReduceBoth(*mesh));
    // Rank 0 dies once every other rank is through the work (a barrier's
    // last reader may still be reading when its first one returns).
    Store& store = *b.store();
    if (b.rank() != 0) {
      // Its reply may be lost: rank 0 can die between applying the Set
      // (which wakes its wait) and answering it. A Set that was not applied
      // shows as rank 0's wait timing out.
      (void)store.Set(absl::StrCat("done/", b.rank()), "1");
    } else {
      for (int r = 1; r < kRanks; ++r) {
        RETURN_IF_ERROR(store.Wait({absl::StrCat("done/", r)}));
      }
      raise(SIGKILL);
    }
    RETURN_IF_ERROR(AwaitGone(rank0_pid));
    const absl::Time start = absl::Now();
    mesh.reset();
    runtime.reset();
    RETURN_IF_ERROR(Within(absl::Now() - start, "teardown", b.rank()));
  }
  const absl::Time start = absl::Now();
  b.Leave();
  return Within(absl::Now() - start, "Leave", b.rank());
}

absl::Status OneRankDies(Bootstrap& b, const std::string& run) {
  constexpr int kVictim = 3;
  {
    ASSIGN_OR_RETURN(runtime, RuntimeOf(b));
    ASSIGN_OR_RETURN(mesh, Mesh(runtime));
    for (int i = 0;; ++i) {
      if (b.rank() == kVictim && i == 5) raise(SIGKILL);
      absl::Status s = AllReduceBoth(mesh);
      if (s.ok()) continue;
      RETURN_IF_ERROR(
          Expect(absl::IsUnavailable(s) || absl::IsFailedPrecondition(s),
                 absl::StrCat("rank ", b.rank(), ": ", s.ToString())));
      break;
    }
  }
  const absl::Time start = absl::Now();
  b.Leave();
  if (b.rank() != 0) {
    // The others' Leave returns at once; rank 0's waits for them.
    return Within(absl::Now() - start, "Leave", b.rank());
  }
  // Rank 0 may come first: its bound counts from the last survivor's Leave,
  // which is at most the others' loop and teardown away.
  return Within(absl::Now() - start, "Leave (rank 0, waits for 1 and 2)",
                b.rank());
}

int Launch(const std::function<absl::Status(Bootstrap&)>& body,
           const std::vector<int>& killed, int* launches) {
  RunRanksOptions options;
  options.timeout = absl::Seconds(90);
  options.rank0_hosts_store = true;
  std::vector<RankOutcome> out = RunRanksDetailed(kRanks, body, options);
  ++*launches;
  int failed = 0;
  for (const RankOutcome& o : out) {
    const bool victim =
        std::find(killed.begin(), killed.end(), o.rank) != killed.end();
    if (victim ? o.reported : (!o.reported || !o.status.ok())) {
      ADD_FAILURE() << "rank " << o.rank << ": " << o.status << " (exit "
                    << o.exit_code << ")";
      failed = 1;
    }
  }
  return failed;
}

TEST(BoundedExit, StoreHostDiesAfterTheWork) {
  int launches = 0, failures = 0;
  for (int n = 0; n < absl::GetFlag(FLAGS_exit_runs); ++n) {
    failures += Launch(StoreHostDies, {0}, &launches);
  }
  std::printf("store host dies: %d launches, %d failed\n", launches, failures);
  EXPECT_EQ(failures, 0);
}

TEST(BoundedExit, Rank0LeavesOnceTheDeadAreKnown) {
  int launches = 0, failures = 0;
  for (int n = 0; n < absl::GetFlag(FLAGS_exit_runs); ++n) {
    const std::string run = absl::StrCat("dies/", n);
    failures += Launch([&](Bootstrap& b) { return OneRankDies(b, run); }, {3},
                       &launches);
  }
  std::printf("one rank dies: %d launches, %d failed\n", launches, failures);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
