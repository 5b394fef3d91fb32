// devmesh/tests/comm/gloo_sync_route_test.cc
// The Gloo backend's synchronous route for all-reduces of at most
// GlooSyncMaxBytes (comm/gloo/gloo_sync_allreduce.h): which all-reduces take
// it, that its algorithm cache builds and drops the same algorithms on
// every member (exact sums through evictions), and its faults: Abort wakes
// a read blocked on the calling thread; a member that dies while it is used
// fails the others within a second, not at the group's timeout. Real
// processes (ForkRanks).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
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
#include "comm/gloo/gloo_sync_allreduce.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"
#include "config/settings.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

absl::StatusOr<std::unique_ptr<Communicator>> Make(
    std::shared_ptr<Store> store, int rank, int size, absl::Duration timeout,
    const std::string& hostname = "") {
  CommOptions options;
  options.timeout = timeout;
  options.gloo.hostname = hostname;
  return CreateCommunicator("gloo", std::move(store), rank, size, options);
}

GlooCommunicator* AsGloo(const std::unique_ptr<Communicator>& comm) {
  return dynamic_cast<GlooCommunicator*>(comm.get());
}

// int32 sum of rank + 1 + i over members: exact.
absl::Status CheckedSum(Communicator& comm, size_t count) {
  std::vector<int32_t> buf(count);
  for (size_t i = 0; i < count; ++i) {
    buf[i] = comm.rank() + 1 + static_cast<int32_t>(i);
  }
  if (auto s = comm.AllReduce(buf.data(), buf.data(), count,
                              DataType::kInt32, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  const int n = comm.size();
  for (size_t i = 0; i < count; ++i) {
    const int32_t want = n * (n + 1) / 2 + n * static_cast<int32_t>(i);
    if (buf[i] != want) {
      return absl::InternalError(absl::StrCat("count ", count, " element ", i,
                                              ": ", buf[i], " != ", want));
    }
  }
  return absl::OkStatus();
}

// DEVMESH_GLOO_SYNC_ROUTE for the ranks ForkRanks starts next (they inherit
// this process's settings, read again here).
void SetRoute(const char* mode) {
  setenv("DEVMESH_GLOO_SYNC_ROUTE", mode, 1);
  (void)ReloadProcessSettings();
}

// The route's pairs: rank XOR 2^k.
TEST(GlooSyncRoutePartnersTest, PowersOfTwoOnly) {
  using gloo_internal::SyncAllreduce;
  EXPECT_EQ(SyncAllreduce::Partners(5, 8), (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(SyncAllreduce::Partners(0, 2), (std::vector<int>{1}));
  EXPECT_TRUE(SyncAllreduce::SizeFits(2));
  EXPECT_TRUE(SyncAllreduce::SizeFits(1024));
  EXPECT_FALSE(SyncAllreduce::SizeFits(1));
  EXPECT_FALSE(SyncAllreduce::SizeFits(3));
  EXPECT_FALSE(SyncAllreduce::SizeFits(6));
}

// Which all-reduces take the route, and the cache: 10 distinct counts twice
// through an 8-entry least-recently-used cache build 20 algorithms (each
// second-pass count was dropped 2 calls before it came back), then the last
// 8 again build none. Group sizes 2, 4 and 8 (forced: one host).
class GlooSyncRouteTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooSyncRouteTest, TakesSmallAllReducesAndCachesTheAlgorithms) {
  ASSERT_EQ(gloo_internal::kSyncCacheEntries, 8u);
  SetRoute("1");
  absl::Status status = ForkRanks(GetParam(), [](int rank, int size,
                                                 std::shared_ptr<Store> store)
                                                  -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(60));
    if (!comm.ok()) return comm.status();
    GlooCommunicator* gloo = AsGloo(*comm);
    if (gloo == nullptr) return absl::InternalError("not a GlooCommunicator");
    // The route is made with the group, in the group's own 4 store round
    // trips (its keys travel with the mesh's).
    if (gloo->sync_builds() != 0 || gloo->store_round_trips() != 4 ||
        gloo->barrier_round_trips() != 2) {
      return absl::InternalError(absl::StrCat(
          "after creation: builds ", gloo->sync_builds(), ", round trips ",
          gloo->store_round_trips(), ", barrier ",
          gloo->barrier_round_trips()));
    }
    // Larger than the route's bound: Gloo's event-loop route.
    const size_t big = gloo_internal::GlooSyncMaxBytes() / 4 + 1;
    if (auto s = CheckedSum(**comm, big); !s.ok()) return s;
    if (gloo->sync_builds() != 0) {
      return absl::InternalError("a large all-reduce took the route");
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t count = 1; count <= 10; ++count) {
        if (auto s = CheckedSum(**comm, count * 3); !s.ok()) return s;
      }
    }
    if (gloo->sync_builds() != 20) {
      return absl::InternalError(
          absl::StrCat("builds after two passes: ", gloo->sync_builds()));
    }
    for (size_t count = 3; count <= 10; ++count) {
      if (auto s = CheckedSum(**comm, count * 3); !s.ok()) return s;
    }
    if (gloo->sync_builds() != 20) {
      return absl::InternalError(
          absl::StrCat("builds after the cached counts: ",
                       gloo->sync_builds()));
    }
    // The largest that fits.
    if (auto s = CheckedSum(**comm, gloo_internal::GlooSyncMaxBytes() / 4);
        !s.ok()) {
      return s;
    }
    return absl::OkStatus();
  }, absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooSyncRouteTest, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("ranks", info.param);
                         });

// Exact sums on Gloo's event-loop route, no route (no algorithm built) and
// creation's 4 store round trips.
absl::Status CheckNoRoute(Communicator& comm) {
  for (size_t count : {1, 7, 1023}) {
    if (auto s = CheckedSum(comm, count); !s.ok()) return s;
  }
  auto* gloo = dynamic_cast<GlooCommunicator*>(&comm);
  if (gloo == nullptr) return absl::InternalError("not a GlooCommunicator");
  if (gloo->sync_builds() != -1 || gloo->store_round_trips() != 4) {
    return absl::InternalError(absl::StrCat(
        "route made: builds ", gloo->sync_builds(), ", round trips ",
        gloo->store_round_trips()));
  }
  return absl::OkStatus();
}

// Groups the route is not for: a size that is not a power of two (even
// when forced), and, left to "auto", a group inside one host (its members'
// Gloo addresses are all loopback): exact sums on Gloo's event-loop route,
// no route kept, creation's 4 store round trips.
TEST(GlooSyncRouteChoiceTest, NotForOddSizesNorForOneHostUnlessForced) {
  for (const char* mode : {"1", "auto"}) {
    SetRoute(mode);
    const int ranks = std::string(mode) == "1" ? 3 : 4;
    absl::Status status = ForkRanks(ranks, [](int rank, int size,
                                              std::shared_ptr<Store> store)
                                               -> absl::Status {
      auto comm = Make(store, rank, size, absl::Seconds(60));
      if (!comm.ok()) return comm.status();
      if (auto s = CheckNoRoute(**comm); !s.ok()) return s;
      // 3 is no power of two: the route is not even offered. 4 in auto
      // mode: offered (its partners' addresses published with the mesh's),
      // then dropped on every member, as every member is on this host.
      auto published = store->Check(
          {absl::StrCat("gloo/sync_addr/", rank, "/", rank ^ 1)});
      if (!published.ok()) return published.status();
      if (*published != (size == 4)) {
        return absl::InternalError(absl::StrCat(
            "the route's addresses were ", *published ? "" : "not ",
            "published at ", size, " ranks"));
      }
      // Nothing deferred without the route.
      if (AsGloo(*comm)->pending_pairs() != 0) {
        return absl::InternalError("pairs left for first use");
      }
      return absl::OkStatus();
    }, absl::Seconds(60));
    EXPECT_TRUE(status.ok()) << "DEVMESH_GLOO_SYNC_ROUTE=" << mode << ": "
                             << status;
  }
}

// An IPv4 address of this machine that is not loopback ("" when none).
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
        (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) {
      found = text;
    }
  }
  freeifaddrs(list);
  return found;
}

// "auto" with every member's device on one non-loopback address: the route
// could have been wanted (no loopback), so each member made its partners'
// pairs and published their addresses with the mesh's, then, seeing every
// peer on its own host, dropped them on every member alike: no route,
// exact sums, still 4 store round trips.
TEST(GlooSyncRouteChoiceTest, MadeThenDroppedInsideOneHostInAutoMode) {
  const std::string address = NonLoopbackAddress();
  if (address.empty()) {
    GTEST_SKIP() << "this machine has no non-loopback IPv4 address to put "
                    "every member's Gloo device on";
  }
  SetRoute("auto");
  absl::Status status = ForkRanks(4, [&address](int rank, int size,
                                                std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(60), address);
    if (!comm.ok()) return comm.status();
    if (auto s = CheckNoRoute(**comm); !s.ok()) return s;
    // Its partners' addresses were published (rank XOR 1, rank XOR 2).
    auto published = store->Check(
        {absl::StrCat("gloo/sync_addr/", rank, "/", rank ^ 1),
         absl::StrCat("gloo/sync_addr/", rank, "/", rank ^ 2)});
    if (!published.ok()) return published.status();
    if (!*published) {
      return absl::InternalError("the route's addresses were not published");
    }
    // The route dropped: the mesh connected at creation, nothing deferred.
    if (AsGloo(*comm)->pending_pairs() != 0) {
      return absl::InternalError("pairs left for first use");
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Abort wakes an all-reduce blocked in read() on the route (the calling
// thread reads its socket: nothing else would), at once rather than at the
// 30 s timeout; the peer's next all-reduce then fails at once too.
TEST(GlooSyncRouteFaultTest, AbortWakesAReadBlockedOnTheRoute) {
  SetRoute("1");
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(30));
    if (!comm.ok()) return comm.status();
    if (auto s = CheckedSum(**comm, 256); !s.ok()) return s;
    if (AsGloo(*comm)->sync_builds() != 1) {
      return absl::InternalError("the route was not taken");
    }
    std::vector<float> data(256, 1.0f);
    if (rank == 0) {
      absl::Status blocked;
      absl::Time ended;
      std::thread collective([&] {
        blocked = (*comm)->AllReduce(data.data(), data.data(), data.size(),
                                     DataType::kFloat32, ReduceOp::kSum);
        ended = absl::Now();
      });
      absl::SleepFor(absl::Milliseconds(300));
      const absl::Time aborted = absl::Now();
      absl::Status abort = (*comm)->Abort();
      collective.join();
      if (!abort.ok()) return abort;
      if (blocked.ok()) {
        return absl::InternalError("the blocked all-reduce succeeded");
      }
      if (ended - aborted > absl::Seconds(2)) {
        return absl::InternalError(absl::StrCat(
            "the blocked all-reduce ended ",
            absl::FormatDuration(ended - aborted), " after Abort: ",
            blocked.ToString()));
      }
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Seconds(1));
    const absl::Time start = absl::Now();
    absl::Status s = (*comm)->AllReduce(data.data(), data.data(), data.size(),
                                        DataType::kFloat32, ReduceOp::kSum);
    if (s.ok()) return absl::InternalError("all-reduce with an aborted peer");
    if (absl::Now() - start > absl::Seconds(2)) {
      return absl::InternalError(
          absl::StrCat("the peer's all-reduce took ",
                       absl::FormatDuration(absl::Now() - start), ": ",
                       s.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(90));
  EXPECT_TRUE(status.ok()) << status;
}

// A member that dies while the route is in use: the others' blocked read
// ends with Unavailable within 1 s, naming a peer.
TEST(GlooSyncRouteFaultTest, MemberKilledWhileTheRouteIsUsedIsNamed) {
  SetRoute("1");
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = Make(store, rank, size, absl::Seconds(30));
    if (!comm.ok()) return comm.status();
    if (auto s = CheckedSum(**comm, 4096); !s.ok()) return s;
    if (rank == 3) {
      // Dies 200 ms into the loop below, mid-all-reduce, without a word
      // (_exit: the kernel closes its sockets as for SIGKILL; ForkRanks
      // counts a silent exit 0 as a deliberate death).
      std::thread([] {
        absl::SleepFor(absl::Milliseconds(200));
        _exit(0);
      }).detach();
    }
    absl::Status s;
    absl::Time start;
    for (int i = 0; i < 100000 && s.ok(); ++i) {
      start = absl::Now();
      s = CheckedSum(**comm, 4096);
    }
    const absl::Duration took = absl::Now() - start;
    if (s.ok()) return absl::InternalError("all-reduces went on without 3");
    if (s.code() != absl::StatusCode::kUnavailable ||
        took > absl::Seconds(1)) {
      return absl::InternalError(absl::StrCat(
          "want Unavailable within 1 s; got after ",
          absl::FormatDuration(took), ": ", s.ToString()));
    }
    // The peer named: rank 3 itself where the failed read was on its
    // connection; a member whose read was with another survivor (who left
    // the algorithm on its own error) names that survivor instead.
    if (!absl::StrContains(s.message(), "global rank ")) {
      return absl::InternalError(
          absl::StrCat("no peer named: ", s.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(90));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
