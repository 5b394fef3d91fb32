// The elastic training example (examples/elastic) as a user runs it: six
// ranks under the real launcher with --host_store --keep_going, rank 2
// SIGKILLed at step 10. The four survivors print parameters equal to a
// fresh run's with 2 replicas from the step they resumed at; rank 3 (the
// live rank of the lost replica) says it was removed; the launcher reports
// rank 2's signal as the job's exit code and nobody else failing. A second
// job without a kill is the control: every rank ends at epoch 0.
#include <stdio.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bootstrap/launcher.h"
#include "bootstrap/testing/capture.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

constexpr char kExample[] = "examples/elastic/elastic_training_main";

using ::devmesh::testing::Capture;

TEST(ElasticTrainingLaunch, SurvivorsOfAKilledRankEndWithAFreshRunsParameters) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 6;
  options.argv = {kExample, "--kill_rank=2", "--kill_step=10"};
  options.host_store = true;
  options.keep_going = true;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string text = out.Read();
  const std::string errors = err.Read();
  EXPECT_EQ(*code, 128 + 9) << text << errors;
  EXPECT_TRUE(absl::StrContains(text, "[rank 2] rank 2: SIGKILL at step 10\n"))
      << text;
  for (int r : {0, 1, 4, 5}) {
    const std::string want = absl::StrCat("[rank ", r, "] rank ", r,
                                          ": trained 24 steps, epoch 1; "
                                          "resumed at step 10 with 2 replicas");
    EXPECT_TRUE(absl::StrContains(text, want)) << want << "\n" << text << errors;
  }
  EXPECT_EQ(absl::StrContains(text, "DIFFER"), false) << text;
  EXPECT_EQ(absl::StrContains(text, "equal a fresh run's"), true) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "[rank 3] rank 3: left the job at step 10: global rank 3 was "
            "removed in epoch 1"))
      << text;
  EXPECT_TRUE(absl::StrContains(errors, "[launcher] rank 2 was killed by "
                                        "signal 9; the other ranks go on"))
      << errors;
  for (int r : {0, 1, 3, 4, 5}) {
    EXPECT_FALSE(absl::StrContains(errors, absl::StrCat("rank ", r, " exited")))
        << errors;
  }
}

TEST(ElasticTrainingLaunch, NoFaultNoShrink) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 6;
  options.argv = {kExample};
  options.host_store = true;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string text = out.Read();
  EXPECT_EQ(*code, 0) << text << err.Read();
  for (int r = 0; r < 6; ++r) {
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("[rank ", r, "] rank ", r,
                           ": trained 24 steps, epoch 0; parameters")))
        << text;
  }
  EXPECT_FALSE(absl::StrContains(text, "DIFFER")) << text;
}

}  // namespace
}  // namespace devmesh
