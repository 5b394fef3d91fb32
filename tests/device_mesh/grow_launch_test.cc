// devmesh/tests/device_mesh/grow_launch_test.cc
// The worked example heals under the real launcher: six ranks of
// examples/elastic/elastic_training_main --heal under //bootstrap:launch's
// LaunchLocal with host_store, keep_going and spare_restarts = 1; rank 2
// SIGKILLs itself at step 10. The survivors shrink to (2, 2); rank 3, alive
// in the lost replica, stays as a spare; the launcher starts rank 2 again
// with DEVMESH_SPARE=1; from step 12 the members Grow until both are
// admitted (at the same step on every rank); every rank, the two newcomers included, prints parameters equal
// to a fresh run's with 3, 2, then 3 replicas, and the launcher exits 0 (the
// restarted rank's end counts, not the kill). --launches repeats it and
// prints the count.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bootstrap/launcher.h"
#include "bootstrap/testing/capture.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, launches, 1, "launches of the healing job");

namespace devmesh {
namespace {

constexpr char kExample[] = "examples/elastic/elastic_training_main";

using ::devmesh::testing::Capture;

TEST(GrowLaunch, TheExampleHealsAKilledReplica) {
  int failures = 0;
  absl::Duration slowest;
  const int launches = absl::GetFlag(FLAGS_launches);
  for (int run = 0; run < launches; ++run) {
    Capture out, err;
    LaunchOptions options;
    options.nproc = 6;
    options.argv = {kExample, "--kill_rank=2", "--kill_step=10", "--heal",
                    "--grow_step=12"};
    options.host_store = true;
    options.keep_going = true;
    options.spare_restarts = 1;
    options.stdout_fd = out.fd();
    options.stderr_fd = err.fd();
    const absl::Time start = absl::Now();
    absl::StatusOr<int> code = LaunchLocal(options);
    slowest = std::max(slowest, absl::Now() - start);
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string text = out.Read();
    const std::string errors = err.Read();
    bool ok = *code == 0;
    EXPECT_EQ(*code, 0) << text << errors;
    auto expect = [&](const std::string& where, const std::string& what) {
      const bool found = absl::StrContains(where, what);
      EXPECT_TRUE(found) << "run " << run << ": want '" << what << "' in\n"
                         << text << errors;
      ok = ok && found;
    };
    expect(text, "[rank 2] rank 2: SIGKILL at step 10\n");
    expect(errors,
           "[launcher] rank 2 was killed by signal 9; starting it again as a "
           "spare (restart 1 of 1)\n");
    expect(text, "[rank 3] rank 3: removed at step 10; staying as a spare\n");
    for (int r : {0, 1, 4, 5}) {
      expect(text, absl::StrCat("[rank ", r, "] rank ", r, ": grew at step "));
    }
    for (int r : {2, 3}) {
      expect(text, absl::StrCat("[rank ", r, "] rank ", r,
                                ": admitted as a spare at step "));
    }
    // Rank r's last line: how it healed, then its training and check; every
    // rank grew at the same step (when depends on the spares' start).
    std::set<std::string> grown_at;
    for (int r = 0; r < 6; ++r) {
      bool healed = false;
      const std::string mark = "; trained 24 steps, epoch 2, 3 replicas since step ";
      for (absl::string_view line : absl::StrSplit(text, '\n')) {
        const size_t at = line.find(mark);
        if (!absl::StartsWith(line, absl::StrCat("[rank ", r, "] rank ", r,
                                                 ": ")) ||
            at == absl::string_view::npos ||
            !absl::EndsWith(line, "equal a fresh run's")) {
          continue;
        }
        healed = true;
        absl::string_view rest = line.substr(at + mark.size());
        grown_at.insert(std::string(rest.substr(0, rest.find(';'))));
      }
      EXPECT_TRUE(healed) << "run " << run << ": rank " << r << "\n" << text;
      ok = ok && healed;
    }
    EXPECT_EQ(grown_at.size(), 1u) << text;
    ok = ok && grown_at.size() == 1;
    EXPECT_FALSE(absl::StrContains(text, "DIFFER")) << text;
    ok = ok && !absl::StrContains(text, "DIFFER");
    if (!ok) ++failures;
  }
  std::printf("grow_launch: launches %d failures %d slowest %s\n", launches,
              failures, absl::FormatDuration(slowest).c_str());
}

TEST(GrowLaunch, SpareRestartsNeedKeepGoingAndHostStore) {
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {kExample};
  options.spare_restarts = 1;
  options.keep_going = true;
  absl::StatusOr<int> code = LaunchLocal(options);
  EXPECT_TRUE(absl::IsInvalidArgument(code.status())) << code.status();
  EXPECT_EQ(code.status().message(),
            "spare_restarts 1: not negative, and above 0 only with keep_going "
            "and host_store (a spare joins a job that goes on, through a store "
            "no rank hosts)");
  options.spare_restarts = -1;
  options.host_store = true;
  EXPECT_TRUE(absl::IsInvalidArgument(LaunchLocal(options).status()));
}

}  // namespace
}  // namespace devmesh

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::ParseCommandLine(argc, argv);
  return RUN_ALL_TESTS();
}
