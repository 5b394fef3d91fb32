// devmesh/tests/comm/two_level_test.cc
// The two-level group (comm/two_level/two_level_communicator.h) in real
// processes on one machine, the hosts given as keys (2 hosts x 2 members in
// both orders, 2 x 3, and Gloo between the hosts):
// - all-reduce of every dtype and op, in and out of place, at counts on
//   both paths (the host leaders' and the reduce-scatter one) and not
//   divisible by the members per host, against exact values; overlapping
//   buffers; the collectives that go to the flat group;
// - a SIGKILLed member: every survivor fails (Unavailable) within 5 s, and
//   the members that share a level with it name it (its global rank);
// - Abort from another thread ends a blocked all-reduce
//   (FailedPrecondition), and later calls too;
// - a member whose count differs, or that calls an all-gather beside the
//   others' all-reduce: InvalidArgument with kDisagreementPayload on the
//   members of its host, every member failing at once;
// - hosts that agree inside but differ from each other (a whole host in an
//   all-gather beside another's all-reduce; totals that differ by a piece
//   of equal size at first): InvalidArgument on the members of a host,
//   every member failing at once, no OK.
// - the levels come at the first all-reduce: creation costs the flat
//   group's 2 store round trips and nothing more, before or after the
//   first all-reduce (a counting store); flat collectives before it leave
//   the levels unmade;
// - a member SIGKILLed while the others are in their first all-reduce (the
//   levels' making): every survivor fails (Unavailable) within 5 s, the
//   member that waits for its messages names it; Abort from another thread
//   ends a first all-reduce that waits in the levels' making, and the member
//   that waits for the aborted one's messages fails within 5 s naming it.
// The mismatch cases run both as the first call (the levels' making on the
// flat group meets the other call) and after a first all-reduce.
// And PlanTwoLevel on layouts that are and are not two-level.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/dtype.h"
#include "comm/two_level/two_level_communicator.h"
#include "comm/two_level/two_level_plan.h"
#include "gtest/gtest.h"
#include "status/status_macros.h"
#include "store/forwarding_store.h"
#include "tests/comm/fork_ranks.h"
#include "tests/comm/typed_values.h"

namespace devmesh {
namespace {

using testing::CheckEqual;
using testing::Decode;
using testing::Encode;
using testing::ForkRanks;
using testing::InputValue;
using testing::ReduceValues;

// 1 and 13: the leaders' path; 70001 (odd, not a multiple of 2 or 3, at
// least 64 KiB in every dtype): the reduce-scatter path with a tail;
// 262245, with pieces of 1 MiB (kPieceBytes): float32 one piece and 101
// elements on the leaders' path, float64 two pieces and a third on the
// reduce-scatter path, one piece for the others.
constexpr size_t kCounts[] = {1, 13, 70001, 262245};
constexpr size_t kPieceBytes = 1 << 20;

std::vector<std::string> Keys(const std::string& layout) {
  std::vector<std::string> keys;
  for (char c : layout) keys.emplace_back(1, c);
  return keys;
}

absl::StatusOr<std::unique_ptr<Communicator>> Make(
    const std::string& layout, const std::string& backend, int rank,
    std::shared_ptr<Store> store, absl::Duration timeout = absl::Seconds(60)) {
  CommOptions options;
  options.timeout = timeout;
  options.label = "mesh dim 'dp'";
  std::vector<std::string> keys = Keys(layout);
  TwoLevelOptions bounds;
  bounds.piece_bytes = kPieceBytes;
  return CreateTwoLevelCommunicator(std::move(store), rank,
                                    static_cast<int>(keys.size()), options,
                                    keys, backend, bounds);
}

absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Counts every call made through it.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  int64_t calls() const { return calls_.load(); }
  absl::Status Set(absl::string_view key, absl::string_view value) override {
    ++calls_;
    return ForwardingStore::Set(key, value);
  }
  using Store::Get;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  absl::Duration timeout) override {
    ++calls_;
    return ForwardingStore::Get(key, timeout);
  }
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override {
    ++calls_;
    return ForwardingStore::Add(key, delta);
  }
  absl::StatusOr<std::string> CompareSet(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view desired) override {
    ++calls_;
    return ForwardingStore::CompareSet(key, expected, desired);
  }
  using Store::Wait;
  absl::Status Wait(absl::Span<const std::string> keys,
                    absl::Duration timeout) override {
    ++calls_;
    return ForwardingStore::Wait(keys, timeout);
  }
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override {
    ++calls_;
    return ForwardingStore::Check(keys);
  }
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override {
    ++calls_;
    return ForwardingStore::DeleteKey(key);
  }
  absl::StatusOr<int64_t> DeletePrefix(absl::string_view prefix) override {
    ++calls_;
    return ForwardingStore::DeletePrefix(prefix);
  }
  absl::StatusOr<int64_t> NumKeys() override {
    ++calls_;
    return ForwardingStore::NumKeys();
  }
  absl::StatusOr<std::vector<std::string>> MultiGet(
      absl::Span<const std::string> keys, absl::Duration timeout) override {
    ++calls_;
    return ForwardingStore::MultiGet(keys, timeout);
  }
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override {
    ++calls_;
    return ForwardingStore::MultiSet(keys, values);
  }

 private:
  std::atomic<int64_t> calls_{0};
};

// Creation makes the flat UCX group only (2 store round trips: its
// address set, every member's got); a Barrier and an all-gather before the
// first all-reduce leave the levels unmade; the first all-reduce makes
// them (shared memory inside each host) with no store call, on both paths.
TEST(TwoLevelLazyTest, LevelsComeAtTheFirstAllReduceWithNoStoreCall) {
  for (const std::string layout : {"aabb", "abab", "aaabbb"}) {
    absl::Status status = ForkRanks(
        static_cast<int>(layout.size()),
        [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
          auto counted = std::make_shared<CountingStore>(store);
          DEVMESH_ASSIGN_OR_RETURN(auto comm,
                                   Make(layout, "ucx", rank, counted));
          const std::string where = absl::StrCat(layout, " rank ", rank, ": ");
          DEVMESH_RETURN_IF_ERROR(Check(
              counted->calls() == 2, absl::StrCat(where, counted->calls(),
                                                  " store calls at creation")));
          DEVMESH_RETURN_IF_ERROR(
              Check(TwoLevelPathOf(*comm) == TwoLevelPath::kNotMade,
                    where + "levels made at creation"));
          DEVMESH_RETURN_IF_ERROR(comm->Barrier());
          std::vector<int32_t> mine(2, rank), all(2 * size, -1);
          DEVMESH_RETURN_IF_ERROR(
              comm->AllGather(absl::MakeConstSpan(mine), absl::MakeSpan(all)));
          DEVMESH_RETURN_IF_ERROR(
              Check(all[2 * size - 1] == size - 1, where + "allgather"));
          DEVMESH_RETURN_IF_ERROR(
              Check(TwoLevelPathOf(*comm) == TwoLevelPath::kNotMade,
                    where + "levels made by a flat collective"));
          const int32_t ranks_sum = size * (size + 1) / 2;
          for (size_t n : {size_t{13}, size_t{40001}}) {
            std::vector<int32_t> x(n, rank + 1);
            DEVMESH_RETURN_IF_ERROR(
                comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum));
            DEVMESH_RETURN_IF_ERROR(
                Check(x[0] == ranks_sum && x[n - 1] == ranks_sum,
                      absl::StrCat(where, "allreduce n=", n, ": ", x[n - 1])));
            DEVMESH_RETURN_IF_ERROR(
                Check(TwoLevelPathOf(*comm) == TwoLevelPath::kTwoLevels,
                      where + "no levels after an all-reduce"));
          }
          return Check(counted->calls() == 2,
                       absl::StrCat(where, counted->calls(),
                                    " store calls after the all-reduces"));
        },
        absl::Seconds(120));
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(TwoLevelPlanTest, Layouts) {
  auto plan = PlanTwoLevel(Keys("abab"), 3);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->hosts, 2);
  EXPECT_EQ(plan->local_size, 2);
  EXPECT_EQ(plan->host, 1);
  EXPECT_EQ(plan->local_index, 1);
  EXPECT_EQ(plan->intra_members, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan->inter_members, (std::vector<int>{2, 3}));
  plan = PlanTwoLevel(Keys("aaabbbccc"), 4);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->intra_members, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(plan->inter_members, (std::vector<int>{1, 4, 7}));
  EXPECT_FALSE(PlanTwoLevel(Keys("aaaa"), 0).has_value());  // one host
  EXPECT_FALSE(PlanTwoLevel(Keys("ab"), 0).has_value());    // one per host
  EXPECT_FALSE(PlanTwoLevel(Keys("aab"), 0).has_value());   // uneven
  EXPECT_FALSE(PlanTwoLevel(Keys("aabbb"), 0).has_value());
  EXPECT_FALSE(PlanTwoLevel(Keys("aabb"), 4).has_value());  // no such rank
}

// (host layout, cross-host backend).
class TwoLevelTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  static std::string Layout() { return std::get<0>(GetParam()); }
  static std::string Backend() { return std::get<1>(GetParam()); }
};

TEST_P(TwoLevelTest, AllReduceEveryDtypeAndOp) {
  const std::string layout = Layout(), backend = Backend();
  absl::Status status = ForkRanks(
      static_cast<int>(layout.size()),
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(auto comm, Make(layout, backend, rank, store));
        DEVMESH_RETURN_IF_ERROR(Check(comm->backend() == "two_level" &&
                                          comm->rank() == rank &&
                                          comm->size() == size,
                                      "identity"));
        for (DataType dtype : kAllDataTypes) {
          for (ReduceOp op : kAllReduceOps) {
            // A float average over a size that is not a power of two is
            // not exact (typed_values.h).
            if (op == ReduceOp::kAvg && (size & (size - 1)) != 0 &&
                (dtype == DataType::kFloat32 || dtype == DataType::kFloat64 ||
                 dtype == DataType::kFloat16 || dtype == DataType::kBFloat16)) {
              continue;
            }
            for (size_t count : kCounts) {
              for (bool in_place : {false, true}) {
                std::vector<double> in(count), expected(count);
                std::vector<double> all(size);
                for (size_t i = 0; i < count; ++i) {
                  in[i] = InputValue(op, dtype, rank, i);
                  for (int r = 0; r < size; ++r) {
                    all[r] = InputValue(op, dtype, r, i);
                  }
                  expected[i] = ReduceValues(op, dtype, all);
                }
                std::vector<char> send = Encode(dtype, in);
                std::vector<char> recv(send.size(), 0);
                char* out = in_place ? send.data() : recv.data();
                const std::string what = absl::StrCat(
                    "allreduce ", DataTypeName(dtype), " ", ReduceOpName(op),
                    " count ", count, in_place ? " in place" : "");
                DEVMESH_RETURN_IF_ERROR(
                    comm->AllReduce(send.data(), out, count, dtype, op));
                DEVMESH_RETURN_IF_ERROR(
                    CheckEqual(what, expected, Decode(dtype, out, count)));
                if (!in_place && send != Encode(dtype, in)) {
                  return absl::InternalError(what + ": send changed");
                }
              }
            }
          }
        }
        return absl::OkStatus();
      },
      absl::Seconds(300));
  EXPECT_TRUE(status.ok()) << status;
}

TEST_P(TwoLevelTest, OverlappingBuffersAndFlatCollectives) {
  const std::string layout = Layout(), backend = Backend();
  absl::Status status = ForkRanks(
      static_cast<int>(layout.size()),
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(auto comm, Make(layout, backend, rank, store));
        const int32_t ranks_sum = size * (size + 1) / 2;
        // send = buf[0, n), recv = buf[2, n + 2), on both paths.
        for (size_t n : {size_t{6}, size_t{40001}}) {
          std::vector<int32_t> buf(n + 2, -7);
          for (size_t i = 0; i < n; ++i) {
            buf[i] = (rank + 1) * static_cast<int32_t>(i % 100 + 1);
          }
          DEVMESH_RETURN_IF_ERROR(comm->AllReduce(
              buf.data(), buf.data() + 2, n, DataType::kInt32, ReduceOp::kSum));
          for (size_t i = 0; i < n; ++i) {
            const int32_t want = ranks_sum * static_cast<int32_t>(i % 100 + 1);
            DEVMESH_RETURN_IF_ERROR(Check(
                buf[2 + i] == want,
                absl::StrCat("overlap n=", n, ": [", i, "] = ", buf[2 + i])));
          }
        }
        // The flat group's collectives.
        std::vector<int32_t> mine(3, rank), gathered(3 * size, -1);
        DEVMESH_RETURN_IF_ERROR(comm->AllGather(absl::MakeConstSpan(mine),
                                                absl::MakeSpan(gathered)));
        for (int i = 0; i < 3 * size; ++i) {
          DEVMESH_RETURN_IF_ERROR(
              Check(gathered[i] == i / 3, absl::StrCat("allgather [", i, "]")));
        }
        std::vector<int32_t> b(5, rank == 1 ? 42 : 0);
        DEVMESH_RETURN_IF_ERROR(comm->Broadcast(absl::MakeSpan(b), 1));
        DEVMESH_RETURN_IF_ERROR(Check(b[4] == 42, "broadcast"));
        DEVMESH_RETURN_IF_ERROR(comm->Barrier());
        std::vector<int32_t> r(2, rank + 1);
        DEVMESH_RETURN_IF_ERROR(comm->Reduce(absl::MakeSpan(r).subspan(0, 2),
                                             absl::MakeSpan(r), ReduceOp::kMax,
                                             0));
        if (rank == 0) {
          DEVMESH_RETURN_IF_ERROR(Check(r[1] == size, "reduce"));
        }
        return absl::OkStatus();
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TwoLevelTest,
                         ::testing::Values(std::make_tuple("aabb", "ucx"),
                                           std::make_tuple("abab", "ucx"),
                                           std::make_tuple("aaabbb", "ucx"),
                                           std::make_tuple("aabb", "gloo")),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "_",
                                               std::get<1>(info.param));
                         });

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Rank 3 (host b, local index 1) is killed once every rank finished a
// first all-reduce; the others' next all-reduce (the reduce-scatter path)
// fails. Ranks 1 (its inter-host peer) and 2 (its host's other member)
// name global rank 3; rank 0 names a member (the one that gave up).
TEST(TwoLevelFailureTest, SigkilledMemberIsNamed) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(30)));
        std::vector<float> x(1 << 16, 1.0f);
        DEVMESH_RETURN_IF_ERROR(
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum));
        DEVMESH_RETURN_IF_ERROR(store->Set(absl::StrCat("warm/", rank), "1"));
        if (rank == 3) {
          DEVMESH_RETURN_IF_ERROR(store->Wait(
              std::vector<std::string>{"warm/0", "warm/1", "warm/2"},
              absl::Seconds(30)));
          DEVMESH_RETURN_IF_ERROR(store->Set("killed", "1"));
          kill(getpid(), SIGKILL);
          return absl::InternalError("still alive after SIGKILL");
        }
        DEVMESH_RETURN_IF_ERROR(
            store->Wait(std::vector<std::string>{"killed"}, absl::Seconds(30)));
        const int64_t start = NowMs();
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const int64_t took = NowMs() - start;
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsUnavailable(got) && took < 5000,
                  absl::StrCat("took ", took, " ms: ", got.ToString())));
        const int named = PeerRank(got);
        if (rank == 0) {
          DEVMESH_RETURN_IF_ERROR(
              Check(named >= 1 && named <= 3, got.ToString()));
        } else {
          DEVMESH_RETURN_IF_ERROR(Check(named == 3, got.ToString()));
        }
        // Sticky.
        const absl::Status again =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        return Check(again.code() == got.code(), again.ToString());
      },
      absl::Seconds(90));
  // ForkRanks counts the killed child as a failure; the survivors' bodies
  // checked their own results.
  EXPECT_EQ(status, absl::InternalError(
                        "rank 3: INTERNAL: killed by signal 9 (Killed)"));
}

// Rank 3 (host b) is SIGKILLed 200 ms after ranks 0-2 started their first
// all-reduce, which waits for it in the levels' making (all-gathers on the
// flat group). Every survivor fails with Unavailable within 5 s, naming a
// member; the member that waits for rank 3's messages in the flat group's
// ring names global rank 3.
TEST(TwoLevelLazyTest, SigkilledDuringTheFirstAllReduceIsNamed) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(30)));
        if (rank == 3) {
          DEVMESH_RETURN_IF_ERROR(store->Wait(
              std::vector<std::string>{"started/0", "started/1", "started/2"},
              absl::Seconds(30)));
          absl::SleepFor(absl::Milliseconds(200));
          kill(getpid(), SIGKILL);
          return absl::InternalError("still alive after SIGKILL");
        }
        std::vector<float> x(13, 1.0f);
        DEVMESH_RETURN_IF_ERROR(
            store->Set(absl::StrCat("started/", rank), "1"));
        const int64_t start = NowMs();
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const int64_t took = NowMs() - start;
        DEVMESH_RETURN_IF_ERROR(
            Check(absl::IsUnavailable(got) && took < 5000,
                  absl::StrCat("rank ", rank, " took ", took,
                               " ms: ", got.ToString())));
        const int named =
            PeerRank(got) >= 0 ? PeerRank(got) : PeerLeftRank(got);
        DEVMESH_RETURN_IF_ERROR(
            store->Set(absl::StrCat("named/", rank), absl::StrCat(named)));
        // Sticky, and the levels were never made.
        const absl::Status again = comm->Barrier();
        DEVMESH_RETURN_IF_ERROR(
            Check(again.code() == got.code(), again.ToString()));
        DEVMESH_RETURN_IF_ERROR(
            Check(TwoLevelPathOf(*comm) == TwoLevelPath::kNotMade, "path"));
        if (rank != 0) return absl::OkStatus();
        std::string by_rank;
        for (int r = 0; r < 3; ++r) {
          DEVMESH_ASSIGN_OR_RETURN(
              std::string v,
              store->Get(absl::StrCat("named/", r), absl::Seconds(30)));
          by_rank += v;
        }
        // The ring's order (algorithms/p2p_collectives.h): rank r receives
        // from r - 1, so rank 0 waits for rank 3.
        return Check(by_rank[0] == '3' && by_rank[1] >= '0' &&
                         by_rank[1] <= '3' && by_rank[2] >= '0' &&
                         by_rank[2] <= '3',
                     absl::StrCat("named by ranks 0-2: ", by_rank));
      },
      absl::Seconds(90));
  EXPECT_EQ(status, absl::InternalError(
                        "rank 3: INTERNAL: killed by signal 9 (Killed)"));
}

// Ranks 0-2 start their first all-reduce; rank 3 never does, so the
// levels' making waits for it. Another thread aborts rank 0's all-reduce
// after 300 ms: FailedPrecondition within 3 s, every later call too. Rank
// 1, which waits for rank 0's messages in the flat group's ring, fails
// within 5 s naming global rank 0 (Unavailable); rank 2 fails too.
TEST(TwoLevelLazyTest, AbortDuringTheFirstAllReduceEndsIt) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(30)));
        std::vector<float> x(13, 1.0f);
        if (rank == 3) {
          DEVMESH_RETURN_IF_ERROR(store->Set("done/3", "1"));
          return store->Wait(
              std::vector<std::string>{"done/0", "done/1", "done/2"},
              absl::Seconds(60));
        }
        std::thread aborter;
        if (rank == 0) {
          aborter = std::thread([&] {
            absl::SleepFor(absl::Milliseconds(300));
            (void)comm->Abort();
          });
        }
        const int64_t start = NowMs();
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        const int64_t took = NowMs() - start;
        const std::string what = absl::StrCat("rank ", rank, " took ", took,
                                              " ms: ", got.ToString());
        std::fprintf(stderr, "%s\n", what.c_str());
        if (rank == 0) {
          aborter.join();
          DEVMESH_RETURN_IF_ERROR(
              Check(absl::IsFailedPrecondition(got) && took < 3000, what));
          const absl::Status again =
              comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
          DEVMESH_RETURN_IF_ERROR(
              Check(absl::IsFailedPrecondition(again), again.ToString()));
        }
        DEVMESH_RETURN_IF_ERROR(Check(!got.ok(), what));
        if (rank == 1) {
          const int named =
              PeerRank(got) >= 0 ? PeerRank(got) : PeerLeftRank(got);
          DEVMESH_RETURN_IF_ERROR(Check(
              absl::IsUnavailable(got) && took < 5000 && named == 0, what));
        }
        // Alive until every member is done.
        DEVMESH_RETURN_IF_ERROR(store->Set(absl::StrCat("done/", rank), "1"));
        return store->Wait(
            std::vector<std::string>{"done/0", "done/1", "done/2", "done/3"},
            absl::Seconds(60));
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 0 calls an all-reduce its peers never join; another thread aborts
// it after 300 ms.
TEST(TwoLevelFailureTest, AbortFromAnotherThread) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(30)));
        if (rank != 0) {
          DEVMESH_RETURN_IF_ERROR(
              store->Wait(std::vector<std::string>{"done"}, absl::Seconds(60)));
          return absl::OkStatus();
        }
        for (size_t n : {size_t{16}, size_t{1} << 16}) {
          std::vector<float> x(n, 1.0f);
          std::thread aborter([&] {
            absl::SleepFor(absl::Milliseconds(300));
            (void)comm->Abort();
          });
          const int64_t start = NowMs();
          const absl::Status got =
              comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
          const int64_t took = NowMs() - start;
          aborter.join();
          DEVMESH_RETURN_IF_ERROR(Check(
              absl::IsFailedPrecondition(got) && took < 3000,
              absl::StrCat("n=", n, " took ", took, " ms: ", got.ToString())));
          const absl::Status again = comm->Barrier();
          DEVMESH_RETURN_IF_ERROR(
              Check(absl::IsFailedPrecondition(again), again.ToString()));
        }
        return store->Set("done", "1");
      },
      absl::Seconds(90));
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 3 passes one element more: the members of its host (ranks 2 and 3)
// fail with InvalidArgument and kDisagreementPayload; every member fails.
TEST(TwoLevelFailureTest, CountThatDiffersIsFound) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(10)));
        const size_t n = (1 << 16) + (rank == 3 ? 1 : 0);
        std::vector<float> x(n, 1.0f);
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        DEVMESH_RETURN_IF_ERROR(Check(!got.ok(), "a mismatch went through"));
        if (rank >= 2) {
          DEVMESH_RETURN_IF_ERROR(
              Check(absl::IsInvalidArgument(got) && DisagreeingRank(got) >= 0,
                    got.ToString()));
        }
        return absl::OkStatus();
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 2 (host b) calls an all-gather while the others call an all-reduce
// (the reduce-scatter path): the members of host b (ranks 2 and 3) fail
// with InvalidArgument and kDisagreementPayload at their intra-host step,
// and every member fails well before the 60 s timeout.
TEST(TwoLevelFailureTest, AllReduceBesideAnotherCollectiveIsFound) {
  for (const bool warm : {false, true}) {
    absl::Status status = ForkRanks(
        4,
        [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
          DEVMESH_ASSIGN_OR_RETURN(
              auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(60)));
          if (warm) {  // the levels made: the mismatch meets on them
            std::vector<float> first(13, 1.0f);
            DEVMESH_RETURN_IF_ERROR(
                comm->AllReduce(absl::MakeSpan(first), ReduceOp::kSum));
          }
          const size_t n = 1 << 16;
          std::vector<float> x(n, 1.0f), gathered(n * size);
          const absl::Time start = absl::Now();
          const absl::Status got =
              rank == 2 ? comm->AllGather(absl::MakeConstSpan(x),
                                          absl::MakeSpan(gathered))
                        : comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
          const absl::Duration took = absl::Now() - start;
          DEVMESH_RETURN_IF_ERROR(Check(!got.ok(), "a mismatch went through"));
          DEVMESH_RETURN_IF_ERROR(Check(
              took < absl::Seconds(10),
              absl::StrCat("warm ", warm, " rank ", rank, " took ",
                           absl::FormatDuration(took), ": ", got.ToString())));
          if (rank >= 2) {
            DEVMESH_RETURN_IF_ERROR(
                Check(absl::IsInvalidArgument(got) && DisagreeingRank(got) >= 0,
                      got.ToString()));
          }
          // The group refuses every later call with its first error.
          const absl::Status later = comm->Barrier();
          return Check(later.code() == got.code(),
                       absl::StrCat("later call: ", later.ToString()));
        },
        absl::Seconds(60));
    EXPECT_TRUE(status.ok()) << "warm " << warm << ": " << status;
  }
}

// Host b (ranks 2 and 3) calls an all-gather while host a calls an
// all-reduce (the host leaders' path, then the reduce-scatter one): each
// host agrees inside, so only the inter-host step can see it. Every member
// fails well before the 60 s timeout; the members that meet on an inter
// group with InvalidArgument and kDisagreementPayload.
TEST(TwoLevelFailureTest, HostsThatDifferAsWholesAreFound) {
  for (const bool warm : {false, true}) {
    for (const size_t n : {size_t{13}, size_t{1} << 16}) {
      absl::Status status = ForkRanks(
          4,
          [&](int rank, int size,
              std::shared_ptr<Store> store) -> absl::Status {
            DEVMESH_ASSIGN_OR_RETURN(
                auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(60)));
            if (warm) {  // the levels made: the hosts meet on the inter group
              std::vector<float> first(13, 1.0f);
              DEVMESH_RETURN_IF_ERROR(
                  comm->AllReduce(absl::MakeSpan(first), ReduceOp::kSum));
            }
            std::vector<float> x(n, 1.0f), gathered(n * size);
            const absl::Time start = absl::Now();
            const absl::Status got =
                rank >= 2 ? comm->AllGather(absl::MakeConstSpan(x),
                                            absl::MakeSpan(gathered))
                          : comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
            const absl::Duration took = absl::Now() - start;
            DEVMESH_RETURN_IF_ERROR(
                Check(!got.ok(), "a mismatch went through"));
            DEVMESH_RETURN_IF_ERROR(
                Check(took < absl::Seconds(10),
                      absl::StrCat("warm ", warm, " n ", n, " rank ", rank,
                                   " took ", absl::FormatDuration(took), ": ",
                                   got.ToString())));
            const bool named =
                absl::IsInvalidArgument(got) && DisagreeingRank(got) >= 0;
            DEVMESH_RETURN_IF_ERROR(
                store->Set(absl::StrCat("named", rank), named ? "1" : "0"));
            if (rank != 0) return absl::OkStatus();
            // Warm, the members that meet on an inter group: the host
            // leaders (ranks 0 and 2) on the leaders' path, every member on
            // the reduce-scatter path. Cold, the flat group's ring (rank r
            // receives from r - 1): ranks 0 and 2 receive the other host's
            // call; ranks 1 and 3 read their notices. The others fail as
            // their peers leave.
            std::string by_rank;
            for (int r = 0; r < 4; ++r) {
              DEVMESH_ASSIGN_OR_RETURN(std::string v,
                                       store->Get(absl::StrCat("named", r)));
              by_rank += v;
            }
            const bool want = n == 13 ? by_rank[0] == '1' && by_rank[2] == '1'
                                      : by_rank == "1111";
            return Check(want, absl::StrCat("warm ", warm, " n ", n,
                                            ": InvalidArgument naming a "
                                            "member, by rank: ",
                                            by_rank));
          },
          absl::Seconds(60));
      EXPECT_TRUE(status.ok()) << status;
    }
  }
}

// Host b's all-reduce is one piece longer than host a's: the first pieces
// are alike, so only the whole call's check before them finds it. Every
// member fails with InvalidArgument naming its inter-host peer on host b,
// and nobody gets OK.
TEST(TwoLevelFailureTest, TotalsThatDifferByAPieceAreFound) {
  absl::Status status = ForkRanks(
      4,
      [&](int rank, int size, std::shared_ptr<Store> store) -> absl::Status {
        DEVMESH_ASSIGN_OR_RETURN(
            auto comm, Make("aabb", "ucx", rank, store, absl::Seconds(60)));
        const size_t piece = kPieceBytes / sizeof(float);
        const size_t n = (rank >= 2 ? 3 : 2) * piece;
        std::vector<float> x(n, 1.0f);
        const absl::Status got =
            comm->AllReduce(absl::MakeSpan(x), ReduceOp::kSum);
        // Each member's inter group is {local index, local index + 2}: the
        // member of host b differs from host a's.
        return Check(absl::IsInvalidArgument(got) &&
                         DisagreeingRank(got) == rank % 2 + 2,
                     absl::StrCat("rank ", rank, ": ", got.ToString()));
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace devmesh
