// devmesh/tests/device_mesh/liveness_beacon_test.cc
// The liveness beacon and its probe (device_mesh/liveness_beacon.h) against
// a child process that runs a beacon:
//   - a probe that was greeted with the child's nonce says kGone within
//     milliseconds of the child's SIGKILL, at an address whose refusal
//     alone would not count (loopback from "another host");
//   - a stopped child (SIGSTOP) is not gone: its kernel keeps its
//     connections;
//   - a refusal counts before any greeting only where the caller says it is
//     credible; a greeting with another nonce (someone else's port) never
//     makes the probe say alive, nor gone after;
//   - the failure watch: a rebuild's wait on a member of "another host"
//     (another boot id, its beacon over loopback) whose lease is still
//     renewed finds it dead by its beacon once its process is SIGKILLed.
// Each child is this binary again (exec: a fresh process, whose beacon is
// its own), told by LIVENESS_BEACON_CHILD_FD where to write its beacon.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "device_mesh/failure_watch.h"
#include "device_mesh/liveness_beacon.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

extern char** environ;

namespace devmesh {
namespace device_mesh_internal {
namespace {

// A child (this binary again) that starts its beacon, writes its port and
// nonce to a pipe and waits.
struct BeaconChild {
  pid_t pid = -1;
  BeaconInfo info;

  BeaconChild() {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string fd = absl::StrCat(fds[1]);
      setenv("LIVENESS_BEACON_CHILD_FD", fd.c_str(), 1);
      char self[] = "/proc/self/exe";
      char* argv[] = {self, nullptr};
      execve(self, argv, environ);
      _exit(127);
    }
    close(fds[1]);
    EXPECT_EQ(read(fds[0], &info, sizeof(info)),
              static_cast<ssize_t>(sizeof(info)));
    close(fds[0]);
  }
  ~BeaconChild() { Kill(); }
  void Kill() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }
};

// Polls `probe` every millisecond until it says `want` or `limit` passes;
// the last state.
BeaconState PollUntil(BeaconProbe& probe, BeaconState want,
                      absl::Duration limit) {
  const absl::Time end = absl::Now() + limit;
  BeaconState s = probe.Poll();
  while (s != want && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(1));
    s = probe.Poll();
  }
  return s;
}

// A port nothing listens on (bound once, then closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(LivenessBeaconTest, AGreetedProbeSaysGoneAtOnceAfterSigkill) {
  BeaconChild child;
  ASSERT_GT(child.info.port, 0);
  BeaconProbe probe("127.0.0.1", child.info.port, child.info.nonce,
                    /*credible_refusal=*/false);
  ASSERT_EQ(PollUntil(probe, BeaconState::kAlive, absl::Seconds(5)),
            BeaconState::kAlive);
  EXPECT_TRUE(probe.verified());
  // Alive stays alive.
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(probe.Poll(), BeaconState::kAlive);
    absl::SleepFor(absl::Milliseconds(1));
  }
  const absl::Time killed = absl::Now();
  child.Kill();
  EXPECT_EQ(PollUntil(probe, BeaconState::kGone, absl::Seconds(5)),
            BeaconState::kGone);
  const absl::Duration took = absl::Now() - killed;
  std::printf("beacon: gone %.3f ms after the SIGKILL\n",
              absl::ToDoubleMilliseconds(took));
  EXPECT_LT(took, absl::Milliseconds(500));
  EXPECT_EQ(probe.Poll(), BeaconState::kGone);  // for good
}

TEST(LivenessBeaconTest, AStoppedProcessIsNotGone) {
  BeaconChild child;
  BeaconProbe probe("127.0.0.1", child.info.port, child.info.nonce, true);
  ASSERT_EQ(PollUntil(probe, BeaconState::kAlive, absl::Seconds(5)),
            BeaconState::kAlive);
  kill(child.pid, SIGSTOP);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(probe.Poll(), BeaconState::kAlive);
    absl::SleepFor(absl::Milliseconds(1));
  }
  // A new probe of the stopped process is never greeted (its beacon's
  // thread does not run): unknown, not gone.
  BeaconProbe late("127.0.0.1", child.info.port, child.info.nonce, true);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(late.Poll(), BeaconState::kUnknown);
    absl::SleepFor(absl::Milliseconds(1));
  }
  kill(child.pid, SIGCONT);
  EXPECT_EQ(PollUntil(late, BeaconState::kAlive, absl::Seconds(5)),
            BeaconState::kAlive);
}

TEST(LivenessBeaconTest, ARefusalBeforeAnyGreetingCountsOnlyWhereCredible) {
  const int port = FreePort();
  BeaconProbe not_credible("127.0.0.1", port, 42, false);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(not_credible.Poll(), BeaconState::kUnknown);
    absl::SleepFor(absl::Milliseconds(1));
  }
  BeaconProbe credible("127.0.0.1", port, 42, true);
  EXPECT_EQ(PollUntil(credible, BeaconState::kGone, absl::Seconds(1)),
            BeaconState::kGone);
}

TEST(LivenessBeaconTest, AnotherNonceIsSomeoneElsesPort) {
  BeaconChild child;
  BeaconProbe probe("127.0.0.1", child.info.port, child.info.nonce + 1,
                    /*credible_refusal=*/false);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(probe.Poll(), BeaconState::kUnknown);
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_FALSE(probe.verified());
  child.Kill();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(probe.Poll(), BeaconState::kUnknown);
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// A rebuild's wait (FailureWatch::JudgeGoneMembers) on rank 2, whose
// identity names another kernel and whose beacon is the child's (over
// loopback: a refusal there alone would not count, so the wait's probe must
// have been greeted first). Its lease is renewed throughout: only the
// beacon can tell that its process is gone.
TEST(LivenessBeaconWatchTest, AWaitedMemberOnAnotherHostIsDeadByItsBeacon) {
  BeaconChild child;
  ASSERT_GT(child.info.port, 0);
  auto store = std::make_shared<InMemoryStore>();
  ASSERT_TRUE(store
                  ->Set(FailureWatch::ProcKey(2),
                        absl::StrCat("00000000-0000-0000-0000-000000000000|1|",
                                     child.pid, "|1|1|127.0.0.1|",
                                     child.info.port, "|", child.info.nonce))
                  .ok());
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/3,
                                   absl::Milliseconds(50), absl::Seconds(30));
  auto renew = [&] {
    ASSERT_TRUE(store->Add(FailureWatch::LeaseKey(1), 1).ok());
    ASSERT_TRUE(store->Add(FailureWatch::LeaseKey(2), 1).ok());
  };
  for (int i = 0; i < 20; ++i) {
    renew();
    EXPECT_FALSE(watch->JudgeGoneMembers({1, 2}));
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time killed = absl::Now();
  child.Kill();
  absl::Time found = absl::InfinitePast();
  for (int i = 0; i < 500 && found == absl::InfinitePast(); ++i) {
    renew();
    if (watch->JudgeGoneMembers({1, 2})) found = absl::Now();
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_NE(found, absl::InfinitePast());
  std::printf("watch: rank 2 dead %.3f ms after its SIGKILL\n",
              absl::ToDoubleMilliseconds(found - killed));
  EXPECT_LT(found - killed, absl::Milliseconds(500));
  EXPECT_EQ(watch->verdict_rank(), 2);
  EXPECT_EQ(watch->verdict(),
            "global rank 2 died (its process is gone: its liveness port on "
            "127.0.0.1 refused a connection; first reported by global rank 0)");
}

}  // namespace
}  // namespace device_mesh_internal
}  // namespace devmesh

int main(int argc, char** argv) {
  if (const char* fd = std::getenv("LIVENESS_BEACON_CHILD_FD")) {
    int out = -1;
    if (!absl::SimpleAtoi(fd, &out)) return 2;
    const devmesh::device_mesh_internal::BeaconInfo mine =
        devmesh::device_mesh_internal::StartBeacon();
    (void)!write(out, &mine, sizeof(mine));
    close(out);
    for (;;) pause();
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
