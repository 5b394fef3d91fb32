// devmesh/tests/comm/gloo_errors_test.cc
// Gloo error paths: a peer that dies, a peer that never arrives, bad
// arguments, Abort.
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/memory_store.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "tests/comm/fork_ranks.h"

namespace devmesh {
namespace {

using testing::ForkRanks;

CommOptions ShortTimeout() {
  CommOptions options;
  options.timeout = absl::Seconds(3);
  return options;
}

TEST(GlooErrorsTest, PeerThatDiesFailsTheOthersWithinTheTimeout) {
  absl::Status status = ForkRanks(4, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    auto comm = CreateCommunicator("gloo", store, rank, size, ShortTimeout());
    if (!comm.ok()) return comm.status();
    if (auto s = (*comm)->Barrier(); !s.ok()) return s;
    if (rank == 3) _exit(0);  // Dies without a word.
    std::vector<float> data(1 << 16, 1.0f);
    absl::Status last;
    for (int i = 0; i < 3 && last.ok(); ++i) {
      last = (*comm)->AllReduce(data.data(), data.data(), data.size(),
                                DataType::kFloat32, ReduceOp::kSum);
    }
    if (last.ok()) {
      return absl::InternalError("all-reduce succeeded with a dead peer");
    }
    if (last.code() != absl::StatusCode::kUnavailable &&
        last.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::InternalError(
          absl::StrCat("unexpected error for a dead peer: ", last.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Abort ends a collective blocked in another thread at once, not at its
// timeout (30 s here), and the peer's next collective on the group fails at
// once too: Abort shuts the group's sockets down under Gloo
// (gloo_shutdown.h). Rank 1 joins the group but not the all-reduce.
TEST(GlooErrorsTest, AbortWakesACollectiveBlockedInAnotherThread) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    CommOptions options;
    options.timeout = absl::Seconds(30);
    auto comm = CreateCommunicator("gloo", store, rank, size, options);
    if (!comm.ok()) return comm.status();
    std::vector<float> data(1024, 1.0f);
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
    // Rank 1: after rank 0 aborted, a collective fails at once.
    absl::SleepFor(absl::Seconds(1));
    const absl::Time start = absl::Now();
    absl::Status s = (*comm)->AllReduce(data.data(), data.data(), data.size(),
                                        DataType::kFloat32, ReduceOp::kSum);
    if (s.ok()) return absl::InternalError("all-reduce with an aborted peer");
    if (absl::Now() - start > absl::Seconds(2)) {
      return absl::InternalError(absl::StrCat(
          "the peer's all-reduce took ", absl::FormatDuration(absl::Now() - start),
          ": ", s.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(90));
  EXPECT_TRUE(status.ok()) << status;
}

// Abort also ends a receive that Gloo is halfway through reading, and a send
// it is halfway through writing: rank 1 stops itself (SIGSTOP) 20 ms into a
// 512 MiB Send, so rank 0's Recv has part of the message and waits for the
// rest on a live connection; rank 0 aborts, continues rank 1, and rank 1
// aborts too. Gloo's connection errors reach neither buffer
// (gloo_abortable_context.h): without AbortableContext each call ends only
// at its 30 s timeout.
TEST(GlooErrorsTest, AbortWakesCallsHalfwayThroughAMessage) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    CommOptions options;
    options.timeout = absl::Seconds(30);
    auto comm = CreateCommunicator("gloo", store, rank, size, options);
    if (!comm.ok()) return comm.status();
    std::vector<float> data(size_t{128} << 20, 1.0f);
    absl::Status result;
    absl::Time ended;
    std::thread call([&] {
      result = rank == 1 ? (*comm)->Send(data.data(), data.size(),
                                         DataType::kFloat32, 0)
                         : (*comm)->Recv(data.data(), data.size(),
                                         DataType::kFloat32, 1);
      ended = absl::Now();
    });
    absl::Time aborted;
    if (rank == 1) {
      if (auto s = store->Set("pid", std::to_string(getpid())); !s.ok()) {
        call.join();
        return s;
      }
      absl::SleepFor(absl::Milliseconds(20));
      raise(SIGSTOP);  // the whole process, mid-send
      auto go = store->Get("rank 0 aborted", absl::Seconds(30));
      aborted = absl::Now();
      absl::Status abort = (*comm)->Abort();
      call.join();
      if (!go.ok()) return go.status();
      if (!abort.ok()) return abort;
    } else {
      auto pid = store->Get("pid", absl::Seconds(30));
      if (!pid.ok()) {
        (void)(*comm)->Abort();
        call.join();
        return pid.status();
      }
      absl::SleepFor(absl::Milliseconds(500));
      aborted = absl::Now();
      absl::Status abort = (*comm)->Abort();
      call.join();
      kill(std::stoi(*pid), SIGCONT);
      if (auto s = store->Set("rank 0 aborted", "1"); !s.ok()) return s;
      if (!abort.ok()) return abort;
    }
    const char* what = rank == 1 ? "send" : "receive";
    if (result.ok()) {
      return absl::InternalError(
          absl::StrCat("the ", what, " succeeded with its peer stopped"));
    }
    if (ended - aborted > absl::Seconds(2)) {
      return absl::InternalError(absl::StrCat(
          "the ", what, " ended ", absl::FormatDuration(ended - aborted),
          " after Abort: ", result.ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(90));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GlooErrorsTest, PeerThatNeverArrivesIsDeadlineExceeded) {
  absl::Status status = ForkRanks(2, [](int rank, int size,
                                        std::shared_ptr<Store> store)
                                         -> absl::Status {
    if (rank == 1) return absl::OkStatus();  // Never creates its side.
    CommOptions options;
    options.timeout = absl::Seconds(1);
    auto comm = CreateCommunicator("gloo", store, rank, size, options);
    if (comm.status().code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::InternalError(
          absl::StrCat("expected DeadlineExceeded, got ", comm.status().ToString()));
    }
    return absl::OkStatus();
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

class GlooSingleRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<InMemoryStore>(absl::Seconds(5));
    auto comm = CreateCommunicator("gloo", store_, 0, 1, ShortTimeout());
    ASSERT_TRUE(comm.ok()) << comm.status();
    comm_ = *std::move(comm);
  }
  std::shared_ptr<Store> store_;
  std::unique_ptr<Communicator> comm_;
};

void ExpectInvalid(const absl::Status& status, absl::string_view needle) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), needle)) << status;
}

TEST_F(GlooSingleRankTest, IdentityAndEveryCollectiveOnOneRank) {
  EXPECT_EQ(comm_->backend(), "gloo");
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->global_ranks(), std::vector<int>{0});
  int32_t in[3] = {5, -7, 9}, out[3] = {};
  ASSERT_TRUE(comm_->AllReduce(in, out, 3, DataType::kInt32, ReduceOp::kAvg).ok());
  EXPECT_EQ(std::vector<int32_t>(out, out + 3), std::vector<int32_t>({5, -7, 9}));
  int32_t rs = 0;
  ASSERT_TRUE(comm_->ReduceScatter(in, &rs, 1, DataType::kInt32, ReduceOp::kMax).ok());
  EXPECT_EQ(rs, 5);
  int32_t ag[3] = {};
  ASSERT_TRUE(comm_->AllGather(in, ag, 3, DataType::kInt32).ok());
  EXPECT_EQ(ag[2], 9);
  ASSERT_TRUE(comm_->Barrier().ok());
}

TEST_F(GlooSingleRankTest, BadArgumentsAreInvalidArgument) {
  float x = 1.0f;
  ExpectInvalid(comm_->AllReduce(nullptr, &x, 1, DataType::kFloat32, ReduceOp::kSum),
                "send buffer is null");
  ExpectInvalid(comm_->AllReduce(&x, nullptr, 1, DataType::kFloat32, ReduceOp::kSum),
                "recv buffer is null");
  ExpectInvalid(comm_->AllReduce(&x, &x, 1, static_cast<DataType>(42), ReduceOp::kSum),
                "invalid dtype value 42");
  ExpectInvalid(comm_->AllReduce(&x, &x, 1, DataType::kFloat32, static_cast<ReduceOp>(9)),
                "invalid ReduceOp value 9");
  ExpectInvalid(comm_->Broadcast(&x, &x, 1, DataType::kFloat32, 1), "root 1");
  ExpectInvalid(comm_->Broadcast(&x, &x, 1, DataType::kFloat32, -1), "root -1");
  ExpectInvalid(comm_->Send(&x, 1, DataType::kFloat32, 0), "peer 0 is this rank");
  ExpectInvalid(comm_->Recv(&x, 1, DataType::kFloat32, 3), "peer 3");
  ExpectInvalid(comm_->AllToAll(&x, nullptr, 1, DataType::kFloat32), "recv buffer");
  ExpectInvalid(comm_->AllGather(&x, &x, SIZE_MAX / 2, DataType::kFloat64),
                "overflows");
  EXPECT_EQ(comm_->Split(-2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GlooSingleRankTest, AbortMakesLaterCallsFailedPrecondition) {
  ASSERT_TRUE(comm_->Abort().ok());
  EXPECT_TRUE(comm_->Abort().ok());  // Idempotent.
  float x = 1.0f;
  absl::Status s = comm_->AllReduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "aborted")) << s;
  EXPECT_EQ(comm_->Barrier().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(comm_->Split(0, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GlooCreateTest, BadCreationArgumentsAreInvalidArgument) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  ExpectInvalid(CreateCommunicator("gloo", nullptr, 0, 1).status(), "store is null");
  ExpectInvalid(CreateCommunicator("gloo", store, 0, 0).status(), "size 0");
  ExpectInvalid(CreateCommunicator("gloo", store, 2, 2).status(), "rank 2");
  ExpectInvalid(CreateCommunicator("gloo", store, -1, 2).status(), "rank -1");
  CommOptions zero;
  zero.timeout = absl::ZeroDuration();
  ExpectInvalid(CreateCommunicator("gloo", store, 0, 1, zero).status(), "timeout");
  CommOptions ranks;
  ranks.global_ranks = {3, 4};
  ExpectInvalid(CreateCommunicator("gloo", store, 0, 1, ranks).status(),
                "global_ranks has 2 entries");
  ranks.global_ranks = {5, 5};
  ExpectInvalid(CreateCommunicator("gloo", store, 0, 2, ranks).status(),
                "global rank 5");
}

TEST(GlooCreateTest, GlobalRanksAreKept) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  CommOptions options;
  options.global_ranks = {6};
  auto comm = CreateCommunicator("gloo", store, 0, 1, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->global_ranks(), std::vector<int>{6});
  auto child = (*comm)->Split(3, 0);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((**child).global_ranks(), std::vector<int>{6});
}

}  // namespace
}  // namespace devmesh
