// The launcher with real processes: a full 8-rank rendezvous through
// Bootstrap::FromEnv, output prefixing, and a failing rank stopping the rest.
#include "bootstrap/launcher.h"

#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/testing/capture.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

constexpr char kWorker[] = "tests/bootstrap/rendezvous_worker";

using ::devmesh::testing::Capture;

TEST(LauncherTest, EightRanksRendezvousAndReadEveryKey) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 8;
  options.argv = {kWorker};
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << err.Read();
  const std::string text = out.Read();
  for (int r = 0; r < 8; ++r) {
    EXPECT_NE(text.find(absl::StrCat("[rank ", r, "] rank ", r,
                                     " of 8 read all 8 keys\n")),
              std::string::npos)
        << text;
  }
}

TEST(LauncherTest, FailingRankStopsTheOthersAndExitsNonZero) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 4;
  options.argv = {kWorker};
  options.env = {{"WORKER_FAIL_RANK", "2"}};
  options.grace_period = absl::Seconds(2);
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_NE(out.Read().find("[rank 2] failing on purpose\n"),
            std::string::npos);
  const std::string errors = err.Read();
  EXPECT_NE(errors.find("[launcher] rank 2 exited with code 3"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("[launcher] failed: rank 2"), std::string::npos);
}

// The launcher hosts the store (--host_store): rank 0 SIGKILLed right after
// the rendezvous does not take it down; the other ranks (--keep_going) write
// and read keys after its death, and the launcher reports rank 0's signal.
TEST(LauncherTest, RankZeroKilledUnderHostStoreLeavesTheStoreUp) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 4;
  options.argv = {kWorker};
  options.env = {{"WORKER_KILL_RANK0", "1"}};
  options.host_store = true;
  options.keep_going = true;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + 9) << err.Read();
  const std::string text = out.Read();
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(text.find(absl::StrCat("[rank ", r, "] rank ", r,
                                     " read the keys of ranks 1..3 after "
                                     "rank 0 died\n")),
              std::string::npos)
        << text << err.Read();
  }
  const std::string errors = err.Read();
  EXPECT_NE(errors.find("[launcher] rank 0 was killed by signal 9; the other "
                        "ranks go on (keep_going)\n"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("[launcher] failed: rank 0 (exit code 137)\n"),
            std::string::npos)
      << errors;
  EXPECT_EQ(errors.find("rank 1 exited"), std::string::npos) << errors;
}

// A rank that exits before it joins, under --host_store --keep_going: the
// launcher reports it to the rendezvous, and every other rank fails at once
// naming it (Unavailable), not at its 60 s timeout with "missing ranks".
// Each rank position in turn, rank 0 included.
TEST(LauncherTest, RankEndingBeforeTheRendezvousIsNamedAtOnce) {
  absl::Duration slowest;
  for (int early = 0; early < 4; ++early) {
    Capture out, err;
    LaunchOptions options;
    options.nproc = 4;
    options.argv = {kWorker};
    options.env = {{"WORKER_EXIT_BEFORE_RANK", absl::StrCat(early)},
                   {"WORKER_TIMEOUT_S", "60"}};
    options.host_store = true;
    options.keep_going = true;
    options.stdout_fd = out.fd();
    options.stderr_fd = err.fd();
    const absl::Time start = absl::Now();
    absl::StatusOr<int> code = LaunchLocal(options);
    const absl::Duration took = absl::Now() - start;
    slowest = std::max(slowest, took);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 3);
    const std::string errors = err.Read();
    for (int r = 0; r < 4; ++r) {
      if (r == early) continue;
      EXPECT_TRUE(absl::StrContains(
          errors,
          absl::StrCat("[rank ", r,
                       "] bootstrap failed: UNAVAILABLE: rendezvous failed: "
                       "rank ",
                       early, " (pid ")))
          << errors;
    }
    EXPECT_TRUE(absl::StrContains(
        errors,
        ") exited with code 3 before the rendezvous completed "
        "(reported by the launcher)"))
        << errors;
    EXPECT_LT(took, absl::Seconds(10)) << errors;
  }
  std::printf("launches: 4, slowest %s\n",
              absl::FormatDuration(slowest).c_str());
}

// The same job with rank 0 hosting the store: its death takes the store,
// and every other rank fails (the contrast that the test above relies on).
TEST(LauncherTest, RankZeroKilledWhileHostingTakesTheStoreWithIt) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 4;
  options.argv = {kWorker};
  // The survivors' store calls retry the vanished server for the timeout.
  options.env = {{"WORKER_KILL_RANK0", "1"}, {"WORKER_TIMEOUT_S", "5"}};
  options.keep_going = true;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + 9);
  EXPECT_EQ(out.Read().find("after rank 0 died"), std::string::npos);
  const std::string errors = err.Read();
  for (int r = 1; r < 4; ++r) {
    EXPECT_NE(errors.find(absl::StrCat("[launcher] rank ", r,
                                       " exited with code 1; the other "
                                       "ranks go on (keep_going)\n")),
              std::string::npos)
        << errors;
  }
}

TEST(LauncherTest, ProcessKilledBySignalIsReported) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 2;
  // Rank 1 dies only after rank 0 has written its line (a marker file), so
  // that the launcher's stop of rank 0 cannot come before rank 0's output.
  const std::string mark = ::testing::TempDir() + "/launcher_rank0_wrote";
  std::remove(mark.c_str());
  options.env = {{"MARK", mark}};
  options.argv = {"/bin/sh", "-c",
                  "echo partial-line-$RANK | tr -d '\\n'; "
                  "if [ \"$RANK\" = 0 ]; then touch \"$MARK\"; fi; "
                  "if [ \"$RANK\" = 1 ]; then "
                  "while [ ! -e \"$MARK\" ]; do sleep 0.01; done; "
                  "kill -9 $$; fi; exec sleep 600"};
  options.grace_period = absl::Seconds(1);
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + 9);
  const std::string text = out.Read();
  EXPECT_NE(text.find("[rank 0] partial-line-0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rank 1] partial-line-1\n"), std::string::npos) << text;
  EXPECT_NE(err.Read().find("rank 1 was killed by signal 9"),
            std::string::npos);
}

// Runs `options` with its output captured; expects it to start and every
// rank to exit 0, and returns what the ranks wrote to stdout.
std::string RunAndReadStdout(LaunchOptions options) {
  Capture out, err;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  EXPECT_TRUE(code.ok()) << code.status();
  if (code.ok()) EXPECT_EQ(*code, 0) << err.Read();
  return out.Read();
}

// The CPUs this process may run on, in order (sched_getaffinity).
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

TEST(LauncherTest, CoreBindingPinsRankRToTheRModKthCpu) {
  const std::vector<int> cpus = AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  // More ranks than CPUs, so the mapping wraps around at least once.
  const int n = static_cast<int>(cpus.size()) + 1;
  LaunchOptions options;
  options.nproc = n;
  options.cpu_bind = CpuBind::kCore;
  options.argv = {"/bin/sh", "-c",
                  "grep '^Cpus_allowed_list:' /proc/self/status"};
  const std::string text = RunAndReadStdout(options);
  for (int r = 0; r < n; ++r) {
    EXPECT_NE(text.find(absl::StrCat("[rank ", r, "] Cpus_allowed_list:\t",
                                     cpus[r % cpus.size()], "\n")),
              std::string::npos)
        << "rank " << r << ":\n" << text;
  }
}

TEST(LauncherTest, NoBindingKeepsTheInheritedCpus) {
  const std::vector<int> cpus = AllowedCpus();
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {"nproc"};  // coreutils: the CPUs this process may use
  const std::string text = RunAndReadStdout(options);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(text.find(absl::StrCat("[rank ", r, "] ", cpus.size(), "\n")),
              std::string::npos)
        << text;
  }
}

TEST(LauncherTest, ParseCpuBind) {
  EXPECT_EQ(*ParseCpuBind("none"), CpuBind::kNone);
  EXPECT_EQ(*ParseCpuBind("core"), CpuBind::kCore);
  absl::StatusOr<CpuBind> bad = ParseCpuBind("socket");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "cpu binding must be none or core, not 'socket'");
}

TEST(LauncherTest, BadOptionsAreInvalidArgument) {
  LaunchOptions options;
  options.nproc = 0;
  options.argv = {"true"};
  EXPECT_EQ(LaunchLocal(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.nproc = 1;
  options.argv.clear();
  EXPECT_EQ(LaunchLocal(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.argv = {"true"};
  options.master_port = 70000;
  EXPECT_EQ(LaunchLocal(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LauncherTest, ProgramThatCannotBeExecutedIsOneClearError) {
  Capture out, err;
  LaunchOptions options;
  options.nproc = 2;
  options.argv = {"/nonexistent/program"};
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  absl::StatusOr<int> code = LaunchLocal(options);
  EXPECT_EQ(code.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(code.status().message(),
            "cannot exec '/nonexistent/program': No such file or directory");
  options.argv = {"no-such-program-on-path"};
  code = LaunchLocal(options);
  EXPECT_EQ(code.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(code.status().message(),
            "cannot exec 'no-such-program-on-path': not found on PATH");
  options.nproc = kMaxLocalRanks + 1;
  options.argv = {"/bin/true"};
  EXPECT_EQ(LaunchLocal(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace devmesh
