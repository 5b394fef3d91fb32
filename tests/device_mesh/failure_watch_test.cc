// devmesh/tests/device_mesh/failure_watch_test.cc
// The failure watch's successor check (device_mesh/failure_watch.h) on one
// process: rank 0's watch follows the lease of "rank 1", whose lease this
// test renews and then stops, and whose process is a child of the test in
// the state each case needs. After the silence:
//   - a child that is alive and not stopped is slow, not dead: no verdict
//     for ten silences; once it is killed, the verdict says its process is
//     gone; left alive, it is dead at the hard limit (30 s during which the
//     store answered the watcher's own renewals: a store that stops
//     answering them in time holds the count until it answers again);
//   - a stopped child (SIGSTOP) is dead by the silence, and the verdict says
//     it is stopped;
//   - a process this kernel cannot see (another host) is dead by the
//     silence alone.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "device_mesh/failure_watch.h"
#include "device_mesh/rank_liveness.h"
#include "gtest/gtest.h"
#include "store/forwarding_store.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

constexpr absl::Duration kPeriod = absl::Milliseconds(50);
constexpr absl::Duration kSilence = absl::Milliseconds(300);

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What the watch of process `pid` would publish under ProcKey: "<boot
// id>|<pid namespace inode>|<pid>|<start time>".
std::string ProcInfoOf(pid_t pid) {
  struct stat ns;
  EXPECT_EQ(stat("/proc/self/ns/pid", &ns), 0);
  const std::string stat_line = FirstLine(absl::StrCat("/proc/", pid, "/stat"));
  std::vector<std::string> f = absl::StrSplit(
      stat_line.substr(stat_line.rfind(')') + 1), ' ', absl::SkipEmpty());
  EXPECT_GE(f.size(), 20u);
  return absl::StrCat(FirstLine("/proc/sys/kernel/random/boot_id"), "|",
                      ns.st_ino, "|", pid, "|", f.size() >= 20 ? f[19] : "");
}

pid_t SleepingChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

// Rank 0's watch over a world of 2 (over `over`), and rank 1's lease
// renewed a few times (so that it has started) and then left alone.
struct Watched {
  std::shared_ptr<Store> store;
  std::shared_ptr<FailureWatch> watch;

  explicit Watched(const std::string& proc_info,
                   std::shared_ptr<Store> over = nullptr)
      : store(over != nullptr ? std::move(over)
                              : std::make_shared<InMemoryStore>()) {
    EXPECT_TRUE(store->Set(FailureWatch::ProcKey(1), proc_info).ok());
    watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2, kPeriod,
                                kSilence);
    for (int i = 0; i < 4; ++i) {
      EXPECT_TRUE(store->Add(FailureWatch::LeaseKey(1), 1).ok());
      absl::SleepFor(kPeriod);
    }
  }

  // The verdict once there is one, waiting at most `limit`.
  std::string VerdictWithin(absl::Duration limit) {
    const absl::Time end = absl::Now() + limit;
    while (watch->verdict().empty() && absl::Now() < end) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return watch->verdict();
  }
};

// Records which thread first wrote each key.
class FirstWriterStore : public ForwardingStore {
 public:
  FirstWriterStore() : ForwardingStore(std::make_shared<InMemoryStore>()) {}
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    Note(key);
    return ForwardingStore::Set(key, value);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    if (delta != 0) Note(key);
    return ForwardingStore::Add(key, delta);
  }
  // Whether `key` was first written by thread `id` (false if never).
  bool FirstWrittenBy(const std::string& key, std::thread::id id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = first_.find(key);
    return it != first_.end() && it->second == id;
  }

 private:
  void Note(absl::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    first_.emplace(std::string(key), std::this_thread::get_id());
  }
  std::mutex mu_;
  std::map<std::string, std::thread::id> first_;
};

// Answers rank 0's lease renewals (an Add of 1 to its lease) a second late
// while slowed: a store too loaded to serve the watcher's own lease.
class SlowRenewalStore : public ForwardingStore {
 public:
  SlowRenewalStore() : ForwardingStore(std::make_shared<InMemoryStore>()) {}
  void Slow(bool slow) { slow_.store(slow); }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    if (delta != 0 && slow_.load() && key == FailureWatch::LeaseKey(0)) {
      absl::SleepFor(absl::Seconds(1));
    }
    return ForwardingStore::Add(key, delta);
  }

 private:
  std::atomic<bool> slow_{false};
};

// A rank killed at once after its first group (before the watch's thread
// ever ran) must still have a started lease and a process to look up, or
// its watcher never judges it (seen in CI: shrink_agreement_test's victim).
TEST(FailureWatchStartTest, LeaseAndProcessArePublishedBeforeStartReturns) {
  auto store = std::make_shared<FirstWriterStore>();
  auto watch = FailureWatch::Start(store, /*rank=*/1, /*world_size=*/2,
                                   kPeriod, kSilence);
  const std::thread::id caller = std::this_thread::get_id();
  EXPECT_TRUE(store->FirstWrittenBy(FailureWatch::LeaseKey(1), caller));
  EXPECT_TRUE(store->FirstWrittenBy(FailureWatch::ProcKey(1), caller));
  auto lease = store->Add(FailureWatch::LeaseKey(1), 0);
  ASSERT_TRUE(lease.ok());
  EXPECT_GE(*lease, 1);
}

TEST(FailureWatchSuccessorTest, AliveAndRunningIsSlowNotDeadUntilItIsGone) {
  const pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  Watched w(ProcInfoOf(child));
  // Ten silences without a renewal: the child is alive, so no verdict.
  EXPECT_EQ(w.VerdictWithin(10 * kSilence), "");
  EXPECT_EQ(w.watch->verdict_rank(), -1);
  Reap(child);
  EXPECT_EQ(w.VerdictWithin(kSilence + 10 * kPeriod),
            "global rank 1 died (its process on this host is gone; first "
            "reported by global rank 0)");
  EXPECT_EQ(w.watch->verdict_rank(), 1);
  auto stored = w.store->Get(FailureWatch::EpochKey(0, "death"),
                             absl::Seconds(1));
  ASSERT_TRUE(stored.ok()) << stored.status();
  // The rank travels beside the text.
  EXPECT_EQ(*stored, absl::StrCat("1\n", w.watch->verdict()));
  EXPECT_EQ(DecodeVerdict(*stored).rank, 1);
  EXPECT_EQ(DecodeVerdict(*stored).text, w.watch->verdict());
}

// `verdict` is the hard limit's on rank 1 (its process running here, rank 0
// watching): its wall time starts with `wall_start`, and 30 s and a
// fraction (or 30 s exactly) of it were counted.
void ExpectHardLimitVerdict(const std::string& verdict,
                            const std::string& wall_start) {
  EXPECT_TRUE(absl::StartsWith(
      verdict, "global rank 1 died (its lease was not renewed for " +
                   wall_start))
      << verdict;
  EXPECT_TRUE(absl::StrContains(
                  verdict, "s although its process on this host runs, 30.") ||
              absl::StrContains(
                  verdict, "s although its process on this host runs, 30s"))
      << verdict;
  EXPECT_TRUE(absl::EndsWith(verdict,
                             "s of it while the store answered global rank 0; "
                             "first reported by global rank 0)"))
      << verdict;
}

// A process that runs but whose lease stays silent (stuck in the kernel,
// frozen by its cgroup, its lease thread gone) is spared only until the hard
// limit, max(30 s, 4 x silence), of wall time.
TEST(FailureWatchSuccessorTest, AliveButSilentPastTheHardLimitIsDead) {
  const pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  const absl::Time start = absl::Now();
  Watched w(ProcInfoOf(child));
  const std::string verdict = w.VerdictWithin(absl::Seconds(40));
  const absl::Duration took = absl::Now() - start;
  Reap(child);
  // 30 s and a fraction ("30.012s"), or 30 s exactly, all of it while the
  // store answered.
  ExpectHardLimitVerdict(verdict, "30");
  EXPECT_GE(took, absl::Seconds(30));
  EXPECT_LT(took, absl::Seconds(35));
}

// The same, but the store answers the watcher's own renewals a second late
// from 20 s to 33 s into the lapse: that time does not count. No verdict at
// 33 s (past the hard limit of wall time: the old rule's verdict came at
// 30 s); once the store answers in time again, the count resumes from about
// 20 s and the verdict comes when it reaches 30 s, about 43 s in.
TEST(FailureWatchSuccessorTest, HardLimitCountsOnlyWhileTheStoreAnswers) {
  const pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  auto store = std::make_shared<SlowRenewalStore>();
  const absl::Time start = absl::Now();
  Watched w(ProcInfoOf(child), store);
  EXPECT_EQ(w.VerdictWithin(start + absl::Seconds(20) - absl::Now()), "");
  store->Slow(true);
  EXPECT_EQ(w.VerdictWithin(start + absl::Seconds(33) - absl::Now()), "");
  store->Slow(false);
  const std::string verdict = w.VerdictWithin(absl::Seconds(20));
  const absl::Duration took = absl::Now() - start;
  Reap(child);
  // Wall time 43 s and a fraction (the renewal in flight at 33 s is late),
  // 30 s of it counted.
  ExpectHardLimitVerdict(verdict, "4");
  EXPECT_GE(took, absl::Seconds(43));
  EXPECT_LT(took, absl::Seconds(47));
}

// AnsweredTime (rank_liveness.h): a call answered within the grace covers
// [sent, sent + grace]; overlapping spans merge; a late answer covers
// nothing; Within clips to its interval.
TEST(AnsweredTimeTest, CoversWhatWasAnsweredInTime) {
  using device_mesh_internal::AnsweredTime;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const auto at = [&](double s) { return t0 + absl::Seconds(s); };
  AnsweredTime answered(absl::Seconds(2));
  EXPECT_EQ(answered.grace(), absl::Seconds(2));
  EXPECT_EQ(answered.Within(at(0), at(100)), absl::ZeroDuration());
  answered.Note(at(0), at(0.1));   // [0, 2]
  answered.Note(at(1), at(1.2));   // [1, 3]: merged, [0, 3]
  answered.Note(at(10), at(13));   // 3 s late: nothing
  answered.Note(at(20), at(22));   // exactly the grace: [20, 22]
  EXPECT_EQ(answered.Within(at(0), at(30)), absl::Seconds(5));
  EXPECT_EQ(answered.Within(at(2.5), at(21)), absl::Seconds(1.5));
  EXPECT_EQ(answered.Within(at(3), at(20)), absl::ZeroDuration());
  EXPECT_EQ(answered.Within(at(21), at(1)), absl::ZeroDuration());
  // Sent a little before the last span's end, noted after it: merged.
  answered.Note(at(21.5), at(21.6));  // [20, 23.5]
  EXPECT_EQ(answered.Within(at(0), at(30)), absl::Seconds(6.5));
}

// At most 256 disjoint spans are kept, the latest.
TEST(AnsweredTimeTest, KeepsTheLatestSpans) {
  using device_mesh_internal::AnsweredTime;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  AnsweredTime answered(absl::Seconds(1));
  for (int i = 0; i < 300; ++i) {
    answered.Note(t0 + absl::Seconds(10 * i), t0 + absl::Seconds(10 * i));
  }
  EXPECT_EQ(answered.Within(t0, t0 + absl::Seconds(3000)), absl::Seconds(256));
  EXPECT_EQ(answered.Within(t0, t0 + absl::Seconds(440)), absl::ZeroDuration());
  EXPECT_EQ(answered.Within(t0, t0 + absl::Seconds(441)), absl::Seconds(1));
}

TEST(FailureWatchSuccessorTest, StoppedIsDeadBySilence) {
  const pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  // Until /proc shows it stopped.
  for (int i = 0; i < 100; ++i) {
    const std::string stat_line =
        FirstLine(absl::StrCat("/proc/", child, "/stat"));
    if (stat_line.find(") T ") != std::string::npos) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Time start = absl::Now();
  Watched w(ProcInfoOf(child));
  const std::string verdict = w.VerdictWithin(kSilence + 20 * kPeriod);
  const absl::Duration took = absl::Now() - start;
  Reap(child);
  EXPECT_TRUE(absl::StartsWith(
      verdict, "global rank 1 died (its lease was not renewed for "))
      << verdict;
  EXPECT_TRUE(absl::EndsWith(verdict,
                             "; its process on this host is stopped; first "
                             "reported by global rank 0)"))
      << verdict;
  EXPECT_GE(took, kSilence);
}

TEST(FailureWatchSuccessorTest, NotVisibleHereIsDeadBySilenceAlone) {
  // Another boot id: a process of another host.
  Watched w("00000000-0000-0000-0000-000000000000|1|1|1");
  const std::string verdict = w.VerdictWithin(kSilence + 20 * kPeriod);
  EXPECT_TRUE(absl::StartsWith(
      verdict, "global rank 1 died (its lease was not renewed for "))
      << verdict;
  EXPECT_TRUE(absl::EndsWith(verdict, "; first reported by global rank 0)"))
      << verdict;
  EXPECT_FALSE(absl::StrContains(verdict, "this host")) << verdict;
}

// A rebuild's wait (FailureWatch::JudgeGoneMembers) on a member of another
// host: its lease decides. World of 3: rank 0's watch follows rank 1 (whose
// lease this test keeps renewing); rank 2 is on another host. While rank 2
// renews, no call judges it; once it stops, a call made at least
// confirm_wait() (3 periods) after its last renewal was first read
// publishes it dead, well before the silence (30 s here).
TEST(FailureWatchJudgeTest, AWaitedMemberOnAnotherHostIsDeadByItsLease) {
  auto store = std::make_shared<InMemoryStore>();
  ASSERT_TRUE(store
                  ->Set(FailureWatch::ProcKey(2),
                        "00000000-0000-0000-0000-000000000000|1|1|1")
                  .ok());
  constexpr absl::Duration kLongSilence = absl::Seconds(30);
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/3,
                                   kPeriod, kLongSilence);
  auto renew = [&](int rank) {
    ASSERT_TRUE(store->Add(FailureWatch::LeaseKey(rank), 1).ok());
  };
  int judged_alive = 0;
  absl::Time last_seen_renewed;
  for (int i = 0; i < 20; ++i) {
    renew(1);
    renew(2);
    last_seen_renewed = absl::Now();
    EXPECT_FALSE(watch->JudgeGoneMembers({1, 2}));
    ++judged_alive;
    absl::SleepFor(kPeriod);
  }
  EXPECT_EQ(judged_alive, 20);
  EXPECT_TRUE(watch->verdict().empty());
  // Rank 2 stops renewing.
  absl::Time found = absl::InfinitePast();
  for (int i = 0; i < 500 && found == absl::InfinitePast(); ++i) {
    renew(1);
    if (watch->JudgeGoneMembers({1, 2})) found = absl::Now();
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_NE(found, absl::InfinitePast());
  // Not before 3 periods without a renewal, counted from the read that
  // first saw its last count.
  EXPECT_GE(found - last_seen_renewed, 3 * kPeriod);
  EXPECT_EQ(watch->verdict_rank(), 2);
  const std::string verdict = watch->verdict();
  EXPECT_TRUE(absl::StartsWith(
      verdict, "global rank 2 died (its lease was not renewed for "))
      << verdict;
  EXPECT_TRUE(absl::EndsWith(verdict,
                             " while a rebuild waited for it; first reported "
                             "by global rank 0)"))
      << verdict;
}

// Hearing of a death without a collective (FailureWatch::WaitForVerdict and
// Subscribe, behind DeviceMesh::WaitForFailure and OnFailure): a verdict
// written by another rank is learnt by the watch's thread and wakes the
// waiter and the live subscriptions, once; an ended subscription is not
// called; a subscription made after the verdict is called at once; a new
// epoch is waited for anew.
TEST(FailureWatchVerdictTest, WaitersAndSubscribersHearOfADeathOnce) {
  auto store = std::make_shared<InMemoryStore>();
  // Rank 1's lease never starts: the watch itself judges no one.
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2, kPeriod,
                                   kSilence);
  absl::StatusOr<Verdict> none = watch->WaitForVerdict(0, absl::InfinitePast());
  ASSERT_EQ(none.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(none.status().message(),
            "no death in epoch 0 known to global rank 0 by the deadline");

  std::mutex mu;
  std::vector<Verdict> heard, ended_heard;
  auto live = watch->Subscribe(0, [&](const Verdict& v) {
    std::lock_guard<std::mutex> lock(mu);
    heard.push_back(v);
  });
  ASSERT_TRUE(live.ok()) << live.status();
  auto ended = watch->Subscribe(0, [&](const Verdict& v) {
    std::lock_guard<std::mutex> lock(mu);
    ended_heard.push_back(v);
  });
  ASSERT_TRUE(ended.ok()) << ended.status();
  ended->reset();

  absl::StatusOr<Verdict> waited = absl::UnknownError("not waited");
  absl::Time woke;
  std::thread waiter([&] {
    waited = watch->WaitForVerdict(0, absl::Now() + absl::Seconds(20));
    woke = absl::Now();
  });
  absl::SleepFor(3 * kPeriod);
  const std::string text = "global rank 1 died (written by the test)";
  const absl::Time written = absl::Now();
  ASSERT_TRUE(store
                  ->Set(FailureWatch::EpochKey(0, "death"),
                        EncodeVerdict(Verdict{1, text}))
                  .ok());
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->rank, 1);
  EXPECT_EQ(waited->text, text);
  // The watch's parked Get of the verdict key lasts one period.
  EXPECT_LT(woke - written, 2 * kPeriod + absl::Milliseconds(500));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(heard.size(), 1u);
    EXPECT_EQ(heard[0].rank, 1);
    EXPECT_EQ(heard[0].text, text);
    EXPECT_TRUE(ended_heard.empty());
  }
  // Known already: at once, here.
  absl::StatusOr<Verdict> again = watch->WaitForVerdict(0, absl::InfinitePast());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->rank, 1);
  std::thread::id called_on;
  auto late = watch->Subscribe(
      0, [&](const Verdict&) { called_on = std::this_thread::get_id(); });
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(called_on, std::this_thread::get_id());

  // A Shrink's new epoch has no verdict yet; the old one is over.
  watch->AdvanceEpoch(1, {0});
  absl::StatusOr<Verdict> next = watch->WaitForVerdict(1, absl::InfinitePast());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(next.status().message(),
            "no death in epoch 1 known to global rank 0 by the deadline");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(heard.size(), 1u);  // the move to epoch 1 is not a death
}

// A waiter or a subscriber for an epoch the job leaves (a Shrink or a Grow
// on another thread) is told so, at once, instead of waiting for the next
// epoch's verdict: the epoch is checked under the watch's lock.
TEST(FailureWatchVerdictTest, AWaiterOfAnEpochTheJobLeavesIsToldSo) {
  auto store = std::make_shared<InMemoryStore>();
  auto watch = FailureWatch::Start(store, /*rank=*/0, /*world_size=*/2, kPeriod,
                                   kSilence);
  absl::StatusOr<Verdict> waited = absl::UnknownError("not waited");
  absl::Time woke;
  std::thread waiter([&] {
    waited = watch->WaitForVerdict(0, absl::Now() + absl::Seconds(20));
    woke = absl::Now();
  });
  absl::SleepFor(3 * kPeriod);
  const absl::Time advanced = absl::Now();
  watch->AdvanceEpoch(1, {0});
  waiter.join();
  EXPECT_EQ(waited.status(),
            absl::FailedPreconditionError(
                "epoch 0 is not the job's current epoch (1; "
                "DeviceMesh::Shrink and Grow move it on)"));
  EXPECT_LT(woke - advanced, absl::Seconds(5));
  auto sub = watch->Subscribe(0, [](const Verdict&) {});
  EXPECT_EQ(sub.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(watch->Subscribe(1, [](const Verdict&) {}).ok());
}

}  // namespace
}  // namespace devmesh
