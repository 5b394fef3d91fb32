// Tests of bootstrap/peer_info.h: the byte forms, and the start-up exchange
// with ranks as threads over an InMemoryStore (agreeing ranks, a world size
// off by one either way and on rank 0, a rank started twice, a different
// store address, a missing rank), then with real processes and a real
// Bootstrap: a rank whose WORLD_SIZE is off by one fails every rank with
// InvalidArgument, long before the bootstrap timeout.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/peer_info.h"
#include "store/forwarding_store.h"
#include "store/socket.h"
#include "bootstrap/testing/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "config/settings.h"

namespace devmesh {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

PeerInfo Info(int rank, int world_size, std::string host = "h0",
              std::string store = "10.0.0.1:29500") {
  PeerInfo p;
  p.rank = rank;
  p.world_size = world_size;
  p.local_rank = rank % 2;
  p.local_world_size = 2;
  p.pid = 100 + rank;
  p.hostname = std::move(host);
  p.address = absl::StrCat("10.0.0.", 1 + rank / 2);
  p.store = std::move(store);
  return p;
}

// Runs ExchangePeerInfo for each of `infos` on its own thread.
std::vector<absl::StatusOr<std::vector<PeerInfo>>> RunExchange(
    const std::vector<PeerInfo>& infos, absl::Duration timeout) {
  InMemoryStore store;
  std::vector<absl::StatusOr<std::vector<PeerInfo>>> results(
      infos.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < infos.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = ExchangePeerInfo(store, infos[i], timeout);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Counts each Store call by name ("Add", "Wait", ...), for round trips.
class CountingStore : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::map<std::string, int> calls;

  absl::Status Set(absl::string_view k, absl::string_view v) override {
    ++calls["Set"];
    return ForwardingStore::Set(k, v);
  }
  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view k,
                                  absl::Duration t) override {
    ++calls["Get"];
    return ForwardingStore::Get(k, t);
  }
  absl::StatusOr<int64_t> Add(absl::string_view k, int64_t d) override {
    ++calls["Add"];
    return ForwardingStore::Add(k, d);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view k,
                                         absl::string_view e,
                                         absl::string_view d) override {
    ++calls["CompareSet"];
    return ForwardingStore::CompareSet(k, e, d);
  }
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> k,
                    absl::Duration t) override {
    ++calls["Wait"];
    return ForwardingStore::Wait(k, t);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> k) override {
    ++calls["Check"];
    return ForwardingStore::Check(k);
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> k, absl::Duration t) override {
    ++calls["MultiGet"];
    return ForwardingStore::MultiGet(k, t);
  }
  absl::Status MultiSet(absl::Span<const std::string> k,
                        absl::Span<const std::string> v) override {
    ++calls["MultiSet"];
    return ForwardingStore::MultiSet(k, v);
  }
};

using Calls = std::map<std::string, int>;

TEST(PeerInfoTest, InfoBytesRoundTrip) {
  PeerInfo p = Info(3, 8, "node:7", "[::1]:29500");
  p.address = "";
  absl::StatusOr<PeerInfo> back = DecodePeerInfo(EncodePeerInfo(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);
  EXPECT_EQ(EncodePeerInfo(Info(1, 4)),
            "1:11:41:11:23:1012:h08:10.0.0.114:10.0.0.1:29500");
}

TEST(PeerInfoTest, BadInfoBytesAreInvalidArgument) {
  const std::string good = EncodePeerInfo(Info(1, 4));
  for (const std::string& bad :
       {std::string(), good.substr(0, good.size() - 1), good + "0:",
        std::string("1:x1:41:11:23:1012:h08:10.0.0.114:10.0.0.1:29500"),
        std::string("99999999999999999999999:1"), std::string(":")}) {
    EXPECT_EQ(DecodePeerInfo(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(PeerInfoTest, TableStoresEachStringOnceAndRoundTrips) {
  std::vector<PeerInfo> peers = {Info(0, 3), Info(1, 3), Info(2, 3, "h1")};
  const std::string bytes = EncodePeerTable(peers);
  EXPECT_EQ(bytes,
            "1:31:52:h08:10.0.0.114:10.0.0.1:295002:h18:10.0.0.2"
            "1:01:31:01:23:1001:01:11:2"
            "1:11:31:11:23:1011:01:11:2"
            "1:21:31:01:23:1021:31:41:2");
  absl::StatusOr<std::vector<PeerInfo>> back = DecodePeerTable(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, peers);
  EXPECT_EQ(DecodePeerTable("1:31:0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePeerTable(bytes.substr(0, bytes.size() - 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A string index past the strings.
  EXPECT_EQ(DecodePeerTable("1:11:12:h01:01:11:01:11:11:01:01:9").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ReadPeerTable (a spare's view of the job): nothing before a rendezvous
// completed, the agreed table after, nothing after a failed one.
TEST(PeerInfoTest, ReadPeerTableIsTheAgreedTableOrNothing) {
  InMemoryStore store;
  absl::StatusOr<std::optional<std::vector<PeerInfo>>> before =
      ReadPeerTable(store);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->has_value());
  const std::vector<PeerInfo> infos = {Info(0, 3), Info(1, 3),
                                       Info(2, 3, "h1")};
  std::vector<std::thread> threads;
  for (const PeerInfo& info : infos) {
    threads.emplace_back([&store, info] {
      EXPECT_TRUE(ExchangePeerInfo(store, info, absl::Seconds(30)).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::optional<std::vector<PeerInfo>>> after =
      ReadPeerTable(store);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ(**after, infos);

  InMemoryStore failed;
  std::vector<PeerInfo> two_zeros = {Info(0, 2), Info(0, 2)};
  two_zeros[1].pid = 4711;
  threads.clear();
  for (const PeerInfo& info : two_zeros) {
    threads.emplace_back([&failed, info] {
      EXPECT_FALSE(ExchangePeerInfo(failed, info, absl::Seconds(5)).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::optional<std::vector<PeerInfo>>> after_failure =
      ReadPeerTable(failed);
  ASSERT_TRUE(after_failure.ok()) << after_failure.status();
  EXPECT_FALSE(after_failure->has_value());

  InMemoryStore garbled;
  ASSERT_TRUE(garbled.Set("devmesh/peers/verdict", "ok:1:x").ok());
  EXPECT_EQ(ReadPeerTable(garbled).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PeerInfoTest, LocalAddressTowardLoopbackIsLoopback) {
  absl::StatusOr<std::string> v4 = LocalAddressToward("127.0.0.1", 29500);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(*v4, "127.0.0.1");
  EXPECT_EQ(LocalAddressToward("no.such.host.invalid", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PeerExchangeTest, AgreeingRanksAllGetTheSameTable) {
  std::vector<PeerInfo> infos = {Info(0, 4), Info(1, 4), Info(2, 4, "h1"),
                                 Info(3, 4, "h1")};
  auto results = RunExchange(infos, absl::Seconds(30));
  for (size_t r = 0; r < infos.size(); ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    EXPECT_EQ(*results[r], infos);
  }
}

TEST(PeerExchangeTest, OneRankWithALargerWorldSizeFailsEveryRank) {
  std::vector<PeerInfo> infos = {Info(0, 4), Info(1, 4), Info(2, 5),
                                 Info(3, 4)};
  auto results = RunExchange(infos, absl::Seconds(60));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(results[r].status().message(),
              "rendezvous failed: rank 2 (pid 102 on h0) has world size 5 but "
              "rank 0 (pid 100 on h0) has world size 4: every rank must get "
              "the same WORLD_SIZE")
        << "rank " << r;
  }
}

TEST(PeerExchangeTest, OneRankWithASmallerWorldSizeFailsEveryRank) {
  std::vector<PeerInfo> infos = {Info(0, 4), Info(1, 4), Info(2, 3),
                                 Info(3, 4)};
  auto results = RunExchange(infos, absl::Seconds(60));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(results[r].status().message(),
              "rendezvous failed: rank 2 (pid 102 on h0) has world size 3 but "
              "rank 0 (pid 100 on h0) has world size 4: every rank must get "
              "the same WORLD_SIZE")
        << "rank " << r;
  }
}

TEST(PeerExchangeTest, RankZeroWithAnotherWorldSizeFailsEveryRank) {
  std::vector<PeerInfo> infos = {Info(0, 5), Info(1, 4), Info(2, 4),
                                 Info(3, 4)};
  auto results = RunExchange(infos, absl::Seconds(60));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument);
    // Whichever of ranks 1-3 compared itself with rank 0 first reports.
    EXPECT_THAT(std::string(results[r].status().message()),
                MatchesRegex("rendezvous failed: rank [123] \\(pid 10[123] on "
                             "h0\\) has world size 4 but rank 0 \\(pid 100 on "
                             "h0\\) has world size 5: .*"))
        << "rank " << r;
  }
}

TEST(PeerExchangeTest, ARankStartedTwiceFailsEveryRank) {
  std::vector<PeerInfo> infos = {Info(0, 4), Info(1, 4), Info(1, 4, "h9"),
                                 Info(2, 4)};
  auto results = RunExchange(infos, absl::Seconds(60));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(results[r].status().message()),
                HasSubstr("rank 1 was started twice: by pid 101 on h"))
        << "rank " << r;
  }
}

// A second job started on the store of a job whose rendezvous completed:
// every rank of the second job says another job is using the store, and the
// first job's keys (its table, its join count) are left as they were.
TEST(PeerExchangeTest, ASecondJobOnACompletedJobsStoreSaysAnotherJobUsesIt) {
  InMemoryStore store;
  auto run = [&](const std::vector<PeerInfo>& infos) {
    std::vector<absl::StatusOr<std::vector<PeerInfo>>> results(
        infos.size(), absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < infos.size(); ++i) {
      threads.emplace_back([&, i] {
        results[i] = ExchangePeerInfo(store, infos[i], absl::Seconds(30));
      });
    }
    for (std::thread& t : threads) t.join();
    return results;
  };
  auto first = run({Info(0, 2), Info(1, 2)});
  ASSERT_TRUE(first[0].ok()) << first[0].status();
  ASSERT_TRUE(first[1].ok()) << first[1].status();
  auto verdict_before = store.Get("devmesh/peers/verdict", absl::Seconds(1));
  ASSERT_TRUE(verdict_before.ok());
  auto second = run({Info(0, 2, "h7"), Info(1, 2, "h7")});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(second[r].status().code(),
              absl::StatusCode::kFailedPrecondition)
        << second[r].status();
    EXPECT_EQ(std::string(second[r].status().message()),
              absl::StrCat("another job is using this store: its rendezvous "
                           "of 2 ranks completed, and its rank ", r,
                           " is pid 10", r, " on h0; this process (pid 10",
                           r, " on h7) asked for rank ", r,
                           " again: give this job a store of its own "
                           "(another MASTER_PORT, or DEVMESH_STORE_ADDR), or "
                           "restart the store once that job has ended (a "
                           "store keeps a job's keys)"));
  }
  EXPECT_EQ(*store.Get("devmesh/peers/verdict", absl::Seconds(1)),
            *verdict_before);
  // Nothing of the second job's was written (its claims failed; no join
  // counter exists): the first job's two claims and verdict.
  EXPECT_EQ(*store.NumKeys(), 3);
}

// The round trips of a rank other than 0, with rank 0's claim already there:
// its claim, a Wait and a Get of rank 0's claim, a Wait and a Get of the
// verdict; no Add (no join counter: on etcd an Add is a compare-and-swap
// txn, and 1024 ranks adding to one key cost thousands of Raft writes).
// Twenty rounds of 8 ranks, each rank's calls asserted exactly.
TEST(PeerExchangeTest, ARankOtherThanZeroMakesFiveRoundTrips) {
  constexpr int kWorld = 8, kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    auto base = std::make_shared<InMemoryStore>();
    absl::StatusOr<std::vector<PeerInfo>> zero = absl::UnknownError("not run");
    std::thread rank0(
        [&] { zero = ExchangePeerInfo(*base, Info(0, kWorld), absl::Seconds(60)); });
    ASSERT_TRUE(base->Wait({"devmesh/peers/rank/0"}, absl::Seconds(60)).ok());
    std::vector<std::unique_ptr<CountingStore>> stores;
    std::vector<absl::StatusOr<std::vector<PeerInfo>>> results(
        kWorld, absl::UnknownError("not run"));
    // Every store before any thread: a push_back that grew the vector while
    // an earlier thread read its element crashed the test (7 of 40 runs).
    for (int r = 1; r < kWorld; ++r) {
      stores.push_back(std::make_unique<CountingStore>(base));
    }
    std::vector<std::thread> threads;
    for (int r = 1; r < kWorld; ++r) {
      threads.emplace_back([&, r] {
        results[r] = ExchangePeerInfo(*stores[r - 1], Info(r, kWorld),
                                      absl::Seconds(60));
      });
    }
    for (std::thread& t : threads) t.join();
    rank0.join();
    ASSERT_TRUE(zero.ok()) << zero.status();
    for (int r = 1; r < kWorld; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r].status();
      EXPECT_EQ(stores[r - 1]->calls,
                (Calls{{"CompareSet", 1}, {"Wait", 2}, {"Get", 2}}))
          << "round " << round << ", rank " << r;
    }
    EXPECT_EQ(*base->NumKeys(), kWorld + 1);  // the claims and the verdict
  }
}

// Rank 0's round trips when every other rank has claimed: its claim, one
// Wait and one MultiGet of every claim, the verdict's CompareSet.
TEST(PeerExchangeTest, RankZeroMakesFourRoundTripsWhenTheOthersAreThere) {
  constexpr int kWorld = 8, kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    auto base = std::make_shared<InMemoryStore>();
    std::vector<absl::StatusOr<std::vector<PeerInfo>>> results(
        kWorld, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    std::vector<std::string> claims;
    for (int r = 1; r < kWorld; ++r) {
      claims.push_back(absl::StrCat("devmesh/peers/rank/", r));
      threads.emplace_back([&, r] {
        results[r] = ExchangePeerInfo(*base, Info(r, kWorld), absl::Seconds(60));
      });
    }
    ASSERT_TRUE(base->Wait(claims, absl::Seconds(60)).ok());
    CountingStore counting(base);
    results[0] = ExchangePeerInfo(counting, Info(0, kWorld), absl::Seconds(60));
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
      EXPECT_EQ(*results[r], *results[0]);
    }
    EXPECT_EQ(counting.calls,
              (Calls{{"CompareSet", 2}, {"Wait", 1}, {"MultiGet", 1}}))
        << "round " << round;
  }
}

TEST(PeerExchangeTest, ARankWithAnotherStoreAddressFailsEveryRank) {
  std::vector<PeerInfo> infos = {Info(0, 3), Info(1, 3),
                                 Info(2, 3, "h0", "localhost:29500")};
  auto results = RunExchange(infos, absl::Seconds(60));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(results[r].status().message(),
              "rendezvous failed: rank 2 (pid 102 on h0) was given store "
              "localhost:29500 but rank 0 (pid 100 on h0) was given "
              "10.0.0.1:29500: every rank must get the same MASTER_ADDR and "
              "MASTER_PORT")
        << "rank " << r;
  }
}

TEST(PeerExchangeTest, AMissingRankIsADeadlineNamingIt) {
  std::vector<PeerInfo> infos = {Info(0, 4), Info(1, 4), Info(3, 4)};
  auto results = RunExchange(infos, absl::Seconds(1));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(results[r].status().message(),
              "3 of 4 ranks joined the rendezvous at 10.0.0.1:29500 within 1s; "
              "missing ranks: 2 (is every rank started, with the same store "
              "address and world size?)")
        << "rank " << r;
  }
}

// Twelve of 40 ranks missing, spread out: the first eight in rank order are
// named (found by halving the ranges that lack a key).
TEST(PeerExchangeTest, TheFirstEightMissingRanksAreNamed) {
  const std::vector<int> missing = {3, 5, 9, 17, 18, 20, 25, 30, 33, 36, 38, 39};
  std::vector<PeerInfo> infos;
  for (int r = 0; r < 40; ++r) {
    if (std::find(missing.begin(), missing.end(), r) == missing.end()) {
      infos.push_back(Info(r, 40));
    }
  }
  auto results = RunExchange(infos, absl::Seconds(1));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(results[r].status().message(),
              "28 of 40 ranks joined the rendezvous at 10.0.0.1:29500 within "
              "1s; missing ranks: 3, 5, 9, 17, 18, 20, 25, 30 (is every rank "
              "started, with the same store address and world size?)")
        << "rank " << r;
  }
}

// 290 of 300 ranks missing: counting the claims by halving would take more
// than 128 Checks, so the message gives the count found within them as a
// floor ("at least"), and still names the first eight missing ranks.
TEST(PeerExchangeTest, ManyMissingRanksAreCountedAsAFloor) {
  std::vector<PeerInfo> infos;
  for (int r = 0; r < 10; ++r) infos.push_back(Info(r, 300));
  auto results = RunExchange(infos, absl::Seconds(1));
  for (size_t r = 0; r < infos.size(); ++r) {
    EXPECT_EQ(results[r].status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(results[r].status().message(),
              "at least 10 of 300 ranks joined the rendezvous at "
              "10.0.0.1:29500 within 1s; missing ranks: 10, 11, 12, 13, 14, "
              "15, 16, 17 (is every rank started, with the same store address "
              "and world size?)")
        << "rank " << r;
  }
}

TEST(PeerExchangeTest, BadSelfIsInvalidArgument) {
  InMemoryStore store;
  EXPECT_EQ(ExchangePeerInfo(store, Info(4, 4), absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangePeerInfo(store, Info(0, 0), absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Real processes, rank 0 hosting the store: rank 2 believes WORLD_SIZE is 5.
// With a 120 s bootstrap timeout, InvalidArgument on every rank (not
// DeadlineExceeded) shows that the mistake is found at the rendezvous.
TEST(PeerExchangeProcessTest, WorldSizeOffByOneFailsEveryRankFast) {
  absl::StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  const int port = *probe->LocalPort();
  probe->Close();
  const absl::Time start = absl::Now();
  std::vector<testing::RankOutcome> outcomes = testing::RunRanksDetailed(
      4, [port](Bootstrap& outer) -> absl::Status {
        RendezvousInfo info;
        info.rank = outer.rank();
        info.world_size = outer.rank() == 2 ? 5 : 4;
        info.local_rank = outer.rank();
        info.local_world_size = info.world_size;
        info.store_host = "127.0.0.1";
        info.store_port = port;
        BootstrapOptions options;
        options.timeout = absl::Seconds(120);
        absl::StatusOr<std::unique_ptr<Bootstrap>> boot =
            Bootstrap::Create(info, options);
        return boot.ok() ? absl::OkStatus() : boot.status();
      },
      testing::RunRanksOptions{});
  const absl::Duration took = absl::Now() - start;
  std::printf("4 ranks, one with WORLD_SIZE off by one: all ended in %s\n",
              absl::FormatDuration(took).c_str());
  ASSERT_EQ(outcomes.size(), 4u);
  for (const testing::RankOutcome& o : outcomes) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kInvalidArgument)
        << "rank " << o.rank << ": " << o.status;
    EXPECT_THAT(std::string(o.status.message()),
                MatchesRegex("rendezvous failed: rank 2 \\(pid [0-9]+ on .*\\) "
                             "has world size 5 but rank 0 \\(pid [0-9]+ on "
                             ".*\\) has world size 4: .*"))
        << "rank " << o.rank;
  }
}

// Real processes, rank 0 hosting the store, WORLD_SIZE 4 but rank 3 never
// starts: every rank that joined ends with rank 0's missing-rank message
// (rank 0 publishes it and keeps the store up until they read it), not with
// the store connection closing under them.
TEST(PeerExchangeProcessTest, MissingRankEveryJoinedRankGetsTheSameMessage) {
  absl::StatusOr<Socket> probe = Socket::Listen("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  const int port = *probe->LocalPort();
  probe->Close();
  // Progress lines every second on the waiting ranks (stderr, not checked
  // here: "devmesh: rank R waiting: 3 of 4 ranks joined ...").
  setenv("DEVMESH_RENDEZVOUS_PROGRESS_S", "1", 1);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  std::vector<testing::RankOutcome> outcomes = testing::RunRanksDetailed(
      3, [port](Bootstrap& outer) -> absl::Status {
        RendezvousInfo info;
        info.rank = outer.rank();
        info.world_size = 4;
        info.local_rank = outer.rank();
        info.local_world_size = 4;
        info.store_host = "127.0.0.1";
        info.store_port = port;
        BootstrapOptions options;
        // Rank 0 times out first; the others, started a little later, would
        // otherwise time out on their own.
        options.timeout = outer.rank() == 0 ? absl::Seconds(2)
                                            : absl::Seconds(4);
        absl::StatusOr<std::unique_ptr<Bootstrap>> boot =
            Bootstrap::Create(info, options);
        return boot.ok() ? absl::OkStatus() : boot.status();
      },
      testing::RunRanksOptions{});
  unsetenv("DEVMESH_RENDEZVOUS_PROGRESS_S");
  ASSERT_EQ(outcomes.size(), 3u);
  for (const testing::RankOutcome& o : outcomes) {
    EXPECT_EQ(o.status.code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << o.rank << ": " << o.status;
    EXPECT_EQ(std::string(o.status.message()),
              absl::StrCat("3 of 4 ranks joined the rendezvous at 127.0.0.1:",
                           port,
                           " within 2s; missing ranks: 3 (is every rank "
                           "started, with the same store address and world "
                           "size?)"))
        << "rank " << o.rank;
  }
}

}  // namespace
}  // namespace devmesh
