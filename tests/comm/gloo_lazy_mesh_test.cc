// devmesh/tests/comm/gloo_lazy_mesh_test.cc
// A Gloo group with the synchronous all-reduce route connects only the
// route's pairs at creation and its other pairs at the first call that needs
// them (comm/gloo/gloo_communicator.h): which calls connect which pairs,
// exact results after, DEVMESH_GLOO_LAZY_MESH=0, and the faults of a
// connection made late: a member gone before it (named, bounded by the
// timeout, the same error on later calls) and Abort during it. Real
// processes (ForkRanks), the route forced on one host.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"
#include "config/settings.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

absl::StatusOr<std::unique_ptr<Communicator>> Make(
    std::shared_ptr<Store> store, int rank, int size, absl::Duration timeout) {
  CommOptions options;
  options.timeout = timeout;
  return CreateCommunicator("gloo", std::move(store), rank, size, options);
}

GlooCommunicator* AsGloo(const std::unique_ptr<Communicator>& comm) {
  return dynamic_cast<GlooCommunicator*>(comm.get());
}

absl::Status ExpectPending(const std::unique_ptr<Communicator>& comm,
                           int64_t want, absl::string_view when) {
  const int64_t got = AsGloo(comm)->pending_pairs();
  if (got == want) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(when, ": ", got,
                                          " pairs pending, expected ", want));
}

// Sum over ranks of (rank + 1) * (i + 1) in every element, checked exactly.
absl::Status CheckedBigSum(Communicator& comm, size_t count) {
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = static_cast<int32_t>((comm.rank() + 1) * (i % 1000 + 1));
  }
  if (auto s = comm.AllReduce(data.data(), data.data(), count,
                              DataType::kInt32, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  const int64_t n = comm.size();
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = n * (n + 1) / 2 * static_cast<int64_t>(i % 1000 + 1);
    if (data[i] != want) {
      return absl::InternalError(absl::StrCat("element ", i, ": ", data[i],
                                              ", expected ", want));
    }
  }
  return absl::OkStatus();
}

class GlooLazyMeshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("DEVMESH_GLOO_SYNC_ROUTE", "1", 1);
    unsetenv("DEVMESH_GLOO_LAZY_MESH");
    ASSERT_TRUE(ReloadProcessSettings().ok());
  }
};

// 4 ranks: after creation 3 pairs wait; a small all-reduce (the route)
// connects none; a Send/Recv between ranks 0 and 1 connects only theirs; a
// 1 MiB all-reduce (off the route) connects the rest, with exact sums; so do
// the later calls.
TEST_F(GlooLazyMeshTest, EachCallConnectsOnlyWhatItNeeds) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(60));
    if (!comm.ok()) return comm.status();
    if (auto s = ExpectPending(*comm, 3, "after creation"); !s.ok()) return s;
    if (auto s = CheckedBigSum(**comm, 64); !s.ok()) return s;
    if (auto s = ExpectPending(*comm, 3, "after a route all-reduce");
        !s.ok()) {
      return s;
    }
    if (rank < 2) {
      int32_t value = rank == 0 ? 41 : 0;
      absl::Status s = rank == 0
                           ? (*comm)->Send(&value, 1, DataType::kInt32, 1)
                           : (*comm)->Recv(&value, 1, DataType::kInt32, 0);
      if (!s.ok()) return s;
      if (rank == 1 && value != 41) {
        return absl::InternalError(absl::StrCat("received ", value));
      }
      if (auto s = ExpectPending(*comm, 2, "after Send/Recv"); !s.ok()) {
        return s;
      }
    }
    // 1 MiB of int32: above the route's 256 KiB bound.
    if (auto s = CheckedBigSum(**comm, size_t{1} << 18); !s.ok()) return s;
    if (auto s = ExpectPending(*comm, 0, "after a 1 MiB all-reduce");
        !s.ok()) {
      return s;
    }
    if (auto s = (*comm)->Barrier(); !s.ok()) return s;
    std::vector<int32_t> all(size, -1);
    const int32_t mine = 10 * rank;
    if (auto s = (*comm)->AllGather(&mine, all.data(), 1, DataType::kInt32);
        !s.ok()) {
      return s;
    }
    for (int r = 0; r < size; ++r) {
      if (all[r] != 10 * r) {
        return absl::InternalError(absl::StrCat("allgather[", r, "] = ",
                                                all[r]));
      }
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// The first call off the route may be any collective: a Barrier connects
// every pair too.
TEST_F(GlooLazyMeshTest, BarrierConnectsEveryPair) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(60));
    if (!comm.ok()) return comm.status();
    if (auto s = (*comm)->Barrier(); !s.ok()) return s;
    return ExpectPending(*comm, 0, "after Barrier");
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// DEVMESH_GLOO_LAZY_MESH=0: every pair connected at creation.
TEST_F(GlooLazyMeshTest, OffConnectsEveryPairAtCreation) {
  setenv("DEVMESH_GLOO_LAZY_MESH", "0", 1);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(60));
    if (!comm.ok()) return comm.status();
    if (auto s = ExpectPending(*comm, 0, "after creation"); !s.ok()) return s;
    return CheckedBigSum(**comm, size_t{1} << 18);
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// One rank creates the group, all-reduces once on the route and exits. The
// others' first call off the route then fails within the 3 s timeout (plus
// margin), Unavailable or DeadlineExceeded, naming a global rank, and a
// second call fails the same way at once. Which rank a survivor names
// depends on which side of each pair it is (Gloo: the greater address
// connects): waiting on the gone rank, or connecting to it, it names that
// rank; connecting to a survivor that already failed (and closed the pairs
// it had not waited for) it names that survivor. When the highest rank is
// gone (the greatest address, fork order) every survivor waits on it, so
// every survivor names it.
class GlooLazyMeshGoneTest : public GlooLazyMeshTest,
                             public ::testing::WithParamInterface<int> {};

TEST_P(GlooLazyMeshGoneTest, AMemberGoneBeforeTheFirstConnectFailsTheOthers) {
  const int gone = GetParam();
  absl::Status status = ForkRanks(4, [gone](int rank, int size,
                                            std::shared_ptr<Store> store)
                                             -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(3));
    if (!comm.ok()) return comm.status();
    if (auto s = CheckedBigSum(**comm, 16); !s.ok()) return s;
    if (rank == gone) {
      comm->reset();
      _exit(0);
    }
    absl::SleepFor(absl::Milliseconds(200));  // its sockets are gone
    const absl::Time start = absl::Now();
    absl::Status first = (*comm)->Barrier();
    const absl::Duration took = absl::Now() - start;
    if (first.ok()) {
      return absl::InternalError(
          absl::StrCat("Barrier passed without rank ", gone));
    }
    const std::string want =
        gone == size - 1 ? absl::StrCat("global rank ", gone) : "global rank ";
    if (!absl::StrContains(first.message(), want)) {
      return absl::InternalError(absl::StrCat("the error does not name '",
                                              want, "': ", first.ToString()));
    }
    if (!absl::IsUnavailable(first) && !absl::IsDeadlineExceeded(first)) {
      return absl::InternalError(absl::StrCat("unexpected code: ",
                                              first.ToString()));
    }
    if (took > absl::Seconds(5)) {
      return absl::InternalError(absl::StrCat("Barrier took ",
                                              absl::FormatDuration(took)));
    }
    const absl::Time again = absl::Now();
    absl::Status second = (*comm)->Barrier();
    if (second.code() != first.code() ||
        !absl::StrContains(second.message(), "earlier call") ||
        absl::Now() - again > absl::Milliseconds(500)) {
      return absl::InternalError(absl::StrCat("second call: ",
                                              second.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << "rank " << gone << " gone: " << status;
}

INSTANTIATE_TEST_SUITE_P(GoneRank, GlooLazyMeshGoneTest,
                         ::testing::Values(0, 1, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("rank", info.param);
                         });

// Rank 0's Barrier waits for rank 1, which never calls it; Abort from
// another thread after 300 ms ends the wait within a second, not at the
// 30 s timeout.
TEST_F(GlooLazyMeshTest, AbortEndsAConnectAtFirstUse) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(30));
    if (!comm.ok()) return comm.status();
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(3));
      return absl::OkStatus();
    }
    std::thread aborter([&] {
      absl::SleepFor(absl::Milliseconds(300));
      (void)(*comm)->Abort();
    });
    const absl::Time start = absl::Now();
    absl::Status s = (*comm)->Barrier();
    const absl::Duration took = absl::Now() - start;
    aborter.join();
    if (s.ok()) return absl::InternalError("Barrier passed");
    if (took > absl::Seconds(1.3)) {
      return absl::InternalError(absl::StrCat(
          "Barrier ended ", absl::FormatDuration(took), " after it began: ",
          s.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
