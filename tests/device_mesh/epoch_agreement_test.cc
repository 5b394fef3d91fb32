// devmesh/tests/device_mesh/epoch_agreement_test.cc
// AgreeOnSurvivors (device_mesh/epoch_agreement.h) on one process: ranks 0
// and 1 of a world of 3 agree, each on its own thread with its own watch
// over one in-memory store, after a verdict that names rank 2. Both get the
// same survivors, dead set and payloads, byte for byte, even for payloads
// that hold the decision's own separators; the decision in the store fences
// rank 2 and no one else; an epoch without a verdict is refused. A member
// that has not arrived and whose lease stands still is dead when its
// process is stopped, and waited for (slow, not dead) while this kernel
// shows it running.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "device_mesh/epoch_agreement.h"
#include "device_mesh/failure_watch.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace device_mesh_internal {
namespace {

constexpr absl::Duration kPeriod = absl::Milliseconds(50);

TEST(EpochAgreementTest, SurvivorsGetTheSameDecisionAndPayloads) {
  auto store = std::make_shared<InMemoryStore>();
  ASSERT_TRUE(store
                  ->Set(FailureWatch::EpochKey(0, "death"),
                        EncodeVerdict({2, "global rank 2 is gone (test)"}))
                  .ok());
  const std::vector<std::string> payload = {
      "a=1/1;b=2/0;",
      std::string("x:3:\nsurvivors=9;dead=\0;", 23),
  };
  std::vector<std::optional<absl::StatusOr<Agreement>>> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto watch = FailureWatch::Start(store, r, /*world_size=*/3, kPeriod,
                                       4 * kPeriod);
      got[r] = AgreeOnSurvivors(*watch, /*epoch=*/0, {0, 1, 2}, payload[r],
                                /*lease=*/10 * kPeriod, absl::Seconds(10));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(got[r].has_value());
    ASSERT_TRUE(got[r]->ok()) << got[r]->status();
    const Agreement& a = **got[r];
    EXPECT_EQ(a.survivors, (std::vector<int>{0, 1}));
    EXPECT_EQ(a.dead, (std::vector<int>{2}));
    ASSERT_EQ(a.payloads.size(), 2u);
    EXPECT_EQ(a.payloads.at(0), payload[0]);
    EXPECT_EQ(a.payloads.at(1), payload[1]);
  }
  auto decision = store->Get(FailureWatch::EpochKey(0, "decision"),
                             absl::Seconds(1));
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_TRUE(IsSurvivor(*decision, 0));
  EXPECT_TRUE(IsSurvivor(*decision, 1));
  EXPECT_FALSE(IsSurvivor(*decision, 2));
  // The epoch's one decision: a later call gets it again.
  auto watch = FailureWatch::Start(store, 0, 3, kPeriod, 4 * kPeriod);
  auto again = AgreeOnSurvivors(*watch, 0, {0, 1, 2}, "other", 10 * kPeriod,
                                absl::Seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->payloads.at(0), payload[0]);
}

TEST(EpochAgreementTest, NoVerdictNoAgreement) {
  auto store = std::make_shared<InMemoryStore>();
  auto watch = FailureWatch::Start(store, 0, 2, kPeriod, 4 * kPeriod);
  auto a = AgreeOnSurvivors(*watch, 0, {0, 1}, "p", 10 * kPeriod,
                            absl::Seconds(10));
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status())) << a.status();
  EXPECT_FALSE(store->Check({FailureWatch::EpochKey(0, "decision")}).value());
}

TEST(EpochAgreementTest, DecisionsThatCannotBeParsedFenceNobody) {
  EXPECT_TRUE(IsSurvivor("error=4;too slow", 3));
  EXPECT_TRUE(IsSurvivor("survivors=0,1;dead=2\n0:5:ab", 2));  // short payload
  EXPECT_TRUE(IsSurvivor("garbage", 2));
  EXPECT_FALSE(IsSurvivor("survivors=0,1;dead=2\n0:2:ab\n1:0:", 2));
}


// What the watch of process `pid` publishes under ProcKey: "<boot
// id>|<pid namespace inode>|<pid>|<start time>".
std::string ProcInfoOf(pid_t pid) {
  auto first_line = [](const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  struct stat ns;
  EXPECT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  const std::string stat_line =
      first_line(absl::StrCat("/proc/", pid, "/stat"));
  std::vector<std::string> f = absl::StrSplit(
      stat_line.substr(stat_line.rfind(')') + 1), ' ', absl::SkipEmpty());
  EXPECT_GE(f.size(), 20u);
  return absl::StrCat(first_line("/proc/sys/kernel/random/boot_id"), "|",
                      ns.st_ino, "|", pid, "|", f.size() >= 20 ? f[19] : "");
}

// Ranks 0 and 1 of a world of 4 agree after a verdict on rank 3; rank 2
// has not arrived, its lease started and then stood still, and its process
// is a child of this test: running (sleeping), it is slow, not dead, and
// is waited for until the timeout (an overloaded host's rank: grow_cycles
// saw a live rank counted dead this way under a load average of 250);
// stopped, its lease decides.
absl::StatusOr<Agreement> AgreeWithRank2(bool stop_it,
                                         absl::Duration* took) {
  const pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  if (stop_it) kill(child, SIGSTOP);
  auto store = std::make_shared<InMemoryStore>();
  EXPECT_TRUE(store
                  ->Set(FailureWatch::EpochKey(0, "death"),
                        EncodeVerdict({3, "global rank 3 is gone (test)"}))
                  .ok());
  EXPECT_TRUE(store->Set(FailureWatch::ProcKey(2), ProcInfoOf(child)).ok());
  EXPECT_TRUE(store->Add(FailureWatch::LeaseKey(2), 1).ok());
  std::vector<std::optional<absl::StatusOr<Agreement>>> got(2);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto watch = FailureWatch::Start(store, r, /*world_size=*/4, kPeriod,
                                       absl::Seconds(30));
      got[r] = AgreeOnSurvivors(*watch, /*epoch=*/0, {0, 1, 2, 3}, "p",
                                /*lease=*/4 * kPeriod, absl::Seconds(2));
    });
  }
  for (auto& t : threads) t.join();
  *took = absl::Now() - start;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(got[0].has_value() && got[1].has_value());
  if (got[0]->ok() != got[1]->ok()) {
    ADD_FAILURE() << "the two ranks disagree";
  }
  return *got[0];
}

TEST(EpochAgreementTest, ARunningProcessIsSlowNotDead) {
  absl::Duration took;
  absl::StatusOr<Agreement> a = AgreeWithRank2(/*stop_it=*/false, &took);
  EXPECT_TRUE(absl::IsDeadlineExceeded(a.status())) << a.status();
  EXPECT_TRUE(absl::StrContains(a.status().message(), "global rank(s) [2]"))
      << a.status();
  EXPECT_GE(took, absl::Seconds(2));
}

TEST(EpochAgreementTest, AStoppedProcessIsDeadByItsLease) {
  absl::Duration took;
  absl::StatusOr<Agreement> a = AgreeWithRank2(/*stop_it=*/true, &took);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->survivors, (std::vector<int>{0, 1}));
  EXPECT_EQ(a->dead, (std::vector<int>{2, 3}));
  EXPECT_LT(took, absl::Seconds(2));
}

}  // namespace
}  // namespace device_mesh_internal
}  // namespace devmesh
