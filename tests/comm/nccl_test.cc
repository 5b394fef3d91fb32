// devmesh/tests/comm/nccl_test.cc
// The NCCL backend. Builds and links everywhere; tests that need a GPU skip
// with "no CUDA device visible". tools/gpu_check.sh runs them on a GPU host.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/forwarding_communicator.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_stream.h"
#include "comm/registry.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"
#include "tests/comm/typed_values.h"

#ifdef DEVMESH_TEST_HAS_NCCL
#include <cuda_runtime_api.h>
#endif

namespace devmesh {
namespace {

#define SKIP_WITHOUT_GPU()                                             \
  do {                                                                 \
    auto count = CudaDeviceCount();                                    \
    if (!count.ok()) GTEST_SKIP() << count.status().message();         \
  } while (0)

TEST(NcclTest, BadArgumentsAreInvalidArgumentWithoutTouchingCuda) {
  if (!NcclBuiltIn()) GTEST_SKIP() << "built without NCCL";
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  EXPECT_EQ(CreateNcclCommunicator(store, 1, 1, CommOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclCommunicator(nullptr, 0, 1, CommOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  CommOptions ranks;
  ranks.global_ranks = {1, 2};
  EXPECT_EQ(CreateNcclCommunicator(store, 0, 1, ranks).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NcclTest, DeviceCountNeverCrashes) {
  auto count = CudaDeviceCount();
  if (count.ok()) {
    EXPECT_GT(*count, 0);
  } else {
    EXPECT_EQ(count.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(absl::StrContains(count.status().message(),
                                  "no CUDA device visible"));
  }
}

#ifdef DEVMESH_TEST_HAS_NCCL

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> HostCopy(const T* dev, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return host;
}

absl::StatusOr<std::unique_ptr<Communicator>> WorldOfOne() {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(30));
  CommOptions options;
  options.timeout = absl::Seconds(60);
  return CreateCommunicator("nccl", store, 0, 1, options);
}

TEST(NcclTest, WorldOfOneCollectives) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOfOne();
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "nccl");
  EXPECT_EQ((*comm)->size(), 1);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64,
                         DataType::kFloat16, DataType::kBFloat16,
                         DataType::kInt8, DataType::kUInt8, DataType::kInt32,
                         DataType::kInt64}) {
    std::vector<double> values = {1, 2, 3, 4};
    std::vector<char> host = testing::Encode(dtype, values);
    char* dev = DeviceCopy(host);
    ASSERT_TRUE((*comm)->AllReduce(dev, dev, 4, dtype, ReduceOp::kSum).ok());
    EXPECT_EQ(testing::Decode(dtype, HostCopy(dev, host.size()).data(), 4),
              values)
        << DataTypeName(dtype);
    ASSERT_TRUE((*comm)->Broadcast(dev, dev, 4, dtype, 0).ok());
    cudaFree(dev);
  }
  ASSERT_TRUE((*comm)->Barrier().ok());
}

TEST(NcclTest, WorldOfOneSplit) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOfOne();
  ASSERT_TRUE(comm.ok()) << comm.status();
  auto child = (*comm)->Split(0, 0);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_NE(*child, nullptr);
  EXPECT_EQ((*child)->size(), 1);
  EXPECT_EQ((*child)->global_ranks(), std::vector<int>{0});
  float* dev = DeviceCopy(std::vector<float>{2.5f});
  ASSERT_TRUE((*child)->AllReduce(dev, dev, 1, DataType::kFloat32,
                                  ReduceOp::kMax).ok());
  EXPECT_EQ(HostCopy(dev, 1)[0], 2.5f);
  cudaFree(dev);
  auto none = (*comm)->Split(kNoColor, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
}

TEST(NcclTest, MissingRankZeroIsDeadlineExceeded) {
  SKIP_WITHOUT_GPU();
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  CommOptions options;
  options.timeout = absl::Seconds(1);
  auto comm = CreateCommunicator("nccl", store, 1, 2, options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
      << comm.status();
}

// Holds `stream` for `ms` milliseconds (a host function in stream order).
void HoldStream(cudaStream_t stream, intptr_t ms) {
  ASSERT_EQ(
      cudaLaunchHostFunc(
          stream,
          [](void* p) {
            absl::SleepFor(absl::Milliseconds(reinterpret_cast<intptr_t>(p)));
          },
          reinterpret_cast<void*>(ms)),
      cudaSuccess);
}

TEST(NcclTest, AsyncCallsRunOnTheScopesStreamAndEndWithTheirEvent) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOfOne();
  ASSERT_TRUE(comm.ok()) << comm.status();
  cudaStream_t mine = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking),
            cudaSuccess);
  float* dev = DeviceCopy(std::vector<float>{1, 2, 3});
  {
    NcclStreamScope scope(mine);
    HoldStream(mine, 300);
    Work w =
        (*comm)->IAllReduce(dev, dev, 3, DataType::kFloat32, ReduceOp::kMax);
    // Behind the held stream: not done until the hold ends.
    EXPECT_FALSE(w.Test());
    EXPECT_EQ(w.Wait(absl::Milliseconds(50)).code(),
              absl::StatusCode::kDeadlineExceeded);
    ASSERT_TRUE(w.Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(w.Test());
  }
  EXPECT_EQ(HostCopy(dev, 3), (std::vector<float>{1, 2, 3}));
  // Outside the scope: the communicator's own stream, not held by ours.
  HoldStream(mine, 2000);
  Work own =
      (*comm)->IAllReduce(dev, dev, 3, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(own.Wait(absl::Milliseconds(1500)).ok());
  ASSERT_EQ(cudaStreamSynchronize(mine), cudaSuccess);
  // Through a wrapper, and outliving the communicator.
  Work late;
  {
    auto view = std::make_shared<ForwardingCommunicator>(
        std::shared_ptr<Communicator>(std::move(*comm)));
    late = view->IBroadcast(dev, dev, 3, DataType::kFloat32, 0);
  }
  EXPECT_TRUE(late.Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(HostCopy(dev, 3), (std::vector<float>{1, 2, 3}));
  cudaFree(dev);
  cudaStreamDestroy(mine);
}

TEST(NcclTest, AbortThenFailedPrecondition) {
  SKIP_WITHOUT_GPU();
  auto comm = WorldOfOne();
  ASSERT_TRUE(comm.ok()) << comm.status();
  ASSERT_TRUE((*comm)->Abort().ok());
  EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kFailedPrecondition);
}

#endif  // DEVMESH_TEST_HAS_NCCL

}  // namespace
}  // namespace devmesh
