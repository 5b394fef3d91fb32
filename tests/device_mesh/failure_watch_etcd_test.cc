// devmesh/tests/device_mesh/failure_watch_etcd_test.cc
// The failure watch (device_mesh/failure_watch.h) over an etcd store: each
// rank's lease is an etcd lease (device_mesh/rank_liveness.h). Rank 1 is a
// child process with a watch of its own over a real etcd member
// (tests/store/etcd_testing.h), whose process key is rewritten to look like
// another host's (so only the lease judges it); rank 0 is this process.
//   - rank 1 SIGKILLed: etcd deletes its lease key at the lease's expiry,
//     rank 0's watch sees it and publishes the verdict naming rank 1 (its
//     payload too, through Explain);
//   - rank 1 SIGSTOPped for 1 s, a third of its 3 s TTL: no verdict;
//   - rank 1 ends its watch and exits: its lease is revoked at once, it is
//     marked left, and no verdict follows;
//   - rank 1's lease lapses while its process runs (here: this process),
//     and the etcd member is stopped for 26 s: the hard limit (30 s) counts
//     only the time etcd answered rank 0's own lease calls, so the verdict
//     comes 30 s of answered time in, not at the member's return.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/error_info.h"
#include "device_mesh/failure_watch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/etcd_store.h"
#include "tests/store/etcd_testing.h"

namespace devmesh {
namespace {

using ::devmesh::testing::EtcdCluster;
using ::testing::HasSubstr;

constexpr absl::Duration kPeriod = absl::Milliseconds(250);
constexpr absl::Duration kSilence = absl::Seconds(3);  // the etcd TTL

std::shared_ptr<Store> Connect(const EtcdCluster& etcd,
                               const std::string& prefix) {
  EtcdStoreOptions options;
  options.endpoints = etcd.endpoints();
  options.key_prefix = prefix;
  options.default_timeout = absl::Seconds(20);
  auto store = EtcdStore::Connect(options);
  if (!store.ok()) return nullptr;
  return std::shared_ptr<Store>(std::move(*store));
}

// Rank 1 in a child process: this test binary started again (fork, then
// exec at once: the parent has threads) with --gtest_filter=Rank1Child.Run
// and kRank1Env = "<endpoints>;<prefix>;<clean 0|1>;<ready fd>;<go fd>".
// Its watch started (lease granted, process key rewritten as another
// host's), it writes 'r' on `ready`; then, for a clean exit, a byte on `go`
// ends the watch and the process (exit 0); else it waits to be killed.
constexpr char kRank1Env[] = "DEVMESH_FW_ETCD_RANK1";

struct Rank1 {
  pid_t pid = -1;
  int go = -1;  // write end; -1 when the child waits to be killed
};

Rank1 StartRank1(const EtcdCluster& etcd, const std::string& prefix,
                 bool clean_exit) {
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) return {};
  // Everything the child needs, made before fork (only exec after it).
  const std::string spec =
      absl::StrCat(kRank1Env, "=", absl::StrJoin(etcd.endpoints(), ","), ";",
                   prefix, ";", clean_exit ? 1 : 0, ";", ready[1], ";", go[0]);
  std::vector<std::string> env_strings = {spec};
  for (char** e = environ; *e != nullptr; ++e) {
    // Not the test runner's outputs and shards: the child would claim the
    // parent's premature-exit file, or be sharded out of its one test.
    const absl::string_view var = *e;
    if (absl::StartsWith(var, "GTEST_") ||
        absl::StartsWith(var, "TEST_PREMATURE_EXIT_FILE=") ||
        absl::StartsWith(var, "TEST_SHARD_") ||
        absl::StartsWith(var, "TEST_TOTAL_SHARDS=") ||
        absl::StartsWith(var, "XML_OUTPUT_FILE=")) {
      continue;
    }
    env_strings.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string filter = "--gtest_filter=Rank1Child.Run";
  char* argv[] = {self.data(), filter.data(), nullptr};
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(go[1]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // kept across execve
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  close(ready[1]);
  close(go[0]);
  char c = 0;
  const bool up = pid > 0 && read(ready[0], &c, 1) == 1 && c == 'r';
  close(ready[0]);
  Rank1 child;
  child.pid = pid;
  if (clean_exit) {
    child.go = go[1];
  } else {
    close(go[1]);
  }
  if (!up && pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    child.pid = -1;
  }
  return child;
}

// The child's side (skipped when the test binary runs as itself).
TEST(Rank1Child, Run) {
  const char* spec = std::getenv(kRank1Env);
  if (spec == nullptr) GTEST_SKIP() << "run by StartRank1 only";
  std::vector<std::string> f = absl::StrSplit(spec, ';');
  int clean = 0, ready = -1, go = -1;
  if (f.size() != 5 || !absl::SimpleAtoi(f[2], &clean) ||
      !absl::SimpleAtoi(f[3], &ready) || !absl::SimpleAtoi(f[4], &go)) {
    _exit(2);
  }
  EtcdStoreOptions options;
  options.endpoints = absl::StrSplit(f[0], ',');
  options.key_prefix = f[1];
  options.default_timeout = absl::Seconds(20);
  auto connected = EtcdStore::Connect(options);
  if (!connected.ok()) _exit(3);
  std::shared_ptr<Store> store(std::move(*connected));
  auto watch = FailureWatch::Start(store, /*rank=*/1, /*world_size=*/2,
                                   kPeriod, kSilence);
  // Another host's process: this kernel cannot vouch for it either way.
  if (!store->Set(FailureWatch::ProcKey(1), "another-boot|1|1|1").ok()) {
    _exit(4);
  }
  char c = 'r';
  if (write(ready, &c, 1) != 1) _exit(5);
  if (clean == 0) {
    for (;;) pause();
  }
  if (read(go, &c, 1) != 1) _exit(6);
  watch.reset();  // a clean exit: left, then the lease revoked
  _exit(0);
}

int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(FailureWatchEtcdTest, KilledRankIsDeadByLeaseExpiry) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  const std::string prefix = "/fw-etcd-kill/";
  Rank1 rank1 = StartRank1(etcd, prefix, /*clean_exit=*/false);
  ASSERT_GT(rank1.pid, 0);
  std::shared_ptr<Store> store = Connect(etcd, prefix);
  ASSERT_NE(store, nullptr);
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2,
                                   kPeriod, kSilence);
  // Rank 1's lease key is there, attached to its lease.
  auto there = store->Check({FailureWatch::LeaseKey(1)});
  ASSERT_TRUE(there.ok());
  EXPECT_TRUE(*there);
  kill(rank1.pid, SIGKILL);
  Reap(rank1.pid);
  auto verdict = watch->WaitForVerdict(0, absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->rank, 1);
  EXPECT_THAT(verdict->text, HasSubstr("global rank 1 died"));
  EXPECT_THAT(verdict->text, HasSubstr("its etcd lease expired"));
  EXPECT_THAT(verdict->text, HasSubstr("first reported by global rank 0"));
  there = store->Check({FailureWatch::LeaseKey(1)});
  ASSERT_TRUE(there.ok());
  EXPECT_FALSE(*there);  // deleted by etcd with the lease
  // A collective's error on rank 0 now names rank 1 in its payload.
  const absl::Status explained = watch->Explain(
      absl::UnavailableError("recv from global rank 1 failed"), {0, 1});
  EXPECT_EQ(explained.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(PeerRank(explained), 1);
  EXPECT_THAT(explained.message(), HasSubstr("its etcd lease expired"));
}

TEST(FailureWatchEtcdTest, RankStoppedForLessThanItsTtlIsNotDead) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  const std::string prefix = "/fw-etcd-stop/";
  Rank1 rank1 = StartRank1(etcd, prefix, /*clean_exit=*/false);
  ASSERT_GT(rank1.pid, 0);
  std::shared_ptr<Store> store = Connect(etcd, prefix);
  ASSERT_NE(store, nullptr);
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2,
                                   kPeriod, kSilence);
  absl::SleepFor(2 * kPeriod);  // rank 0 follows rank 1's key
  kill(rank1.pid, SIGSTOP);
  absl::SleepFor(absl::Seconds(1));
  kill(rank1.pid, SIGCONT);
  // Past a whole TTL after the stop: rank 1 renewed in time.
  auto verdict =
      watch->WaitForVerdict(0, absl::Now() + kSilence + absl::Seconds(2));
  EXPECT_EQ(verdict.status().code(), absl::StatusCode::kDeadlineExceeded)
      << (verdict.ok() ? verdict->text : verdict.status().ToString());
  auto there = store->Check({FailureWatch::LeaseKey(1)});
  ASSERT_TRUE(there.ok());
  EXPECT_TRUE(*there);
  kill(rank1.pid, SIGKILL);
  Reap(rank1.pid);
}

// Rank 1 is a lease the test grants (TTL 2 s) and never keeps alive, under
// this process's own identity (copied from rank 0's process key), so that
// this kernel shows it running: slow, not dead, until the hard limit. The
// member is SIGSTOPped from 12 s to 38 s: no verdict by 42 s (the old rule,
// 30 s of wall time, gave one as soon as etcd answered again); the verdict
// comes once etcd has answered rank 0 for 30 s of the lapse, which began
// about when the test started: 12 s before the stop, 18 s after it.
TEST(FailureWatchEtcdTest, HardLimitCountsOnlyWhileEtcdAnswers) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  const std::string prefix = "/fw-etcd-slow/";
  std::shared_ptr<Store> store = Connect(etcd, prefix);
  ASSERT_NE(store, nullptr);
  auto* lessor = dynamic_cast<EtcdStore*>(store.get());
  ASSERT_NE(lessor, nullptr);
  const absl::Time start = absl::Now();
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2,
                                   kPeriod, kSilence);
  auto self = store->Get(FailureWatch::ProcKey(0), absl::Seconds(5));
  ASSERT_TRUE(self.ok()) << self.status();
  ASSERT_TRUE(store->Set(FailureWatch::ProcKey(1), *self).ok());
  auto lease = lessor->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(
      lessor->SetWithLease(FailureWatch::LeaseKey(1), "1", lease->id).ok());
  auto before = watch->WaitForVerdict(0, start + absl::Seconds(12));
  EXPECT_EQ(before.status().code(), absl::StatusCode::kDeadlineExceeded);
  auto gone = store->Check({FailureWatch::LeaseKey(1)});
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_FALSE(*gone);  // expired: the lapse is on
  etcd.Stop(0);
  absl::SleepFor(start + absl::Seconds(38) - absl::Now());
  etcd.Continue(0);
  auto early = watch->WaitForVerdict(0, start + absl::Seconds(42));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded)
      << (early.ok() ? early->text : early.status().ToString());
  auto verdict = watch->WaitForVerdict(0, start + absl::Seconds(90));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->rank, 1);
  EXPECT_THAT(verdict->text,
              HasSubstr("although its process on this host runs, 30."));
  EXPECT_THAT(verdict->text,
              HasSubstr("s of it while the store answered global rank 0; its "
                        "etcd lease expired; first reported by global rank "
                        "0)"));
  // 30 s answered: about 12 before the stop, 18 after the member's return.
  EXPECT_GE(took, absl::Seconds(55));
  EXPECT_LT(took, absl::Seconds(70));
}

TEST(FailureWatchEtcdTest, CleanExitRevokesTheLeaseAndIsNoDeath) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.Start(1).ok());
  const std::string prefix = "/fw-etcd-exit/";
  Rank1 rank1 = StartRank1(etcd, prefix, /*clean_exit=*/true);
  ASSERT_GT(rank1.pid, 0);
  std::shared_ptr<Store> store = Connect(etcd, prefix);
  ASSERT_NE(store, nullptr);
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2,
                                   kPeriod, kSilence);
  absl::SleepFor(2 * kPeriod);  // rank 0 follows rank 1's key
  char c = 'g';
  ASSERT_EQ(write(rank1.go, &c, 1), 1);
  close(rank1.go);
  const int status = Reap(rank1.pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Revoked before the process ended (not left to expire), after its mark.
  auto there = store->Check({FailureWatch::LeaseKey(1)});
  ASSERT_TRUE(there.ok());
  EXPECT_FALSE(*there);
  auto left = store->Check({FailureWatch::LeftKey(1)});
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(*left);
  auto verdict =
      watch->WaitForVerdict(0, absl::Now() + kSilence + absl::Seconds(2));
  EXPECT_EQ(verdict.status().code(), absl::StatusCode::kDeadlineExceeded)
      << (verdict.ok() ? verdict->text : verdict.status().ToString());
}

}  // namespace
}  // namespace devmesh
