// devmesh/tests/comm/nccl_shrink_test.cc
// Shrinking NCCL communicators (comm/shrinkable_communicator.h, issue 20).
// The plan's checks (PlanShrink, ShrinkExclusions) and the compile-time
// choice run everywhere; the rest needs a GPU and skips without one, with
// the reason ("no CUDA device visible: ...", or how many GPUs a multi-rank
// shrink needs: NCCL allows one rank per GPU). tools/gpu_check.sh runs it
// on a GPU host.
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/group_args.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/shrinkable_communicator.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

#ifdef DEVMESH_TEST_HAS_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace devmesh {
namespace {

void ExpectInvalid(const absl::Status& status, absl::string_view message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(PlanShrinkTest, RefusesEachBadListWithItsMessage) {
  const std::vector<int> group = {10, 11, 12, 13};
  ExpectInvalid(PlanShrink("nccl", 1, group, {}).status(),
                "nccl shrink: nothing to exclude (ncclCommShrink needs at "
                "least one rank)");
  ExpectInvalid(PlanShrink("nccl", 1, group, {4}).status(),
                "nccl shrink: excluded rank 4 is outside [0, 4)");
  ExpectInvalid(PlanShrink("nccl", 1, group, {-1}).status(),
                "nccl shrink: excluded rank -1 is outside [0, 4)");
  ExpectInvalid(PlanShrink("nccl", 1, group, {2, 0, 2}).status(),
                "nccl shrink: rank 2 is excluded twice");
  ExpectInvalid(PlanShrink("nccl", 1, group, {3, 2, 1, 0}).status(),
                "nccl shrink: excluding all 4 ranks leaves no group");
  ExpectInvalid(PlanShrink("nccl", 1, group, {1}).status(),
                "nccl shrink: this rank (1) is excluded: an excluded member "
                "does not call Shrink");
  // A world of one has nobody else to exclude.
  ExpectInvalid(PlanShrink("nccl", 0, {0}, {0}).status(),
                "nccl shrink: excluding all 1 ranks leaves no group");
}

TEST(PlanShrinkTest, SurvivorsKeepTheirOrder) {
  auto plan = PlanShrink("nccl", 2, {10, 11, 12, 13}, {3, 0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->global_ranks, (std::vector<int>{11, 12}));
  EXPECT_EQ(plan->rank, 1);
  plan = PlanShrink("nccl", 0, {4, 2, 6}, {1});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->global_ranks, (std::vector<int>{4, 6}));
  EXPECT_EQ(plan->rank, 0);
}

TEST(ShrinkExclusionsTest, OnlyAnOrderedRemovalIsAShrink) {
  using V = std::vector<int>;
  EXPECT_EQ(ShrinkExclusions({0, 2, 4, 6}, {0, 4}), (V{1, 3}));
  EXPECT_EQ(ShrinkExclusions({0, 2, 4, 6}, {2, 4, 6}), (V{0}));
  // Nothing removed: not a shrink.
  EXPECT_EQ(ShrinkExclusions({0, 2}, {0, 2}), std::nullopt);
  // Another order, or a rank that was not in the group: made anew.
  EXPECT_EQ(ShrinkExclusions({0, 2, 4}, {4, 0}), std::nullopt);
  EXPECT_EQ(ShrinkExclusions({0, 2, 4}, {0, 3}), std::nullopt);
  EXPECT_EQ(ShrinkExclusions({0, 2}, {0, 2, 4}), std::nullopt);
}

TEST(NcclShrinkTest, ChosenFromTheNcclVersionWhenCompiling) {
#ifdef DEVMESH_TEST_HAS_NCCL
  EXPECT_EQ(NcclShrinkBuiltIn(), NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0))
      << "NCCL_VERSION_CODE " << NCCL_VERSION_CODE;
  EXPECT_EQ(NcclRevokeBuiltIn(), NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 7))
      << "NCCL_VERSION_CODE " << NCCL_VERSION_CODE;
#else
  EXPECT_FALSE(NcclShrinkBuiltIn());
  EXPECT_FALSE(NcclRevokeBuiltIn());
#endif
}

#ifdef DEVMESH_TEST_HAS_NCCL

#define SKIP_WITHOUT_GPUS(n)                                              \
  do {                                                                    \
    auto count = CudaDeviceCount();                                       \
    if (!count.ok()) GTEST_SKIP() << count.status().message();            \
    if (*count < (n)) {                                                   \
      GTEST_SKIP() << "needs " << (n) << " GPUs (NCCL: one rank per "     \
                   << "GPU); " << *count << " visible";                   \
    }                                                                     \
  } while (0)

absl::StatusOr<std::unique_ptr<Communicator>> Rank(
    std::shared_ptr<Store> store, int rank, int size,
    std::vector<int> globals) {
  CommOptions options;
  options.timeout = absl::Seconds(60);
  options.global_ranks = std::move(globals);
  options.nccl.cuda_device = rank;
  return CreateNcclCommunicator(std::move(store), rank, size, options);
}

float AllReduceOne(Communicator& comm, float value) {
  float* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, &value, sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  absl::Status s = comm.AllReduce(dev, dev, 1, DataType::kFloat32,
                                  ReduceOp::kSum);
  EXPECT_TRUE(s.ok()) << s;
  float out = -1;
  EXPECT_EQ(cudaMemcpy(&out, dev, sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(dev);
  return out;
}

// One GPU: the checks run on a real communicator and leave it working.
TEST(NcclShrinkTest, WorldOfOneRefusesEveryListAndStaysUsable) {
  SKIP_WITHOUT_GPUS(1);
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  auto comm = Rank(store, 0, 1, {7});
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto* s = dynamic_cast<ShrinkableCommunicator*>(comm->get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->CanShrink(), NcclShrinkBuiltIn());
  ExpectInvalid(s->Shrink({0}, true).status(),
                "nccl shrink: excluding all 1 ranks leaves no group");
  ExpectInvalid(s->Shrink({}, true).status(),
                "nccl shrink: nothing to exclude (ncclCommShrink needs at "
                "least one rank)");
  ExpectInvalid(s->Shrink({1}, false).status(),
                "nccl shrink: excluded rank 1 is outside [0, 1)");
  EXPECT_EQ(AllReduceOne(**comm, 2.5f), 2.5f);
  ASSERT_TRUE((*comm)->Abort().ok());
  EXPECT_FALSE(s->CanShrink());
}

// One GPU: Revoke refuses later calls; teardown after it is ncclCommAbort
// (the destructor), never ncclCommFinalize.
TEST(NcclShrinkTest, RevokeRefusesCallsThenTeardownAborts) {
  SKIP_WITHOUT_GPUS(1);
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  auto comm = Rank(store, 0, 1, {});
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto* s = dynamic_cast<ShrinkableCommunicator*>(comm->get());
  ASSERT_NE(s, nullptr);
  if (!NcclRevokeBuiltIn()) {
    EXPECT_EQ(s->Revoke().code(), absl::StatusCode::kUnimplemented);
    GTEST_SKIP() << "built against an NCCL without ncclCommRevoke";
  }
  ASSERT_TRUE(s->Revoke().ok());
  ASSERT_TRUE(s->Revoke().ok());  // once; the second does nothing
  absl::Status barrier = (*comm)->Barrier();
  EXPECT_EQ(barrier.code(), absl::StatusCode::kFailedPrecondition) << barrier;
  EXPECT_TRUE(absl::StrContains(barrier.message(), "revoked")) << barrier;
  comm->reset();  // the destructor aborts a revoked communicator
}

// Two GPUs: rank 1 is excluded (and releases its communicator with Abort);
// rank 0 shrinks to a group of one that works, and its parent is aborted.
TEST(NcclShrinkTest, TwoRanksShrinkToOne) {
  SKIP_WITHOUT_GPUS(2);
  if (!NcclShrinkBuiltIn()) GTEST_SKIP() << "built without ncclCommShrink";
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  absl::StatusOr<std::unique_ptr<Communicator>> comms[2] = {
      absl::UnknownError("not made"), absl::UnknownError("not made")};
  {
    std::thread other([&] { comms[1] = Rank(store, 1, 2, {20, 21}); });
    comms[0] = Rank(store, 0, 2, {20, 21});
    other.join();
  }
  ASSERT_TRUE(comms[0].ok()) << comms[0].status();
  ASSERT_TRUE(comms[1].ok()) << comms[1].status();
  ASSERT_TRUE((*comms[1])->Abort().ok());
  auto* parent = dynamic_cast<ShrinkableCommunicator*>(comms[0]->get());
  ASSERT_NE(parent, nullptr);
  ASSERT_TRUE(parent->CanShrink());
  auto child = parent->Shrink({1}, /*abort_in_flight=*/true);
  ASSERT_TRUE(child.ok()) << child.status();
  EXPECT_EQ((*child)->rank(), 0);
  EXPECT_EQ((*child)->size(), 1);
  EXPECT_EQ((*child)->global_ranks(), std::vector<int>{20});
  EXPECT_EQ(AllReduceOne(**child, 3.0f), 3.0f);
  EXPECT_FALSE(parent->CanShrink());  // aborted, never destroyed
  EXPECT_EQ((*comms[0])->Barrier().code(),
            absl::StatusCode::kFailedPrecondition);
}

#endif  // DEVMESH_TEST_HAS_NCCL

}  // namespace
}  // namespace devmesh
