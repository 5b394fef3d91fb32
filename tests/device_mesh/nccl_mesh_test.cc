// Mesh groups on NCCL (issue 19): a dim with an NCCL config of its own is a
// group made from the layout (ncclCommInitRankConfig under the group's own
// store namespace, no ncclCommSplit, no world communicator for it) on the
// caller's CUDA stream, returning without waiting when synchronize is false;
// a world-sized dim without one is the world communicator. One GPU allows a
// world of one, so the meshes here are 1 x 1. Builds everywhere; skips with
// "no CUDA device visible" without a GPU (tools/gpu_check.sh runs it on one).
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "comm/nccl/nccl_communicator.h"
#include "device_mesh/device_mesh.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

#ifdef DEVMESH_TEST_HAS_NCCL
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>
#endif

namespace devmesh {
namespace {

TEST(NcclMesh, WithoutAGpuCudaMeshesFailClearly) {
  if (CudaDeviceCount().ok()) GTEST_SKIP() << "a CUDA device is visible";
  auto runtime = *MeshRuntime::Create(std::make_shared<InMemoryStore>(), 0, 1, 0);
  auto mesh = InitDeviceMesh(runtime, "cuda", {1, 1}, {"dp", "tp"});
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kUnavailable)
      << mesh.status();
  EXPECT_EQ(runtime->world_communicators(), 0);
}

#ifdef DEVMESH_TEST_HAS_NCCL
// Holds the stream until the test releases it (a host function on it).
std::atomic<bool> g_release{false};
void CUDART_CB HoldStream(void*) {
  while (!g_release.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(NcclMesh, ConfiguredDimIsItsOwnGroupOnTheCallersStream) {
  auto count = CudaDeviceCount();
  if (!count.ok()) GTEST_SKIP() << count.status().message();
  auto runtime = *MeshRuntime::Create(
      std::make_shared<InMemoryStore>(absl::Seconds(30)), 0, 1, 0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  MeshOptions options;
  NcclOptions config;
  config.min_ctas = 1;
  config.stream = stream;
  config.synchronize = false;
  options.per_dim["tp"].nccl = config;
  auto mesh = InitDeviceMesh(runtime, "cuda", {1, 1}, {"dp", "tp"}, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto tp = mesh->GetGroup("tp");
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_EQ(runtime->world_communicators(), 0);
  EXPECT_EQ(runtime->group_creations(), 1);
  void* mem = nullptr;
  ASSERT_EQ(cudaMalloc(&mem, sizeof(float)), cudaSuccess);
  float* dev = static_cast<float*>(mem);
  const float value = 3.5f;
  ASSERT_EQ(cudaMemcpy(dev, &value, sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  // The caller's stream is held: an all-reduce on it that returns while the
  // stream still has work queued ran on that stream and did not wait.
  g_release = false;
  ASSERT_EQ(cudaLaunchHostFunc(stream, HoldStream, nullptr), cudaSuccess);
  ASSERT_TRUE((*tp)->AllReduce(dev, dev, 1, DataType::kFloat32,
                               ReduceOp::kSum).ok());
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  g_release = true;
  // synchronize = false: the caller waits for its own stream.
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  float back = 0;
  ASSERT_EQ(cudaMemcpy(&back, dev, sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, 3.5f);
  // dp (the world of one, no config) is the world communicator.
  auto dp = mesh->GetGroup("dp");
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(runtime->world_communicators(), 1);
  EXPECT_EQ(*dp, *runtime->World("nccl", absl::Seconds(300)));
  cudaFree(dev);
  tp->reset();
  dp->reset();
  mesh = absl::UnknownError("released");
  cudaStreamDestroy(stream);
}
#endif  // DEVMESH_TEST_HAS_NCCL

}  // namespace
}  // namespace devmesh
