// devmesh/tests/comm/async_collectives_test.cc
// The I* calls (comm/work.h) on Gloo, shm and UCX, in real processes at 3
// ranks: a run of every kind issued back to back and then waited for, with
// a blocking call among them, gives exact values in issue order; Abort ends
// the running call and the queued ones; a communicator destroyed with a
// call running and one queued ends them (the running one as after Abort,
// the queued one Cancelled) and the Works outlive it; Wait with a deadline.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/communicator.h"
#include "comm/forwarding_communicator.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

#define RETURN_IF_ERROR_T(expr) \
  do {                          \
    absl::Status _s = (expr);   \
    if (!_s.ok()) return _s;    \
  } while (0)

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

class AsyncCollectivesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AsyncCollectivesTest, EveryKindInIssueOrderWithExactValues) {
  absl::Status status = ForkRanks(3, [backend = GetParam()](
                                         int rank, int size,
                                         std::shared_ptr<Store> store) {
    auto made = testing::WorldOf(backend, rank, size, store);
    if (!made.ok()) return made.status();
    Communicator& c = **made;
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int round = 0; round < 3; ++round) {
      // One buffer chained through three calls: their order shows in it.
      std::vector<int64_t> chain(4, rank + 1);
      std::vector<float> gathered(2 * size), mine = {float(rank), 1.5f};
      std::vector<int32_t> bcast(5, rank == 1 ? 7 : 0);
      int64_t reduced = 0, one = rank + 10;
      std::vector<size_t> counts(size), offsets(size);
      for (int p = 0; p < size; ++p) counts[p] = 1, offsets[p] = p;
      std::vector<double> a2a_in(size), a2a_out(size, -1);
      for (int p = 0; p < size; ++p) a2a_in[p] = 10 * rank + p;
      int32_t to_right = 100 + rank, from_left = -1;
      const P2POp ring[] = {P2POp::Send(&to_right, 1, DataType::kInt32, right),
                            P2POp::Recv(&from_left, 1, DataType::kInt32, left)};
      std::vector<Work> works;
      works.push_back(c.IAllReduce<int64_t>(absl::MakeSpan(chain),
                                            ReduceOp::kSum));
      works.push_back(c.IAllGather<float>(mine, absl::MakeSpan(gathered)));
      works.push_back(c.IBroadcast<int32_t>(absl::MakeSpan(bcast), 1));
      works.push_back(
          c.IReduce(&one, &reduced, 1, DataType::kInt64, ReduceOp::kMax, 2));
      works.push_back(c.IAllToAllV(a2a_in.data(), counts, offsets,
                                   a2a_out.data(), counts, offsets,
                                   DataType::kFloat64));
      works.push_back(c.IBatchSendRecv(ring));
      // IGather, IScatter, IReduceScatter, IAllToAll, and ISend/IRecv
      // issued in an order that needs no overlap (even ranks send first).
      std::vector<int32_t> all_ranks(size, -1), scattered(1, -1);
      std::vector<int32_t> whole(size);
      for (int p = 0; p < size; ++p) whole[p] = 50 + p;
      const int32_t me32 = rank;
      works.push_back(c.IGather(&me32, all_ranks.data(), 1, DataType::kInt32,
                                0));
      works.push_back(c.IScatter(whole.data(), scattered.data(), 1,
                                 DataType::kInt32, 0));
      std::vector<float> rs_in(size, 1.0f), rs_out(1, 0.0f);
      works.push_back(c.IReduceScatter<float>(rs_in, absl::MakeSpan(rs_out),
                                              ReduceOp::kSum));
      std::vector<int64_t> a2a_eq_in(size, rank), a2a_eq_out(size, -1);
      works.push_back(
          c.IAllToAll<int64_t>(a2a_eq_in, absl::MakeSpan(a2a_eq_out)));
      int64_t p2p_out = 1000 + rank, p2p_in = -1;
      if (rank % 2 == 0 && rank + 1 < size) {
        works.push_back(c.ISend(&p2p_out, 1, DataType::kInt64, rank + 1));
      } else if (rank % 2 == 1) {
        works.push_back(c.IRecv(&p2p_in, 1, DataType::kInt64, rank - 1));
      }
      // A blocking call waits for those before it: the max sees the sum
      // (6), and the next sum sees the max.
      RETURN_IF_ERROR_T(c.AllReduce<int64_t>(absl::MakeSpan(chain),
                                             ReduceOp::kMax));
      works.push_back(c.IAllReduce<int64_t>(absl::MakeSpan(chain),
                                            ReduceOp::kSum));
      works.push_back(c.IBarrier());
      for (size_t i = 0; i < works.size(); ++i) {
        RETURN_IF_ERROR_T(works[i].Wait());
        RETURN_IF_ERROR_T(Expect(works[i].Test(), "Test after Wait"));
      }
      const std::string r = absl::StrCat("round ", round, ": ");
      // 1+2+3 = 6, max 6, then summed over 3 ranks: 18.
      RETURN_IF_ERROR_T(Expect(chain == std::vector<int64_t>(4, 18),
                               r + "allreduce chain"));
      std::vector<float> want_gathered;
      for (int p = 0; p < size; ++p) {
        want_gathered.push_back(float(p));
        want_gathered.push_back(1.5f);
      }
      RETURN_IF_ERROR_T(Expect(gathered == want_gathered, r + "allgather"));
      RETURN_IF_ERROR_T(
          Expect(bcast == std::vector<int32_t>(5, 7), r + "broadcast"));
      if (rank == 2) {
        RETURN_IF_ERROR_T(Expect(reduced == 12, r + "reduce"));
      }
      for (int p = 0; p < size; ++p) {
        RETURN_IF_ERROR_T(
            Expect(a2a_out[p] == 10 * p + rank, r + "alltoallv"));
      }
      RETURN_IF_ERROR_T(Expect(from_left == 100 + left, r + "batch"));
      if (rank == 0) {
        RETURN_IF_ERROR_T(Expect(all_ranks == std::vector<int32_t>{0, 1, 2},
                                 r + "gather"));
      }
      RETURN_IF_ERROR_T(Expect(scattered[0] == 50 + rank, r + "scatter"));
      RETURN_IF_ERROR_T(Expect(rs_out[0] == 3.0f, r + "reduce_scatter"));
      RETURN_IF_ERROR_T(Expect(a2a_eq_out == std::vector<int64_t>{0, 1, 2},
                               r + "alltoall"));
      if (rank % 2 == 1) {
        RETURN_IF_ERROR_T(Expect(p2p_in == 1000 + rank - 1, r + "irecv"));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 0 issues an all-reduce its peers never join and a second one behind
// it; Abort from the issuing thread ends both within seconds (the group's
// timeout is 60 s), and Wait with a past deadline said DeadlineExceeded
// while the first ran.
TEST_P(AsyncCollectivesTest, AbortEndsTheRunningAndTheQueuedCalls) {
  absl::Status status = ForkRanks(3, [backend = GetParam()](
                                         int rank, int size,
                                         std::shared_ptr<Store> store) {
    auto made = testing::WorldOf(backend, rank, size, store);
    if (!made.ok()) return made.status();
    Communicator& c = **made;
    RETURN_IF_ERROR_T(c.Barrier());  // every member connected
    if (rank == 0) {
      float x = 1, y = 2;
      Work first = c.IAllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
      Work second = c.IAllReduce(&y, &y, 1, DataType::kFloat32, ReduceOp::kSum);
      absl::Status early = first.Wait(absl::Milliseconds(300));
      RETURN_IF_ERROR_T(Expect(absl::IsDeadlineExceeded(early) && !first.Test(),
                               "early wait: " + early.ToString()));
      const absl::Time t0 = absl::Now();
      RETURN_IF_ERROR_T(c.Abort());
      absl::Status a = first.Wait(absl::Seconds(20));
      absl::Status b = second.Wait(absl::Seconds(20));
      const absl::Duration took = absl::Now() - t0;
      absl::Status verdict = Expect(
          !a.ok() && !absl::IsDeadlineExceeded(a) &&
              absl::IsFailedPrecondition(b) && took < absl::Seconds(10),
          absl::StrCat("first ", a.ToString(), ", second ", b.ToString(),
                       ", after ", absl::FormatDuration(took)));
      RETURN_IF_ERROR_T(store->Set("rank0_done", "1"));
      return verdict;
    }
    // Peers stay (their communicators open) until rank 0 is done.
    return store->Wait({"rank0_done"}, absl::Seconds(60));
  });
  EXPECT_TRUE(status.ok()) << status;
}

// A communicator destroyed with one call running and one queued: the
// running one is aborted, the queued one ends Cancelled, and both Works
// are read after the communicator is gone. The same through a wrapper (a
// ForwardingCommunicator view, which has a progress thread of its own),
// after an exact I* all-reduce through it.
TEST_P(AsyncCollectivesTest, WorkOutlivesItsCommunicator) {
  for (bool through_view : {false, true}) {
  absl::Status status = ForkRanks(3, [backend = GetParam(), through_view](
                                         int rank, int size,
                                         std::shared_ptr<Store> store) {
    auto made = testing::WorldOf(backend, rank, size, store);
    if (!made.ok()) return made.status();
    std::unique_ptr<Communicator> comm = *std::move(made);
    if (through_view) {
      comm = std::make_unique<ForwardingCommunicator>(
          std::shared_ptr<Communicator>(std::move(comm)));
      int64_t x = rank + 1;
      RETURN_IF_ERROR_T(
          comm->IAllReduce(&x, &x, 1, DataType::kInt64, ReduceOp::kSum)
              .Wait());
      RETURN_IF_ERROR_T(Expect(x == 6, "view allreduce"));
    }
    RETURN_IF_ERROR_T(comm->Barrier());
    if (rank != 0) return store->Wait({"rank0_done"}, absl::Seconds(60));
    std::vector<float> big(1 << 16, 1.0f);
    Work running = comm->IBarrier();
    Work queued = comm->IAllReduce(big.data(), big.data(), big.size(),
                                   DataType::kFloat32, ReduceOp::kSum);
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time t0 = absl::Now();
    comm.reset();
    const absl::Duration took = absl::Now() - t0;
    absl::Status a = running.Wait(absl::Seconds(1));
    absl::Status b = queued.Wait(absl::Seconds(1));
    RETURN_IF_ERROR_T(store->Set("rank0_done", "1"));
    return Expect(!a.ok() && !absl::IsDeadlineExceeded(a) &&
                      absl::IsCancelled(b) && took < absl::Seconds(10),
                  absl::StrCat("running ", a.ToString(), ", queued ",
                               b.ToString(), ", destroyed in ",
                               absl::FormatDuration(took)));
  });
  EXPECT_TRUE(status.ok()) << (through_view ? "view: " : "") << status;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, AsyncCollectivesTest,
                         ::testing::Values("gloo", "shm", "ucx"));

}  // namespace
}  // namespace devmesh
