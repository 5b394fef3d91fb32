// devmesh/tests/device_mesh/stopped_launch_test.cc
// A launcher that stops its ranks during a group's creation leaves nothing
// in /dev/shm: `launch --nproc=4` where one rank exits 3 after
// InitDeviceMesh and before its groups, while the others make theirs and are
// stopped (SIGTERM) by the launcher. Each rank in turn is the one that fails;
// --launch_runs sets the launches (CI: 8, two per failing rank). When rank 0
// fails, the launcher hosts the store (--host_store): with rank 0 hosting it,
// rank 0's exit would first wait out BootstrapOptions::shutdown_timeout (30 s)
// for ranks that wait for it in turn (bootstrap.h's Lifetime).
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bootstrap/launcher.h"
#include "bootstrap/testing/capture.h"
#include "gtest/gtest.h"
#include "tests/comm/shm_segments.h"

ABSL_FLAG(int, launch_runs, 8, "launches; the failing rank cycles 0..3");

namespace devmesh {
namespace {

constexpr char kWorker[] = "tests/device_mesh/stopped_launch_worker";

using ::devmesh::testing::Capture;

// The pids the ranks printed ("[rank N] pid P").
std::set<int64_t> PrintedPids(const std::string& out) {
  std::set<int64_t> pids;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    const size_t at = line.find("] pid ");
    int64_t pid = 0;
    if (at != absl::string_view::npos &&
        absl::SimpleAtoi(line.substr(at + 6), &pid)) {
      pids.insert(pid);
    }
  }
  return pids;
}

TEST(StoppedLaunchTest, RankExitingBeforeItsGroupsLeavesNoSegment) {
  const int runs = absl::GetFlag(FLAGS_launch_runs);
  int left_behind = 0;
  absl::Duration slowest;
  for (int run = 0; run < runs; ++run) {
    const int fail = run % 4;
    Capture out, err;
    LaunchOptions options;
    options.nproc = 4;
    options.argv = {kWorker};
    options.env = {{"WORKER_FAIL_RANK", absl::StrCat(fail)}};
    options.grace_period = absl::Seconds(2);
    options.host_store = fail == 0;
    options.stdout_fd = out.fd();
    options.stderr_fd = err.fd();
    const absl::Time start = absl::Now();
    absl::StatusOr<int> code = LaunchLocal(options);
    slowest = std::max(slowest, absl::Now() - start);
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string errors = err.Read();
    EXPECT_EQ(*code, 3) << errors;
    EXPECT_NE(errors.find(absl::StrCat("[launcher] rank ", fail,
                                       " exited with code 3")),
              std::string::npos)
        << errors;
    const std::set<int64_t> pids = PrintedPids(out.Read());
    ASSERT_EQ(pids.size(), 4u) << out.Read();
    const std::set<std::string> left = devmesh::testing::SegmentsOf(pids);
    left_behind += static_cast<int>(left.size());
    EXPECT_TRUE(left.empty()) << "run " << run << ": " << *left.begin()
                              << " and " << left.size() - 1 << " more";
  }
  std::printf("stopped launches: %d, segments left: %d, slowest %s\n", runs,
              left_behind, absl::FormatDuration(slowest).c_str());
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
