// A program that does not link @devmesh//comm:gloo: backend "gloo" is not
// registered (KnownBackends lists what is linked), CreateCommunicator("gloo")
// is NotFound naming the target to add, and a mesh that would use Gloo
// (DEVMESH_CROSS_HOST_BACKEND=gloo, or a dim's backend "gloo") fails at
// InitDeviceMesh with that NotFound, before any group is made. Runs as one
// rank of a larger world over an InMemoryStore.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "comm/registry.h"
#include "config/settings.h"
#include "device_mesh/init_device_mesh.h"
#include "gtest/gtest.h"
#include "store/memory_store.h"

namespace devmesh {
namespace {

constexpr char kNotLinked[] =
    "backend \"gloo\" is not linked into this program: add "
    "\"@devmesh//comm:gloo\" to its deps";

std::shared_ptr<MeshRuntime> Runtime(int rank, int world) {
  auto runtime = *MeshRuntime::Create(std::make_shared<InMemoryStore>(), rank,
                                      world, rank);
  runtime->SkipMeshAgreementForTesting();
  return runtime;
}

void ExpectNotLinked(const absl::Status& s) {
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), kNotLinked)) << s;
}

TEST(WithoutGlooTest, KnownBackendsAreTheLinkedOnes) {
  EXPECT_EQ(KnownBackends(), (std::vector<std::string>{"nccl", "shm", "ucx"}));
  EXPECT_TRUE(CheckBackendLinked("ucx").ok());
  ExpectNotLinked(CheckBackendLinked("gloo"));
  const absl::Status other = CheckBackendLinked("mpi");
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(other.message(),
                                "unknown communicator backend \"mpi\"; known: "
                                "nccl, shm, ucx"))
      << other;
}

TEST(WithoutGlooTest, CreateCommunicatorGlooIsNotFound) {
  auto store = std::make_shared<InMemoryStore>(absl::Seconds(1));
  auto comm = CreateCommunicator("gloo", store, 0, 1);
  ExpectNotLinked(comm.status());
  EXPECT_TRUE(
      absl::StrContains(comm.status().message(), "(linked: nccl, shm, ucx)"))
      << comm.status();
}

TEST(WithoutGlooTest, DefaultCrossHostBackendIsUcx) {
  EXPECT_STREQ(CrossHostBackendName(Settings()), "ucx");
  Settings gloo;
  gloo.cross_host_backend = CrossHostBackend::kGloo;
  EXPECT_STREQ(CrossHostBackendName(gloo), "gloo");
  // The default mesh needs nothing beyond //device_mesh.
  auto mesh = InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"});
  EXPECT_TRUE(mesh.ok()) << mesh.status();
}

TEST(WithoutGlooTest, DimBackendGlooFailsTheMesh) {
  MeshOptions options;
  options.per_dim["dp"].backend = "gloo";
  ExpectNotLinked(InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"},
                                 options)
                      .status());
  MeshOptions all;
  all.all.backend = "gloo";
  ExpectNotLinked(
      InitDeviceMesh(Runtime(1, 4), "cpu", {4}, {"dp"}, all).status());
  // A device type with no default backend, its dims naming their own.
  MeshOptions per_dim_only;
  per_dim_only.per_dim["dp"].backend = "shm";
  per_dim_only.per_dim["tp"].backend = "gloo";
  ExpectNotLinked(InitDeviceMesh(Runtime(0, 4), "tpu", {2, 2}, {"dp", "tp"},
                                 per_dim_only)
                      .status());
}

TEST(WithoutGlooTest, CrossHostBackendGlooFailsTheMesh) {
  ASSERT_EQ(setenv("DEVMESH_CROSS_HOST_BACKEND", "gloo", 1), 0);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  ExpectNotLinked(
      InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"}).status());
  ASSERT_EQ(unsetenv("DEVMESH_CROSS_HOST_BACKEND"), 0);
  ASSERT_TRUE(ReloadProcessSettings().ok());
  EXPECT_TRUE(
      InitDeviceMesh(Runtime(0, 4), "cpu", {2, 2}, {"dp", "tp"}).ok());
}

}  // namespace
}  // namespace devmesh
