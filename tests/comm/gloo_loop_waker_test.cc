// devmesh/tests/comm/gloo_loop_waker_test.cc
// Gloo's event loop without its idle tick (comm/gloo/gloo_loop_waker.h): a
// device's loop thread starts with kIdleTickSlack as its timer slack, so an
// idle loop wakes about once a second rather than 100 times (Gloo's
// epoll_wait(..., 10)); the thread that made the device gets its own slack
// back; and the waits that need a loop turn (each pair connect on the side
// that connects, each pair close) are kicked, so that groups still connect
// and close in well under one slowed tick. The loop thread runs under
// SCHED_BATCH unless DEVMESH_GLOO_LOOP_BATCH=0; the caller's policy and
// slack never change.
#include <dirent.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_device.h"
#include "comm/gloo/gloo_loop_waker.h"
#include "comm/options.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"
#include "config/settings.h"

namespace devmesh {
namespace {

std::set<int> Threads() {
  std::set<int> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* e = readdir(dir)) {
    int tid = 0;
    if (absl::SimpleAtoi(e->d_name, &tid)) tids.insert(tid);
  }
  closedir(dir);
  return tids;
}

int64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  in >> v;
  return v;
}

// "voluntary_ctxt_switches:" of /proc/self/task/<tid>/status: how often the
// thread went to sleep, i.e. once per loop turn for an idle event loop.
int64_t VoluntarySwitches(int tid) {
  std::ifstream in(absl::StrCat("/proc/self/task/", tid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    const std::string key = "voluntary_ctxt_switches:";
    if (line.rfind(key, 0) == 0) {
      int64_t v = -1;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(key.size())),
                           &v)) {
        return v;
      }
    }
  }
  return -1;
}

// The thread among those not in `before` that sleeps in epoll_wait (Gloo's
// loop; a sanitizer may start a thread of its own too), or -1.
int FindLoopThread(const std::set<int>& before) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    for (int tid : Threads()) {
      if (before.count(tid) != 0) continue;
      std::ifstream in(absl::StrCat("/proc/self/task/", tid, "/wchan"));
      std::string wchan;
      in >> wchan;
      if (wchan == "do_epoll_wait") return tid;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

TEST(GlooLoopWakerTest, AnIdleLoopBarelyWakesAndTheCallerKeepsItsSlack) {
  if (sched_getscheduler(0) != SCHED_OTHER) {
    GTEST_SKIP() << "the test runs under a policy other than SCHED_OTHER "
                    "(chrt?); the loop then keeps the caller's policy";
  }
  const int64_t my_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  ASSERT_GT(my_slack, 0);
  const std::set<int> before = Threads();
  GlooOptions options;
  options.hostname = "127.0.0.1";
  auto device = gloo_internal::MakeGlooDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  const int loop = FindLoopThread(before);
  ASSERT_GT(loop, 0) << "no new thread waits in epoll_wait";
  // /proc/<tid>/timerslack_ns: a thread's own slack (not under task/).
  EXPECT_EQ(ReadNumber(absl::StrCat("/proc/", loop, "/timerslack_ns")),
            absl::ToInt64Nanoseconds(gloo_internal::kIdleTickSlack));
  EXPECT_EQ(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), my_slack);
  // The loop runs under SCHED_BATCH (no wake-up preemption of the rank's
  // thread); this thread keeps the default policy.
  EXPECT_EQ(sched_getscheduler(loop), SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  // Gloo's own 10 ms tick would sleep about 200 times in 2 s.
  const int64_t start = VoluntarySwitches(loop);
  ASSERT_GE(start, 0);
  absl::SleepFor(absl::Seconds(2));
  const int64_t turns = VoluntarySwitches(loop) - start;
  EXPECT_LE(turns, 6) << "the idle loop turned " << turns << " times in 2 s";
}

TEST(GlooLoopWakerTest, TheBatchPolicyCanBeTurnedOff) {
  if (sched_getscheduler(0) != SCHED_OTHER) {
    GTEST_SKIP() << "the test runs under a policy other than SCHED_OTHER";
  }
  ASSERT_EQ(setenv("DEVMESH_GLOO_LOOP_BATCH", "0", 1), 0);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  const std::set<int> before = Threads();
  GlooOptions options;
  options.hostname = "127.0.0.1";
  auto device = gloo_internal::MakeGlooDevice(options);
  unsetenv("DEVMESH_GLOO_LOOP_BATCH");
  ASSERT_TRUE(ReloadProcessSettings().ok());
  ASSERT_TRUE(device.ok()) << device.status();
  const int loop = FindLoopThread(before);
  ASSERT_GT(loop, 0) << "no new thread waits in epoll_wait";
  EXPECT_EQ(sched_getscheduler(loop), SCHED_OTHER);
  EXPECT_EQ(ReadNumber(absl::StrCat("/proc/", loop, "/timerslack_ns")),
            absl::ToInt64Nanoseconds(gloo_internal::kIdleTickSlack));
}

TEST(GlooLoopWakerTest, AKickTurnsTheLoopAtOnceAndStopsWithIt) {
  GlooOptions options;
  options.hostname = "127.0.0.1";
  const std::set<int> before = Threads();
  auto device = gloo_internal::MakeGlooDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  const int loop = FindLoopThread(before);
  ASSERT_GT(loop, 0) << "no new thread waits in epoll_wait";
  auto waker = gloo_internal::LoopWakerFor(device->get());
  ASSERT_NE(waker, nullptr);
  const int64_t start = VoluntarySwitches(loop);
  {
    gloo_internal::ScopedLoopKick kick(waker);
    absl::SleepFor(absl::Milliseconds(300));
  }
  const int64_t kicked = VoluntarySwitches(loop) - start;
  // Held 300 ms: at once, then 0.1, 0.3, 0.7 ... ms, then every 10 ms: at
  // most about 35 turns; at least 10 even on a loaded machine (none
  // without the kick).
  EXPECT_GE(kicked, 10);
  absl::SleepFor(absl::Milliseconds(100));  // the kick thread notices the end
  const int64_t after = VoluntarySwitches(loop);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LE(VoluntarySwitches(loop) - after, 3) << "kicks went on";
  // A waker of a device no one holds any more is gone.
  const ::gloo::transport::Device* raw = device->get();
  waker.reset();
  device->reset();
  EXPECT_EQ(gloo_internal::LoopWakerFor(raw), nullptr);
}

// A Gloo group of `size` ranks on 127.0.0.1 with group timeout `timeout`.
absl::StatusOr<std::unique_ptr<Communicator>> LoopbackGlooGroup(
    int rank, int size, std::shared_ptr<Store> store, absl::Duration timeout) {
  CommOptions options;
  options.timeout = timeout;
  options.gloo.hostname = "127.0.0.1";
  return CreateCommunicator("gloo", std::move(store), rank, size, options);
}

// Four processes connect a group, all-reduce and destroy it. Without the
// kicks each pair that a member connects waits for a slowed tick (1 s) and
// so does each pair close: measured with the kicks disabled, connects took
// 2.0 s and closes 2.0-4.0 s. The bounds (1.5 s) leave room for a loaded
// machine.
TEST(GlooLoopWakerTest, GroupsConnectAndCloseWithoutWaitingForTheTick) {
  absl::Status status = testing::ForkRanks(
      4, [](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        const absl::Time start = absl::Now();
        auto comm = LoopbackGlooGroup(rank, size, store, absl::Seconds(60));
        if (!comm.ok()) return comm.status();
        const absl::Duration connect = absl::Now() - start;
        std::vector<int64_t> v = {rank + 1};
        absl::Status s = (*comm)->AllReduce(absl::MakeSpan(v), ReduceOp::kSum);
        if (!s.ok()) return s;
        if (v[0] != 10) {
          return absl::InternalError(absl::StrCat("sum ", v[0], ", want 10"));
        }
        const absl::Time closing = absl::Now();
        comm->reset();
        const absl::Duration close = absl::Now() - closing;
        if (connect > absl::Milliseconds(1500) ||
            close > absl::Milliseconds(1500)) {
          return absl::InternalError(absl::StrCat(
              "rank ", rank, ": connect took ", absl::FormatDuration(connect),
              ", close ", absl::FormatDuration(close), " (bound 1.5s each)"));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

// A collective that times out: Gloo closes every pair of the context on the
// waiting thread, each close waiting for a loop turn. Ranks 1-3 all-reduce
// with a 1 s timeout while rank 0 never joins; each must fail within the
// timeout plus 1.3 s (without the deadline kick, the three closes waited up
// to a slowed tick, 1 s, each).
TEST(GlooLoopWakerTest, ATimedOutCollectiveClosesItsPairsAtOnce) {
  absl::Status status = testing::ForkRanks(
      4, [](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        auto comm = LoopbackGlooGroup(rank, size, store, absl::Seconds(1));
        if (!comm.ok()) return comm.status();
        if (rank == 0) {
          absl::SleepFor(absl::Seconds(4));
          return absl::OkStatus();
        }
        std::vector<int64_t> v = {rank + 1};
        const absl::Time start = absl::Now();
        absl::Status s = (*comm)->AllReduce(absl::MakeSpan(v), ReduceOp::kSum);
        const absl::Duration took = absl::Now() - start;
        if (s.ok()) return absl::InternalError("all-reduce without rank 0 ok");
        if (took > absl::Milliseconds(2300)) {
          return absl::InternalError(absl::StrCat(
              "rank ", rank, ": the timed-out all-reduce took ",
              absl::FormatDuration(took), " (bound 2.3s): ", s.ToString()));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
