// devmesh/tests/comm/nccl_grow/nccl_grow_test.cc
// GrowNcclCommunicator (comm/nccl/nccl_communicator.h): the argument checks
// (before any CUDA call, so they run without a GPU), which path this build
// takes, and, where two GPUs are visible, a world of one grown to two ranks
// by two threads (NCCL allows one rank per GPU): rank 0 grows its
// communicator, rank 1 joins as the new rank, and an all-reduce over the
// grown group sums both ranks' values. Without them that part skips and
// says why.
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/options.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"
#include "store/prefix_store.h"

#ifdef DEVMESH_TEST_HAS_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace devmesh {
namespace {

void ExpectInvalid(const absl::StatusOr<NcclGrowResult>& got,
                   const std::string& message) {
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
      << got.status();
  EXPECT_EQ(got.status().message(), message);
}

TEST(NcclGrowTest, TheBuildSaysWhichPath) {
#if defined(DEVMESH_TEST_HAS_NCCL) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  EXPECT_TRUE(NcclGrowBuiltIn());
#else
  EXPECT_FALSE(NcclGrowBuiltIn());
#endif
}

TEST(NcclGrowTest, RefusesBadArgumentsWithTheirMessages) {
#ifndef DEVMESH_TEST_HAS_NCCL
  GTEST_SKIP() << "devmesh was built without NCCL";
#endif
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  CommOptions options;
  ExpectInvalid(GrowNcclCommunicator(nullptr, nullptr, 2, 3, 2, options),
                "nccl grow: store is null");
  ExpectInvalid(GrowNcclCommunicator(nullptr, store, 2, 2, 2, options),
                "nccl grow: from 2 to 2 ranks; the grown group must be "
                "larger than a non-empty parent");
  ExpectInvalid(GrowNcclCommunicator(nullptr, store, 0, 2, 1, options),
                "nccl grow: from 0 to 2 ranks; the grown group must be "
                "larger than a non-empty parent");
  ExpectInvalid(GrowNcclCommunicator(nullptr, store, 2, 4, 1, options),
                "nccl grow: a new rank must be in [2, 4) (members keep 0 .. "
                "1), got 1");
  ExpectInvalid(GrowNcclCommunicator(nullptr, store, 2, 4, 4, options),
                "nccl grow: a new rank must be in [2, 4) (members keep 0 .. "
                "1), got 4");
  options.global_ranks = {0, 1, 2};
  ExpectInvalid(GrowNcclCommunicator(nullptr, store, 2, 4, 3, options),
                "nccl grow: global_ranks has 3 entries for a group of size 4");
}

#ifdef DEVMESH_TEST_HAS_NCCL
TEST(NcclGrowTest, AWorldOfOneGrowsToTwo) {
  auto count = CudaDeviceCount();
  if (!count.ok()) GTEST_SKIP() << count.status().message();
  if (*count < 2) {
    GTEST_SKIP() << "growing to two ranks needs two GPUs (NCCL allows one "
                    "rank per GPU); "
                 << *count << " visible";
  }
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  CommOptions base;
  base.nccl.cuda_device = 0;
  auto parent = CreateNcclCommunicator(std::make_shared<PrefixStore>(store, "world"), 0, 1, base);
  ASSERT_TRUE(parent.ok()) << parent.status();
  auto grow_store = std::make_shared<PrefixStore>(store, "grow");
  absl::StatusOr<NcclGrowResult> joined = absl::UnknownError("not run");
  std::thread newcomer([&] {
    CommOptions o;
    o.nccl.cuda_device = 1;
    joined = GrowNcclCommunicator(nullptr, grow_store, 1, 2, 1, o);
  });
  auto grown = GrowNcclCommunicator(parent->get(), grow_store, 1, 2, -1, base);
  newcomer.join();
  ASSERT_TRUE(grown.ok()) << grown.status();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(grown->grown_from_parent, NcclGrowBuiltIn());
  EXPECT_EQ(grown->comm->rank(), 0);
  EXPECT_EQ(joined->comm->rank(), 1);
  EXPECT_EQ(grown->comm->size(), 2);
  parent->reset();  // NCCL's recipe: the parent goes after the grow.
  float* bufs[2] = {nullptr, nullptr};
  float host[2] = {0, 0};
  Communicator* comms[2] = {grown->comm.get(), joined->comm.get()};
  absl::Status results[2];
  std::thread t[2];
  for (int r = 0; r < 2; ++r) {
    t[r] = std::thread([&, r] {
      cudaSetDevice(r);
      const float value = static_cast<float>(r + 1);
      cudaMalloc(&bufs[r], sizeof(float));
      cudaMemcpy(bufs[r], &value, sizeof(float), cudaMemcpyHostToDevice);
      results[r] = comms[r]->AllReduce(bufs[r], bufs[r], 1, DataType::kFloat32,
                                       ReduceOp::kSum);
      cudaMemcpy(&host[r], bufs[r], sizeof(float), cudaMemcpyDeviceToHost);
      cudaFree(bufs[r]);
    });
  }
  for (auto& th : t) th.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(host[r], 3.0f);
  }
}
#endif

}  // namespace
}  // namespace devmesh
