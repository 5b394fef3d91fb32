// devmesh/tests/comm/shm_store_group_test.cc
// Shared-memory groups made over the store alone (CreateShmGroup, what
// CreateCommunicator("shm") and device_mesh's "auto" use), in real
// processes: no Gloo device and no socket until a Send or Recv; Send and
// Recv through a pair connected on first use, exact; Split's children
// (kNoColor, key order, a timeout of their own); a member that never joins
// the set-up, or never calls Split, named within the timeout; bad peers.
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/registry.h"
#include "comm/shm/shm_communicator.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "store/prefix_store.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

// Sockets this process holds (/proc/self/fd entries "socket:[...]").
int Sockets() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    char target[64] = {};
    const std::string path = absl::StrCat("/proc/self/fd/", e->d_name);
    const ssize_t len = readlink(path.c_str(), target, sizeof(target) - 1);
    if (len > 0 && absl::StartsWith(target, "socket:")) ++n;
  }
  closedir(dir);
  return n;
}

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

absl::Status SumIs(Communicator& g, int64_t want) {
  int64_t x = g.global_ranks()[g.rank()] + 1;
  DEVMESH_RETURN_IF_ERROR(
      g.AllReduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum));
  return Expect(x == want, absl::StrCat("sum ", x, " != ", want, " on [",
                                        absl::StrJoin(g.global_ranks(), ","),
                                        "]"));
}

// The world as a shm group over `store` (CreateCommunicator("shm")).
absl::StatusOr<std::unique_ptr<Communicator>> MakeWorld(
    int rank, int size, std::shared_ptr<Store> store, absl::Duration timeout) {
  CommOptions options;
  options.timeout = timeout;
  return CreateCommunicator("shm", std::move(store), rank, size, options);
}

const ShmCommunicator* AsShm(const Communicator* c) {
  return dynamic_cast<const ShmCommunicator*>(c);
}

// World, tp/dp splits and their collectives make no socket and no Gloo
// group; Send/Recv then connects one pair per peer, reused.
TEST(ShmStoreGroupTest, NoSocketUntilSendRecv) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    const int sockets_before = Sockets();
    auto world = MakeWorld(rank, size, store, absl::Seconds(60));
    if (!world.ok()) return world.status();
    auto tp = (*world)->Split(rank / 2, rank);
    if (!tp.ok()) return tp.status();
    auto dp = (*world)->Split(rank % 2, rank);
    if (!dp.ok()) return dp.status();
    for (Communicator* g : {world->get(), tp->get(), dp->get()}) {
      const ShmCommunicator* shm = AsShm(g);
      DEVMESH_RETURN_IF_ERROR(Expect(
          shm != nullptr && shm->underlying() == nullptr,
          absl::StrCat("a group is ", g->backend(), " or has a Gloo group")));
    }
    DEVMESH_RETURN_IF_ERROR(SumIs(**world, 1 + 2 + 3 + 4));
    DEVMESH_RETURN_IF_ERROR(
        SumIs(**tp, rank < 2 ? 1 + 2 : 3 + 4));
    DEVMESH_RETURN_IF_ERROR(
        SumIs(**dp, rank % 2 == 0 ? 1 + 3 : 2 + 4));
    DEVMESH_RETURN_IF_ERROR((*world)->Barrier());
    DEVMESH_RETURN_IF_ERROR(Expect(
        Sockets() == sockets_before,
        absl::StrCat("sockets ", sockets_before, " -> ", Sockets(),
                     " before any Send/Recv")));
    // Pairs (0,1), (2,3) on the world: the even rank sends first.
    const int peer = rank ^ 1;
    int sockets_after_first = -1;
    for (int round = 0; round < 10; ++round) {
      int64_t out = rank * 100 + round;
      int64_t in = -1;
      if (rank % 2 == 0) {
        DEVMESH_RETURN_IF_ERROR((*world)->Send(&out, 1, DataType::kInt64, peer));
        DEVMESH_RETURN_IF_ERROR((*world)->Recv(&in, 1, DataType::kInt64, peer));
      } else {
        DEVMESH_RETURN_IF_ERROR((*world)->Recv(&in, 1, DataType::kInt64, peer));
        DEVMESH_RETURN_IF_ERROR((*world)->Send(&out, 1, DataType::kInt64, peer));
      }
      DEVMESH_RETURN_IF_ERROR(Expect(
          in == peer * 100 + round,
          absl::StrCat("round ", round, ": got ", in, " from ", peer)));
      if (round == 0) sockets_after_first = Sockets();
    }
    // The pair is made once: 9 more rounds add no connection each. When
    // both ends connect at once UCX's TCP transport keeps one of the two
    // connections and closes the other, and either step can fall after
    // round 0: one socket more may be accepted late (a clean-clone CI,
    // 2026-12-06: 1 -> 4 after round 0 -> 5), one may close (about 1 run in
    // 3: 5 after it, 4 at the end). A connection per round would add 9.
    DEVMESH_RETURN_IF_ERROR(Expect(
        Sockets() <= sockets_after_first + 1 && Sockets() > sockets_before,
        absl::StrCat("sockets ", sockets_before, " -> ", sockets_after_first,
                     " after the first round -> ", Sockets())));
    DEVMESH_RETURN_IF_ERROR(Expect(
        AsShm(world->get())->peer_links() == 1,
        absl::StrCat("peer_links ", AsShm(world->get())->peer_links())));
    // A larger message between the dp pair (group ranks 0 and 1), whose
    // global ranks differ from the world's pair.
    std::vector<int32_t> big(100003);
    for (size_t i = 0; i < big.size(); ++i) {
      big[i] = static_cast<int32_t>(rank * 7 + i);
    }
    std::vector<int32_t> got(big.size(), -1);
    const int dp_peer = 1 - (*dp)->rank();
    const int dp_peer_global = (*dp)->global_ranks()[dp_peer];
    if ((*dp)->rank() == 0) {
      DEVMESH_RETURN_IF_ERROR((*dp)->Send(big.data(), big.size(),
                                          DataType::kInt32, dp_peer));
      DEVMESH_RETURN_IF_ERROR((*dp)->Recv(got.data(), got.size(),
                                          DataType::kInt32, dp_peer));
    } else {
      DEVMESH_RETURN_IF_ERROR((*dp)->Recv(got.data(), got.size(),
                                          DataType::kInt32, dp_peer));
      DEVMESH_RETURN_IF_ERROR((*dp)->Send(big.data(), big.size(),
                                          DataType::kInt32, dp_peer));
    }
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != static_cast<int32_t>(dp_peer_global * 7 + i)) {
        return absl::InternalError(
            absl::StrCat("dp recv element ", i, ": ", got[i]));
      }
    }
    // Collectives still right after the pairs.
    DEVMESH_RETURN_IF_ERROR(SumIs(**world, 1 + 2 + 3 + 4));
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Split with kNoColor and keys that reverse the order; a child with a
// timeout of its own; a grandchild.
TEST(ShmStoreGroupTest, SplitChildren) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = MakeWorld(rank, size, store, absl::Seconds(60));
    if (!world.ok()) return world.status();
    SplitOptions split;
    split.timeout = absl::Seconds(20);
    auto child =
        (*world)->Split(rank == 3 ? kNoColor : 0, -rank, split);
    if (!child.ok()) return child.status();
    if (rank == 3) {
      return Expect(*child == nullptr, "kNoColor gave a child");
    }
    DEVMESH_RETURN_IF_ERROR(Expect(
        (*child)->global_ranks() == std::vector<int>({2, 1, 0}) &&
            (*child)->rank() == 2 - rank && (*child)->backend() == "shm",
        absl::StrCat("child [", absl::StrJoin((*child)->global_ranks(), ","),
                     "] rank ", (*child)->rank(), " ", (*child)->backend())));
    DEVMESH_RETURN_IF_ERROR(SumIs(**child, 1 + 2 + 3));
    auto grandchild = (*child)->Split(rank == 1 ? 1 : 0, rank);
    if (!grandchild.ok()) return grandchild.status();
    const std::vector<int> want =
        rank == 1 ? std::vector<int>{1} : std::vector<int>{0, 2};
    DEVMESH_RETURN_IF_ERROR(Expect(
        (*grandchild)->global_ranks() == want,
        absl::StrCat("grandchild [",
                     absl::StrJoin((*grandchild)->global_ranks(), ","), "]")));
    return SumIs(**grandchild, rank == 1 ? 2 : 1 + 3);
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A child with a timeout of its own (1 s, the parent's 60 s): a member that
// skips the child's all-reduce is named within about that second.
TEST(ShmStoreGroupTest, SplitChildHasItsOwnTimeout) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = MakeWorld(rank, size, store, absl::Seconds(60));
    if (!world.ok()) return world.status();
    SplitOptions split;
    split.timeout = absl::Seconds(1);
    auto child = (*world)->Split(0, rank, split);
    if (!child.ok()) return child.status();
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(3));
      return absl::OkStatus();
    }
    const absl::Time t0 = absl::Now();
    int32_t x = 1;
    absl::Status s =
        (*child)->AllReduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum);
    const absl::Duration took = absl::Now() - t0;
    DEVMESH_RETURN_IF_ERROR(Expect(
        absl::IsDeadlineExceeded(s) &&
            absl::StrContains(s.message(), "global rank(s) [1] did not arrive"),
        s.ToString()));
    return Expect(took < absl::Milliseconds(2500),
                  absl::StrCat("took ", absl::FormatDuration(took)));
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A first Send whose peer never makes the matching call ends early: when
// this member aborts the group from another thread (FailedPrecondition),
// when the peer aborts it (Unavailable naming it), when the peer dies
// (Unavailable naming it): each within about a second, not the 60 s timeout.
TEST(ShmStoreGroupTest, ConnectingSendEndsOnAbortOrDeath) {
  for (const char* how : {"abort_here", "peer_aborts", "peer_dies"}) {
    absl::Status status = ForkRanks(2, [how](int rank, int size,
                                             std::shared_ptr<Store> store) {
      auto world = MakeWorld(rank, size, store, absl::Seconds(60));
      if (!world.ok()) return world.status();
      const std::string mode = how;
      if (rank == 1) {
        absl::SleepFor(absl::Milliseconds(300));
        if (mode == "peer_aborts") (void)(*world)->Abort();
        if (mode == "peer_dies") _exit(0);
        absl::SleepFor(absl::Seconds(3));
        return absl::OkStatus();
      }
      std::thread aborter;
      if (mode == "abort_here") {
        aborter = std::thread([&] {
          absl::SleepFor(absl::Milliseconds(300));
          (void)(*world)->Abort();
        });
      }
      const absl::Time t0 = absl::Now();
      int64_t x = 7;
      absl::Status s = (*world)->Send(&x, 1, DataType::kInt64, 1);
      const absl::Duration took = absl::Now() - t0;
      if (aborter.joinable()) aborter.join();
      const bool right =
          mode == "abort_here"
              ? absl::IsFailedPrecondition(s)
              : absl::IsUnavailable(s) &&
                    absl::StrContains(s.message(), "global rank 1");
      DEVMESH_RETURN_IF_ERROR(
          Expect(right, absl::StrCat(mode, ": ", s.ToString())));
      return Expect(took < absl::Milliseconds(1500),
                    absl::StrCat(mode, " took ", absl::FormatDuration(took)));
    });
    EXPECT_TRUE(status.ok()) << how << ": " << status;
  }
}

// Global rank 2 never creates the group: the others get DeadlineExceeded
// naming it, within the timeout and a second.
TEST(ShmStoreGroupTest, MemberThatNeverJoinsIsNamed) {
  absl::Status status = ForkRanks(3, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    if (rank == 2) {
      absl::SleepFor(absl::Seconds(4));
      return absl::OkStatus();
    }
    CommOptions options;
    options.timeout = absl::Seconds(2);
    const absl::Time t0 = absl::Now();
    auto world = CreateCommunicator("shm", store, rank, size, options);
    const absl::Duration took = absl::Now() - t0;
    DEVMESH_RETURN_IF_ERROR(Expect(
        absl::IsDeadlineExceeded(world.status()) &&
            absl::StrContains(world.status().message(),
                              "global rank(s) [2] did not join the group"),
        world.status().ToString()));
    return Expect(took < absl::Seconds(3),
                  absl::StrCat("took ", absl::FormatDuration(took)));
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Global rank 1 makes the group but never calls Split.
TEST(ShmStoreGroupTest, MemberThatNeverSplitsIsNamed) {
  absl::Status status = ForkRanks(3, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = MakeWorld(rank, size, store, absl::Seconds(30));
    if (!world.ok()) return world.status();
    if (rank == 1) {
      absl::SleepFor(absl::Seconds(3));
      return absl::OkStatus();
    }
    SplitOptions split;
    split.timeout = absl::Seconds(1);
    auto child = (*world)->Split(0, rank, split);
    return Expect(
        absl::IsDeadlineExceeded(child.status()) &&
            absl::StrContains(child.status().message(),
                              "global rank(s) [1] did not call Split"),
        child.status().ToString());
  });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ShmStoreGroupTest, BadArguments) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store) {
    auto world = MakeWorld(rank, size, store, absl::Seconds(30));
    if (!world.ok()) return world.status();
    int32_t x = 0;
    absl::Status s = (*world)->Send(&x, 1, DataType::kInt32, 2);
    DEVMESH_RETURN_IF_ERROR(
        Expect(s.message() == "shm send: peer 2 is outside [0, 2)",
               s.ToString()));
    s = (*world)->Recv(&x, 1, DataType::kInt32, rank);
    DEVMESH_RETURN_IF_ERROR(Expect(
        s.message() == absl::StrCat("shm recv: peer ", rank, " is this rank"),
        s.ToString()));
    s = (*world)->Send(nullptr, 4, DataType::kInt32, 1 - rank);
    DEVMESH_RETURN_IF_ERROR(Expect(
        s.message() == "shm send: send buffer is null with count 4",
        s.ToString()));
    // Empty messages need no peer, as in Gloo.
    DEVMESH_RETURN_IF_ERROR((*world)->Send(&x, 0, DataType::kInt32, 1 - rank));
    DEVMESH_RETURN_IF_ERROR(Expect(AsShm(world->get())->peer_links() == 0,
                                   "an empty send connected a pair"));
    auto child = (*world)->Split(-2, 0);
    DEVMESH_RETURN_IF_ERROR(Expect(
        child.status().message() ==
            "shm split: color -2 must be >= 0 or kNoColor (-1)",
        child.status().ToString()));
    // Still usable, and CreateShmGroup's own checks.
    DEVMESH_RETURN_IF_ERROR(SumIs(**world, 3));
    CommOptions options;
    options.timeout = absl::Seconds(30);
    CommOptions bad = options;
    bad.global_ranks = {4, 4};
    auto made = CreateShmGroup(std::make_shared<PrefixStore>(store, "b"),
                               rank, size, bad, ShmOptions());
    DEVMESH_RETURN_IF_ERROR(Expect(
        made.status().message() ==
            "shm: global rank 4 in global_ranks is negative or repeated",
        made.status().ToString()));
    made = CreateShmGroup(nullptr, rank, size, options, ShmOptions());
    return Expect(made.status().message() == "shm: store is null",
                  made.status().ToString());
  });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
