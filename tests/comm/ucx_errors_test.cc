// devmesh/tests/comm/ucx_errors_test.cc
// The "ucx" backend's error paths (comm/ucx/ucx_communicator.h,
// ucx_group.h), in real processes (ForkRanks), with exact codes, payloads
// and, where the wording is stable, messages:
// - Mismatches (dtype at equal bytes, count, a big count, op, broadcast
//   root, kind) on 2 and 4 members: InvalidArgument with kDisagreementPayload
//   naming the member that differs (always the group's last, so that every
//   pair that compares headers names it), within 10 s, sticky. On 2 members
//   at the call itself; on 4 at the call or, for a member that received
//   nothing from the one that differs, at its next call (the contract; on 2
//   members that is the broadcast whose roots differ: both are roots).
// - Send/Recv whose dtype and count differ: the receiver's InvalidArgument
//   names the sender.
// - Abort from another thread ends a blocked wait (FailedPrecondition).
// - A SIGKILLed member is named (Unavailable, kPeerPayload) within 1 s.
// - A member that destroyed its communicator is named (kPeerLeftPayload).
// - A member that never calls: DeadlineExceeded at the group's timeout.
// - Split: order by key, kNoColor, a child's own timeout.
// Each test's children write their timings and where they failed into a
// shared page; the parent prints one "[ucx-stats]" line per test.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

constexpr char kLabel[] = "mesh dim 'tp'";
constexpr int kMaxRanks = 8;
// ForkRanks' limit: no rank's body takes half of it unless a call outlived
// the group's 20 s timeout (the abort case's rank 1: 5 s, then at most 20).
constexpr absl::Duration kRunLimit = absl::Seconds(40);

CommOptions Options(absl::Duration timeout = absl::Seconds(20)) {
  CommOptions options;
  options.timeout = timeout;
  options.label = kLabel;
  return options;
}

// What the children tell the parent: a page shared across fork.
struct RankFacts {
  std::atomic<int64_t> took_ns{-1};   // the call under test
  std::atomic<int64_t> ended_ns{0};   // its end, Unix time
  std::atomic<int> failed_at{0};      // 1: the call; 2: the next call
};
struct Facts {
  RankFacts rank[kMaxRanks];
  std::atomic<int64_t> event_ns{0};  // the kill, leave or abort, Unix time
};

class SharedFacts {
 public:
  SharedFacts() {
    void* page = mmap(nullptr, sizeof(Facts), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    facts_ = page == MAP_FAILED ? nullptr : new (page) Facts();
  }
  ~SharedFacts() {
    if (facts_ != nullptr) munmap(facts_, sizeof(Facts));
  }
  bool ok() const { return facts_ != nullptr; }
  Facts* get() const { return facts_; }
  Facts* operator->() const { return facts_; }

 private:
  Facts* facts_ = nullptr;
};

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Every rank sets "<name>/<rank>"; returns once all have.
absl::Status StoreBarrier(Store& store, const std::string& name, int rank,
                          int size) {
  DEVMESH_RETURN_IF_ERROR(store.Set(absl::StrCat(name, "/", rank), "1"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(absl::StrCat(name, "/", r));
  return store.Wait(keys, absl::Seconds(30));
}

// One matching all-reduce: the group works before the case's call.
absl::Status WarmUp(Communicator& c, int rank, int size) {
  std::vector<int32_t> one = {rank + 1};
  DEVMESH_RETURN_IF_ERROR(c.AllReduce(absl::MakeSpan(one), ReduceOp::kSum));
  return Check(one[0] == size * (size + 1) / 2,
               absl::StrCat("warm-up sum ", one[0]));
}

// ---------------------------------------------------------------------------
// 1. Mismatches. The group's last member differs; the others agree.

struct Mismatch {
  const char* name;
  absl::Status (*call)(Communicator& c, bool differs);
  const char* ours;    // DescribeCall of the others' call
  const char* theirs;  // of the last member's ($0: 8 / size)
};

absl::Status Float32xN(Communicator& c, size_t n) {
  std::vector<float> x(n, 1.0f);
  return c.AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
}

absl::Status DtypeAtEqualBytes(Communicator& c, bool differs) {
  if (!differs) return Float32xN(c, 8);
  std::vector<double> x(4, 1.0);
  return c.AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
}

absl::Status Count(Communicator& c, bool differs) {
  return Float32xN(c, differs ? 4 : 8);
}

absl::Status BigCount(Communicator& c, bool differs) {
  return Float32xN(c, differs ? 100000 : 200000);
}

absl::Status Op(Communicator& c, bool differs) {
  std::vector<int32_t> x(3, 1);
  return c.AllReduce(absl::MakeSpan(x),
                     differs ? ReduceOp::kMax : ReduceOp::kSum);
}

absl::Status Root(Communicator& c, bool differs) {
  std::vector<uint8_t> x(3, 7);
  return c.Broadcast(absl::MakeSpan(x), /*root=*/differs ? 1 : 0);
}

// All-reduce of 8 floats against an all-gather into 8 floats.
absl::Status Kind(Communicator& c, bool differs) {
  if (!differs) return Float32xN(c, 8);
  const size_t block = 8 / c.size();
  std::vector<float> mine(block, 1.0f), all(8);
  return c.AllGather(mine, absl::MakeSpan(all));
}

const Mismatch kMismatches[] = {
    {"dtype_at_equal_bytes", DtypeAtEqualBytes, "allreduce float32 x 8 sum",
     "allreduce float64 x 4 sum"},
    {"count", Count, "allreduce float32 x 8 sum", "allreduce float32 x 4 sum"},
    {"big_count", BigCount, "allreduce float32 x 200000 sum",
     "allreduce float32 x 100000 sum"},
    {"op", Op, "allreduce int32 x 3 sum", "allreduce int32 x 3 max"},
    {"root", Root, "broadcast uint8 x 3 from root 0",
     "broadcast uint8 x 3 from root 1"},
    {"kind", Kind, "allreduce float32 x 8 sum", "allgather float32 x $0"},
};

std::string GroupTail(int size) {
  std::string ranks;
  for (int r = 0; r < size; ++r) absl::StrAppend(&ranks, r == 0 ? "" : ", ", r);
  return absl::StrCat(" (group of global ranks [", ranks,
                      "]); the group refuses every later call");
}

// The error of a mismatched call (or of the next call, `at_call` false).
absl::Status CheckDisagreement(const absl::Status& got, const Mismatch& m,
                               int size, bool at_call) {
  const int last = size - 1;
  const std::string theirs = absl::Substitute(m.theirs, 8 / size);
  const std::string where = at_call ? "the call" : "the next call";
  DEVMESH_RETURN_IF_ERROR(Check(absl::IsInvalidArgument(got),
                                absl::StrCat(where, ": ", got.ToString())));
  DEVMESH_RETURN_IF_ERROR(
      Check(DisagreeingRank(got) == last,
            absl::StrCat(where, ": the payload names ", DisagreeingRank(got),
                         ", not ", last, ": ", got.ToString())));
  const std::string message(got.message());
  if (size == 2 && at_call) {
    // Both members word it alike: group rank 0 is the reference.
    const std::string want = absl::StrCat(
        "ucx call #2 along ", kLabel,
        ": the members' calls differ: global rank 1 called ", theirs,
        ", global rank 0 ", m.ours, GroupTail(size));
    return Check(message == want,
                 absl::StrCat(where, ": got ", message, "\nwant ", want));
  }
  // On 4 members the reference is whichever lower member compared the
  // headers; and a member at its next call may compare with one still at
  // the mismatched call ("at different collectives").
  DEVMESH_RETURN_IF_ERROR(Check(
      absl::StartsWith(message, "ucx") &&
          absl::EndsWith(message, GroupTail(size)) &&
          absl::StrContains(message, absl::StrCat("global rank ", last, " ")),
      absl::StrCat(where, ": message ", message)));
  if (absl::StrContains(message, "the members' calls differ")) {
    DEVMESH_RETURN_IF_ERROR(Check(
        absl::StartsWith(message, absl::StrCat("ucx call #2 along ", kLabel,
                                               ": the members' calls differ: "
                                               "global rank ",
                                               last, " called ", theirs,
                                               ", global rank ")) &&
            absl::StrContains(message, m.ours),
        absl::StrCat(where, ": message ", message)));
  }
  return absl::OkStatus();
}

void PrintTo(const Mismatch& m, std::ostream* os) { *os << m.name; }

using MismatchParam = std::tuple<Mismatch, int>;

class UcxMismatchTest : public ::testing::TestWithParam<MismatchParam> {};

TEST_P(UcxMismatchTest, EveryMemberFailsWithTheDisagreement) {
  const Mismatch& m = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      ranks,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size, Options()));
        DEVMESH_RETURN_IF_ERROR(WarmUp(*comm, rank, size));
        const absl::Time start = absl::Now();
        const absl::Status got = m.call(*comm, rank == size - 1);
        f->rank[rank].took_ns = absl::ToInt64Nanoseconds(absl::Now() - start);
        const absl::Status next = comm->Barrier();
        const absl::Status then = comm->Barrier();
        f->rank[rank].failed_at = got.ok() ? 2 : 1;
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::Now() - start <= absl::Seconds(10),
                  absl::StrCat("the call and the next took ",
                               absl::FormatDuration(absl::Now() - start))));
        if (got.ok()) {
          // Only a member that received nothing from the one that differs
          // may complete the call (ucx_communicator.h): on 4 members any but
          // that one; on 2, both members of a broadcast whose roots differ
          // (each is a root, neither receives).
          const bool may_complete =
              (size > 2 && rank != size - 1) || std::string(m.name) == "root";
          DEVMESH_RETURN_IF_ERROR(Check(
              may_complete,
              absl::StrCat("OK at the mismatched call; the next call: ",
                           next.ToString())));
          DEVMESH_RETURN_IF_ERROR(CheckDisagreement(next, m, size, false));
          return Check(then == next,
                       absl::StrCat("not sticky: ", then.ToString()));
        }
        DEVMESH_RETURN_IF_ERROR(CheckDisagreement(got, m, size, true));
        DEVMESH_RETURN_IF_ERROR(
            Check(next == got, absl::StrCat("the next call: ", next.ToString(),
                                            "\nthe call: ", got.ToString())));
        return Check(then == got,
                     absl::StrCat("not sticky: ", then.ToString()));
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  int at_call = 0, at_next = 0;
  int64_t slowest = 0;
  for (int r = 0; r < ranks; ++r) {
    at_call += f->rank[r].failed_at == 1;
    at_next += f->rank[r].failed_at == 2;
    slowest = std::max<int64_t>(slowest, f->rank[r].took_ns);
  }
  std::cout << "[ucx-stats] mismatch " << m.name << " x" << ranks
            << " ok=" << status.ok() << " at_call=" << at_call
            << " at_next=" << at_next << " slowest_call_ms=" << Ms(slowest)
            << std::endl;
}

INSTANTIATE_TEST_SUITE_P(
    Mismatches, UcxMismatchTest,
    ::testing::Combine(::testing::ValuesIn(kMismatches),
                       ::testing::Values(2, 4)),
    [](const ::testing::TestParamInfo<MismatchParam>& info) {
      return absl::StrCat(std::get<0>(info.param).name, "_",
                          std::get<1>(info.param), "_members");
    });

// ---------------------------------------------------------------------------
// 2. Send/Recv whose dtype and count differ (equal bytes).

TEST(UcxErrorsTest, RecvOfAnotherDtypeNamesTheSender) {
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size, Options()));
        DEVMESH_RETURN_IF_ERROR(WarmUp(*comm, rank, size));
        const absl::Time start = absl::Now();
        if (rank == 0) {
          std::vector<float> x(8, 1.0f);
          absl::Status sent = comm->Send(absl::MakeSpan(x), 1);
          f->rank[rank].took_ns = absl::ToInt64Nanoseconds(absl::Now() - start);
          return Check(sent.ok(), absl::StrCat("send: ", sent.ToString()));
        }
        std::vector<double> x(4, 0.0);
        const absl::Status got = comm->Recv(absl::MakeSpan(x), 0);
        f->rank[rank].took_ns = absl::ToInt64Nanoseconds(absl::Now() - start);
        const std::string want = absl::StrCat(
            "ucx recv along ", kLabel,
            " from global rank 0: it sent float32 x 8, this rank receives "
            "float64 x 4");
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsInvalidArgument(got) && DisagreeingRank(got) == 0 &&
                      got.message() == want,
                  absl::StrCat("got ", got.ToString(), "\nwant ", want)));
        return Check(absl::Now() - start <= absl::Seconds(10),
                     absl::StrCat("took ",
                                  absl::FormatDuration(absl::Now() - start)));
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  std::cout << "[ucx-stats] send_recv ok=" << status.ok()
            << " recv_ms=" << Ms(f->rank[1].took_ns) << std::endl;
}

// ---------------------------------------------------------------------------
// 3. Abort from another thread ends a blocked wait.

TEST(UcxErrorsTest, AbortEndsABlockedAllReduce) {
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size, Options()));
        std::vector<float> x(1024, 1.0f);
        if (rank == 1) {
          // Calls late; its outcome (rank 0 aborted and exited) is reported,
          // not asserted beyond "not the timeout".
          absl::SleepFor(absl::Seconds(5));
          const absl::Time start = absl::Now();
          absl::Status late =
              comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
          f->rank[1].took_ns = absl::ToInt64Nanoseconds(absl::Now() - start);
          std::cerr << "[ucx-stats] abort: rank 1's late call: "
                    << late.ToString() << std::endl;
          return Check(!absl::IsDeadlineExceeded(late), late.ToString());
        }
        std::thread aborter([&] {
          absl::SleepFor(absl::Milliseconds(200));
          f->event_ns = NowNs();
          (void)comm->Abort();
        });
        const absl::Status got = comm->AllReduce(absl::MakeSpan(x),
                                                 ReduceOp::kSum);
        const int64_t ended = NowNs();
        aborter.join();
        f->rank[0].took_ns = ended - f->event_ns;
        const std::string want = absl::StrCat(
            "ucx allreduce #1 along ", kLabel,
            ": the communicator was aborted");
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsFailedPrecondition(got) && got.message() == want,
                  absl::StrCat("got ", got.ToString(), "\nwant ", want)));
        DEVMESH_RETURN_IF_ERROR(Check(
            ended - f->event_ns <= 1000000000,
            absl::StrCat("ended ", Ms(ended - f->event_ns),
                         " ms after Abort")));
        const absl::Status later =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const absl::Status barrier = comm->Barrier();
        DEVMESH_RETURN_IF_ERROR(Check(
            absl::IsFailedPrecondition(later) &&
                absl::IsFailedPrecondition(barrier),
            absl::StrCat("later: ", later.ToString(), "; ",
                         barrier.ToString())));
        return Check(comm->Abort().ok(), "a second Abort");
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  std::cout << "[ucx-stats] abort ok=" << status.ok()
            << " after_abort_ms=" << Ms(f->rank[0].took_ns)
            << " rank1_late_call_ms=" << Ms(f->rank[1].took_ns) << std::endl;
}

// ---------------------------------------------------------------------------
// 4. A SIGKILLed member is named.

// The survivors' error: the killed member named, or (a member that waited
// on a survivor whose call failed first) that survivor's "stopped" notice.
absl::Status CheckKilled(const absl::Status& got, int killed, int* named) {
  *named = PeerRank(got);
  DEVMESH_RETURN_IF_ERROR(Check(absl::IsUnavailable(got),
                                absl::StrCat("got ", got.ToString())));
  const std::string message(got.message());
  if (*named == killed) {
    return Check(
        absl::StartsWith(message, absl::StrCat("ucx allreduce #2 along ",
                                               kLabel, ": the connection to "
                                               "global rank ",
                                               killed, " failed (")),
        absl::StrCat("got ", got.ToString()));
  }
  return Check(*named >= 0 &&
                   absl::StrContains(
                       message, absl::StrCat("global rank ", *named,
                                             " stopped: its call failed (")) &&
                   absl::StrContains(message,
                                     absl::StrCat("global rank ", killed)),
               absl::StrCat("got ", got.ToString()));
}

class UcxKillTest : public ::testing::TestWithParam<int> {};

TEST_P(UcxKillTest, SigkilledMemberIsNamedWithinASecond) {
  const int ranks = GetParam();
  constexpr int kKilled = 1;
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      ranks,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size, Options()));
        DEVMESH_RETURN_IF_ERROR(WarmUp(*comm, rank, size));
        if (rank == kKilled) {
          // Dies once every survivor has its first call's result.
          std::vector<std::string> keys;
          for (int r = 0; r < size; ++r) {
            if (r != kKilled) keys.push_back(absl::StrCat("warm/", r));
          }
          DEVMESH_RETURN_IF_ERROR(store->Wait(keys, absl::Seconds(30)));
          f->event_ns = NowNs();
          kill(getpid(), SIGKILL);
          return absl::InternalError("still alive after SIGKILL");
        }
        DEVMESH_RETURN_IF_ERROR(store->Set(absl::StrCat("warm/", rank), "1"));
        std::vector<float> x(1024, 1.0f);
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const int64_t ended = NowNs();
        f->rank[rank].ended_ns = ended;
        f->rank[rank].took_ns = ended - f->event_ns;
        int named = -1;
        DEVMESH_RETURN_IF_ERROR(CheckKilled(got, kKilled, &named));
        f->rank[rank].failed_at = named == kKilled ? 1 : 2;
        DEVMESH_RETURN_IF_ERROR(
            Check(f->event_ns != 0 && ended - f->event_ns <= 1000000000,
                  absl::StrCat("ended ", Ms(ended - f->event_ns),
                               " ms after the kill: ", got.ToString())));
        const absl::Status later = comm->Barrier();
        return Check(later == got, absl::StrCat("later: ", later.ToString()));
      },
      kRunLimit);
  // ForkRanks counts the killed child as a failure (killed by a signal,
  // reported nothing); the survivors' bodies asserted their own results.
  EXPECT_EQ(status, absl::InternalError(absl::StrCat(
                        "rank ", kKilled,
                        ": INTERNAL: killed by signal 9 (Killed)")));
  int named_killed = 0, named_stopped = 0;
  int64_t slowest = 0;
  for (int r = 0; r < ranks; ++r) {
    if (r == kKilled) continue;
    named_killed += f->rank[r].failed_at == 1;
    named_stopped += f->rank[r].failed_at == 2;
    slowest = std::max<int64_t>(slowest, f->rank[r].took_ns);
  }
  std::cout << "[ucx-stats] kill x" << ranks << " ok="
            << (status.ToString() ==
                absl::StrCat("INTERNAL: rank ", kKilled,
                             ": INTERNAL: killed by signal 9 (Killed)"))
            << " named_killed=" << named_killed
            << " named_stopped=" << named_stopped
            << " slowest_after_kill_ms=" << Ms(slowest) << std::endl;
}

INSTANTIATE_TEST_SUITE_P(Members, UcxKillTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "_members");
                         });

// ---------------------------------------------------------------------------
// 5. A member that destroyed its communicator is named as having left.

TEST(UcxErrorsTest, MemberThatDestroyedItsCommunicatorLeft) {
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size, Options()));
        DEVMESH_RETURN_IF_ERROR(WarmUp(*comm, rank, size));
        if (rank == 1) {
          DEVMESH_RETURN_IF_ERROR(store->Wait({"warm/0"}, absl::Seconds(30)));
          f->event_ns = NowNs();
          comm.reset();
          absl::SleepFor(absl::Seconds(3));
          return absl::OkStatus();
        }
        DEVMESH_RETURN_IF_ERROR(store->Set("warm/0", "1"));
        std::vector<float> x(1024, 1.0f);
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const int64_t ended = NowNs();
        f->rank[0].took_ns = ended - f->event_ns;
        const std::string want =
            absl::StrCat("ucx allreduce #2 along ", kLabel,
                         ": global rank 1 left the group (it destroyed its "
                         "communicator)");
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsUnavailable(got) && PeerLeftRank(got) == 1 &&
                      PeerRank(got) == 1 && got.message() == want,
                  absl::StrCat("got ", got.ToString(), "\nwant ", want)));
        DEVMESH_RETURN_IF_ERROR(
            Check(f->event_ns != 0 && ended - f->event_ns <= 1000000000,
                  absl::StrCat("ended ", Ms(ended - f->event_ns),
                               " ms after the leave")));
        const absl::Status later = comm->Barrier();
        return Check(later == got, absl::StrCat("later: ", later.ToString()));
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  std::cout << "[ucx-stats] left ok=" << status.ok()
            << " after_leave_ms=" << Ms(f->rank[0].took_ns) << std::endl;
}

// ---------------------------------------------------------------------------
// 6. A member that never calls: DeadlineExceeded at the group's timeout.

TEST(UcxErrorsTest, MemberThatNeverCallsIsDeadlineExceeded) {
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      2,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        // Both at creation together: its deadline is the 1 s timeout too.
        DEVMESH_RETURN_IF_ERROR(StoreBarrier(*store, "start", rank, size));
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, CreateCommunicator("ucx", store, rank, size,
                                          Options(absl::Seconds(1))));
        if (rank == 1) {
          // Never calls; stays until rank 0 has its error.
          return store->Wait({"rank 0 done"}, absl::Seconds(30));
        }
        std::vector<float> x(1024, 1.0f);
        const absl::Time start = absl::Now();
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const absl::Duration took = absl::Now() - start;
        f->rank[0].took_ns = absl::ToInt64Nanoseconds(took);
        DEVMESH_RETURN_IF_ERROR(store->Set("rank 0 done", "1"));
        const std::string want = absl::StrCat(
            "ucx allreduce #1 along ", kLabel,
            ": no message from global rank(s) [1] within the group's timeout "
            "of 1s; the group refuses every later call");
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsDeadlineExceeded(got) && PeerRank(got) == 1 &&
                      got.message() == want,
                  absl::StrCat("got ", got.ToString(), "\nwant ", want)));
        DEVMESH_RETURN_IF_ERROR(
            Check(took >= absl::Milliseconds(900) && took <= absl::Seconds(3),
                  absl::StrCat("took ", absl::FormatDuration(took))));
        const absl::Status later = comm->Barrier();
        return Check(later == got, absl::StrCat("later: ", later.ToString()));
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  std::cout << "[ucx-stats] timeout ok=" << status.ok()
            << " took_ms=" << Ms(f->rank[0].took_ns) << std::endl;
}

// ---------------------------------------------------------------------------
// 7. Split.

TEST(UcxErrorsTest, SplitOrdersByKeyAndTheChildKeepsItsOwnTimeout) {
  SharedFacts facts;
  ASSERT_TRUE(facts.ok());
  Facts* f = facts.get();
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto world,
            CreateCommunicator("ucx", store, rank, size, Options()));
        DEVMESH_RETURN_IF_ERROR(WarmUp(*world, rank, size));

        // Color rank % 2, key -rank: each child holds the reverse order.
        DEVMESH_ASSIGN_OR_RETURN(auto half, world->Split(rank % 2, -rank));
        DEVMESH_RETURN_IF_ERROR(Check(half != nullptr, "no child"));
        const std::vector<int> want_globals =
            rank % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{3, 1};
        DEVMESH_RETURN_IF_ERROR(Check(
            half->size() == 2 && half->rank() == (rank >= 2 ? 0 : 1) &&
                half->global_ranks() == want_globals &&
                half->backend() == "ucx",
            absl::StrCat("child rank ", half->rank(), " of ", half->size())));
        std::vector<int32_t> v(5);
        for (int i = 0; i < 5; ++i) v[i] = (rank + 1) * (i + 1);
        DEVMESH_RETURN_IF_ERROR(half->AllReduce(absl::MakeSpan(v),
                                                ReduceOp::kSum));
        const int32_t pair_sum = rank % 2 == 0 ? 1 + 3 : 2 + 4;
        for (int i = 0; i < 5; ++i) {
          DEVMESH_RETURN_IF_ERROR(
              Check(v[i] == pair_sum * (i + 1),
                    absl::StrCat("half sum [", i, "] = ", v[i])));
        }
        std::vector<int32_t> mine = {rank}, order(2);
        DEVMESH_RETURN_IF_ERROR(half->AllGather(mine, absl::MakeSpan(order)));
        DEVMESH_RETURN_IF_ERROR(
            Check(order == std::vector<int32_t>(want_globals.begin(),
                                                want_globals.end()),
                  absl::StrCat("gathered ", order[0], ", ", order[1])));

        // kNoColor: rank 3 joins none.
        DEVMESH_ASSIGN_OR_RETURN(auto three,
                                 world->Split(rank == 3 ? kNoColor : 0, rank));
        if (rank == 3) {
          DEVMESH_RETURN_IF_ERROR(Check(three == nullptr, "kNoColor child"));
        } else {
          DEVMESH_RETURN_IF_ERROR(Check(
              three != nullptr && three->size() == 3 && three->rank() == rank &&
                  three->global_ranks() == std::vector<int>{0, 1, 2},
              "the 3-member child"));
          std::vector<int32_t> s = {rank + 1, 10 * (rank + 1)};
          DEVMESH_RETURN_IF_ERROR(three->AllReduce(absl::MakeSpan(s),
                                                   ReduceOp::kSum));
          DEVMESH_RETURN_IF_ERROR(
              Check(s == std::vector<int32_t>{6, 60},
                    absl::StrCat("3-member sums ", s[0], ", ", s[1])));
        }

        // A child with its own 1 s timeout: works after idling past it (the
        // deadline is per call), and its calls end at its timeout, not the
        // parent's 20 s.
        SplitOptions own;
        own.timeout = absl::Seconds(1);
        DEVMESH_ASSIGN_OR_RETURN(auto quick, world->Split(0, rank, own));
        DEVMESH_RETURN_IF_ERROR(Check(quick != nullptr, "no quick child"));
        std::vector<int32_t> q = {rank};
        DEVMESH_RETURN_IF_ERROR(quick->AllReduce(absl::MakeSpan(q),
                                                 ReduceOp::kSum));
        absl::SleepFor(absl::Milliseconds(1500));
        q = {rank};
        DEVMESH_RETURN_IF_ERROR(quick->AllReduce(absl::MakeSpan(q),
                                                 ReduceOp::kSum));
        DEVMESH_RETURN_IF_ERROR(
            Check(q[0] == 6, absl::StrCat("quick sum ", q[0])));
        if (rank != 3) {
          // Rank 3 skips this one: rank 2 (its partner in the first step)
          // times out naming it; the others fail with it or at its notice.
          const absl::Time start = absl::Now();
          const absl::Status got =
              quick->AllReduce(absl::MakeSpan(q), ReduceOp::kSum);
          const absl::Duration took = absl::Now() - start;
          f->rank[rank].took_ns = absl::ToInt64Nanoseconds(took);
          DEVMESH_RETURN_IF_ERROR(Check(
              !got.ok() && took >= absl::Milliseconds(900) &&
                  took <= absl::Seconds(3) &&
                  absl::StrContains(got.message(), "timeout of 1s") &&
                  absl::StrContains(got.message(), kLabel),
              absl::StrCat("took ", absl::FormatDuration(took), ": ",
                           got.ToString())));
          if (rank == 2) {
            DEVMESH_RETURN_IF_ERROR(Check(
                absl::IsDeadlineExceeded(got) && PeerRank(got) == 3,
                absl::StrCat("rank 2: ", got.ToString())));
          }
        }
        DEVMESH_RETURN_IF_ERROR(StoreBarrier(*store, "quick done", rank, size));
        // The parent is another group: it still works.
        return WarmUp(*world, rank, size);
      },
      kRunLimit);
  EXPECT_TRUE(status.ok()) << status;
  int64_t slowest = 0;
  for (int r = 0; r < 3; ++r) {
    slowest = std::max<int64_t>(slowest, f->rank[r].took_ns);
  }
  std::cout << "[ucx-stats] split ok=" << status.ok()
            << " quick_timeout_slowest_ms=" << Ms(slowest) << std::endl;
}

}  // namespace
}  // namespace devmesh
